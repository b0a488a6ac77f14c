// Command outreach runs the Outreach MCP service and its operator commands.
//
//	outreach serve                 start the MCP server (embedded store by default)
//	outreach indexes               apply the index list and exit
//	outreach keys create|list|revoke
//	outreach users invite|clients|disconnect
//	outreach verify [--json]       check the change-log invariants over the whole store
//	outreach seed --demo           write the demo data
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"outreach/audit"
	"outreach/backup"
	"outreach/delivery"
	"outreach/embedded"
	"outreach/mailauth"
	"outreach/mailsync"
	"outreach/metrics"
	"outreach/oauth"
	"outreach/pitchsend"
	"outreach/repo"
	"outreach/repo/access"
	"outreach/repo/outbox"
	"outreach/repo/pipeline"
	"outreach/server"
	"outreach/server/version"
	"outreach/tools"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "outreach:", err)
		os.Exit(1)
	}
}

const usage = `usage: outreach <command> [flags]

commands:
  serve      start the MCP server at {addr}/mcp (--demo: demo data on an empty store;
             --mongo-listen ADDR: the analyst endpoint, MongoDB's wire protocol, read-only,
             user KEY_ID and password KEY of an agent key with the read scope)
  indexes    apply the index list and exit
  keys       create | list | revoke agent keys
  users      invite --email EMAIL (a one-time link to set a password for OAuth sign-in) | clients | disconnect GRANT_ID
  mailbox    connect --provider google|microsoft [--device] (a one-time link to the connect page, or the device code flow) | status | disconnect
  verify     check that every record matches its change-log entry (--json: machine-readable)
  backup     --to DIR: a consistent copy of the store, taken by the running server | verify SOURCE | list DIR
  restore    restore SOURCE [--counter N | --until TIME]: a backup (and the changes shipped after it) into an empty store
  seed       seed --demo: write the demo data (rollback_session demo takes it back)
  bench      measure the tools beside the floor, the raw store and a peer (Markdown table)
  version    print the version

Every command reads the same configuration:
  --data DIR       embedded store directory (OUTREACH_DATA, default ./data)
  MONGODB_URI      use this MongoDB instead of the embedded store
  OUTREACH_DB      database name (default outreach)
  OUTREACH_WRITE_MODE  force "ordered" or "transaction" (default: chosen by the server's abilities)
  OUTREACH_SERVER_INDEX  on: with MONGODB_URI, keep the service's own index in each instance, following the change log (default off; see docs/store.md);
                         OUTREACH_SERVER_INDEX_WAIT: how long a read waits for it to reach the store's counter (default 250ms)
  OUTREACH_PUBLIC_URL  base URL clients reach the service at, for signed media URLs and OAuth metadata (default: from each request; -public-url)
  OUTREACH_OAUTH       true: serve OAuth 2.1 beside the agent keys (-oauth; see docs/oauth.md)
  OUTREACH_OIDC_ISSUER / OUTREACH_OIDC_CLIENT_ID / OUTREACH_OIDC_CLIENT_SECRET / OUTREACH_OIDC_DOMAINS / OUTREACH_OIDC_NAME
                       members may also sign in with this OpenID Connect provider (-oidc-issuer, ...)
  OUTREACH_MEDIA_MAX_BYTES  size cap of a media upload (default 104857600, 100 MiB)
  OUTREACH_MEDIA_URL_TTL    lifetime of signed media URLs, e.g. 15m (default 15m)
  OUTREACH_MEDIA_SIGNING_KEY_FILE  file (mode 0600) holding the secret media URLs are signed with, at least 32 bytes;
                            with MONGODB_URI give every instance the same one (default: DIR/media-url.key on the
                            embedded store, made at first start; a key of this process alone on MongoDB)
  OUTREACH_MEDIA_SIGNING_KEY       the same secret given inline (the file is preferred: it keeps the secret out of the environment)
  OUTREACH_PITCH_WINDOW     double-pitch guard window, e.g. 336h (default 14 days; -pitch-window)
  OUTREACH_IMAP_ADDR        shared inbox host:port, e.g. imap.gmail.com:993 (unset: no email sync)
  OUTREACH_IMAP_SECURITY    tls (default), starttls, or plain (loopback servers only)
  OUTREACH_IMAP_USER / OUTREACH_IMAP_PASSWORD   login with a password
  OUTREACH_IMAP_OAUTH2_TOKEN / OUTREACH_IMAP_OAUTH2_TOKEN_FILE   XOAUTH2 bearer token (the file is re-read at every sync)
  OUTREACH_IMAP_AUTH        password, xoauth2 or oauthbearer (default: xoauth2 when a token is set)
  OUTREACH_IMAP_MAILBOXES   comma-separated mailboxes (default INBOX)
  OUTREACH_IMAP_INTERVAL    time between automatic syncs, e.g. 5m (default 5m; 0 = only sync_emails)
  OUTREACH_IMAP_MAX_MESSAGE_BYTES  larger messages are skipped and reported (default 52428800, 50 MiB)
  OUTREACH_MAILBOX_PROVIDER  google, microsoft or a name of your own: connect the team mailbox by signing in (docs/connect.md)
  OUTREACH_MAILBOX_CLIENT_ID / _CLIENT_SECRET[_FILE] / _TENANT / _ADDRESS / _KEY_FILE / _SCOPES / _REFRESH_MARGIN
  OUTREACH_MAILBOX_AUTH_URL / _TOKEN_URL / _DEVICE_AUTH_URL / _REVOKE_URL   a provider by its endpoints; see docs/operations.md
  OUTREACH_EMAIL_KEEP_ATTACHMENTS  true: keep attachment bytes in GridFS (default false: metadata only)
  OUTREACH_SMTP_ADDR        the team mailbox's submission server for pitches, host:port (unset: no sending)
  OUTREACH_SMTP_SECURITY / _AUTH / _USER / _PASSWORD / _OAUTH2_TOKEN[_FILE] / _FROM / _SENT_MAILBOX   see docs/operations.md
  OUTREACH_PITCH_APPROVER_SCOPE / _DAILY_CAP / _DOMAIN_CAP / _RESPONDED_ON_REPLY / _INTERVAL / _LEASE   pitch policy
  OUTREACH_TOOLSETS         toolsets to serve, comma-separated (default: every toolset offered, the lean default listed; core: the core set; all: every one listed)
  OUTREACH_RATE_LIMIT       tool calls per second per key, RATE or RATE,BURST (default 10,100; 0: none)
  OUTREACH_HTTP_RATE_LIMIT  HTTP requests per second per key, RATE or RATE,BURST (default 50,500; 0: none)
  OUTREACH_PAGE_RATE_LIMIT  shared report pages and report downloads per second per client address, RATE or RATE,BURST (default 2,20; 0: none)
  OUTREACH_SERVER_CARD      true: serve the MCP server card at /.well-known/mcp/server-card.json (default false)
`

type config struct {
	data, addr, mongoListen, uri, db, writeMode string
	toolsets, rateLimit, httpRateLimit          string
	pageRateLimit                               string
	// memoryLimit: the soft memory limit (memlimit.go); empty: the default.
	memoryLimit string
	// pitchWindow is the double-pitch guard's window.
	pitchWindow            time.Duration
	mongoAllowWrites, demo bool // mongoAllowWrites: a removed flag, refused
	deploy                 deployConfig
	serverCard             bool // serve /.well-known/mcp/server-card.json
	// oauth turns on the OAuth resource server (and authorization server)
	// under the public URL.
	oauth bool
	// oidc* configure sign-in through an upstream OpenID Connect provider.
	oidcIssuer, oidcClientID, oidcDomains, oidcName string
	// mongoTLSCert/Key: the analyst endpoint's certificate files;
	// mongoAllowPlaintext lets it listen beyond loopback without TLS;
	// mongoTLS is the configuration serve gives it.
	mongoTLSCert, mongoTLSKey string
	mongoAllowPlaintext       bool
	mongoTLS                  *tls.Config
	// backup* schedule backups and change shipping (serve --backup-to).
	backupTo    string
	backupEvery time.Duration
	backupKeep  int
	// backupDaily and backupWeekly also keep the newest backup of each of
	// the last so many days and weeks.
	backupDaily, backupWeekly int
	// noUpgradeBackup: a start that upgrades the store's format takes no
	// backup first (upgradeBackup).
	noUpgradeBackup bool
}

func (c *config) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.data, "data", env("OUTREACH_DATA", "./data"), "embedded store directory")
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	cfg := config{uri: os.Getenv("MONGODB_URI"), db: env("OUTREACH_DB", "outreach"), writeMode: os.Getenv("OUTREACH_WRITE_MODE"),
		backupTo: os.Getenv("OUTREACH_BACKUP_TO"), noUpgradeBackup: os.Getenv("OUTREACH_NO_UPGRADE_BACKUP") == "true"}
	cfg.deploy.publicURL = os.Getenv("OUTREACH_PUBLIC_URL")
	log := zerolog.New(stderr).With().Timestamp().Logger()
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.flags(fs)
	switch args[0] {
	case "serve":
		fs.StringVar(&cfg.addr, "addr", env("OUTREACH_ADDR", "127.0.0.1:8080"), "listen address")
		fs.StringVar(&cfg.mongoListen, "mongo-listen", env("OUTREACH_MONGO_LISTEN", ""), "also open the analyst endpoint here: the embedded store over MongoDB's wire protocol (mongosh, Compass, drivers), read-only, for agent keys with the read scope (SCRAM-SHA-256: user KEY_ID, password KEY)")
		fs.StringVar(&cfg.mongoTLSCert, "mongo-tls-cert", env("OUTREACH_MONGO_TLS_CERT", ""), "the analyst endpoint speaks TLS only, with this PEM certificate chain (with --mongo-tls-key; default: the service's own certificate when it serves HTTPS); read again when the files change")
		fs.StringVar(&cfg.mongoTLSKey, "mongo-tls-key", env("OUTREACH_MONGO_TLS_KEY", ""), "the PEM private key of --mongo-tls-cert")
		fs.BoolVar(&cfg.mongoAllowPlaintext, "mongo-allow-plaintext", os.Getenv("OUTREACH_MONGO_ALLOW_PLAINTEXT") == "true", "let the analyst endpoint listen on a non-loopback address without TLS (behind a TLS proxy, say): the data analysts read then crosses the network in the clear")
		fs.BoolVar(&cfg.oauth, "oauth", os.Getenv("OUTREACH_OAUTH") == "true", "serve OAuth 2.1 beside the agent keys: protected resource metadata at /.well-known/oauth-protected-resource, and OAuth access tokens at /mcp (see docs/oauth.md)")
		fs.StringVar(&cfg.oidcIssuer, "oidc-issuer", env("OUTREACH_OIDC_ISSUER", ""), "with --oauth: members may also sign in with this OpenID Connect provider (issuer URL; its client secret in OUTREACH_OIDC_CLIENT_SECRET)")
		fs.StringVar(&cfg.oidcClientID, "oidc-client-id", env("OUTREACH_OIDC_CLIENT_ID", ""), "the service's client id at the OpenID Connect provider")
		fs.StringVar(&cfg.oidcDomains, "oidc-domains", env("OUTREACH_OIDC_DOMAINS", ""), "comma-separated email domains let in through the OpenID Connect provider (default: any; the email must be a member's anyway)")
		fs.StringVar(&cfg.oidcName, "oidc-name", env("OUTREACH_OIDC_NAME", ""), "the provider's name on the sign-in button, e.g. Google (default: the issuer's host)")
		fs.BoolVar(&cfg.demo, "demo", false, "on an empty store, write the demo data first (as seed --demo)")
		fs.BoolVar(&cfg.serverCard, "server-card", os.Getenv("OUTREACH_SERVER_CARD") == "true", "serve the MCP server card at /.well-known/mcp/server-card.json, for clients that discover servers")
		fs.BoolVar(&cfg.mongoAllowWrites, "mongo-allow-writes", os.Getenv("OUTREACH_MONGO_ALLOW_WRITES") == "true", "removed: refused (writes through the wire endpoint bypassed the change log)")
		fs.StringVar(&cfg.rateLimit, "rate-limit", env("OUTREACH_RATE_LIMIT", tools.DefaultCallRate), "tool calls per second per key, RATE or RATE,BURST (0: no limit)")
		fs.StringVar(&cfg.httpRateLimit, "http-rate-limit", env("OUTREACH_HTTP_RATE_LIMIT", tools.DefaultRequestRate), "HTTP requests per second per key at the edge (429 over it), RATE or RATE,BURST (0: no limit)")
		fs.StringVar(&cfg.pageRateLimit, "page-rate-limit", env("OUTREACH_PAGE_RATE_LIMIT", tools.DefaultPageRate), "requests of shared report pages and report downloads per second per client address (429 over it), RATE or RATE,BURST (0: no limit)")
		fs.StringVar(&cfg.toolsets, "toolsets", env("OUTREACH_TOOLSETS", ""), "comma-separated toolsets to serve: "+strings.Join(tools.ToolsetNames(), ", ")+"; core (the core set: "+strings.Join(tools.CoreToolsets(), ", ")+"); all (every toolset, every one listed); empty (the default): every toolset offered, clients naming none are listed the lean default set")
		fs.StringVar(&cfg.memoryLimit, "memory-limit", env("OUTREACH_MEMORY_LIMIT", ""), "soft limit on the Go runtime's memory, e.g. 512MiB, or off (default "+defaultMemoryLimit+", or GOMEMLIMIT when set): the collector runs more often near it")
		cfg.deploy.flags(fs)
		fs.StringVar(&cfg.backupTo, "backup-to", cfg.backupTo, "take backups into this directory on a schedule, and ship the changes after the last one there every minute (see docs/backups.md)")
		fs.BoolVar(&cfg.noUpgradeBackup, "no-upgrade-backup", cfg.noUpgradeBackup, "a start that upgrades the store's format takes no backup first (by default it takes one into --backup-to, else into DATA/backups on the embedded store, and on MongoDB refuses to start without a target)")
		backupEvery, err := time.ParseDuration(env("OUTREACH_BACKUP_EVERY", "24h"))
		if err != nil || backupEvery < time.Minute {
			return fmt.Errorf("OUTREACH_BACKUP_EVERY=%q: want a duration of at least 1m, e.g. 24h", os.Getenv("OUTREACH_BACKUP_EVERY"))
		}
		fs.DurationVar(&cfg.backupEvery, "backup-every", backupEvery, "with --backup-to: time between backups, e.g. 24h")
		backupKeep, err := strconv.Atoi(env("OUTREACH_BACKUP_KEEP", "7"))
		if err != nil || backupKeep < 1 {
			return fmt.Errorf("OUTREACH_BACKUP_KEEP=%q: want a number of backups of at least 1", os.Getenv("OUTREACH_BACKUP_KEEP"))
		}
		fs.IntVar(&cfg.backupKeep, "backup-keep", backupKeep, "with --backup-to: how many backups are kept (older ones and the changes shipped before them are removed)")
		for _, k := range []struct {
			flag, env string
			into      *int
			usage     string
		}{
			{"backup-keep-daily", "OUTREACH_BACKUP_KEEP_DAILY", &cfg.backupDaily, "with --backup-to: also keep the newest backup of each of the last N days (UTC)"},
			{"backup-keep-weekly", "OUTREACH_BACKUP_KEEP_WEEKLY", &cfg.backupWeekly, "with --backup-to: also keep the newest backup of each of the last N weeks (ISO, UTC)"},
		} {
			n, err := strconv.Atoi(env(k.env, "0"))
			if err != nil || n < 0 {
				return fmt.Errorf("%s=%q: want a number of at least 0", k.env, os.Getenv(k.env))
			}
			fs.IntVar(k.into, k.flag, n, k.usage)
		}
		pitchWindow, err := time.ParseDuration(env("OUTREACH_PITCH_WINDOW", pipeline.DefaultPitchWindow.String()))
		if err != nil || pitchWindow <= 0 {
			return fmt.Errorf("OUTREACH_PITCH_WINDOW=%q: want a positive duration, e.g. 336h (14 days)", os.Getenv("OUTREACH_PITCH_WINDOW"))
		}
		fs.DurationVar(&cfg.pitchWindow, "pitch-window", pitchWindow, "double-pitch guard: refuse to pitch a contact the team pitched within this window, e.g. 336h (default 14 days)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if cfg.mongoAllowWrites {
			return errors.New("--mongo-allow-writes (OUTREACH_MONGO_ALLOW_WRITES) was removed: a write through the wire endpoint changed records without their change-log entry. " +
				"Change data through the MCP tools; --mongo-listen opens a read-only analyst endpoint")
		}
		if cfg.backupEvery < time.Minute || cfg.backupKeep < 1 {
			return fmt.Errorf("--backup-every %s --backup-keep %d: want at least 1m and at least 1 backup", cfg.backupEvery, cfg.backupKeep)
		}
		if _, err := applyMemoryLimit(cfg.memoryLimit); err != nil {
			return fmt.Errorf("--memory-limit (OUTREACH_MEMORY_LIMIT): %w", err)
		}
		if _, err := applyGCPace(ctx, env("OUTREACH_GC_HEADROOM", "")); err != nil {
			return fmt.Errorf("OUTREACH_GC_HEADROOM: %w", err)
		}
		return serve(ctx, cfg, stdout, stderr, log)
	case "indexes", "verify":
		asJSON := fs.Bool("json", false, "verify: print the report as JSON")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return runCommand(ctx, cfg, command{Name: args[0], JSON: *asJSON}, stdout, stderr, log)
	case "seed":
		demo := fs.Bool("demo", false, "write the demo data (fictional; under the session demo, so rollback_session demo takes it back)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if !*demo {
			return errors.New("usage: outreach seed --demo (the only data set there is)")
		}
		return runCommand(ctx, cfg, command{Name: "seed --demo"}, stdout, stderr, log)
	case "keys":
		return keys(ctx, cfg, args[1:], stdout, stderr, log)
	case "backup":
		return backupCommand(ctx, cfg, args[1:], stdout, stderr, log)
	case "restore":
		return restoreCommand(ctx, cfg, args[1:], stdout, stderr, log)
	case "users":
		return users(ctx, cfg, args[1:], stdout, stderr)
	case "mailbox":
		return mailboxCommand(ctx, cfg, args[1:], stdout, stderr)
	case "bench":
		return benchCommand(ctx, args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, version.Version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// open connects to the configured store. Without MONGODB_URI it uses the
// embedded store on cfg.data: through the socket of a server running there,
// or by starting it in this process (and, when serving, exposing the socket).
// A store of an older format is backed up first (upgradeBackup), the line
// saying so printed to notice.
func open(ctx context.Context, cfg config, serving bool, notice io.Writer, log zerolog.Logger) (*repo.Store, func(), error) {
	opts := repo.Options{WriteMode: cfg.writeMode, Logger: log, BeforeUpgrade: upgradeBackup(cfg, notice, log)}
	media, err := mediaOptions(cfg)
	if err != nil {
		return nil, nil, err
	}
	uri := cfg.uri
	var es *embedded.Store
	var store *repo.Store
	// The analyst endpoint asks the store about keys; it opens before the
	// store's handle exists and refuses everyone until then.
	var analystStore atomic.Pointer[repo.Store]
	if uri == "" {
		eopts := embedded.Options{Dir: cfg.data}
		if serving && cfg.mongoListen != "" {
			eopts.TCP, eopts.Hidden, eopts.HiddenFields = cfg.mongoListen, repo.SecretCollections, repo.SecretFields
			eopts.Auth = analystAuth(&analystStore)
			eopts.TLS = cfg.mongoTLS
			eopts.Logger = slog.New(zerologHandler{log})
		}
		es, err = embedded.Start(ctx, eopts)
		if err != nil {
			return nil, nil, err
		}
		uri = es.URI
		opts.Exclusive = true // only this process can have the embedded files open
		opts.PrepareStore = es.IndexIDs
		opts.IndexCheckpoint = es.IndexCheckpoint(cfg.db)
		if cfg.data != "" {
			opts.Lookups = es // SQLite's files: the look-ups read them
		}
		ev := log.Info().Str("data", cfg.data)
		if es.PublicURI != "" {
			ev = ev.Str("mongo_listen", es.PublicURI)
		}
		ev.Msg("embedded store started")
		for _, r := range es.Repaired {
			log.Warn().Str("repair", r).Msg("store catalog repaired: a process was killed while creating a collection or an index")
		}
	}
	media.SigningKey, err = signingKey(cfg, serving, log)
	opts.Setup = append(opts.Setup, pipeline.WithMedia(media))
	if err == nil {
		store, err = repo.Open(ctx, uri, cfg.db, opts)
	}
	if err != nil {
		if es != nil {
			es.Close()
		}
		return nil, nil, err
	}
	analystStore.Store(store)
	return store, func() {
		store.Close(context.Background())
		if es != nil {
			es.Close()
		}
	}, nil
}

// mediaOptions reads the media configuration from the environment.
func mediaOptions(cfg config) (pipeline.MediaOptions, error) {
	var o pipeline.MediaOptions
	if v := os.Getenv("OUTREACH_MEDIA_MAX_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return o, fmt.Errorf("OUTREACH_MEDIA_MAX_BYTES=%q: want a positive number of bytes", v)
		}
		o.MaxBytes = n
	}
	if v := os.Getenv("OUTREACH_MEDIA_URL_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return o, fmt.Errorf("OUTREACH_MEDIA_URL_TTL=%q: want a duration of at least 1s, e.g. 15m", v)
		}
		o.URLTTL = d
	}
	var err error
	o.PublicURL, err = server.ParsePublicURL("--public-url (OUTREACH_PUBLIC_URL)", cfg.deploy.publicURL)
	return o, err
}

// mailConfig reads the shared inbox's configuration; nil when
// OUTREACH_IMAP_ADDR is unset.
func mailConfig(tokens mailsync.TokenSource) (*mailsync.Config, bool, error) {
	keep := false
	if v := os.Getenv("OUTREACH_EMAIL_KEEP_ATTACHMENTS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, false, fmt.Errorf("OUTREACH_EMAIL_KEEP_ATTACHMENTS=%q: want true or false", v)
		}
		keep = b
	}
	addr := os.Getenv("OUTREACH_IMAP_ADDR")
	if addr == "" {
		return nil, keep, nil
	}
	c := &mailsync.Config{Addr: addr, Security: os.Getenv("OUTREACH_IMAP_SECURITY"), Auth: os.Getenv("OUTREACH_IMAP_AUTH"),
		User: os.Getenv("OUTREACH_IMAP_USER"), Password: os.Getenv("OUTREACH_IMAP_PASSWORD"),
		Token: os.Getenv("OUTREACH_IMAP_OAUTH2_TOKEN"), TokenFile: os.Getenv("OUTREACH_IMAP_OAUTH2_TOKEN_FILE"),
		Interval: 5 * time.Minute, KeepAttachments: keep}
	if tokens != nil {
		c.Tokens = tokens // the mailbox connected by signing in
	}
	for _, m := range strings.Split(os.Getenv("OUTREACH_IMAP_MAILBOXES"), ",") {
		if m = strings.TrimSpace(m); m != "" {
			c.Mailboxes = append(c.Mailboxes, m)
		}
	}
	if len(c.Mailboxes) == 0 {
		c.Mailboxes = []string{"INBOX"} // the default, named so that the start log says what is synced
	}
	if v := os.Getenv("OUTREACH_IMAP_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || (d != 0 && d < 10*time.Second) {
			return nil, keep, fmt.Errorf("OUTREACH_IMAP_INTERVAL=%q: want 0 (on demand only) or a duration of at least 10s, e.g. 5m", v)
		}
		c.Interval = d
	}
	if v := os.Getenv("OUTREACH_IMAP_MAX_MESSAGE_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return nil, keep, fmt.Errorf("OUTREACH_IMAP_MAX_MESSAGE_BYTES=%q: want a positive number of bytes", v)
		}
		c.MaxMessageBytes = n
	}
	if err := c.Check(); err != nil {
		return nil, keep, fmt.Errorf("email sync configuration: %w", err)
	}
	return c, keep, nil
}

func serve(ctx context.Context, cfg config, stdout, stderr io.Writer, log zerolog.Logger) error {
	// Every setting is checked, and the address taken, before the store is
	// opened: a wrong flag must not create a store or print its first key.
	mbSet, err := mailboxConfig(cfg)
	if err != nil {
		return err
	}
	var imapTokens mailsync.TokenSource
	var smtpMailbox pitchsend.Mailbox
	if mbSet != nil {
		imapTokens, smtpMailbox = mbSet.ref, mbSet.ref
	}
	mailCfg, keep, err := mailConfig(imapTokens)
	if err != nil {
		return err
	}
	toolsets, err := tools.WithToolsets(cfg.toolsets)
	if err != nil {
		return err
	}
	limits, err := tools.ParseRateLimits(cfg.rateLimit, cfg.httpRateLimit)
	if err != nil {
		return err
	}
	if limits.Pages, limits.PageBurst, err = tools.ParseRate(cfg.pageRateLimit); err != nil {
		return fmt.Errorf("rate limit of report pages %q: %w", cfg.pageRateLimit, err)
	}
	dcfg, err := deliveryConfig(log)
	if err != nil {
		return err
	}
	if _, err := mediaOptions(cfg); err != nil {
		return err
	}
	scfg, err := cfg.deploy.serverConfig()
	if err != nil {
		return err
	}
	tlsOpts := cfg.deploy.tlsOptions(cfg.data)
	if err := tlsOpts.Check(); err != nil {
		return err
	}
	scfg.Hosts = tlsOpts.ACMEHosts
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	var metricsLn net.Listener
	if cfg.deploy.metricsListen != "" {
		if metricsLn, err = net.Listen("tcp", cfg.deploy.metricsListen); err != nil {
			return fmt.Errorf("--metrics-listen (OUTREACH_METRICS_LISTEN): %w", err)
		}
		defer metricsLn.Close()
	}
	var tlsCfg *tls.Config
	if tlsOpts.Enabled() {
		if tlsCfg, err = tlsOpts.TLSConfig(log); err != nil {
			return err
		}
	}
	if cfg.mongoTLS, err = analystTLS(cfg, tlsCfg, log); err != nil {
		return err
	}
	scfg.OAuth = cfg.oauth
	if scfg.OAuth && scfg.PublicURL == "" {
		scfg.PublicURL = bannerBase("", tlsOpts, ln.Addr())
	}
	if cfg.oidcIssuer != "" {
		if !cfg.oauth {
			return errors.New("--oidc-issuer needs --oauth: the OpenID Connect sign-in is how members approve OAuth clients")
		}
		scfg.Upstream = &oauth.Upstream{Issuer: cfg.oidcIssuer, ClientID: cfg.oidcClientID, ClientSecret: os.Getenv("OUTREACH_OIDC_CLIENT_SECRET"),
			Domains: strings.Split(cfg.oidcDomains, ","), Name: cfg.oidcName}
		if err := oauth.CheckUpstream(ctx, *scfg.Upstream); err != nil {
			return fmt.Errorf("--oidc-issuer: %w", err)
		}
	}
	// Pitches' unsubscribe links are built on the public URL (else the address listened on).
	pitchPol, smtpCfg, err := pitchConfig(bannerBase(scfg.PublicURL, tlsOpts, ln.Addr()), smtpMailbox)
	if err != nil {
		return err
	}
	store, closeStore, err := open(ctx, cfg, true, stdout, log)
	if err != nil {
		return err
	}
	defer closeStore()
	var topts []tools.Option
	pipeline.Of(store).SetPitchWindow(cfg.pitchWindow)
	if err := pipeline.Of(store).Seed(ctx); err != nil {
		return err
	}
	key, err := access.Of(store).Bootstrap(audit.WithActor(ctx, repo.SystemActor("bootstrap")))
	if err != nil {
		return fmt.Errorf("first admin key: %w", err)
	}
	if cfg.demo {
		if err := serveDemo(ctx, store, stderr, log); err != nil {
			return err
		}
	}
	listenURL := server.ListenURL(ln.Addr(), tlsCfg != nil)
	base := bannerBase(scfg.PublicURL, tlsOpts, ln.Addr())
	if key != "" {
		printFirstKey(stdout, base, key)
	}
	if cfg.uri == "" {
		stopCommands, err := serveCommands(ctx, store, cfg.data, log)
		if err != nil {
			return err
		}
		defer stopCommands()
	}
	go store.RunRecovery(ctx, 10*time.Second)
	var backupStatus func() backup.Status
	if cfg.backupTo != "" {
		sched := startBackups(ctx, store, cfg, log)
		backupStatus = sched.Status
		topts = append(topts, tools.WithBackupStatus(sched.Status))
	}
	outbox.Of(store).SetDeliveryTargets(delivery.Targets(dcfg))
	go delivery.New(store, dcfg).Run(ctx) // also fires next_action_due without targets
	topts = append(topts, []tools.Option{tools.WithEmailAttachments(keep), tools.WithSlack(dcfg.Slack), toolsets, tools.WithRateLimits(limits), tools.WithServerCard(cfg.serverCard)}...)
	if mbSet != nil {
		mb, err := newMailbox(ctx, cfg, store, mbSet, base, log)
		if err != nil {
			return err
		}
		mbSet.ref.m.Store(mb)
		runningMailbox.Store(mb)
		defer runningMailbox.Store(nil)
		scfg.Mailbox = mb.Pages()
		topts = append(topts, tools.WithMailbox(mb))
		st, _ := mb.Status(ctx)
		log.Info().Str("mailbox", mb.Address()).Str("provider", mb.Provider()).Str("state", st.State).Str("connect", base+mailauth.ConnectPath).Msg("mailbox sign-in configured")
		go mb.Run(ctx)
	}
	var syncer *mailsync.Syncer
	if mailCfg != nil {
		syncer, err = mailsync.New(store, *mailCfg)
		if err != nil {
			return err
		}
		topts = append(topts, tools.WithMailSync(syncer))
		interval := mailCfg.Interval.String() // "5m0s": a duration says its unit
		if mailCfg.Interval == 0 {
			interval = "0 (on demand only)"
		}
		log.Info().Str("imap", mailCfg.Addr).Strs("mailboxes", mailCfg.Mailboxes).Str("interval", interval).Msg("email sync configured")
		go syncer.Run(ctx, log)
	}
	sender, err := startPitches(store, pitchPol, smtpCfg, syncer, base, log)
	if err != nil {
		return err
	}
	if sender != nil {
		topts = append(topts, tools.WithPitchSender(sender))
		go sender.Run(ctx)
	}
	if cfg.deploy.metricsOn() {
		scfg.Metrics = metrics.New(metrics.Sources{Store: store, Mail: syncer, Backup: backupStatus})
		ev := log.Info().Bool("token", cfg.deploy.metricsToken != "")
		if metricsLn != nil {
			msrv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: scfg.Metrics.Handler(cfg.deploy.metricsToken),
				ErrorLog: slog.NewLogLogger(zerologHandler{log}, slog.LevelWarn)}
			go msrv.Serve(metricsLn)
			defer msrv.Close()
			ev = ev.Str("url", "http://"+metricsLn.Addr().String()+metrics.Path)
		} else {
			ev = ev.Str("url", listenURL+metrics.Path)
		}
		ev.Msg("serving metrics")
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsCfg, ErrorLog: slog.NewLogLogger(zerologHandler{log}, slog.LevelWarn)}
	srv.Handler = server.EndStreamsOnShutdown(srv, server.NewWithConfig(store, log, scfg, topts...))
	if scfg.OAuth {
		slog.SetDefault(slog.New(zerologHandler{log})) // the authorization server's library logs through slog
		log.Info().Str("resource", scfg.PublicURL+"/mcp").Str("metadata", (&oauth.Config{PublicURL: scfg.PublicURL}).MetadataURL()).Msg("OAuth on")
	}
	errc := make(chan error, 1)
	if tlsCfg != nil {
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { errc <- srv.Serve(ln) }()
	}
	ev := log.Info().Str("url", listenURL+"/mcp")
	if scfg.PublicURL != "" {
		ev = ev.Str("public_url", scfg.PublicURL+"/mcp")
	}
	ev.Str("version", version.Version).Msg("serving MCP")
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info().Msg("shutting down: finishing calls in flight")
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close() // open event streams do not end by themselves
	}
	return nil
}

func printFirstKey(w io.Writer, base, key string) {
	fmt.Fprintf(w, `
First start on an empty store: an admin key was created. It is shown only this once.

    %s

Try it:

    curl -s %s/mcp -H 'Authorization: Bearer %s' \
      -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
      -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'

MCP client configuration (e.g. .mcp.json):

    {"mcpServers": {"outreach": {"type": "http", "url": "%s/mcp", "headers": {"Authorization": "Bearer %s"}}}}

`, key, base, key, base, key)
}

func keys(ctx context.Context, cfg config, args []string, stdout, stderr io.Writer, log zerolog.Logger) error {
	if len(args) == 0 {
		return errors.New("usage: outreach keys create|list|revoke")
	}
	fs := flag.NewFlagSet("keys "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.flags(fs)
	name := fs.String("name", "", "name of the key (create)")
	email := fs.String("user-email", "", "owner's email; the user is created if new (create, list)")
	agentType := fs.String("agent-type", "other", "claude_cowork, claude_code, openclaw or other (create)")
	scopes := fs.String("scopes", "read,write", "comma-separated: read, write, admin (create)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	c := command{Name: "keys " + args[0], KeyName: *name, UserEmail: *email, AgentType: *agentType}
	switch args[0] {
	case "create":
		c.Scopes = strings.Split(*scopes, ",")
	case "list":
	case "revoke":
		if fs.NArg() != 1 {
			return errors.New("usage: outreach keys revoke ID")
		}
		c.ID = fs.Arg(0)
	default:
		return fmt.Errorf("unknown keys command %q: use create, list or revoke", args[0])
	}
	return runCommand(ctx, cfg, c, stdout, stderr, zerolog.Nop())
}

// keyOwner finds the user of email, creating it when new; without email, the first admin.
func keyOwner(ctx context.Context, store *repo.Store, email string) (*repo.User, error) {
	if email == "" {
		email = "admin@localhost"
	}
	u, err := access.Of(store).UserByEmail(ctx, email)
	if repo.ErrorCode(err) == repo.CodeNotFound {
		return access.Of(store).CreateUser(ctx, strings.Split(email, "@")[0], email, "")
	}
	return u, err
}
