package mailtest

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"

	gomail "github.com/wneessen/go-mail"
)

// The servers themselves: a message submitted with STARTTLS and a login
// arrives in the journalist's mailbox; a message to an unknown mailbox
// comes back to the sender as a delivery status notification.
func TestServers(t *testing.T) {
	s := Start(t, "nia@paper.test")
	m := gomail.NewMsg()
	m.From(Team)
	m.To("nia@paper.test", "nobody@paper.test")
	m.Subject("hello")
	m.SetBodyString(gomail.TypeTextPlain, "hi")
	c, err := gomail.NewClient("127.0.0.1", gomail.WithPort(port(s.Submission)), gomail.WithTLSPolicy(gomail.TLSMandatory),
		gomail.WithTLSConfig(&tls.Config{RootCAs: s.RootCAs, ServerName: "127.0.0.1"}), gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
		gomail.WithUsername(Team), gomail.WithPassword(s.Passwords[Team]))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DialAndSendWithContext(context.Background(), m); err != nil {
		t.Fatalf("send: %v\n%s", err, s.Log())
	}
	got := s.WaitMessages("nia@paper.test", "INBOX", 1)
	if !strings.Contains(string(got[0]), "Subject: hello") {
		t.Errorf("arrived: %s", got[0])
	}
	dsn := s.WaitMessages(Team, "INBOX", 1)
	if !strings.Contains(string(dsn[0]), "multipart/report") || !strings.Contains(string(dsn[0]), "nobody@paper.test") {
		t.Errorf("bounce: %s", dsn[0])
	}
}

func port(addr string) int {
	_, p, _ := strings.Cut(addr, ":")
	n := 0
	for _, c := range p {
		n = n*10 + int(c-'0')
	}
	return n
}
