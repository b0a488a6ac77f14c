// Package repo is the domain: every kind of record, its fields, rules,
// guards and queries, the dossiers, reports, imports and the outbox. It
// speaks the engine's vocabulary (package ledger: errors, pages, record ids)
// and registers its collections with the engine at Open (schema.go); the
// service's index of the embedded store is package ledger/index.
//
// The single write path still lives here, in the files that move into
// ledger next (write.go, group.go, recover.go, verify.go, changelog.go,
// idempotency.go, rollback.go, mirror.go, mirror_read.go): every mutation of
// every collection goes through Store.write (write.go), which records the
// change in change_log in the same atomic unit; no other file of the service
// calls a driver write.
package repo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongoevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/indexes"
	"outreach/ledger"
)

// Write modes, chosen once at start.
const (
	// ModeTransaction writes a change and its entry in one multi-document
	// transaction (a replica set or a sharded cluster).
	ModeTransaction = "transaction"
	// ModeOrdered writes them in a fixed order that recovery completes or
	// voids after a crash (a server without transactions).
	ModeOrdered = "ordered"
)

// Collections. The names are what an analyst sees in mongosh.
const (
	collOutlets       = "outlets"
	collContacts      = "contacts"
	collChannels      = "channels"
	collCampaigns     = "campaigns"
	collOpportunities = "opportunities"
	collCoverage      = "coverage"
	collMedia         = "media"
	collNotes         = "notes"
	collEmails        = "email_threads"
	collUsers         = "users"
	collKeys          = "agent_keys"
	collKeyUsage      = "key_usage"
	collChangeLog     = "change_log"
	collCounters      = "counters"
	collPlans         = "plans"
	collIntents       = "write_intents"
	collPlanSteps     = "plan_steps"
	collSessions      = "agent_sessions"
	collSettings      = "settings"
	// The capability probes' scratch documents (ledger/probe.go).
	collProbes = ledger.CollProbes
	// The outbox and team messaging (notify.go, messages.go).
	collSubscriptions = "subscriptions"
	collNotifications = "notifications"
	collDeliveries    = "deliveries"
	collMessages      = "slack_messages"
	// Messages of the shared inbox read but not stored (emailheld.go).
	collHeld = "email_held"
	// The GridFS bucket "fs" holding media bytes (see blobs in write.go).
	collFiles  = "fs.files"
	collChunks = "fs.chunks"
)

// SecretCollections are the collections the analyst endpoint never shows:
// they hold secrets or their verifiers (agent keys' hashes and SCRAM
// verifiers, the media URL signing secret, stored tool results), or the
// write path's own bookkeeping, which carries a pending create's redacted
// values until it lands.
var SecretCollections = []string{collKeys, collSettings, collIdempotency, collIntents, collPlans, collPlanSteps}

// SecretFields are, per collection, the fields the analyst endpoint never
// shows: a pending change entry's sealed values (a create's redacted
// fields, until the entry settles).
var SecretFields = map[string][]string{collChangeLog: {"sealed"}}

// Capabilities are what the connected server can do, detected at start.
// Each is decided by a probe (probe.go), never by the server's name.
type Capabilities struct {
	Transactions bool `json:"transactions"`
	// AtomicUpdates: the server applies a filtered update atomically. The
	// ordered protocol then runs without in-process serialisation.
	AtomicUpdates bool `json:"atomic_updates"`
	// SerialWrites: the write path serialises its steps in this process
	// (filtered updates not atomic, or the embedded store).
	SerialWrites bool `json:"serial_writes"`
	UnionWith    bool `json:"union_with"`
	// TextIndex: $text works and folds case, but (TextSearch false) not
	// accents: search keeps the literal path.
	TextIndex  bool   `json:"text_index"`
	TextSearch bool   `json:"text_search"`
	WriteMode  string `json:"write_mode"`
	Server     string `json:"server"`
	// Probes say why a probed capability came out false.
	Probes []string `json:"probes,omitempty"`
}

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
	// Media configures uploads and signed media URLs; zero values take the defaults.
	Media MediaOptions
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
	// service's own indexes are written to at a clean stop and loaded from
	// at the next start when no change was written since (mirror_checkpoint.go).
	IndexCheckpoint string
	// IndexCheck runs every query the service's own indexes answer on the
	// store as well and fails it when the answers differ (tests; also set
	// by OUTREACH_INDEX_CHECK=1).
	IndexCheck bool
}

// Store is the service's handle on the database.
type Store struct {
	client *mongo.Client
	db     *mongo.Database
	caps   Capabilities
	lease  time.Duration
	log    zerolog.Logger
	// hook, when set by a test, runs after each step of the write protocol; an
	// error from it stops the protocol there as a crash would.
	hook func(point string) error

	keyUseMu sync.Mutex
	keyUse   map[string]time.Time
	keys     keyCache // verified keys (keys.go)
	seqs     seqBlock // change seqs reserved by an exclusive store (write.go)

	media    MediaOptions
	mediaKey atomic.Pointer[[]byte] // the URL-signing secret, once read (media.go)
	uploadMu sync.Mutex             // one upload completes at a time (media.go)

	targets     atomic.Pointer[[]string] // delivery targets of new notifications (notify.go)
	pitchWindow atomic.Int64             // the double-pitch window in nanoseconds; 0: the default (guards.go)

	// serialWrites is set when the atomicity probe finds that update and
	// findAndModify read and then write without a lock (FerretDB v1): two
	// guarded writes at one version can both match, and two $inc can return
	// one number. writeMu then makes the write path's steps atomic among
	// this process's writers. The embedded store always sets it.
	serialWrites bool
	// intentID names this process's document in write_intents.
	intentID string
	// exclusive: no other process writes this store (Options.Exclusive).
	exclusive bool
	// checkpoint is the index checkpoint file (Options.IndexCheckpoint);
	// preloaded, the checkpoint read at Open before recovery, until the
	// first build takes it (mirror_checkpoint.go).
	checkpoint string
	preloaded  atomic.Pointer[preloadedCheckpoint]
	// sweptBefore is the cutoff of the last recovery sweep (unix ns): a
	// pending write older than it was due to be settled by that sweep.
	sweptBefore atomic.Int64
	// unsettled is set when a write failed part-way or recovery left work.
	unsettled atomic.Bool
	writeMu   sync.Mutex
	// Held under writeMu in serial mode: the records each running group
	// holds (coll/id -> plan id), the groups this process is writing, and
	// this process's intent while it is not settled.
	locks     map[string]string
	running   map[string]bool
	ownIntent *intent
	// intentStored says this process's intent document may be stored
	// pending (a batch wrote it and nothing marked it done since): a clean
	// Close marks it done, so the next start has nothing to settle.
	intentStored bool
	// commits queues single-record writes for group commit (serial mode).
	commits commitQueue
	// turns queues this process's updates of one record (see modify).
	turns recordTurns
	// sessions caches session id -> the agent it is bound to.
	sessions sync.Map
	// implicit caches what keys' implicit sessions depend on (sessions_cache.go).
	implicit implicitCache
	// mirror: the indexes the service keeps for the exclusive embedded
	// store (mirror.go); nil elsewhere.
	mirror     *mirror
	stopMirror context.CancelFunc
	// schema is the domain's registration (schema.go).
	schema ledger.Schema
}

// Open connects to uri, applies the index list, detects capabilities, picks
// the write mode and recovers any write a crash left half-done.
func Open(ctx context.Context, uri, database string, opts Options) (*Store, error) {
	copts := options.Client().ApplyURI(uri).SetTimeout(30 * time.Second).
		SetBSONOptions(&options.BSONOptions{DefaultDocumentM: true})
	if opts.Monitor != nil {
		copts.SetMonitor(opts.Monitor)
	}
	client, err := mongo.Connect(copts)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	s := &Store{client: client, db: client.Database(database), schema: domainSchema(), lease: opts.Lease, log: opts.Logger, media: opts.Media.withDefaults(), exclusive: opts.Exclusive, intentID: uuid.NewString(),
		locks: map[string]string{}, running: map[string]bool{}}
	if s.lease == 0 {
		s.lease = 30 * time.Second
	}
	if err := s.setSigningKey(opts.Media.SigningKey); err != nil {
		client.Disconnect(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := client.Ping(ctx, nil); err != nil {
		client.Disconnect(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("ping %s: %w", redactURI(uri), err)
	}
	probeKey := uri
	if opts.Exclusive {
		probeKey = "embedded" // the store compiled into this binary
	}
	if err := s.detect(ctx, probeKey); err != nil {
		client.Disconnect(context.WithoutCancel(ctx))
		return nil, err
	}
	if opts.Exclusive {
		s.serialWrites = true
		s.checkpoint = opts.IndexCheckpoint
	}
	s.caps.SerialWrites = s.serialWrites
	switch opts.WriteMode {
	case "":
	case ModeOrdered:
		s.caps.WriteMode = ModeOrdered
	case ModeTransaction:
		if !s.caps.Transactions {
			client.Disconnect(context.WithoutCancel(ctx))
			return nil, errors.New("write mode transaction asked for, but the server has no multi-document transactions (it is not a replica set)")
		}
		s.caps.WriteMode = ModeTransaction
	default:
		client.Disconnect(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("unknown write mode %q: use ordered or transaction", opts.WriteMode)
	}
	switch opts.TextSearch {
	case "":
	case "on":
		s.caps.TextSearch = true // probed again below, on the service's own index
	case "off":
		s.caps.TextSearch = false
	default:
		client.Disconnect(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("unknown text search setting %q: use on or off", opts.TextSearch)
	}
	if err := indexes.Apply(ctx, s.db, s.caps.TextSearch); err != nil {
		client.Disconnect(context.WithoutCancel(ctx))
		return nil, err
	}
	if s.caps.TextSearch {
		s.caps.TextSearch = s.probeText(ctx)
	}
	if opts.PrepareStore != nil {
		if err := opts.PrepareStore(ctx, database); err != nil {
			client.Disconnect(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	s.log.Info().Str("write_mode", s.caps.WriteMode).Bool("transactions", s.caps.Transactions).
		Bool("atomic_updates", s.caps.AtomicUpdates).Bool("serial_writes", s.caps.SerialWrites).
		Bool("union_with", s.caps.UnionWith).Bool("text_search", s.caps.TextSearch).
		Str("server", s.caps.Server).Strs("probes", s.caps.Probes).Msg("store ready")
	// Recovery reads the change log for pending entries: on the embedded
	// store a scan of the whole log, which at 100k notes outlasts the
	// client's 30 s limit on a loaded machine. A deadline of its own lifts
	// that limit for this one pass.
	rctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	if opts.Exclusive && s.serialWrites {
		s.preloadCheckpoint(rctx)
	}
	if _, err := s.Recover(rctx, opts.Exclusive); err != nil {
		client.Disconnect(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("recover: %w", err)
	}
	if opts.Exclusive && s.serialWrites {
		s.startMirror(opts.IndexCheck || os.Getenv("OUTREACH_INDEX_CHECK") == "1")
	}
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
	return indexes.Apply(ctx, s.db, s.caps.TextSearch)
}

// Close marks this process's last write intent done (serial protocol) and
// disconnects. The intent of a finished write is left pending while the
// process runs (one store write less per change, see commitBatch); a clean
// stop settles it, so a clean start and stop leave recovery nothing to do.
func (s *Store) Close(ctx context.Context) error {
	if s.serialWrites {
		s.writeMu.Lock()
		if err := s.closeIntent(ctx); err != nil {
			s.log.Warn().Err(err).Msg("last write intent left to recovery at the next start")
		} else {
			s.saveCheckpoint(ctx)
		}
		s.writeMu.Unlock()
	}
	if s.stopMirror != nil {
		s.stopMirror()
	}
	return s.client.Disconnect(ctx)
}

// Capabilities reports what was detected at start and the write mode chosen.
func (s *Store) Capabilities() Capabilities { return s.caps }

// Ping checks that the store answers.
func (s *Store) Ping(ctx context.Context) error { return s.client.Ping(ctx, nil) }

func (s *Store) coll(name string) *mongo.Collection { return s.db.Collection(name) }

// probed holds what the probes found per server (its URI), once per process:
// the probes take about a second on a server that builds indexes slowly, and
// the tests open hundreds of stores on one server.
var probed sync.Map

// detect names the server (for the log and get_service_info only) and runs
// the capability probes, which decide everything else.
func (s *Store) detect(ctx context.Context, probeKey string) error {
	var build bson.M
	if err := s.db.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&build); err == nil {
		s.caps.Server = fmt.Sprint(build["version"])
		if fd, ok := build["ferretdb"].(bson.M); ok && fd["version"] != nil {
			s.caps.Server = "FerretDB " + strings.TrimPrefix(fmt.Sprint(fd["version"]), "v") + " (MongoDB " + s.caps.Server + ")"
		} else if strings.Contains(fmt.Sprint(build), "ferretdb") {
			s.caps.Server = "FerretDB " + s.caps.Server
		} else {
			s.caps.Server = "MongoDB " + s.caps.Server
		}
	}
	var p ledger.Probes
	if v, ok := probed.Load(probeKey); ok {
		p = v.(ledger.Probes)
	} else {
		p = ledger.Probe(ctx, s.client, s.db)
		probed.Store(probeKey, p)
	}
	s.caps.Transactions = p.Transactions
	s.caps.AtomicUpdates = p.AtomicUpdates
	s.caps.UnionWith = p.UnionWith
	// The service's own text indexes are built (indexes.Apply) and probed again.
	s.caps.TextSearch = p.TextSearch
	s.caps.TextIndex = p.TextIndex
	s.caps.Probes = p.Notes
	s.serialWrites = !p.AtomicUpdates
	s.caps.WriteMode = ModeOrdered
	if s.caps.Transactions {
		s.caps.WriteMode = ModeTransaction
	}
	return nil
}

func (s *Store) probeText(ctx context.Context) bool {
	cur, err := s.coll(collNotes).Find(ctx, bson.M{"$text": bson.M{"$search": "probe"}}, options.Find().SetLimit(1))
	if err != nil {
		return false
	}
	defer cur.Close(ctx)
	return cur.Err() == nil
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
func (s *Store) RawCollections() Raw { return Raw{Database: s.db} }
