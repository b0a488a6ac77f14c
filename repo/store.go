// Package repo is the domain's core: the store's face over the engine,
// the schema it registers (every collection and kind of record), the
// record helpers, lists, errors, sessions, idempotency, agent keys, the
// rollback and its rules, and the registry the areas above fill at init
// (registry.go). The areas are the packages under repo/ (repo/pitches,
// repo/dossiers, ...): each imports the core and the areas below it, never
// one above (direction_test.go). The records not yet moved to an area of
// their own are still here. It speaks the engine's vocabulary (package
// ledger: errors, pages, record ids); the service's index of the embedded
// store is package ledger/index.
//
// The write path is package ledger (the engine): Store holds the engine
// and the domain's own state, and every mutation goes through the engine's
// Write, which records the change in change_log in the same atomic unit; no
// file outside ledger calls a driver write.
package repo

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	mongoevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/indexes"
	"outreach/ledger"
)

// Write modes, chosen once at start (ledger.ModeTransaction, ledger.ModeOrdered).
const (
	ModeTransaction = ledger.ModeTransaction
	ModeOrdered     = ledger.ModeOrdered
)

// Collections. The names are what an analyst sees in mongosh.
const (
	CollOutlets       = "outlets"
	CollContacts      = "contacts"
	CollChannels      = "channels"
	CollCampaigns     = "campaigns"
	CollOpportunities = "opportunities"
	CollCoverage      = "coverage"
	CollMedia         = "media"
	CollNotes         = "notes"
	CollEmails        = "email_threads"
	CollUsers         = "users"
	CollKeys          = "agent_keys"
	// OAuth grants of the authorization server (repo/access/oauth.go).
	CollOAuthGrants = "oauth_grants"
	// The authorization server's clients, requests and sign-ins (repo/access/oauthas.go).
	CollOAuthClients  = "oauth_clients"
	CollOAuthRequests = "oauth_requests"
	CollSignIns       = "sign_ins"
	CollKeyUsage      = ledger.CollKeyUsage
	CollChangeLog     = ledger.CollChangeLog
	CollCounters      = ledger.CollCounters
	CollPlans         = ledger.CollPlans
	CollIntents       = ledger.CollIntents
	CollPlanSteps     = ledger.CollPlanSteps
	CollSessions      = ledger.CollSessions
	CollSettings      = "settings"
	// The capability probes' scratch documents (ledger/probe.go).
	CollProbes = ledger.CollProbes
	// The outbox and team messaging (repo/outbox, repo/notify).
	CollSubscriptions = "subscriptions"
	CollNotifications = "notifications"
	CollDeliveries    = "deliveries"
	CollMessages      = "slack_messages"
	// Messages of the shared inbox read but not stored (repo/inbox/emailheld.go).
	CollHeld = "email_held"
	// Pitches and the suppression list (repo/pitches).
	CollPitches      = "pitches"
	CollSuppressions = "suppressions"
	// Shared report snapshots behind signed links (repo/reports).
	CollSharedReports = "shared_reports"
	// The team mailbox's OAuth connection (repo/mailboxes).
	CollMailboxes = "mailbox_connections"
	// The GridFS bucket "fs" holding media bytes (see blobs in write.go).
	CollFiles  = ledger.CollFiles
	CollChunks = ledger.CollChunks
)

// SecretCollections are the collections the analyst endpoint never shows:
// they hold secrets or their verifiers (agent keys' hashes and SCRAM
// verifiers, the OAuth server's token, code and password hashes, the media URL signing secret, stored tool results), or the
// write path's own bookkeeping, which carries a pending create's redacted
// values until it lands.
var SecretCollections = []string{CollKeys, CollOAuthGrants, CollOAuthClients, CollOAuthRequests, CollSignIns, CollSettings, CollMailboxes, CollIdempotency, CollIntents, CollPlans, CollPlanSteps}

// SecretFields are, per collection, the fields the analyst endpoint never
// shows: a pending change entry's sealed values (a create's redacted
// fields, until the entry settles).
var SecretFields = map[string][]string{CollChangeLog: {"sealed"}}

// Capabilities are what the connected server can do, detected at start
// (ledger.Capabilities).
type Capabilities = ledger.Capabilities

// Options configure Open.
type Options struct {
	// WriteMode forces a mode ("ordered" or "transaction"); empty chooses by capability.
	WriteMode string
	// Lease is how long a pending change may be in flight before recovery
	// voids it. Zero means 30s.
	Lease time.Duration
	// Exclusive says no other process writes to this store (the embedded
	// store, whose files one process holds): recovery at start may then void
	// every pending write at once instead of waiting for leases.
	Exclusive bool
	// Logger receives start-up and recovery messages.
	Logger zerolog.Logger
	// Setup runs as the store is made, before it connects: an area reads
	// its own options there (pipeline.WithMedia: the media's configuration
	// and URL-signing secret); an error fails Open.
	Setup []func(*Store) error
	// TextSearch "on" uses a text index where one can be built even if the
	// text-search probe failed (tests compare the text path with the literal
	// one on what such a server does find); "off" never uses one; empty
	// follows the probe.
	TextSearch string
	// Monitor, when set, sees every command sent to the server (the tests
	// record the query shapes the service issues, to explain each).
	Monitor *mongoevent.CommandMonitor
	// PrepareStore, when set, runs once the service's collections exist
	// (the embedded store gives FerretDB's look-ups by _id an index there:
	// embedded.Store.IndexIDs).
	PrepareStore func(ctx context.Context, database string) error
	// IndexCheckpoint, when set (the embedded store), is the file the
	// service's own indexes are written to while running and at a clean
	// stop, and loaded from at the next start (ledger/mirror_checkpoint.go).
	IndexCheckpoint string
	// Lookups, when set (the embedded store: its *embedded.Store), lists
	// from the store's own indexes the change entries after a checkpoint
	// and those left pending, so a start after a crash reads only those
	// (ledger/mirror_tail.go).
	Lookups ledger.Lookups
	// IndexCheck runs every query the service's own indexes answer on the
	// store as well and fails it when the answers differ (tests; also set
	// by OUTREACH_INDEX_CHECK=1).
	IndexCheck bool
	// ServerIndex keeps the service's own index on a server too, following
	// the change log (ledger.Options.ServerIndex); also set by
	// OUTREACH_SERVER_INDEX=on. Ignored on the embedded store, which
	// always keeps it.
	ServerIndex bool
	// ServerIndexWait bounds a read's wait for that index to reach the
	// store's counter (OUTREACH_SERVER_INDEX_WAIT; default 250 ms).
	ServerIndexWait time.Duration
	// RecordCacheMB bounds the record cache of the embedded store, in MiB
	// (ledger/recordcache.go): nil takes OUTREACH_RECORD_CACHE_MB, else 32;
	// 0 turns it off.
	RecordCacheMB *int
	// BeforeUpgrade, when set, runs on a store of an older format before
	// the new one is recorded (ledger.Upgrade): the command takes a backup.
	BeforeUpgrade ledger.Upgrade
}

// Store is the service's handle on the database: the engine (the write
// path, its reads and its index) and the domain's own state.
type Store struct {
	*ledger.Engine
	client *mongo.Client
	Log    zerolog.Logger
	// schema is the domain's registration (schema.go).
	schema ledger.Schema

	keyUseMu sync.Mutex
	keyUse   map[string]time.Time
	keys     keyCache // verified keys (keys.go)

	// turns queues this process's updates of one record (see modify).
	turns recordTurns
	// implicit caches what keys' implicit sessions depend on (sessions_cache.go).
	implicit implicitCache
	// areas holds the state an area keeps per store (AreaState).
	areas sync.Map
	// textByPattern asks the store's pattern for every free-text filter of
	// a list (package textlist), so that tests can compare the two paths.
	textByPattern atomic.Bool
}

// Open connects to uri, applies the index list, detects capabilities, picks
// the write mode and recovers any write a crash left half-done.
func Open(ctx context.Context, uri, database string, opts Options) (*Store, error) {
	if err := checkRegistry(); err != nil {
		return nil, err
	}
	copts := options.Client().ApplyURI(uri).SetTimeout(30 * time.Second).
		SetBSONOptions(&options.BSONOptions{DefaultDocumentM: true})
	if opts.Monitor != nil {
		copts.SetMonitor(opts.Monitor)
	}
	client, err := mongo.Connect(copts)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	s := &Store{client: client, Log: opts.Logger}
	s.schema = domainSchema(s)
	for _, setup := range opts.Setup {
		if err := setup(s); err != nil {
			client.Disconnect(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	if err := client.Ping(ctx, nil); err != nil {
		client.Disconnect(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("ping %s: %w", redactURI(uri), err)
	}
	probeKey := uri
	if opts.Exclusive {
		probeKey = "embedded" // the store compiled into this binary
	}
	serverIndex, err := serverIndexOn(opts.ServerIndex)
	if err == nil && os.Getenv("OUTREACH_SERVER_INDEX_WAIT") != "" {
		opts.ServerIndexWait, err = time.ParseDuration(os.Getenv("OUTREACH_SERVER_INDEX_WAIT"))
		if err != nil || opts.ServerIndexWait <= 0 || opts.ServerIndexWait > time.Minute {
			err = fmt.Errorf("OUTREACH_SERVER_INDEX_WAIT=%q: want a duration above 0 and at most 1m, e.g. 250ms", os.Getenv("OUTREACH_SERVER_INDEX_WAIT"))
		}
	}
	if err != nil {
		client.Disconnect(context.WithoutCancel(ctx))
		return nil, err
	}
	cacheBytes, err := recordCacheBytes(opts.RecordCacheMB)
	if err != nil {
		client.Disconnect(context.WithoutCancel(ctx))
		return nil, err
	}
	eng, err := ledger.Open(ctx, client, database, probeKey, ledger.Options{RecordCache: cacheBytes, WriteMode: opts.WriteMode, Lease: opts.Lease,
		Exclusive: opts.Exclusive, Logger: opts.Logger, TextSearch: opts.TextSearch, TextColl: CollNotes,
		ApplyIndexes: indexes.Apply, PrepareStore: opts.PrepareStore, IndexCheckpoint: opts.IndexCheckpoint, Lookups: opts.Lookups,
		ServerIndex: serverIndex, ServerIndexWait: opts.ServerIndexWait,
		IndexCheck: opts.IndexCheck || os.Getenv("OUTREACH_INDEX_CHECK") == "1", Schema: s.schema, BeforeUpgrade: opts.BeforeUpgrade})
	if err != nil {
		client.Disconnect(context.WithoutCancel(ctx))
		return nil, err
	}
	s.Engine = eng
	eng.OnChangeLanded(s.implicit.advance)
	if err := s.dropStoredSigningSecret(ctx); err != nil {
		s.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := s.scrubStoredResults(ctx); err != nil {
		s.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return s, nil
}

// ApplyIndexes applies the index list again.
func (s *Store) ApplyIndexes(ctx context.Context) error {
	return indexes.Apply(ctx, s.Database(), s.Capabilities().TextSearch)
}

// Close settles the engine's last write intent and disconnects.
func (s *Store) Close(ctx context.Context) error {
	s.Engine.Close(ctx)
	return s.client.Disconnect(ctx)
}

func redactURI(uri string) string {
	if i := strings.Index(uri, "@"); i >= 0 {
		if j := strings.Index(uri, "://"); j >= 0 && j < i {
			return uri[:j+3] + "…" + uri[i:]
		}
	}
	return uri
}

// Raw gives read access to the database for benchmarks and diagnostics that
// compare the service's queries with plain driver queries. Nothing may write
// through it: writes go through the write path (a test enforces it).
type Raw struct {
	Database *mongo.Database
}

// RawCollections returns the database for read-only comparisons.
func (s *Store) RawCollections() Raw { return Raw{Database: s.Database()} }

// serverIndexOn is OUTREACH_SERVER_INDEX, "on" or "off", or where unset
// Options.ServerIndex (default off).
func serverIndexOn(set bool) (bool, error) {
	switch v := os.Getenv("OUTREACH_SERVER_INDEX"); v {
	case "on":
		return true, nil
	case "off":
		return false, nil
	case "":
		return set, nil
	default:
		return false, fmt.Errorf("OUTREACH_SERVER_INDEX=%q: want on or off (the service's own index on a server, following the change log)", v)
	}
}

// WithReadPoint marks ctx as one tool call's: on a server with the
// service's own index, its reads ask the store's counter once, and again
// after each of its writes (ledger.WithReadPoint).
func WithReadPoint(ctx context.Context) context.Context { return ledger.WithReadPoint(ctx) }
