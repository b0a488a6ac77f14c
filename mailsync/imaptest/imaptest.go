// Package imaptest starts a real IMAP server for tests: Dovecot, on a
// loopback port, with a throwaway mail directory and one user. Without
// Dovecot installed the test is skipped with a message, except under CI
// (CI=true), where it fails: the test command installs it there.
package imaptest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
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
)

// Server is a running Dovecot.
type Server struct {
	// Addr is the IMAP port (STARTTLS offered with Options.TLS).
	Addr string
	// TLSAddr is the implicit-TLS port (Options.TLS).
	TLSAddr string
	// RootCAs trusts the server's certificate (Options.TLS).
	RootCAs *x509.CertPool
	// Token is a bearer token the server accepts for User (Options.OAuth2).
	Token    string
	User     string
	Password string
	dir      string
	conf     string
	bin      string
	cmd      *exec.Cmd
	t        testing.TB
}

// Binary finds Dovecot, or skips (fails under CI) the test.
func Binary(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"dovecot", "/usr/sbin/dovecot"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("Dovecot is not installed, and CI=true: ./scripts/test.sh installs it (apt-get install -y dovecot-imapd)")
	}
	t.Skip("Dovecot is not installed (apt-get install -y dovecot-imapd, or run ./scripts/test.sh): IMAP tests skipped")
	return ""
}

// Options choose what the server offers beyond plain IMAP with a password.
type Options struct {
	// TLS adds implicit TLS on TLSAddr and STARTTLS on Addr, with a
	// certificate for 127.0.0.1 that RootCAs trusts.
	TLS bool
	// OAuth2 accepts XOAUTH2 and OAUTHBEARER with Token, checked by
	// Dovecot against an introspection endpoint this package serves.
	OAuth2 bool
}

// Start starts Dovecot for the test and stops it when the test ends.
func Start(t testing.TB) *Server { return StartWith(t, Options{}) }

// StartWith is Start with options.
func StartWith(t testing.TB, o Options) *Server {
	t.Helper()
	bin := Binary(t)
	dir, err := os.MkdirTemp("", "imaptest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// The mail processes run as an unprivileged user, who must reach the directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, 8)
	rand.Read(secret)
	s := &Server{User: "team", Password: hex.EncodeToString(secret), dir: dir, conf: filepath.Join(dir, "dovecot.conf"), t: t}
	mailUser, internal := "nobody", ""
	if os.Getuid() != 0 {
		u, err := user.Current()
		if err != nil {
			t.Fatal(err)
		}
		mailUser = u.Username
		internal = fmt.Sprintf("default_internal_user = %s\ndefault_login_user = %s\ndefault_internal_group = %s\n", u.Username, u.Username, groupName(u))
	}
	mu, err := user.Lookup(mailUser)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"mail", "run", "state"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	uid, _ := strconv.Atoi(mu.Uid)
	gid, _ := strconv.Atoi(mu.Gid)
	os.Chown(filepath.Join(dir, "mail"), uid, gid)
	if err := os.WriteFile(filepath.Join(dir, "passwd"), []byte(s.User+":{PLAIN}"+s.Password+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := confParams{Dir: dir, UID: uid, GID: gid, Port: port, Internal: internal, Mechs: "plain login"}
	if o.TLS {
		c.TLSPort = freePort(t)
		s.TLSAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(c.TLSPort))
		s.RootCAs = WriteCert(t, dir)
	}
	if o.OAuth2 {
		s.Token = hex.EncodeToString(secret) + "-token"
		c.IntrospectionURL = s.serveIntrospection(t)
		c.Mechs += " xoauth2 oauthbearer"
	}
	var conf string
	if version(bin) >= 24 {
		conf = conf24(c)
	} else {
		conf = conf23(c)
		if o.OAuth2 {
			if err := os.WriteFile(filepath.Join(dir, "oauth2.conf"), []byte("introspection_mode = post\nintrospection_url = "+c.IntrospectionURL+
				"\nusername_attribute = username\nactive_attribute = active\nactive_value = true\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(s.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	s.bin = bin
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// confParams fill the configuration templates.
type confParams struct {
	Dir                     string
	UID, GID, Port, TLSPort int
	Internal, Mechs         string
	IntrospectionURL        string
}

// version is Dovecot's major and minor version as one number (23 for
// 2.3, 24 for 2.4); 0 if unknown.
func version(bin string) int {
	out, _ := exec.Command(bin, "--version").Output()
	var major, minor int
	if _, err := fmt.Sscanf(string(out), "%d.%d", &major, &minor); err != nil {
		return 0
	}
	return major*10 + minor
}

// conf23 is the configuration in Dovecot 2.3's syntax (run by the tests here).
func conf23(c confParams) string {
	var b strings.Builder
	fmt.Fprintf(&b, "base_dir = %[1]s/run\nstate_dir = %[1]s/state\nlog_path = %[1]s/dovecot.log\n%[2]s", c.Dir, c.Internal)
	b.WriteString("protocols = imap\nlisten = 127.0.0.1\ndisable_plaintext_auth = no\nfirst_valid_uid = 0\n")
	fmt.Fprintf(&b, "auth_mechanisms = %s\nmail_location = maildir:%s/mail/%%u\n", c.Mechs, c.Dir)
	if c.TLSPort != 0 {
		fmt.Fprintf(&b, "ssl = yes\nssl_cert = <%[1]s/cert.pem\nssl_key = <%[1]s/key.pem\n", c.Dir)
	} else {
		b.WriteString("ssl = no\n")
	}
	fmt.Fprintf(&b, "passdb {\n  driver = passwd-file\n  args = scheme=PLAIN username_format=%%u %s/passwd\n}\n", c.Dir)
	if c.IntrospectionURL != "" {
		fmt.Fprintf(&b, "passdb {\n  driver = oauth2\n  args = %s/oauth2.conf\n}\n", c.Dir)
	}
	fmt.Fprintf(&b, "userdb {\n  driver = static\n  args = uid=%d gid=%d home=%s/mail/%%u\n}\n", c.UID, c.GID, c.Dir)
	b.WriteString(listeners(c, "address"))
	return b.String()
}

// conf24 is the same configuration in Dovecot 2.4's syntax, written from
// its documentation (new setting names, named passdb and userdb filters,
// %{user}, OAuth2 settings of their own).
func conf24(c confParams) string {
	var b strings.Builder
	b.WriteString("dovecot_config_version = 2.4.0\ndovecot_storage_version = 2.4.0\n")
	fmt.Fprintf(&b, "base_dir = %[1]s/run\nstate_dir = %[1]s/state\nlog_path = %[1]s/dovecot.log\n%[2]s", c.Dir, c.Internal)
	b.WriteString("protocols = imap\nlisten = 127.0.0.1\nauth_allow_cleartext = yes\nfirst_valid_uid = 0\n")
	fmt.Fprintf(&b, "auth_mechanisms = %s\nmail_driver = maildir\nmail_home = %s/mail/%%{user}\nmail_path = ~\n", c.Mechs, c.Dir)
	if c.TLSPort != 0 {
		fmt.Fprintf(&b, "ssl = yes\nssl_server_cert_file = %[1]s/cert.pem\nssl_server_key_file = %[1]s/key.pem\n", c.Dir)
	} else {
		b.WriteString("ssl = no\n")
	}
	fmt.Fprintf(&b, "passdb passwd-file {\n  passwd_file_path = %s/passwd\n}\n", c.Dir)
	if c.IntrospectionURL != "" {
		fmt.Fprintf(&b, "oauth2_introspection_mode = post\noauth2_introspection_url = %s\noauth2_username_attribute = username\noauth2_active_attribute = active\noauth2_active_value = true\n", c.IntrospectionURL)
	}
	fmt.Fprintf(&b, "userdb static {\n  fields {\n    uid = %d\n    gid = %d\n    home = %s/mail/%%{user}\n  }\n}\n", c.UID, c.GID, c.Dir)
	b.WriteString(listeners(c, "listen"))
	return b.String()
}

func listeners(c confParams, addressKey string) string {
	imaps := "    port = 0\n"
	if c.TLSPort != 0 {
		imaps = fmt.Sprintf("    %s = 127.0.0.1\n    port = %d\n    ssl = yes\n", addressKey, c.TLSPort)
	}
	return fmt.Sprintf("service imap-login {\n  inet_listener imap {\n    %s = 127.0.0.1\n    port = %d\n  }\n  inet_listener imaps {\n%s  }\n}\n", addressKey, c.Port, imaps)
}

// WriteCert writes a self-signed certificate for 127.0.0.1 and its key
// (cert.pem, key.pem) into dir, and returns a pool that trusts it.
func WriteCert(t testing.TB, dir string) *x509.CertPool {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// serveIntrospection answers Dovecot's OAuth2 token introspection (RFC
// 7662, by POST): s.Token is active for s.User, anything else is not.
func (s *Server) serveIntrospection(t testing.TB) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if r.Form.Get("token") == s.Token {
			fmt.Fprintf(w, `{"active": "true", "username": %q}`, s.User)
			return
		}
		fmt.Fprint(w, `{"active": "false"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/introspect"
}

func groupName(u *user.User) string {
	if g, err := user.LookupGroupId(u.Gid); err == nil {
		return g.Name
	}
	return u.Username
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Stop stops Dovecot at once, as a crash or a dropped network would: its
// process group (the master and every login and mail process) is killed, so
// open connections are cut.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	s.cmd.Wait()
	s.cmd = nil
	// Wait until nothing listens on the port any more.
	for i := 0; i < 100; i++ {
		c, err := net.DialTimeout("tcp", s.Addr, 100*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(20 * time.Millisecond)
	}
}

// Restart starts Dovecot again (or for the first time) on the same port and mail.
func (s *Server) Restart() {
	s.t.Helper()
	if s.cmd != nil {
		s.Stop()
	}
	var out bytes.Buffer
	cmd := exec.Command(s.bin, "-F", "-c", s.conf)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start Dovecot: %v", err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "dovecot.log"))
			s.t.Fatalf("Dovecot did not listen on %s: %s %s", s.Addr, out.String(), log)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// Client logs in as the test user.
func (s *Server) Client() *imapclient.Client {
	s.t.Helper()
	c, err := imapclient.DialInsecure(s.Addr, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := c.Login(s.User, s.Password).Wait(); err != nil {
		s.t.Fatal(err)
	}
	return c
}

// Append adds raw messages to mailbox over IMAP (creating the mailbox).
func (s *Server) Append(mailbox string, raws ...[]byte) {
	s.t.Helper()
	c := s.Client()
	defer c.Close()
	if mailbox != "INBOX" {
		c.Create(mailbox, nil).Wait() // exists already: fine
	}
	for _, raw := range raws {
		cmd := c.Append(mailbox, int64(len(raw)), nil)
		if _, err := cmd.Write(raw); err != nil {
			s.t.Fatal(err)
		}
		if err := cmd.Close(); err != nil {
			s.t.Fatal(err)
		}
		if _, err := cmd.Wait(); err != nil {
			s.t.Fatalf("append to %s: %v", mailbox, err)
		}
	}
}

// UIDValidity reads a mailbox's UIDVALIDITY.
func (s *Server) UIDValidity(mailbox string) uint32 {
	s.t.Helper()
	c := s.Client()
	defer c.Close()
	d, err := c.Select(mailbox, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		s.t.Fatal(err)
	}
	return d.UIDValidity
}

// SetUIDValidity changes a mailbox's UIDVALIDITY, as a server does when it
// rebuilds its index: every UID the client knew is void.
func (s *Server) SetUIDValidity(mailbox string, v uint32) {
	s.t.Helper()
	doveadm, err := exec.LookPath("doveadm")
	if err != nil {
		doveadm = filepath.Join(filepath.Dir(s.bin), "..", "bin", "doveadm")
	}
	out, err := exec.Command(doveadm, "-c", s.conf, "mailbox", "update", "-u", s.User,
		"--uid-validity", strconv.FormatUint(uint64(v), 10), mailbox).CombinedOutput()
	if err != nil {
		s.t.Fatalf("doveadm mailbox update: %v %s", err, out)
	}
}
