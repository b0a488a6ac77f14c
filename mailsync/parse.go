package mailsync

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // decodes non-UTF-8 charsets in bodies and headers
	gomail "github.com/emersion/go-message/mail"
	"golang.org/x/net/html"

	"outreach/repo/inbox"
)

// ErrMalformed marks a message that cannot be read as RFC 822/MIME.
var ErrMalformed = errors.New("malformed message")

// parseOptions tune parse.
type parseOptions struct {
	// fallbackDate is used when the Date header is missing or unreadable
	// (the IMAP INTERNALDATE, or now).
	fallbackDate time.Time
	// accept, when set, sees the addresses before the body is read; false
	// stops there (the message has no known contact, or is stored already).
	accept func(h header) (bool, error)
	// keepAttachment, when set, stores an attachment's bytes and returns the
	// file id, size and SHA-256; otherwise the bytes are only counted.
	keepAttachment func(filename, mimeType string, r io.Reader) (string, int64, string, error)
}

// header is what is known of a message once its header is read.
type header struct {
	MessageID string
	From      string
	To, Cc    []string
	Names     map[string]string
	Subject   string
	Date      time.Time
}

// parse reads one RFC 822 message with the MIME library: headers decoded
// (RFC 2047, charsets), the body walked part by part (nested multiparts,
// quoted-printable and base64 decoded, charsets converted to UTF-8), text
// preferred over HTML in multipart/alternative, HTML reduced to text when it
// is the only body, attachments measured (and kept when asked). A nil
// message with a nil error means accept declined it.
func parse(r io.Reader, o parseOptions) (*inbox.IncomingEmail, error) {
	e, err := message.Read(bufio.NewReader(r))
	if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	h := gomail.Header{Header: e.Header}
	in := &inbox.IncomingEmail{}
	if h.Get("From") == "" && h.Get("To") == "" && h.Get("Message-Id") == "" && h.Get("Subject") == "" {
		return nil, fmt.Errorf("%w: no message header", ErrMalformed)
	}
	if id, err := h.MessageID(); err == nil {
		in.MessageID = id
	} else if raw := strings.Trim(strings.TrimSpace(h.Get("Message-Id")), "<>"); raw != "" {
		in.MessageID = raw // a Message-ID the grammar refuses is still the message's name
	}
	if ids, _ := h.MsgIDList("In-Reply-To"); len(ids) > 0 {
		in.InReplyTo = ids[0]
	}
	in.References, _ = h.MsgIDList("References")
	from := addresses(h, "From", in)
	if len(from) > 0 {
		in.From = from[0]
	}
	in.To, in.Cc = addresses(h, "To", in), addresses(h, "Cc", in)
	in.Subject, _ = h.Subject()
	in.Subject = strings.Join(strings.Fields(strings.ToValidUTF8(in.Subject, "\uFFFD")), " ")
	in.Date = parseDate(h.Get("Date"))
	if in.Date.IsZero() {
		in.Date = o.fallbackDate
	}
	if o.accept != nil {
		ok, err := o.accept(header{MessageID: in.MessageID, From: in.From, To: in.To, Cc: in.Cc, Names: in.Names, Subject: in.Subject, Date: in.Date})
		if err != nil || !ok {
			return nil, err
		}
	}
	var plain, htmlText []string
	walkErr := e.Walk(func(path []int, part *message.Entity, perr error) error {
		if part.MultipartReader() != nil {
			return nil
		}
		mediaType, params, _ := part.Header.ContentType()
		if mediaType == "" {
			mediaType = "text/plain"
		}
		disp, dparams, _ := part.Header.ContentDisposition()
		ah := gomail.AttachmentHeader{Header: part.Header}
		filename, _ := ah.Filename()
		if filename == "" {
			filename = params["name"]
		}
		isText := strings.HasPrefix(mediaType, "text/plain") || strings.HasPrefix(mediaType, "text/html")
		if disp == "attachment" || (!isText && mediaType != "message/rfc822") || (filename != "" && disp != "inline") {
			if filename == "" {
				filename = dparams["filename"]
			}
			a := inbox.EmailAttachment{Filename: filename, MIMEType: mediaType}
			if o.keepAttachment != nil {
				id, n, sum, err := o.keepAttachment(filename, mediaType, part.Body)
				if err != nil {
					return storeError{err}
				}
				a.FileID, a.SizeBytes, a.SHA256 = id, n, sum
			} else {
				n, err := io.Copy(io.Discard, part.Body)
				if err != nil {
					return fmt.Errorf("%w: attachment %q: %v", ErrMalformed, filename, err)
				}
				a.SizeBytes = n
			}
			in.Attachments = append(in.Attachments, a)
			return nil
		}
		if mediaType == "message/rfc822" {
			_, err := io.Copy(io.Discard, part.Body)
			return err
		}
		// perr is an unknown charset or transfer encoding: the body comes
		// undecoded, which is better than no body.
		_ = perr
		b, err := io.ReadAll(io.LimitReader(part.Body, 4*inbox.MaxEmailBodyText))
		if err != nil {
			return fmt.Errorf("%w: body part: %v", ErrMalformed, err)
		}
		io.Copy(io.Discard, part.Body)
		text := strings.ToValidUTF8(string(b), "\uFFFD")
		if strings.HasPrefix(mediaType, "text/html") {
			htmlText = append(htmlText, htmlToText(text))
		} else {
			plain = append(plain, text)
		}
		return nil
	})
	var se storeError
	switch {
	case walkErr == nil:
	case errors.As(walkErr, &se):
		return nil, se.err
	case errors.Is(walkErr, ErrMalformed):
		return nil, walkErr
	default:
		return nil, fmt.Errorf("%w: %v", ErrMalformed, walkErr)
	}
	body := plain
	if len(body) == 0 {
		body = htmlText
	}
	in.BodyText = normalizeText(strings.Join(body, "\n\n"))
	if in.MessageID == "" {
		in.MessageID = inbox.ContentKey(in.From, strings.Join(in.To, ","), strings.Join(in.Cc, ","), in.Subject, h.Get("Date"), in.BodyText)
	}
	return in, nil
}

// storeError is a failure to store an attachment's bytes (not the message's fault).
type storeError struct{ err error }

func (e storeError) Error() string { return e.err.Error() }

var looseAddress = regexp.MustCompile(`[^\s<>,;:"()\[\]]+@[^\s<>,;:"()\[\]]+`)

// addresses returns the bare addresses of a header field, lower case, and
// records their display names (decoded from RFC 2047) in in.Names; a list
// the grammar refuses is searched for anything shaped like an address.
func addresses(h gomail.Header, key string, in *inbox.IncomingEmail) []string {
	list, err := h.AddressList(key)
	var out []string
	if err == nil {
		for _, a := range list {
			addr := strings.ToLower(a.Address)
			out = append(out, addr)
			name := strings.Join(strings.Fields(strings.ToValidUTF8(a.Name, "\uFFFD")), " ")
			if name != "" && !strings.EqualFold(name, addr) {
				if in.Names == nil {
					in.Names = map[string]string{}
				}
				if _, ok := in.Names[addr]; !ok {
					in.Names[addr] = name
				}
			}
		}
		return out
	}
	raw, _ := h.Text(key)
	for _, a := range looseAddress.FindAllString(raw, -1) {
		out = append(out, strings.ToLower(strings.Trim(a, ".")))
	}
	return out
}

// dateLayouts are the odd Date forms seen in the wild that net/mail refuses.
var dateLayouts = []string{
	"Mon, 2 Jan 2006 15:04:05 -0700 (MST)",
	"Mon, 2 Jan 2006 15:04:05 MST",
	"Mon, 2 Jan 2006 15:04 -0700",
	"2 Jan 2006 15:04:05 -0700",
	"Mon Jan 2 15:04:05 2006",
	"Mon Jan 2 15:04:05 MST 2006",
	"Mon, 2 Jan 06 15:04:05 -0700",
	"2006-01-02 15:04:05 -0700",
	"2006-01-02 15:04:05",
	time.RFC3339,
}

// parseDate reads a Date header leniently; the zero time when it cannot.
func parseDate(v string) time.Time {
	v = strings.Join(strings.Fields(v), " ")
	if v == "" {
		return time.Time{}
	}
	if t, err := mail.ParseDate(v); err == nil {
		return t.UTC()
	}
	// A trailing comment or zone name that is not understood.
	cleaned := strings.TrimSpace(regexp.MustCompile(`\s*\([^)]*\)\s*$`).ReplaceAllString(v, ""))
	for _, s := range []string{v, cleaned, strings.ReplaceAll(cleaned, "GMT", "+0000"), strings.ReplaceAll(cleaned, "UT ", "+0000 ")} {
		if t, err := mail.ParseDate(s); err == nil {
			return t.UTC()
		}
		for _, l := range dateLayouts {
			if t, err := time.Parse(l, s); err == nil {
				return t.UTC()
			}
		}
	}
	return time.Time{}
}

// normalizeText turns CRLF into LF, trims trailing spaces of lines and the
// whole text.
func normalizeText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	s = strings.TrimSpace(strings.Join(lines, "\n"))
	for strings.Contains(s, "\n\n\n") {
		s = strings.ReplaceAll(s, "\n\n\n", "\n\n")
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return s
}

// htmlToText reduces HTML to its readable text with the HTML tokenizer:
// scripts and styles dropped, blocks and line breaks kept as new lines.
func htmlToText(s string) string {
	z := html.NewTokenizer(strings.NewReader(s))
	var b strings.Builder
	skip := 0
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return normalizeText(collapseSpaces(b.String()))
		case html.TextToken:
			if skip == 0 {
				b.Write(z.Text())
			}
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			name, _ := z.TagName()
			tag := string(name)
			isEnd := tt == html.EndTagToken
			switch tag {
			case "script", "style", "head", "title":
				if isEnd {
					skip = max(0, skip-1)
				} else {
					skip++
				}
			case "br", "p", "div", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "table", "ul", "ol":
				b.WriteString("\n")
			case "td", "th":
				b.WriteString(" ")
			}
		}
	}
}

var spaces = regexp.MustCompile(`[ \t\x{00a0}]+`)

func collapseSpaces(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(spaces.ReplaceAllString(l, " "))
	}
	return strings.Join(lines, "\n")
}
