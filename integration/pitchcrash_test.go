package integration

import (
	"net"
	"net/textproto"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"outreach/mailsync/imaptest"
)

// holdSMTP is a submission server that keeps every message it is sent and,
// while hold is set, does not answer the end of DATA until released: the
// moment between the message going and the sender recording it.
type holdSMTP struct {
	addr     string
	mu       sync.Mutex
	hold     bool
	messages []string
	got      chan struct{}
	release  chan struct{}
}

func newHoldSMTP(t *testing.T) *holdSMTP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &holdSMTP{addr: ln.Addr().String(), hold: true, got: make(chan struct{}, 10), release: make(chan struct{})}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		h.unhold()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(2 * time.Minute))
				tp := textproto.NewConn(c)
				tp.PrintfLine("220 hold ESMTP")
				for {
					line, err := tp.ReadLine()
					if err != nil {
						return
					}
					switch strings.ToUpper(strings.Fields(line + " x")[0]) {
					case "EHLO", "HELO":
						tp.PrintfLine("250-hold\r\n250 8BITMIME")
					case "DATA":
						tp.PrintfLine("354 go ahead")
						b, err := tp.ReadDotBytes()
						if err != nil {
							return
						}
						h.mu.Lock()
						h.messages = append(h.messages, string(b))
						hold := h.hold
						h.mu.Unlock()
						h.got <- struct{}{}
						if hold {
							<-h.release
							return // the sender is gone: no answer
						}
						tp.PrintfLine("250 queued")
					case "QUIT":
						tp.PrintfLine("221 bye")
						return
					default:
						tp.PrintfLine("250 ok")
					}
				}
			}()
		}
	}()
	return h
}

// unhold answers every later message and lets a held one go.
func (h *holdSMTP) unhold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hold {
		h.hold = false
		close(h.release)
	}
}

func (h *holdSMTP) received() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.messages...)
}

var messageIDHeader = regexp.MustCompile(`(?mi)^Message-Id:\s*(<[^>]+>)`)

// The service killed (kill -9) after the message went and before it
// recorded the outcome: after the restart the delivery worker takes the
// pitch over once the lease ends, finds no copy in the Sent folder, sends
// again with the same Message-ID, and the record says a second copy may
// have gone.
func TestPitchKilledBetweenDataAndRecord(t *testing.T) {
	imap := imaptest.Start(t)
	smtp := newHoldSMTP(t)
	data := dataDir(t)
	env := []string{"OUTREACH_SMTP_ADDR=" + smtp.addr, "OUTREACH_SMTP_SECURITY=plain", "OUTREACH_SMTP_AUTH=none",
		"OUTREACH_SMTP_FROM=team@outreach.test", "OUTREACH_PITCH_INTERVAL=1s", "OUTREACH_PITCH_LEASE=2s",
		"OUTREACH_IMAP_ADDR=" + imap.Addr, "OUTREACH_IMAP_SECURITY=plain", "OUTREACH_IMAP_USER=" + imap.User,
		"OUTREACH_IMAP_PASSWORD=" + imap.Password, "OUTREACH_IMAP_INTERVAL=0"}
	srv := startServer(t, data, env...)
	adminKey := srv.FirstKey
	admin := mustDial(t, srv.URL, adminKey)
	var key struct {
		Key string `json:"key"`
	}
	admin.must(t, "create_agent_key", M{"name": "drafter", "agent_type": "other", "scopes": []string{"read", "write"}}, &key)
	agent := mustDial(t, srv.URL, key.Key)
	var rec struct {
		ID string `json:"id"`
	}
	agent.must(t, "create_contact", M{"first_name": "Ivy", "last_name": "U", "email": "ivy@paper.test"}, &rec)
	contact := rec.ID
	agent.must(t, "create_opportunity", M{"title": "Crash", "contact_ids": []string{contact}}, &rec)
	agent.must(t, "create_pitch", M{"opportunity_id": rec.ID, "contact_ids": []string{contact}, "subject": "Hi", "body": "Hi {{first_name}}"}, &rec)
	id := rec.ID
	admin.must(t, "approve_pitch", M{"id": id}, nil)
	agent.must(t, "send_pitch", M{"id": id, "scheduled_at": time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)}, nil)

	select {
	case <-smtp.got:
	case <-time.After(60 * time.Second):
		t.Fatalf("the worker never sent the pitch\n%s", srv.stderr)
	}
	srv.kill()
	smtp.unhold()

	srv = startServer(t, data, env...)
	admin = mustDial(t, srv.URL, adminKey)
	var p pitchView
	deadline := time.Now().Add(60 * time.Second)
	for {
		admin.must(t, "get_pitch", M{"id": id}, &p)
		if p.State == "sent" || p.State == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted service never finished the pitch: %+v\n%s", p, srv.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	got := smtp.received()
	r := p.Recipients[0]
	if p.State != "sent" || r.State != "sent" || r.Attempts != 2 || !strings.Contains(r.Note, "two copies") {
		t.Errorf("after the restart: %+v", p)
	}
	if len(got) != 2 {
		t.Fatalf("the server got %d copies, want 2 (one before the kill, one after)", len(got))
	}
	first, second := messageIDHeader.FindStringSubmatch(got[0]), messageIDHeader.FindStringSubmatch(got[1])
	if first == nil || second == nil || first[1] != second[1] || first[1] != "<"+r.MessageID+">" {
		t.Errorf("Message-IDs: %v %v, recorded %s", first, second, r.MessageID)
	}
}
