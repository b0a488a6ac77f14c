package mailauth_test

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/mailauth"
	"outreach/mailauth/mailauthtest"
	"outreach/repo"
	"outreach/repo/access"
	"outreach/repo/mailboxes"
	"outreach/repo/repotest"
)

const (
	publicURL = "http://127.0.0.1:9"
	address   = "team@example.test"
	password  = "provider-password"
)

type fixture struct {
	store *repo.Store
	p     *mailauthtest.Provider
	m     *mailauth.Mailbox
	admin string
}

func setup(t *testing.T, ttl time.Duration) *fixture {
	t.Helper()
	s := repotest.OpenEmbedded(t)
	p := mailauthtest.Start(t, publicURL+mailauth.CallbackPath,
		mailauthtest.User{ID: "team", Email: address, Password: password},
		mailauthtest.User{ID: "someone", Email: "someone@example.test", Password: password})
	p.SetAccessTTL(ttl)
	key, err := mailauth.MakeKey(filepath.Join(t.TempDir(), mailauth.KeyFileName))
	if err != nil {
		t.Fatal(err)
	}
	m, err := mailauth.New(s, mailauth.Options{Provider: mailauth.Provider{Name: "testprovider", ClientID: p.ClientID, ClientSecret: p.Secret,
		AuthURL: p.AuthURL, TokenURL: p.TokenURL, DeviceAuthURL: p.DeviceURL, RevokeURL: p.RevokeURL, Scopes: mailauthtest.Scopes},
		Address: address, PublicURL: publicURL, Key: key, MaxBackoff: 2 * time.Second, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := audit.WithActor(context.Background(), repo.SystemActor("test"))
	u, err := access.Of(s).CreateUser(ctx, "Ada Admin", "ada@example.test", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := access.Of(s).CreateKey(ctx, access.NewKeyInput{UserID: u.ID, Name: "admin", Scopes: []string{repo.ScopeRead, repo.ScopeWrite, repo.ScopeAdmin}}); err != nil {
		t.Fatal(err)
	}
	return &fixture{store: s, p: p, m: m, admin: u.ID}
}

// signIn runs a sign-in at the provider as email and returns the state and
// code the provider sends back.
func (f *fixture) signIn(t *testing.T, email string) (state, code, nonce string) {
	t.Helper()
	authURL, nonce := f.m.Start(f.admin)
	back, err := f.p.SignIn(authURL, email, password)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(back)
	if err != nil || !strings.HasSuffix(u.Path, mailauth.CallbackPath) {
		t.Fatalf("the provider sent the browser to %q", back)
	}
	if u.Query().Get("code") == "" {
		t.Fatalf("no code: %s", back)
	}
	return u.Query().Get("state"), u.Query().Get("code"), nonce
}

func (f *fixture) connect(t *testing.T) {
	t.Helper()
	state, code, nonce := f.signIn(t, address)
	c, err := f.m.Finish(context.Background(), state, code, nonce)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != mailboxes.StatusConnected || c.Address != address {
		t.Fatalf("connection: %+v", c)
	}
}

func (f *fixture) stored(t *testing.T) *mailboxes.Connection {
	t.Helper()
	c, err := mailboxes.Of(f.store).Connection(context.Background(), address)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// everything returns every document of every collection as extended JSON.
func everything(t *testing.T, s *repo.Store) []byte {
	t.Helper()
	ctx := context.Background()
	names, err := s.Database().ListCollectionNames(ctx, bson.M{})
	if err != nil {
		t.Fatal(err)
	}
	var all bytes.Buffer
	for _, n := range names {
		cur, err := s.Database().Collection(n).Find(ctx, bson.M{})
		if err != nil {
			t.Fatal(err)
		}
		for cur.Next(ctx) {
			b, _ := bson.MarshalExtJSON(cur.Current, false, false)
			all.Write(b)
			all.WriteByte('\n')
		}
		cur.Close(ctx)
	}
	return all.Bytes()
}

// TestTokensKeptFreshAcrossExpiries connects by signing in, then uses the
// token source across several (shortened) expiries: each expiry brings a
// refresh, each refresh a rotated refresh token that replaces the old one
// through the write path; no token is in any collection or change entry.
func TestTokensKeptFreshAcrossExpiries(t *testing.T) {
	f := setup(t, 3*time.Second)
	ctx := context.Background()
	if _, err := f.m.AccessToken(ctx); !mailauth.IsDisconnected(err) {
		t.Fatalf("before connecting: %v; want disconnected", err)
	}
	f.connect(t)
	seen := map[string]bool{}
	sealed := map[string]bool{f.stored(t).RefreshSealed: true}
	for i := 0; i < 4; i++ {
		tok, err := f.m.AccessToken(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen[tok] = true
		sealed[f.stored(t).RefreshSealed] = true
		time.Sleep(3 * time.Second) // the token expires
	}
	if len(seen) < 3 || f.p.Refreshes.Load() < 3 {
		t.Fatalf("%d access tokens and %d refreshes over 4 expiries; want a new token after each", len(seen), f.p.Refreshes.Load())
	}
	if len(sealed) < 3 {
		t.Errorf("the rotated refresh token was not kept: %d sealed values", len(sealed))
	}
	all := everything(t, f.store)
	for tok := range seen {
		if bytes.Contains(all, []byte(tok)) {
			t.Errorf("an access token is in the store")
		}
	}
	if !bytes.Contains(all, []byte(`"refresh_sealed":"[redacted]"`)) {
		t.Errorf("no change entry shows the sealed refresh token as [redacted]")
	}
	var entries []bson.M
	cur, _ := f.store.Database().Collection(repo.CollChangeLog).Find(ctx, bson.M{"collection": repo.CollMailboxes})
	cur.All(ctx, &entries)
	if len(entries) < 3 {
		t.Errorf("%d change entries of the connection; want the connect and each rotation", len(entries))
	}
	for _, e := range entries {
		for _, side := range []string{"before", "after"} {
			if st, ok := e[side].(bson.M); ok && st["refresh_sealed"] != nil && st["refresh_sealed"] != "[redacted]" && st["refresh_sealed"] != "" {
				t.Errorf("change entry %v holds the sealed token: %v", e["seq"], st["refresh_sealed"])
			}
		}
	}
}

// TestRefusedRefreshDisconnects: the provider ends the grant (a password
// change, a withdrawn consent); the next refresh marks the mailbox
// disconnected with the provider's reason, notifies the admins once, and
// the token source answers disconnected until an admin connects again.
func TestRefusedRefreshDisconnects(t *testing.T) {
	f := setup(t, time.Hour)
	ctx := context.Background()
	f.connect(t)
	f.p.RevokeAll("team")
	err := f.m.Refresh(ctx)
	if !mailauth.IsDisconnected(err) {
		t.Fatalf("refresh after the revocation: %v; want disconnected", err)
	}
	if _, err := f.m.AccessToken(ctx); !mailauth.IsDisconnected(err) {
		t.Fatalf("access token after the revocation: %v; want disconnected", err)
	}
	st, err := f.m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != mailboxes.StatusDisconnected || !strings.Contains(st.Reason, "invalid_grant") || !st.Paused {
		t.Fatalf("status %+v; want disconnected with the provider's reason, paused", st)
	}
	if f.stored(t).RefreshSealed != "" {
		t.Errorf("the refused refresh token is still kept")
	}
	f.m.Refresh(ctx) // again: no second notification
	var ns []bson.M
	cur, _ := f.store.Database().Collection(repo.CollNotifications).Find(ctx, bson.M{"event": mailboxes.EventDisconnected})
	cur.All(ctx, &ns)
	if len(ns) != 1 || ns[0]["user_id"] != f.admin || !strings.Contains(ns[0]["text"].(string), "invalid_grant") {
		t.Fatalf("notifications %v; want one to the admin with the reason", ns)
	}
	f.connect(t)
	if _, err := f.m.AccessToken(ctx); err != nil {
		t.Fatalf("after reconnecting: %v", err)
	}
	if st, _ := f.m.Status(ctx); st.State != mailboxes.StatusConnected || st.Reason != "" || st.Paused {
		t.Fatalf("status after reconnecting %+v", st)
	}
}

// TestProviderUnreachableOrGarbled: a refresh that cannot reach the
// provider, or gets an answer that is not a token response, keeps the
// current access token and says what is wrong; the mailbox stays connected.
func TestProviderUnreachableOrGarbled(t *testing.T) {
	f := setup(t, time.Hour)
	ctx := context.Background()
	f.connect(t)
	tok, err := f.m.AccessToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		set  func(bool)
		want string
	}{{"down", f.p.Down.Store, "could not be reached"}, {"garbage", f.p.Garbage.Store, "not a token response"}} {
		c.set(true)
		if err := f.m.Refresh(ctx); err != nil {
			t.Fatalf("%s: refresh with a current token: %v; want it kept", c.name, err)
		}
		st, _ := f.m.Status(ctx)
		if st.State != mailboxes.StatusConnected || !strings.Contains(st.Problem, c.want) {
			t.Fatalf("%s: status %+v; want connected with a problem saying %q", c.name, st, c.want)
		}
		if got, err := f.m.AccessToken(ctx); err != nil || got != tok {
			t.Fatalf("%s: the current token was not kept: %v", c.name, err)
		}
		c.set(false)
	}
	if err := f.m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := f.m.Status(ctx); st.Problem != "" {
		t.Fatalf("the problem stays after a good refresh: %+v", st)
	}
}

// TestRefusals: a replayed state, a return in another browser, a code of
// another sign-in (the PKCE proof does not match) and the wrong account are
// refused, said plainly, and store nothing; and each is let through (or,
// for the replay, reaches the provider) with its guard turned off, so each
// refusal is its guard's.
func TestRefusals(t *testing.T) {
	ctx := context.Background()
	attacks := []struct {
		name, guard, want string
		// attack runs the attack on a fresh fixture and returns its error.
		attack func(f *fixture) error
	}{
		{"another browser", "nonce", "another browser", func(f *fixture) error {
			state, code, _ := f.signIn(t, address)
			_, err := f.m.Finish(ctx, state, code, "another browser's nonce")
			return err
		}},
		{"a code of another sign-in", "pkce", "PKCE", func(f *fixture) error {
			_, codeA, _ := f.signIn(t, address)
			authB, nonceB := f.m.Start(f.admin)
			_, err := f.m.Finish(ctx, mustQuery(t, authB, "state"), codeA, nonceB)
			return err
		}},
		{"the wrong account", "account", "You signed in as someone@example.test, but the team mailbox is team@example.test", func(f *fixture) error {
			state, code, nonce := f.signIn(t, "someone@example.test")
			_, err := f.m.Finish(ctx, state, code, nonce)
			return err
		}},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			f := setup(t, time.Hour)
			err := a.attack(f)
			var r *mailauth.Refusal
			if !errors.As(err, &r) || !strings.Contains(r.Message, a.want) {
				t.Fatalf("%v; want a refusal saying %q", err, a.want)
			}
			if c := f.stored(t); c != nil {
				t.Fatalf("the refused sign-in stored a connection: %+v", c)
			}
			// Without the guard, the attack connects the mailbox.
			f = setup(t, time.Hour)
			on := mailauth.Without(a.guard)
			err = a.attack(f)
			on()
			if err != nil || f.stored(t) == nil {
				t.Fatalf("without the %s guard: %v; the attack should have connected, or the refusal is not the guard's", a.guard, err)
			}
		})
	}

	t.Run("a replayed state", func(t *testing.T) {
		f := setup(t, time.Hour)
		state, code, nonce := f.signIn(t, address)
		if _, err := f.m.Finish(ctx, state, code, nonce); err != nil {
			t.Fatal(err)
		}
		before := f.p.Exchanges.Load()
		_, err := f.m.Finish(ctx, state, code, nonce)
		var r *mailauth.Refusal
		if !errors.As(err, &r) || !strings.Contains(r.Message, "already used") || f.p.Exchanges.Load() != before {
			t.Fatalf("replay: %v (%d exchanges); want refused before asking the provider", err, f.p.Exchanges.Load()-before)
		}
		// Without the guard the replay reaches the provider (which refuses
		// the spent code: a second line of defence).
		on := mailauth.Without("spend")
		state, code, nonce = f.signIn(t, address)
		f.m.Finish(ctx, state, code, nonce)
		before = f.p.Exchanges.Load()
		_, err = f.m.Finish(ctx, state, code, nonce)
		on()
		if f.p.Exchanges.Load() == before || err == nil {
			t.Fatalf("without the guard the replay did not reach the provider: %v", err)
		}
	})

	// And the right account connects.
	f := setup(t, time.Hour)
	f.connect(t)
}

func mustQuery(t *testing.T, raw, k string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || u.Query().Get(k) == "" {
		t.Fatalf("%s has no %s", raw, k)
	}
	return u.Query().Get(k)
}

// TestDeviceFlow connects through the device code flow, then disconnects:
// the refresh token is revoked at the provider and forgotten here.
func TestDeviceFlow(t *testing.T) {
	f := setup(t, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	da, err := f.m.DeviceStart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if da.UserCode == "" || da.VerificationURI == "" {
		t.Fatalf("device authorization %+v", da)
	}
	go func() {
		if err := f.p.ApproveDevice(da.UserCode, address, password); err != nil {
			t.Error(err)
		}
	}()
	c, err := f.m.DeviceFinish(ctx, da, f.admin)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != mailboxes.StatusConnected {
		t.Fatalf("%+v", c)
	}
	if _, err := f.m.AccessToken(ctx); err != nil {
		t.Fatal(err)
	}
	said, err := f.m.Disconnect(audit.WithActor(ctx, repo.SystemActor("test")), "disconnected by an admin")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(said, "revoked at the provider") {
		t.Errorf("disconnect said %q", said)
	}
	if err := f.m.Refresh(ctx); !mailauth.IsDisconnected(err) {
		t.Fatalf("after disconnecting: %v", err)
	}
	if st, _ := f.m.Status(ctx); st.State != mailboxes.StatusDisconnected || st.Reason != "disconnected by an admin" {
		t.Fatalf("%+v", st)
	}
}

// TestKeyFile: the key file must be the owner's alone and hold enough; a
// token sealed for one mailbox does not open for another or under another
// key.
func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, mailauth.KeyFileName)
	if _, err := mailauth.ReadKey(path); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing key: %v", err)
	}
	k, err := mailauth.MakeKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %04o", info.Mode().Perm())
	}
	sealed := k.Seal(address, "a refresh token")
	if strings.Contains(sealed, "a refresh token") {
		t.Fatal("not sealed")
	}
	if got, err := k.Open(address, sealed); err != nil || got != "a refresh token" {
		t.Fatalf("%q %v", got, err)
	}
	if _, err := k.Open("other@example.test", sealed); err == nil {
		t.Error("a token sealed for one mailbox opens for another")
	}
	os.Chmod(path, 0o644)
	if _, err := mailauth.ReadKey(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("key readable by others: %v", err)
	}
	other, _ := mailauth.MakeKey(filepath.Join(dir, "other.key"))
	if _, err := other.Open(address, sealed); err == nil {
		t.Error("a token opens under another key")
	}
	short := filepath.Join(dir, "short.key")
	os.WriteFile(short, []byte("short"), 0o600)
	if _, err := mailauth.ReadKey(short); err == nil || !strings.Contains(err.Error(), "at least") {
		t.Fatalf("short key: %v", err)
	}
}

// TestRefreshLoopBacksOff: with the provider unreachable the refresh loop
// retries with backoff (1 s doubling, here up to 2 s), never in a tight
// loop; once the provider answers again it refreshes and clears the
// problem. (Only an upper bound on the attempts: a loaded machine makes
// fewer.)
func TestRefreshLoopBacksOff(t *testing.T) {
	f := setup(t, time.Hour)
	f.connect(t)
	f.p.Down.Store(true)
	before := f.p.Refreshes.Load()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.m.Run(ctx); close(done) }()
	time.Sleep(5 * time.Second)
	if n := f.p.Refreshes.Load() - before; n > 6 {
		t.Errorf("%d refresh attempts in 5 s with the provider down; want backoff (at most 6)", n)
	}
	if st, _ := f.m.Status(context.Background()); st.Problem == "" || st.State != mailboxes.StatusConnected {
		t.Errorf("status while the provider is down: %+v", st)
	}
	f.p.Down.Store(false)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if st, _ := f.m.Status(context.Background()); st.Problem == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the problem stays after the provider is back")
		}
		time.Sleep(200 * time.Millisecond)
	}
	cancel()
	<-done
}

// TestReplacedKey: a kept token that does not open with the key (the key
// file was replaced) disconnects the mailbox, saying so.
func TestReplacedKey(t *testing.T) {
	f := setup(t, time.Hour)
	f.connect(t)
	other, err := mailauth.MakeKey(filepath.Join(t.TempDir(), "new.key"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := mailauth.New(f.store, mailauth.Options{Provider: mailauth.Provider{Name: "testprovider", ClientID: f.p.ClientID, ClientSecret: f.p.Secret,
		AuthURL: f.p.AuthURL, TokenURL: f.p.TokenURL, Scopes: mailauthtest.Scopes}, Address: address, PublicURL: publicURL, Key: other, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Refresh(context.Background()); !mailauth.IsDisconnected(err) {
		t.Fatalf("refresh under another key: %v", err)
	}
	if st, _ := m.Status(context.Background()); st.State != mailboxes.StatusDisconnected || !strings.Contains(st.Reason, "key file was replaced") {
		t.Fatalf("%+v", st)
	}
}
