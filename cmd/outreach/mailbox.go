package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/oauth2"

	"outreach/mailauth"
	"outreach/repo"
	"outreach/repo/mailboxes"
)

// The team mailbox connected by signing in (OUTREACH_MAILBOX_PROVIDER):
// the configuration, the key the refresh token is sealed under, and the
// `outreach mailbox` commands.

// mailboxRef is the mailbox connection as the IMAP sync and the SMTP
// sending see it; it is filled once the store is open.
type mailboxRef struct {
	m atomic.Pointer[mailauth.Mailbox]
}

func (r *mailboxRef) AccessToken(ctx context.Context) (string, error) {
	if m := r.m.Load(); m != nil {
		return m.AccessToken(ctx)
	}
	return "", &mailauth.DisconnectedError{Reason: "the service is starting"}
}

func (r *mailboxRef) Ready(ctx context.Context) (bool, string) {
	if m := r.m.Load(); m != nil {
		return m.Ready(ctx)
	}
	return false, "the service is starting"
}

// runningMailbox is this server's mailbox connection, for the commands of
// the command socket (the one-time link lives in its memory).
var runningMailbox atomic.Pointer[mailauth.Mailbox]

// mailboxSetting reads the sign-in connection's settings; nil when
// OUTREACH_MAILBOX_PROVIDER is unset. It refuses a configuration that
// also gives the IMAP or SMTP side a password or token of its own.
type mailboxSetting struct {
	provider mailauth.Provider
	address  string
	keyPath  string
	ref      *mailboxRef
}

func mailboxConfig(cfg config) (*mailboxSetting, error) {
	p, on, err := mailauth.ProviderFromEnv()
	if !on {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mailbox sign-in: %w", err)
	}
	for _, v := range []string{"OUTREACH_IMAP_PASSWORD", "OUTREACH_IMAP_OAUTH2_TOKEN", "OUTREACH_IMAP_OAUTH2_TOKEN_FILE",
		"OUTREACH_SMTP_PASSWORD", "OUTREACH_SMTP_OAUTH2_TOKEN", "OUTREACH_SMTP_OAUTH2_TOKEN_FILE"} {
		if os.Getenv(v) != "" {
			return nil, fmt.Errorf("OUTREACH_MAILBOX_PROVIDER connects the mailbox by signing in, and %s gives it a credential of its own: unset one of them", v)
		}
	}
	for _, v := range []string{"OUTREACH_IMAP_AUTH", "OUTREACH_SMTP_AUTH"} {
		if a := os.Getenv(v); a != "" && a != "xoauth2" {
			return nil, fmt.Errorf("%s=%q: with OUTREACH_MAILBOX_PROVIDER the mailbox authenticates with xoauth2 (leave it unset)", v, a)
		}
	}
	ms := &mailboxSetting{provider: p, ref: &mailboxRef{}}
	ms.address = strings.ToLower(strings.TrimSpace(env("OUTREACH_MAILBOX_ADDRESS", env("OUTREACH_IMAP_USER", os.Getenv("OUTREACH_SMTP_USER")))))
	if !strings.Contains(ms.address, "@") {
		return nil, fmt.Errorf("mailbox sign-in: the team mailbox's address %q: set OUTREACH_IMAP_USER (or OUTREACH_MAILBOX_ADDRESS) to the mailbox's email address", ms.address)
	}
	if os.Getenv("OUTREACH_IMAP_ADDR") == "" && os.Getenv("OUTREACH_SMTP_ADDR") == "" {
		return nil, errors.New("OUTREACH_MAILBOX_PROVIDER is set, but neither OUTREACH_IMAP_ADDR nor OUTREACH_SMTP_ADDR: there is no mailbox to connect (see docs/connect.md)")
	}
	ms.keyPath = os.Getenv("OUTREACH_MAILBOX_KEY_FILE")
	switch {
	case ms.keyPath == "" && cfg.uri != "":
		return nil, errors.New("OUTREACH_MAILBOX_KEY_FILE is not set: on MongoDB the key the mailbox's refresh token is sealed under is the operator's, the same file on every instance (mode 0600, at least 32 bytes: openssl rand -hex 32 > mailbox.key; chmod 600 mailbox.key)")
	case ms.keyPath != "":
		if _, err := mailauth.ReadKey(ms.keyPath); err != nil {
			return nil, fmt.Errorf("OUTREACH_MAILBOX_KEY_FILE: %w", err)
		}
	case cfg.data != "":
		// The data directory's key: a file there must be the owner's alone.
		path := filepath.Join(cfg.data, mailauth.KeyFileName)
		if _, err := os.Stat(path); err == nil {
			if _, err := mailauth.ReadKey(path); err != nil {
				return nil, err
			}
		}
	}
	return ms, nil
}

// mailboxKey reads the mailbox key: the operator's file, or the data
// directory's, made at first start. A connection already kept whose key
// file is gone refuses the start: a new key could not open its token.
func mailboxKey(ctx context.Context, cfg config, store *repo.Store, ms *mailboxSetting) (*mailauth.Key, error) {
	if ms.keyPath != "" {
		return mailauth.ReadKey(ms.keyPath)
	}
	path := filepath.Join(cfg.data, mailauth.KeyFileName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		c, err := mailboxes.Of(store).Connection(ctx, ms.address)
		if err != nil {
			return nil, err
		}
		if c != nil && c.RefreshSealed != "" {
			return mailauth.ReadKey(path) // says it is missing, and what to do
		}
		return mailauth.MakeKey(path)
	}
	return mailauth.ReadKey(path)
}

// newMailbox makes the mailbox connection on store.
func newMailbox(ctx context.Context, cfg config, store *repo.Store, ms *mailboxSetting, publicURL string, log zerolog.Logger) (*mailauth.Mailbox, error) {
	key, err := mailboxKey(ctx, cfg, store, ms)
	if err != nil {
		return nil, fmt.Errorf("mailbox sign-in: %w", err)
	}
	opts := mailauth.Options{Provider: ms.provider, Address: ms.address, PublicURL: publicURL, Key: key, Log: log}
	if v := os.Getenv("OUTREACH_MAILBOX_REFRESH_MARGIN"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return nil, fmt.Errorf("OUTREACH_MAILBOX_REFRESH_MARGIN=%q: want a duration of at least 1s, e.g. 5m", v)
		}
		opts.Margin = d
	}
	return mailauth.New(store, opts)
}

// mailboxCommand runs `outreach mailbox connect|status|disconnect`.
func mailboxCommand(ctx context.Context, cfg config, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: outreach mailbox connect --provider google|microsoft [--device] | status | disconnect")
	}
	fs := flag.NewFlagSet("mailbox "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.flags(fs)
	provider := fs.String("provider", "", "google, microsoft, or the configured provider's name (connect; must match OUTREACH_MAILBOX_PROVIDER)")
	device := fs.Bool("device", false, "connect with the device code flow: sign in on any device with the code printed here (connect)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	c := command{Name: "mailbox " + args[0], KeyName: strings.ToLower(*provider), DataDir: cfg.data}
	switch args[0] {
	case "connect":
		if *provider == "" {
			return errors.New("usage: outreach mailbox connect --provider google|microsoft [--device]: the provider is required")
		}
		if *device {
			c.Name = "mailbox device start"
			var out strings.Builder
			if err := runCommand(ctx, cfg, c, &out, stderr, zerolog.Nop()); err != nil {
				return err
			}
			handle, text, _ := strings.Cut(out.String(), "\n")
			fmt.Fprint(stdout, text)
			return runCommand(ctx, cfg, command{Name: "mailbox device wait", ID: handle, DataDir: cfg.data}, stdout, stderr, zerolog.Nop())
		}
	case "status", "disconnect":
	default:
		return fmt.Errorf("unknown mailbox command %q: use connect, status or disconnect", args[0])
	}
	return runCommand(ctx, cfg, c, stdout, stderr, zerolog.Nop())
}

// devices are the device flows started by `mailbox connect --device`,
// waiting for the person to sign in.
var devices = struct {
	sync.Mutex
	m map[string]*oauth2.DeviceAuthResponse
}{m: map[string]*oauth2.DeviceAuthResponse{}}

// commandMailbox is the mailbox connection a command works on: the running
// server's, or (no server on the data directory, or MongoDB) one made here
// on the store the command opened.
func commandMailbox(ctx context.Context, store *repo.Store, dataDir string) (*mailauth.Mailbox, error) {
	if m := runningMailbox.Load(); m != nil {
		return m, nil
	}
	cfg := config{data: dataDir, uri: os.Getenv("MONGODB_URI")}
	ms, err := mailboxConfig(cfg)
	if err != nil {
		return nil, err
	}
	if ms == nil {
		return nil, errors.New("the team mailbox is not connected by signing in here: set OUTREACH_MAILBOX_PROVIDER and its settings (see docs/connect.md)")
	}
	return newMailbox(ctx, cfg, store, ms, env("OUTREACH_PUBLIC_URL", "http://"+env("OUTREACH_ADDR", "127.0.0.1:8080")), zerolog.Nop())
}

// executeMailbox runs a mailbox command against store.
func executeMailbox(ctx context.Context, store *repo.Store, c command, out io.Writer) error {
	m, err := commandMailbox(ctx, store, c.DataDir)
	if err != nil {
		return err
	}
	if c.KeyName != "" && c.KeyName != m.Provider() {
		return fmt.Errorf("--provider %s: the service's mailbox provider is %s (OUTREACH_MAILBOX_PROVIDER)", c.KeyName, m.Provider())
	}
	switch c.Name {
	case "mailbox connect":
		if runningMailbox.Load() == nil {
			return errors.New("the one-time link is made by the running service, and none runs on this data directory (on MongoDB commands never go through it): start it (outreach serve) and run this again, or sign in as an admin on its page /mailbox/connect, or use --device")
		}
		fmt.Fprintf(out, "Open this link in a browser within %s; it works once. Sign in at %s as %s:\n\n    %s\n\n",
			mailauth.LinkTTL, m.Provider(), m.Address(), m.NewLink("system"))
		return nil
	case "mailbox device start":
		da, err := m.DeviceStart(ctx)
		if err != nil {
			return err
		}
		handle := strings.ReplaceAll(strings.ToLower(da.UserCode), " ", "") + fmt.Sprint(time.Now().UnixNano())
		devices.Lock()
		devices.m[handle] = da
		devices.Unlock()
		uri := da.VerificationURI
		if da.VerificationURIComplete != "" {
			uri = da.VerificationURIComplete
		}
		fmt.Fprintf(out, "%s\nOn any device, open %s and enter the code %s, then sign in at %s as %s (within %s). Waiting...\n",
			handle, uri, da.UserCode, m.Provider(), m.Address(), time.Until(da.Expiry).Round(time.Second))
		return nil
	case "mailbox device wait":
		devices.Lock()
		da := devices.m[c.ID]
		delete(devices.m, c.ID)
		devices.Unlock()
		if da == nil {
			return errors.New("this device sign-in is unknown or over: start again")
		}
		conn, err := m.DeviceFinish(ctx, da, "system")
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "The team mailbox %s is connected; the inbox sync and pitch sending use it.\n", conn.Address)
		return nil
	case "mailbox status":
		st, err := m.Status(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s at %s: %s", st.Address, st.Provider, st.State)
		if st.Reason != "" {
			fmt.Fprintf(out, " (%s)", st.Reason)
		}
		if st.Problem != "" {
			fmt.Fprintf(out, "; problem: %s", st.Problem)
		}
		fmt.Fprintln(out)
		return nil
	case "mailbox disconnect":
		said, err := m.Disconnect(ctx, "disconnected by an admin (outreach mailbox disconnect)")
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "The team mailbox %s is disconnected: %s. The inbox sync and pitch sending wait until it is connected again.\n", m.Address(), said)
		return nil
	}
	return fmt.Errorf("unknown command %q", c.Name)
}
