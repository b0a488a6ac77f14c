package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
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

// The engine's own collections: the change log and the protocol's
// bookkeeping, and the operational documents it writes for the domain
// (sessions, key usage, idempotency claims, the bytes of media files).
const (
	CollChangeLog   = "change_log"
	CollCounters    = "counters"
	CollPlans       = "plans"
	CollIntents     = "write_intents"
	CollPlanSteps   = "plan_steps"
	CollSessions    = "agent_sessions"
	CollKeyUsage    = "key_usage"
	CollIdempotency = "idempotency_keys"
	// The GridFS bucket "fs" holding media bytes (see PutBlob).
	CollFiles  = "fs.files"
	CollChunks = "fs.chunks"
)

const (
	collChangeLog   = CollChangeLog
	collCounters    = CollCounters
	collPlans       = CollPlans
	collIntents     = CollIntents
	collPlanSteps   = CollPlanSteps
	collSessions    = CollSessions
	collKeyUsage    = CollKeyUsage
	collIdempotency = CollIdempotency
	collFiles       = CollFiles
	collChunks      = CollChunks
)

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
	// Index is the state of the service's own index: "building" (queries
	// read the store meanwhile), "behind" (a server: it has not reached
	// the store's counter for a while, and reads go to the store), or
	// "current"; empty where none is kept (a server without
	// OUTREACH_SERVER_INDEX).
	Index string `json:"index,omitempty"`
	// IndexFollows: the index follows the change log (a server), rather
	// than being kept by this process's writes (the embedded store).
	IndexFollows bool `json:"index_follows,omitempty"`
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
	// TextSearch "on" uses a text index where one can be built even if the
	// text-search probe failed; "off" never uses one; empty follows the probe.
	TextSearch string
	// TextColl is a collection with a text index, on which the text search
	// is probed again once the indexes are applied.
	TextColl string
	// ApplyIndexes applies the domain's index list (text: build text indexes).
	ApplyIndexes func(ctx context.Context, db *mongo.Database, text bool) error
	// PrepareStore, when set, runs once the service's collections exist.
	PrepareStore func(ctx context.Context, database string) error
	// IndexCheckpoint, when set (the embedded store), is the file the
	// engine's own indexes are written to at a clean stop and loaded from
	// at the next start when no change was written since (mirror_checkpoint.go).
	IndexCheckpoint string
	// Lookups, when set (the embedded store), answers from the store's own
	// indexes what a start asks of the change log (mirror_tail.go): the
	// entries after a checkpoint, the entries left pending.
	Lookups Lookups
	// ServerIndex keeps the service's own index on a store other processes
	// write too (a server): built from the store at start, then kept
	// current by following the change log (mirror_follow.go). Ignored on
	// an exclusive store, which keeps its index always.
	ServerIndex bool
	// ServerIndexWait bounds how long a read waits for the index to reach
	// the store's counter before it reads the store; zero means 250 ms.
	ServerIndexWait time.Duration
	// IndexCheck runs every query the engine's own index answers on the
	// store as well and fails it when the answers differ.
	IndexCheck bool
	// RecordCache bounds the record cache (recordcache.go), in bytes; zero
	// or less: none.
	RecordCache int64
	// Schema is the domain's registration.
	Schema Schema
	// BeforeUpgrade, when set, runs on a store of an older format before
	// the new one is recorded (the service takes a backup there); unset,
	// the format is recorded without it.
	BeforeUpgrade Upgrade
}

// Engine is the write path's state: the connection, the protocol's locks
// and intents, the group commit queue, the sequence block, the session
// bindings and the index it keeps for the embedded store.
type Engine struct {
	client *mongo.Client
	db     *mongo.Database
	caps   Capabilities
	lease  time.Duration
	log    zerolog.Logger
	// hook, when set by a test, runs after each step of the write protocol; an
	// error from it stops the protocol there as a crash would.
	hook func(point string) error

	seqs seqBlock // change seqs reserved by an exclusive store (write.go)

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
	// sweptBefore is the cutoff of the last recovery sweep (unix ns): a
	// pending write older than it was due to be settled by that sweep.
	sweptBefore atomic.Int64
	// unsettled is set when a write failed part-way or recovery left work.
	unsettled atomic.Bool
	// recovering counts the recovery passes running that settle writes in
	// doubt (Health).
	recovering atomic.Int32
	// Counters for Health: writes committed, lost to a conflict, and
	// writes in doubt that recovery settled.
	committed, conflicts, recovered atomic.Int64
	writeMu                         sync.Mutex
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
	// sessions caches session id -> the agent it is bound to.
	sessions sync.Map
	// mirror: the indexes the service keeps for the exclusive embedded
	// store (mirror.go), or on a server with Options.ServerIndex
	// (mirror_follow.go); nil elsewhere.
	mirror     *mirror
	stopMirror context.CancelFunc
	// cache holds stored records read by _id where the mirror is live
	// (recordcache.go); nil elsewhere.
	cache *recordCache
	// checkpoint is the index checkpoint file (Options.IndexCheckpoint);
	// preloaded, the checkpoint read at Open before recovery, until the
	// first build takes it (mirror_checkpoint.go).
	checkpoint string
	preloaded  atomic.Pointer[loadedCheckpoint]
	// lookups: Options.Lookups; ckpt: the checkpoints written while
	// running (mirror_tail.go).
	lookups Lookups
	ckpt    checkpointer
	// sessionGen moves on every change that can alter what is derived from
	// the change log and the session bindings (SessionGeneration).
	sessionGen atomic.Uint64
	// landedHook is told of each change entry stored (OnChangeLanded).
	landedHook atomic.Pointer[func(gen uint64, c LandedChange)]
	// schema is the domain's registration.
	schema Schema
	// writesDone counts the writes this process ended (landed or not): a
	// read point taken before one is not reused after it (WithReadPoint).
	writesDone atomic.Uint64
	// restoring is set between BeginRestore and CompleteRestore: the restore
	// writes are refused outside it.
	restoring atomic.Bool
	// format is the store's format version (Format).
	format int
}

// probed holds what the probes found per server (its URI), once per process:
// the probes take about a second on a server that builds indexes slowly, and
// the tests open hundreds of stores on one server.
var probed sync.Map

// Open starts the engine on database of a connected client: it detects the
// server's capabilities (probeKey names the server for the probes' cache),
// picks the write mode, applies the domain's indexes and recovers any write
// a crash left half-done. On error the caller disconnects the client.
func Open(ctx context.Context, client *mongo.Client, database, probeKey string, opts Options) (*Engine, error) {
	s := &Engine{client: client, db: client.Database(database), schema: opts.Schema, lease: opts.Lease, log: opts.Logger,
		exclusive: opts.Exclusive, intentID: uuid.NewString(), locks: map[string]string{}, running: map[string]bool{}}
	if s.lease == 0 {
		s.lease = 30 * time.Second
	}
	s.detect(ctx, probeKey)
	if opts.Exclusive {
		s.serialWrites = true
	}
	s.caps.SerialWrites = s.serialWrites
	if err := s.checkRestoreMarker(ctx); err != nil {
		return nil, err
	}
	format, err := s.checkStoreFormat(ctx)
	if err != nil {
		return nil, err
	}
	s.format = format
	switch opts.WriteMode {
	case "":
	case ModeOrdered:
		s.caps.WriteMode = ModeOrdered
	case ModeTransaction:
		if !s.caps.Transactions {
			return nil, errors.New("write mode transaction asked for, but the server has no multi-document transactions (it is not a replica set)")
		}
		s.caps.WriteMode = ModeTransaction
	default:
		return nil, fmt.Errorf("unknown write mode %q: use ordered or transaction", opts.WriteMode)
	}
	switch opts.TextSearch {
	case "":
	case "on":
		s.caps.TextSearch = true // probed again below, on the service's own index
	case "off":
		s.caps.TextSearch = false
	default:
		return nil, fmt.Errorf("unknown text search setting %q: use on or off", opts.TextSearch)
	}
	if opts.ApplyIndexes != nil {
		if err := opts.ApplyIndexes(ctx, s.db, s.caps.TextSearch); err != nil {
			return nil, err
		}
	}
	if s.caps.TextSearch {
		s.caps.TextSearch = s.probeText(ctx, opts.TextColl)
	}
	if opts.PrepareStore != nil {
		if err := opts.PrepareStore(ctx, database); err != nil {
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
		s.checkpoint, s.lookups = opts.IndexCheckpoint, opts.Lookups
		s.preloadCheckpoint(rctx)
	}
	rep, err := s.Recover(rctx, opts.Exclusive)
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	// Settling a pending entry moves no counter: a checkpoint that held one
	// is followed, not taken as it is (mirror_checkpoint.go).
	s.ckpt.recovered = rep.Applied+rep.Aborted+rep.PlansApplied+rep.PlansAborted > 0
	// An older store is upgraded on a settled store (a backup copies no
	// pending change), before the index starts.
	if s.format < StoreFormat {
		if err := s.upgradeFormat(ctx, s.format, opts.BeforeUpgrade); err != nil {
			return nil, err
		}
	}
	if opts.Exclusive && s.serialWrites {
		s.cache = newRecordCache(opts.RecordCache)
		s.startMirror(opts.IndexCheck)
	}
	if opts.ServerIndex && !opts.Exclusive {
		wait := opts.ServerIndexWait
		if wait <= 0 {
			wait = 250 * time.Millisecond
		}
		s.startFollow(opts.IndexCheck, wait)
	}
	return s, nil
}

// Close marks this process's last write intent done (serial protocol) and
// stops the index. The intent of a finished write is left pending while the
// process runs (one store write less per change, see commitBatch); a clean
// stop settles it, so a clean start and stop leave recovery nothing to do.
// The caller disconnects the client.
func (s *Engine) Close(ctx context.Context) {
	s.stopCheckpoints()
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
}

// Capabilities reports what was detected at start and the write mode chosen.
func (s *Engine) Capabilities() Capabilities {
	c := s.caps
	if h := s.Health(); h.IndexKept {
		c.Index, c.IndexFollows = "current", h.IndexFollowing
		switch {
		case h.IndexBuilding:
			c.Index = "building"
		case h.IndexBehind:
			c.Index = "behind"
		}
	}
	return c
}

// Ping checks that the store answers.
func (s *Engine) Ping(ctx context.Context) error { return s.client.Ping(ctx, nil) }

// Database is the store's database, for reads (nothing outside the engine
// may write through it: a test enforces it).
func (s *Engine) Database() *mongo.Database { return s.db }

// Collection is one of the store's collections, for reads.
func (s *Engine) Collection(name string) *mongo.Collection { return s.db.Collection(name) }

// Logger is the engine's logger.
func (s *Engine) Logger() zerolog.Logger { return s.log }

// Exclusive reports whether no other process writes this store.
func (s *Engine) Exclusive() bool { return s.exclusive }

func (s *Engine) coll(name string) *mongo.Collection { return s.db.Collection(name) }

// detect names the server (for the log and get_service_info only) and runs
// the capability probes, which decide everything else.
func (s *Engine) detect(ctx context.Context, probeKey string) {
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
	var p Probes
	if v, ok := probed.Load(probeKey); ok {
		p = v.(Probes)
	} else {
		p = Probe(ctx, s.client, s.db)
		probed.Store(probeKey, p)
	}
	s.caps.Transactions = p.Transactions
	s.caps.AtomicUpdates = p.AtomicUpdates
	s.caps.UnionWith = p.UnionWith
	// The service's own text indexes are built (ApplyIndexes) and probed again.
	s.caps.TextSearch = p.TextSearch
	s.caps.TextIndex = p.TextIndex
	s.caps.Probes = p.Notes
	s.serialWrites = !p.AtomicUpdates
	s.caps.WriteMode = ModeOrdered
	if s.caps.Transactions {
		s.caps.WriteMode = ModeTransaction
	}
}

func (s *Engine) probeText(ctx context.Context, coll string) bool {
	if coll == "" {
		return false
	}
	cur, err := s.coll(coll).Find(ctx, bson.M{"$text": bson.M{"$search": "probe"}}, options.Find().SetLimit(1))
	if err != nil {
		return false
	}
	defer cur.Close(ctx)
	return cur.Err() == nil
}
