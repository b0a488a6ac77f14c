package mailsync

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/textproto"
	"outreach/repo/pitches"
	"strings"

	"github.com/emersion/go-message"
	gomail "github.com/emersion/go-message/mail"
)

// Delivery status notifications (RFC 3464): a bounce of a pitch the
// service sent comes back to the team mailbox as a multipart/report with a
// message/delivery-status part naming each failed recipient, and the
// returned message's header (text/rfc822-headers or message/rfc822)
// carrying the pitch's Message-ID. The sync hands each failed recipient to
// the store, which marks it bounced and suppresses a permanent failure.

// maxDSNBytes bounds the bytes a delivery report is read into memory with.
const maxDSNBytes = 4 << 20

// isReport reports whether the top-level header of a message, peeked from
// br, declares a delivery status report.
func isReport(br *bufio.Reader) bool {
	head, _ := br.Peek(br.Size())
	if i := bytes.Index(head, []byte("\r\n\r\n")); i >= 0 {
		head = head[:i]
	} else if i := bytes.Index(head, []byte("\n\n")); i >= 0 {
		head = head[:i]
	}
	h := bytes.ToLower(head)
	return bytes.Contains(h, []byte("multipart/report")) && bytes.Contains(h, []byte("delivery-status"))
}

// dsnRecipient is one failed recipient of a report.
type dsnRecipient struct {
	email, action, status, diagnostic string
}

// readDSN reads a delivery report: the returned message's Message-ID and
// the recipients it reports.
func readDSN(raw []byte) (string, []dsnRecipient) {
	e, err := message.Read(bytes.NewReader(raw))
	if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
		return "", nil
	}
	var msgID string
	var rcpts []dsnRecipient
	e.Walk(func(_ []int, part *message.Entity, _ error) error {
		mt, _, _ := part.Header.ContentType()
		switch mt {
		case "message/delivery-status", "message/global-delivery-status":
			b, _ := io.ReadAll(io.LimitReader(part.Body, maxDSNBytes))
			tr := textproto.NewReader(bufio.NewReader(bytes.NewReader(b)))
			first := true
			for {
				h, err := tr.ReadMIMEHeader()
				if len(h) > 0 && !first {
					_, addr, _ := strings.Cut(h.Get("Final-Recipient"), ";")
					rcpts = append(rcpts, dsnRecipient{email: strings.ToLower(strings.Trim(strings.TrimSpace(addr), "<>")),
						action: strings.ToLower(strings.TrimSpace(h.Get("Action"))), status: strings.TrimSpace(h.Get("Status")),
						diagnostic: strings.TrimSpace(h.Get("Diagnostic-Code"))})
				}
				if len(h) > 0 {
					first = false
				}
				if err != nil {
					break
				}
			}
		case "text/rfc822-headers", "message/rfc822", "message/global", "message/global-headers":
			b, _ := io.ReadAll(io.LimitReader(part.Body, maxDSNBytes))
			if oe, err := message.Read(bytes.NewReader(b)); err == nil || message.IsUnknownCharset(err) {
				h := gomail.Header{Header: oe.Header}
				if id, err := h.MessageID(); err == nil && id != "" {
					msgID = id
				}
			}
		}
		return nil
	})
	return msgID, rcpts
}

// bounces hands the failed recipients of a report to the store; it
// reports whether the report named a pitch's message.
func (s *Syncer) bounces(ctx context.Context, raw []byte) bool {
	msgID, rcpts := readDSN(raw)
	if msgID == "" {
		return false
	}
	found := false
	for _, r := range rcpts {
		if r.action != "failed" && r.action != "delayed" {
			continue
		}
		ok, err := pitches.Of(s.store).PitchBounce(ctx, msgID, r.email, r.status, r.diagnostic, r.action == "failed" && strings.HasPrefix(r.status, "5"))
		if err != nil {
			continue
		}
		found = found || ok
	}
	return found
}
