package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestServeChecksEverySettingFirst starts `outreach serve` on an empty data
// directory with one wrong setting at a time: each is refused, naming it,
// before the store is touched: the directory stays empty and no admin key
// is printed (it would be printed "only this once" for a store that the
// next, corrected start would find already bootstrapped).
func TestServeChecksEverySettingFirst(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"unknown toolset", []string{"--toolsets", "core,bogus"}, nil, `unknown toolset "bogus"`},
		{"rate limit", []string{"--rate-limit", "fast"}, nil, "fast"},
		{"HTTP rate limit", []string{"--http-rate-limit", "1,x"}, nil, "1,x"},
		{"Slack without a channel", nil, []string{"OUTREACH_SLACK_BOT_TOKEN=xoxb-1"}, "OUTREACH_SLACK_CHANNEL"},
		{"public URL with a query", []string{"--public-url", "https://outreach.example.com/?x=1"}, nil, "--public-url"},
		{"public URL not http", nil, []string{"OUTREACH_PUBLIC_URL=ftp://outreach.example.com"}, "--public-url (OUTREACH_PUBLIC_URL)"},
		{"trusted proxies", []string{"--trusted-proxies", "10.0.0.0/33"}, nil, "--trusted-proxies"},
		{"TLS certificate without its key", []string{"--tls-cert", "/nonexistent/cert.pem"}, nil, "--tls-key"},
		{"TLS files that do not exist", []string{"--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"}, nil, "--tls-cert"},
		{"TLS files and ACME", []string{"--tls-cert", "c.pem", "--tls-key", "k.pem", "--acme-host", "outreach.example.com"}, nil, "--acme-host"},
		{"ACME for an address", []string{"--acme-host", "203.0.113.7"}, nil, "--acme-host"},
		{"ACME for a name with a port", nil, []string{"OUTREACH_ACME_HOST=outreach.example.com:443"}, "--acme-host"},
		{"ACME directory over plain HTTP", []string{"--acme-host", "outreach.example.com", "--acme-directory", "http://ca.example.com/dir"}, nil, "--acme-directory"},
		{"ACME e-mail without a host", []string{"--acme-email", "ops@example.com"}, nil, "--acme-host"},
		{"media cap", nil, []string{"OUTREACH_MEDIA_MAX_BYTES=0"}, "OUTREACH_MEDIA_MAX_BYTES"},
		{"IMAP interval", nil, []string{"OUTREACH_IMAP_ADDR=127.0.0.1:1", "OUTREACH_IMAP_INTERVAL=1s"}, "OUTREACH_IMAP_INTERVAL"},
		{"metrics token too short", nil, []string{"OUTREACH_METRICS_TOKEN=short"}, "OUTREACH_METRICS_TOKEN"},
		{"metrics listen address invalid", []string{"--metrics-listen", "256.0.0.1:0"}, nil, "--metrics-listen"},
		// The analyst endpoint exists on the embedded store only (ignored with MONGODB_URI).
		{"analyst endpoint beyond loopback in plain text", []string{"--mongo-listen", "0.0.0.0:0"}, nil, "--mongo-allow-plaintext"},
		{"analyst certificate without its key", []string{"--mongo-listen", "127.0.0.1:0", "--mongo-tls-cert", "/nonexistent/cert.pem"}, nil, "--mongo-tls-key"},
		{"analyst certificate files that do not exist", []string{"--mongo-listen", "127.0.0.1:0", "--mongo-tls-cert", "/nonexistent/cert.pem", "--mongo-tls-key", "/nonexistent/key.pem"}, nil, "--mongo-tls-cert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Contains(strings.Join(tc.args, " "), "--mongo-listen") && os.Getenv("MONGODB_URI") != "" {
				t.Skip("no analyst endpoint on MONGODB_URI")
			}
			data := dataDir(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary(t), append([]string{"serve", "--data", data, "--addr", "127.0.0.1:0"}, tc.args...)...)
			cmd.Env = append(append(os.Environ(), storeEnv(data)...), tc.env...)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if err := cmd.Run(); err == nil {
				t.Fatalf("serve started:\n%s\n%s", out.String(), errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.want) {
				t.Errorf("stderr does not name %q:\n%s", tc.want, errOut.String())
			}
			if strings.Contains(out.String(), "Bearer") || strings.Contains(strings.ToLower(out.String()), "admin key") {
				t.Errorf("an admin key was printed for a start that was refused:\n%s", out.String())
			}
			if entries, err := os.ReadDir(data); err != nil || len(entries) > 0 {
				t.Errorf("the refused start left %d entries in the data directory (%v)", len(entries), err)
			}
			if uri := os.Getenv("MONGODB_URI"); uri != "" { // the store is a database there
				client, err := mongo.Connect(options.Client().ApplyURI(uri).SetTimeout(20 * time.Second))
				if err != nil {
					t.Fatal(err)
				}
				defer client.Disconnect(context.Background())
				db := strings.TrimPrefix(storeEnv(data)[0], "OUTREACH_DB=")
				names, err := client.ListDatabaseNames(context.Background(), bson.M{"name": db})
				if err != nil || len(names) > 0 {
					t.Errorf("the refused start created database %v (%v)", names, err)
				}
			}
		})
	}
}

// TestServeLogsEmailSyncSettings: the start log says what the email sync
// will do, as an operator reads it: the mailboxes synced (INBOX when none
// is configured, not an empty list) and the interval with its unit.
func TestServeLogsEmailSyncSettings(t *testing.T) {
	for _, tc := range []struct {
		env       []string
		mailboxes []string
		interval  string
	}{
		{[]string{"OUTREACH_IMAP_INTERVAL=10s"}, []string{"INBOX"}, "10s"},
		{[]string{"OUTREACH_IMAP_MAILBOXES=INBOX, Press", "OUTREACH_IMAP_INTERVAL=0"}, []string{"INBOX", "Press"}, "0 (on demand only)"},
	} {
		srv := startServer(t, dataDir(t), append([]string{"OUTREACH_IMAP_ADDR=127.0.0.1:1", "OUTREACH_IMAP_SECURITY=plain",
			"OUTREACH_IMAP_USER=press", "OUTREACH_IMAP_PASSWORD=secret"}, tc.env...)...)
		var got struct {
			Mailboxes []string `json:"mailboxes"`
			Interval  any      `json:"interval"`
		}
		found := false
		for _, line := range strings.Split(srv.stderr.String(), "\n") {
			if strings.Contains(line, `"email sync configured"`) {
				found = json.Unmarshal([]byte(line), &got) == nil
			}
		}
		if !found {
			t.Fatalf("no email sync line in the start log:\n%s", srv.stderr.String())
		}
		if !slices.Equal(got.Mailboxes, tc.mailboxes) || got.Interval != tc.interval {
			t.Errorf("start log: mailboxes %q, interval %v; want %q, %q", got.Mailboxes, got.Interval, tc.mailboxes, tc.interval)
		}
	}
}
