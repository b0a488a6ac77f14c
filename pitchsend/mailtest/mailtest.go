// Package mailtest starts real mail servers for tests, on loopback: Postfix
// as the submission server (STARTTLS required, SASL authentication through
// Dovecot) delivering over LMTP into Dovecot, which serves the mailboxes
// over IMAP. Two domains are local: outreach.test (the team) and
// paper.test (journalists). Postfix's master runs only as root; without
// root or without the packages the test is skipped, except under CI=true,
// where it fails (the test command installs postfix, dovecot-imapd and
// dovecot-lmtpd, and runs as root).
package mailtest

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"outreach/mailsync/imaptest"
)

// Servers are a running Postfix and Dovecot.
type Servers struct {
	// Submission is Postfix's submission port (STARTTLS, AUTH PLAIN/LOGIN).
	Submission string
	// IMAP is Dovecot's IMAP port (no TLS: loopback).
	IMAP string
	// RootCAs trusts Postfix's certificate.
	RootCAs *x509.CertPool
	// Passwords of the mailboxes, by address.
	Passwords map[string]string
	// CAFile is the server certificate's PEM file (SSL_CERT_FILE for a
	// process of its own).
	CAFile string
	dir    string
	cmds   []*exec.Cmd
	t      testing.TB
}

// Team is the team mailbox every Servers has.
const Team = "team@outreach.test"

func skip(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s, and CI=true: ./scripts/test.sh installs postfix, dovecot-imapd and dovecot-lmtpd and runs as root", why)
	}
	t.Skip(why + ": mail sending tests skipped (apt-get install postfix dovecot-imapd dovecot-lmtpd, as root)")
}

func find(names ...string) string {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// Start starts the servers with the team mailbox and the given journalist
// mailboxes (addresses at paper.test); they stop when the test ends.
func Start(t testing.TB, mailboxes ...string) *Servers {
	t.Helper()
	return StartWith(t, Options{}, mailboxes...)
}

// Options choose what the servers offer beyond logins with a password.
type Options struct {
	// Introspection, when set, is an OAuth 2.0 token introspection URL
	// (RFC 7662; credentials in the URL's user part): Dovecot's oauth2
	// passdb then accepts XOAUTH2 and OAUTHBEARER, for IMAP and for
	// Postfix's submission (SASL through Dovecot), with the tokens that
	// endpoint says are active for the login's address (its email claim).
	Introspection string
}

// StartWith is Start with options.
func StartWith(t testing.TB, o Options, mailboxes ...string) *Servers {
	t.Helper()
	dovecot := find("dovecot", "/usr/sbin/dovecot")
	postfix := find("postfix", "/usr/sbin/postfix")
	if dovecot == "" || postfix == "" {
		skip(t, "Postfix or Dovecot is not installed")
	}
	if _, err := os.Stat("/usr/lib/dovecot/lmtp"); err != nil {
		skip(t, "Dovecot's LMTP service is not installed")
	}
	if os.Getuid() != 0 {
		skip(t, "Postfix's master runs only as root")
	}
	dir, err := os.MkdirTemp("", "mailtest-")
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("MAILTEST_KEEP") == "" {
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	os.Chmod(dir, 0o755)
	s := &Servers{dir: dir, t: t, Passwords: map[string]string{}}
	var passwd strings.Builder
	for _, a := range append([]string{Team}, mailboxes...) {
		b := make([]byte, 8)
		rand.Read(b)
		s.Passwords[a] = hex.EncodeToString(b)
		fmt.Fprintf(&passwd, "%s:{PLAIN}%s\n", a, s.Passwords[a])
	}
	for _, d := range []string{"mail", "run", "state", "pf", "pf/conf", "pf/queue", "pf/data"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	os.Chown(filepath.Join(dir, "mail"), 65534, 65534)
	pu, err := user.Lookup("postfix")
	if err != nil {
		skip(t, "the postfix user does not exist")
	}
	puid, _ := strconv.Atoi(pu.Uid)
	os.Chown(filepath.Join(dir, "pf", "data"), puid, -1)
	os.WriteFile(filepath.Join(dir, "passwd"), []byte(passwd.String()), 0o644)
	s.RootCAs = imaptest.WriteCert(t, filepath.Join(dir, "pf"))
	s.CAFile = filepath.Join(dir, "pf", "cert.pem")
	imapPort, lmtpPort, authPort, subPort := freePort(t), freePort(t), freePort(t), freePort(t)
	s.IMAP = net.JoinHostPort("127.0.0.1", strconv.Itoa(imapPort))
	s.Submission = net.JoinHostPort("127.0.0.1", strconv.Itoa(subPort))

	mechs, oauth2 := "plain login", ""
	if o.Introspection != "" {
		mechs += " xoauth2 oauthbearer"
		oauth2 = fmt.Sprintf("passdb {\n  driver = oauth2\n  args = %s/oauth2.conf\n}\n", dir)
		os.WriteFile(filepath.Join(dir, "oauth2.conf"), []byte("introspection_mode = post\nintrospection_url = "+o.Introspection+
			"\nusername_attribute = email\nactive_attribute = active\nactive_value = true\n"), 0o644)
	}
	dconf := filepath.Join(dir, "dovecot.conf")
	os.WriteFile(dconf, []byte(fmt.Sprintf(`base_dir = %[1]s/run
state_dir = %[1]s/state
log_path = %[1]s/dovecot.log
protocols = imap lmtp
listen = 127.0.0.1
disable_plaintext_auth = no
first_valid_uid = 0
auth_mechanisms = %[5]s
mail_location = maildir:%[1]s/mail/%%u
postmaster_address = postmaster@outreach.test
ssl = no
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%%u %[1]s/passwd
}
%[6]suserdb {
  driver = static
  args = uid=65534 gid=65534 home=%[1]s/mail/%%u
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = %[2]d
  }
  inet_listener imaps {
    port = 0
  }
}
service lmtp {
  inet_listener lmtp {
    address = 127.0.0.1
    port = %[3]d
  }
}
service auth {
  inet_listener {
    address = 127.0.0.1
    port = %[4]d
  }
}
`, dir, imapPort, lmtpPort, authPort, mechs, oauth2)), 0o644)
	s.run("", dovecot, "-F", "-c", dconf)
	s.wait(s.IMAP, "dovecot.log")

	pf := filepath.Join(dir, "pf")
	os.WriteFile(filepath.Join(pf, "conf", "main.cf"), []byte(fmt.Sprintf(`compatibility_level = 3.6
queue_directory = %[1]s/queue
data_directory = %[1]s/data
mail_owner = postfix
setgid_group = postdrop
myhostname = mail.outreach.test
mydomain = outreach.test
myorigin = outreach.test
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
maillog_file = %[1]s/maillog
maillog_file_prefixes = %[1]s
alias_maps =
alias_database =
local_recipient_maps =
virtual_mailbox_domains = outreach.test paper.test
virtual_transport = lmtp:inet:127.0.0.1:%[2]d
default_transport = error:no mail leaves the test
relayhost =
smtputf8_enable = no
biff = no
smtpd_sasl_type = dovecot
smtpd_sasl_path = inet:127.0.0.1:%[3]d
smtpd_tls_cert_file = %[1]s/cert.pem
smtpd_tls_key_file = %[1]s/key.pem
smtpd_recipient_restrictions = check_recipient_access inline:{ { refused@paper.test = REJECT this journalist is refused by the test server } }, permit_sasl_authenticated, reject
smtpd_relay_restrictions = permit_sasl_authenticated, reject
bounce_queue_lifetime = 0
maximal_queue_lifetime = 0
`, pf, lmtpPort, authPort)), 0o644)
	os.WriteFile(filepath.Join(pf, "conf", "master.cf"), []byte(fmt.Sprintf(`127.0.0.1:%d inet n - n - - smtpd
  -o smtpd_tls_security_level=encrypt
  -o smtpd_sasl_auth_enable=yes
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
tlsmgr    unix  -       -       n       1000?   1       tlsmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
lmtp      unix  -       -       n       -       -       lmtp
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
`, subPort)), 0o644)
	conf := filepath.Join(pf, "conf")
	if out, err := exec.Command(postfix, "-c", conf, "check").CombinedOutput(); err != nil {
		t.Fatalf("postfix check: %v %s %s", err, out, s.Log())
	}
	s.run(filepath.Join(pf, "queue", "pid", "master.pid"), postfix, "-c", conf, "start-fg")
	s.wait(s.Submission, "pf/maillog")
	return s
}

// run starts a server's master process in the foreground, its output to a
// file (a pipe would be held open by the processes it starts), and kills
// it and its process group when the test ends. pidFile, when set, names the
// file where the master writes its own pid (Postfix's master runs in a
// session of its own).
func (s *Servers) run(pidFile, bin string, args ...string) {
	out, err := os.Create(filepath.Join(s.dir, filepath.Base(bin)+".out"))
	if err != nil {
		s.t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start %s: %v", bin, err)
	}
	s.cmds = append(s.cmds, cmd)
	s.t.Cleanup(func() {
		if pidFile != "" {
			if b, err := os.ReadFile(pidFile); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
					syscall.Kill(-pid, syscall.SIGKILL)
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
}

// wait waits until addr accepts connections, or fails with log.
func (s *Servers) wait(addr, log string) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(s.dir, log))
			s.t.Fatalf("nothing listens on %s: %s", addr, b)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// Log is Postfix's mail log, for failure messages.
func (s *Servers) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "pf", "maillog"))
	d, _ := os.ReadFile(filepath.Join(s.dir, "dovecot.log"))
	return string(b) + string(d)
}

// Client logs in to addr's mailbox.
func (s *Servers) Client(addr string) *imapclient.Client {
	s.t.Helper()
	c, err := imapclient.DialInsecure(s.IMAP, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := c.Login(addr, s.Passwords[addr]).Wait(); err != nil {
		s.t.Fatal(err)
	}
	return c
}

// Messages returns the raw messages in addr's mailbox mbox (none when it
// does not exist).
func (s *Servers) Messages(addr, mbox string) [][]byte {
	s.t.Helper()
	c := s.Client(addr)
	defer c.Close()
	sel, err := c.Select(mbox, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil || sel.NumMessages == 0 {
		return nil
	}
	var set imap.SeqSet
	set.AddRange(1, sel.NumMessages)
	msgs, err := c.Fetch(set, &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{{Peek: true}}}).Collect()
	if err != nil {
		s.t.Fatal(err)
	}
	var out [][]byte
	for _, m := range msgs {
		for _, b := range m.BodySection {
			out = append(out, b.Bytes)
		}
	}
	return out
}

// WaitMessages waits until addr's mailbox mbox holds at least n messages
// (mail goes through Postfix's queue), and returns them.
func (s *Servers) WaitMessages(addr, mbox string, n int) [][]byte {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := s.Messages(addr, mbox)
		if len(m) >= n {
			return m
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s/%s has %d messages, want %d; log:\n%s", addr, mbox, len(m), n, s.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Append adds a raw message to addr's mailbox mbox.
func (s *Servers) Append(addr, mbox string, raw []byte) {
	s.t.Helper()
	c := s.Client(addr)
	defer c.Close()
	if mbox != "INBOX" {
		c.Create(mbox, nil).Wait()
	}
	cmd := c.Append(mbox, int64(len(raw)), nil)
	cmd.Write(raw)
	cmd.Close()
	if _, err := cmd.Wait(); err != nil {
		s.t.Fatal(err)
	}
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
