package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/mailauth"
	"outreach/mailauth/mailauthtest"
	"outreach/pitchsend/mailtest"
)

// TestMailboxSignIn runs the team mailbox connected by signing in, with
// real parts only: the service's binary; an OAuth 2.0 provider run in the
// test (zitadel/oidc's) that issues, refreshes (rotating the refresh
// token), expires (after 6 s) and revokes tokens; Dovecot checking every
// IMAP login and Postfix's submission (SASL through Dovecot) with its
// oauth2 passdb against that provider's introspection; and a headless
// Chromium as the admin's browser. No password or token is configured
// for IMAP or SMTP: they work on XOAUTH2 with the service's tokens.
//
// The admin connects from a one-time link of `outreach mailbox connect`;
// the inbox sync and pitches work across several expiries; the provider
// revokes the grant: the mailbox is disconnected with the provider's
// reason, the admin notified, a scheduled pitch waits (not failed); the
// admin connects again and it goes, once. disconnect_mailbox revokes at the
// provider; the device code flow from the command line connects again. No
// token the provider issued is in the data directory, a backup, or the log.
func TestMailboxSignIn(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		// On a server the mailbox key is the operator's file and the
		// one-time link is printed only from a data directory; the flows,
		// the token source and the pauses are the same code on both.
		t.Skip("runs on the embedded store: it connects from the one-time link `outreach mailbox connect` prints from the data directory")
	}
	exe := chromium(t)
	const pw = "the team's password at the provider"
	const adminPassword = "an admin's password at Outreach"
	p := mailauthtest.Start(t, "", mailauthtest.User{ID: "team", Email: mailtest.Team, Password: pw},
		mailauthtest.User{ID: "other", Email: "other@outreach.test", Password: pw})
	p.SetAccessTTL(6 * time.Second)
	iu, _ := url.Parse(p.IntrospectURL)
	iu.User = url.UserPassword(p.ClientID, p.Secret)
	recipients := []string{"r0@paper.test", "r1@paper.test", "r2@paper.test", "r3@paper.test"}
	mail := mailtest.StartWith(t, mailtest.Options{Introspection: iu.String()}, recipients...)

	data := dataDir(t)
	secretFile := filepath.Join(t.TempDir(), "client-secret")
	os.WriteFile(secretFile, []byte(p.Secret+"\n"), 0o600)
	svcEnv := []string{
		"OUTREACH_IMAP_ADDR=" + mail.IMAP, "OUTREACH_IMAP_SECURITY=plain", "OUTREACH_IMAP_USER=" + mailtest.Team, "OUTREACH_IMAP_INTERVAL=0",
		"OUTREACH_SMTP_ADDR=" + mail.Submission, "OUTREACH_SMTP_SECURITY=starttls", "OUTREACH_SMTP_USER=" + mailtest.Team,
		"OUTREACH_SMTP_FROM=PR Team <" + mailtest.Team + ">", "SSL_CERT_FILE=" + mail.CAFile, "OUTREACH_PITCH_INTERVAL=1s",
		"OUTREACH_OAUTH=true", "OUTREACH_MAILBOX_PROVIDER=testprovider", "OUTREACH_MAILBOX_CLIENT_ID=" + p.ClientID, "OUTREACH_MAILBOX_CLIENT_SECRET_FILE=" + secretFile,
		"OUTREACH_MAILBOX_AUTH_URL=" + p.AuthURL, "OUTREACH_MAILBOX_TOKEN_URL=" + p.TokenURL, "OUTREACH_MAILBOX_DEVICE_AUTH_URL=" + p.DeviceURL,
		"OUTREACH_MAILBOX_REVOKE_URL=" + p.RevokeURL, "OUTREACH_MAILBOX_SCOPES=" + strings.Join(mailauthtest.Scopes, " ")}
	srv := startServer(t, data, svcEnv...)
	p.SetRedirect(srv.Base + mailauth.CallbackPath)
	if info, err := os.Stat(filepath.Join(data, mailauth.KeyFileName)); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the mailbox key file: %v %v", info, err)
	}
	admin := mustDial(t, srv.URL, srv.FirstKey)
	agentKey := strings.TrimSpace(mustCLI(t, "keys", "create", "--data", data, "--name", "pitching agent"))
	agent := mustDial(t, srv.URL, agentKey)

	status := func() mailauth.Status {
		t.Helper()
		var out struct {
			Mailbox *mailauth.Status `json:"mailbox"`
		}
		admin.must(t, "get_sync_status", M{}, &out)
		if out.Mailbox == nil {
			t.Fatal("get_sync_status has no mailbox")
		}
		return *out.Mailbox
	}
	if st := status(); st.State != "not_connected" || !st.Paused {
		t.Fatalf("before connecting: %+v", st)
	}
	var te *toolError
	if err := admin.call(context.Background(), "sync_emails", M{}, nil); !errors.As(err, &te) || te.Code != "failed_precondition" || !strings.Contains(te.Message, "not connected") {
		t.Fatalf("sync before connecting: %v", err)
	}

	// The connect page's guards, over plain HTTP: a return from the
	// provider that no sign-in of this browser started, and a sign-in form
	// without this browser's CSRF token, are refused; the page's headers
	// allow nothing else to run or frame it.
	resp, err := http.Get(srv.Base + mailauth.CallbackPath + "?state=forged&code=forged")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "already used") || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") ||
		resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("a forged return: %s %v %s", resp.Status, resp.Header, body)
	}
	resp, err = http.PostForm(srv.Base+mailauth.ConnectPath, url.Values{"email": {"x@example.test"}, "password": {"x"}})
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "security token") {
		t.Fatalf("a sign-in without the CSRF token: %s %s", resp.Status, body)
	}

	// The admin's browser.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// An admin with a password to sign in to Outreach (set from an invite,
	// in the browser), and a member who is not an admin.
	invite := func(email, scopes string) {
		t.Helper()
		out := mustCLI(t, "users", "invite", "--email", email, "--scopes", scopes, "--data", data, "--public-url", srv.Base)
		link := regexp.MustCompile(`http://\S+/oauth/invite\?token=\S+`).FindString(out)
		ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("password")),
			chromedp.SendKeys(chromedp.ID("password"), adminPassword), chromedp.SendKeys(chromedp.ID("confirm"), adminPassword),
			chromedp.Click(chromedp.CSS(`button[type=submit]`))); err != nil {
			t.Fatalf("the invite of %s: %v", email, err)
		}
		for {
			if h, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("h1"))); h == "Password set" {
				return
			}
			if ctx.Err() != nil {
				body, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("body")))
				t.Fatalf("the invite of %s: %s", email, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// signInOutreach opens the connect page and signs in to Outreach as
	// email; it returns the message the page then shows, if any.
	signInOutreach := func(ctx context.Context, email string) error {
		return chromedp.Do(ctx, chromedp.Navigate(srv.Base+mailauth.ConnectPath), chromedp.WaitVisible(chromedp.ID("email")),
			chromedp.SendKeys(chromedp.ID("email"), email), chromedp.SendKeys(chromedp.ID("password"), adminPassword),
			chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	}
	connect := func(as string) string {
		t.Helper()
		out := mustCLI(t, "mailbox", "connect", "--provider", "testprovider", "--data", data)
		link := regexp.MustCompile(`http://\S+/mailbox/connect\?link=\S+`).FindString(out)
		if link == "" {
			t.Fatalf("no link in %q", out)
		}
		ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
		defer cancel()
		err := chromedp.Do(ctx, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("username")),
			chromedp.SendKeys(chromedp.ID("username"), as), chromedp.SendKeys(chromedp.ID("password"), pw),
			chromedp.Click(chromedp.CSS(`button[type=submit]`)), chromedp.WaitVisible(chromedp.ID("message")))
		if err != nil {
			body, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("the browser's connect: %v\npage: %s", err, body)
		}
		msg, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("message")))
		if err != nil {
			t.Fatalf("the browser's connect: %v", err)
		}
		// The one-time link is spent.
		resp, err := http.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("the link opened twice: %s", resp.Status)
		}
		return msg
	}
	// From the connect page: an admin signs in to Outreach, then at the
	// provider; first as the wrong account: refused, said plainly, nothing
	// kept. A member who is not an admin cannot start it.
	invite("ada@example.test", "read,write,admin")
	invite("ben@example.test", "read,write")
	{
		ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
		if err := signInOutreach(ctx, "ben@example.test"); err != nil {
			t.Fatal(err)
		}
		msg, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[role=alert]`)))
		if err != nil || !strings.Contains(msg, "Only an admin connects the team mailbox") {
			t.Fatalf("a member who is not an admin: %q %v", msg, err)
		}
		if err := signInOutreach(ctx, "ada@example.test"); err != nil {
			t.Fatal(err)
		}
		err = chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("username")),
			chromedp.SendKeys(chromedp.ID("username"), "other@outreach.test"), chromedp.SendKeys(chromedp.ID("password"), pw),
			chromedp.Click(chromedp.CSS(`button[type=submit]`)), chromedp.WaitVisible(chromedp.ID("message")))
		if err != nil {
			body, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("the page's connect: %v\n%s", err, body)
		}
		msg, _ = chromedp.Run(ctx, chromedp.Text(chromedp.ID("message")))
		cancel()
		if !strings.Contains(msg, "You signed in as other@outreach.test, but the team mailbox is "+mailtest.Team) {
			t.Fatalf("the wrong account: %q", msg)
		}
	}
	if st := status(); st.State != "not_connected" {
		t.Fatalf("after the wrong account: %+v", st)
	}
	if msg := connect(mailtest.Team); !strings.Contains(msg, "is connected") {
		t.Fatalf("connect: %q", msg)
	}
	if st := status(); st.State != "connected" || st.Paused {
		t.Fatalf("after connecting: %+v", st)
	}

	// Contacts the inbox and the pitches know.
	var ids []string
	for i, r := range recipients {
		var c struct{ ID string }
		agent.must(t, "create_contact", M{"first_name": fmt.Sprintf("R%d", i), "last_name": "Test", "email": r}, &c)
		ids = append(ids, c.ID)
	}
	msgNo := 0
	syncOne := func() {
		t.Helper()
		msgNo++
		mail.Append(mailtest.Team, "INBOX", []byte(fmt.Sprintf("From: r0@paper.test\r\nTo: %s\r\nSubject: note %d\r\nMessage-ID: <note-%d@paper.test>\r\nDate: %s\r\n\r\nhello %d\r\n",
			mailtest.Team, msgNo, msgNo, time.Now().Format(time.RFC1123Z), msgNo)))
		var res struct{ Stored int }
		admin.must(t, "sync_emails", M{}, &res)
		if res.Stored != 1 {
			t.Fatalf("sync %d stored %d", msgNo, res.Stored)
		}
	}
	pitch := func(i int, at string) (string, string) {
		t.Helper()
		var opp, pt struct{ ID string }
		agent.must(t, "create_opportunity", M{"title": fmt.Sprintf("Story %d", i), "stage": "drafting", "contact_ids": []string{ids[i]}}, &opp)
		agent.must(t, "create_pitch", M{"opportunity_id": opp.ID, "contact_ids": []string{ids[i]}, "subject": fmt.Sprintf("Pitch %d", i), "body": "Hello."}, &pt)
		admin.must(t, "approve_pitch", M{"id": pt.ID, "confirm": true}, nil)
		args := M{"id": pt.ID, "confirm": true}
		if at != "" {
			args["scheduled_at"] = at
		}
		var got pitchView
		agent.must(t, "send_pitch", args, &got)
		return pt.ID, got.State
	}

	// The sync and sending across several expiries of the access token.
	for i := 0; i < 3; i++ {
		syncOne()
		if _, st := pitch(i, ""); st != "sent" {
			t.Fatalf("pitch %d: %s\n%s", i, st, mail.Log())
		}
		mail.WaitMessages(recipients[i], "INBOX", 1)
		time.Sleep(7 * time.Second) // the access token expires
	}
	if n := p.Refreshes.Load(); n < 3 {
		t.Errorf("%d refreshes across three expiries", n)
	}

	// The provider ends the grant: disconnected, with its reason.
	p.RevokeAll("team")
	deadline := time.Now().Add(60 * time.Second)
	st := status()
	for st.State != "disconnected" && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		st = status()
	}
	if st.State != "disconnected" || !strings.Contains(st.Reason, "invalid_grant") || !st.Paused {
		t.Fatalf("after the revocation: %+v", st)
	}
	var notes struct {
		Notifications []struct {
			Event, Text string
		}
	}
	admin.must(t, "list_notifications", M{}, &notes)
	found := 0
	for _, n := range notes.Notifications {
		if n.Event == "mailbox_disconnected" && strings.Contains(n.Text, "invalid_grant") {
			found++
		}
	}
	if found != 1 {
		t.Errorf("the admin has %d mailbox notifications: %+v", found, notes)
	}
	if err := admin.call(context.Background(), "sync_emails", M{}, nil); !errors.As(err, &te) || !strings.Contains(te.Message, "not connected") {
		t.Fatalf("sync while disconnected: %v", err)
	}
	// A pitch sent now is refused before anything is written; one
	// scheduled waits: nothing sent, nothing failed.
	{
		var opp, pt struct{ ID string }
		agent.must(t, "create_opportunity", M{"title": "Refused now", "stage": "drafting", "contact_ids": []string{ids[3]}}, &opp)
		agent.must(t, "create_pitch", M{"opportunity_id": opp.ID, "contact_ids": []string{ids[3]}, "subject": "Now", "body": "Hello."}, &pt)
		admin.must(t, "approve_pitch", M{"id": pt.ID, "confirm": true}, nil)
		if err := agent.call(context.Background(), "send_pitch", M{"id": pt.ID, "confirm": true}, nil); !errors.As(err, &te) || te.Code != "failed_precondition" || !strings.Contains(te.Message, "nothing was sent or scheduled") {
			t.Fatalf("send now while disconnected: %v", err)
		}
		var got pitchView
		agent.must(t, "get_pitch", M{"id": pt.ID}, &got)
		if got.State != "approved" {
			t.Fatalf("the refused pitch is %s", got.State)
		}
		agent.must(t, "cancel_pitch", M{"id": pt.ID}, nil)
	}
	// A pitch scheduled now waits: nothing sent, nothing failed.
	waitID, st3 := pitch(3, time.Now().Add(time.Second).UTC().Format(time.RFC3339))
	if st3 != "scheduled" {
		t.Fatalf("scheduled pitch: %s", st3)
	}
	time.Sleep(4 * time.Second) // several rounds of the delivery worker
	if m := mail.Messages(recipients[3], "INBOX"); len(m) != 0 {
		t.Fatalf("sent while disconnected: %d", len(m))
	}
	var waiting pitchView
	agent.must(t, "get_pitch", M{"id": waitID}, &waiting)
	if waiting.State != "scheduled" && waiting.State != "sending" {
		t.Fatalf("the waiting pitch: %+v", waiting)
	}
	for _, r := range waiting.Recipients {
		if r.State != "pending" {
			t.Fatalf("a recipient of the waiting pitch is %s", r.State)
		}
	}

	// The admin connects again: it goes, once.
	if msg := connect(mailtest.Team); !strings.Contains(msg, "is connected") {
		t.Fatalf("reconnect: %q", msg)
	}
	mail.WaitMessages(recipients[3], "INBOX", 1)
	syncOne()
	time.Sleep(3 * time.Second)
	for i, r := range recipients {
		if m := mail.Messages(r, "INBOX"); len(m) != 1 {
			t.Errorf("%s (pitch %d) received %d messages", r, i, len(m))
		}
	}

	// disconnect_mailbox revokes at the provider.
	var dis struct {
		Done    string          `json:"done"`
		Mailbox mailauth.Status `json:"mailbox"`
	}
	admin.must(t, "disconnect_mailbox", M{"reason": "moving to another mailbox"}, &dis)
	if !strings.Contains(dis.Done, "revoked at the provider") || dis.Mailbox.State != "disconnected" {
		t.Fatalf("disconnect_mailbox: %+v", dis)
	}
	if err := agent.call(context.Background(), "disconnect_mailbox", M{}, nil); !errors.As(err, &te) || te.Code != "permission_denied" {
		t.Errorf("disconnect_mailbox without the admin scope: %v", err)
	}

	// The device code flow from the command line.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), "mailbox", "connect", "--provider", "testprovider", "--device", "--data", data)
	cmd.Env = append(os.Environ(), storeEnv(data)...)
	var outBuf bytes.Buffer
	pr, pwr, _ := os.Pipe()
	cmd.Stdout, cmd.Stderr = pwr, &outBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pwr.Close()
	code, rest := "", &bytes.Buffer{}
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		rest.WriteString(sc.Text() + "\n")
		if m := regexp.MustCompile(`enter the code ([^\s,]+)`).FindStringSubmatch(sc.Text()); m != nil {
			code = m[1]
			break
		}
	}
	if code == "" {
		t.Fatalf("no user code: %s %s", rest, &outBuf)
	}
	if err := p.ApproveDevice(code, mailtest.Team, pw); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		rest.WriteString(sc.Text() + "\n")
	}
	if err := cmd.Wait(); err != nil || !strings.Contains(rest.String(), "is connected") {
		t.Fatalf("outreach mailbox connect --device: %v\n%s\n%s", err, rest, &outBuf)
	}
	if st := status(); st.State != "connected" {
		t.Fatalf("after the device flow: %+v", st)
	}
	syncOne()

	// No token the provider issued is at rest: not in the data
	// directory's files, not in a backup, not in the log.
	tokens := p.Issued()
	if len(tokens) < 8 {
		t.Fatalf("the provider issued %d tokens", len(tokens))
	}
	look := func(where string, text []byte) {
		t.Helper()
		for _, tok := range tokens {
			if bytes.Contains(text, []byte(tok)) {
				t.Errorf("a token the provider issued is in %s", where)
				return
			}
		}
	}
	scanFiles(t, data, look)
	bdir := filepath.Join(t.TempDir(), "backup")
	mustCLI(t, "backup", "--to", bdir, "--data", data)
	if scanFiles(t, bdir, look) == 0 {
		t.Error("the backup has no files")
	}
	if code := srv.term(30 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	look("the server's log", []byte(srv.stderr.String()))
	look("the server's output", []byte(srv.stdout.String()))

	// The key file readable by others, or gone while a connection is kept:
	// the service refuses to start, saying why.
	key := filepath.Join(data, mailauth.KeyFileName)
	refuses := func(want string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary(t), "serve", "--data", data, "--addr", "127.0.0.1:0")
		cmd.Env = append(append(os.Environ(), storeEnv(data)...), svcEnv...)
		out, err := cmd.CombinedOutput()
		if err == nil || ctx.Err() != nil || !strings.Contains(string(out), want) {
			t.Errorf("serve with the key file %s: %v\n%s", want, err, out)
		}
	}
	os.Chmod(key, 0o644)
	refuses("readable by others (mode 0644): chmod 600")
	os.Remove(key)
	refuses("is missing: the refresh token cannot be opened without it")

	// Every document of every collection, read through the driver; the
	// connection's change entries hold the sealed token as [redacted].
	docs, _, db := scanCollections(t, data, look)
	if docs < 20 {
		t.Fatalf("only %d documents", docs)
	}
	type state struct {
		RefreshSealed *string    `bson:"refresh_sealed"`
		RotatedAt     *time.Time `bson:"rotated_at"`
	}
	var entries []struct {
		Seq    int64  `bson:"seq"`
		Before *state `bson:"before"`
		After  *state `bson:"after"`
	}
	cur, err := db.Collection("change_log").Find(context.Background(), bson.M{"collection": "mailbox_connections"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(context.Background(), &entries); err != nil {
		t.Fatal(err)
	}
	rotations := 0
	for _, e := range entries {
		for _, st := range []*state{e.Before, e.After} {
			if st != nil && st.RefreshSealed != nil && *st.RefreshSealed != "[redacted]" && *st.RefreshSealed != "" {
				t.Errorf("change entry %d holds the sealed token: %q", e.Seq, *st.RefreshSealed)
			}
		}
		if e.Before != nil && e.After != nil && e.After.RotatedAt != nil && (e.Before.RotatedAt == nil || !e.After.RotatedAt.Equal(*e.Before.RotatedAt)) {
			rotations++
		}
	}
	if rotations < 3 {
		t.Errorf("%d rotations of the refresh token in the change log (%d entries); want one per refresh", rotations, len(entries))
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return b.String()
}
