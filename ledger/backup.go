package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"outreach/audit"
)

// What a backup and a restore ask of the engine. A backup reads the store
// while it serves; the engine fixes the change counter the copy stands at
// (FixPoint), and the copy of each record is brought back to that counter
// from the change log. A restore writes a backup into an empty store
// through the engine's restore writes (write.go), between BeginRestore and
// CompleteRestore, and a marker in the store says while it is not finished.

// StoreFormat is the version of the store's layout this binary writes: the
// collections, the bookkeeping fields and the change entry's shape. A backup
// names it; a restore refuses a backup of a newer one.
const StoreFormat = 1

// CollStoreInfo holds the store's format version (storeFormatID), written
// at its first start: a binary refuses a store of a newer format.
const CollStoreInfo = "store_info"

const storeFormatID = "format"

// storeInfo is the store's format document.
type storeInfo struct {
	ID     string    `bson:"_id"`
	Format int       `bson:"format"`
	Since  time.Time `bson:"since"`
}

// ErrStoreNewer is returned by Open on a store of a newer format than
// this binary knows.
var ErrStoreNewer = errors.New("the store is of a newer format than this binary knows")

// checkStoreFormat refuses a store of a newer format and returns the
// store's format. A store without one recorded is new when it holds
// nothing (its first start: the format is recorded at once), else it was
// made before formats were recorded: format 0, upgraded by Open.
func (s *Engine) checkStoreFormat(ctx context.Context) (int, error) {
	var in storeInfo
	err := s.coll(CollStoreInfo).FindOne(ctx, bson.M{"_id": storeFormatID}).Decode(&in)
	if errors.Is(err, mongo.ErrNoDocuments) {
		held, err := s.contents(ctx)
		if err != nil {
			return 0, fmt.Errorf("reading the store's contents: %w", err)
		}
		if len(held) > 0 {
			return 0, nil
		}
		return StoreFormat, s.recordStoreFormat(ctx, 0)
	}
	if err != nil {
		return 0, fmt.Errorf("reading the store's format: %w", err)
	}
	if in.Format > StoreFormat {
		return 0, fmt.Errorf("%w: database %s is in store format %d, this binary knows formats up to %d: run the Outreach version that wrote it, or a later one",
			ErrStoreNewer, s.db.Name(), in.Format, StoreFormat)
	}
	return in.Format, nil
}

// Upgrade is called by Open on a store of an older format than this
// binary's (from, to), once interrupted writes are settled and before the
// new format is recorded or anything of the format is changed: the service
// takes a backup there. An error stops Open, leaving the format as it was.
type Upgrade func(ctx context.Context, eng *Engine, from, to int) error

// upgradeFormat runs before (if set) and records this binary's format in
// a store of format from.
func (s *Engine) upgradeFormat(ctx context.Context, from int, before Upgrade) error {
	if before != nil {
		if err := before(ctx, s, from, StoreFormat); err != nil {
			return fmt.Errorf("upgrading the store from format %d to %d: %w (the store is left in format %d)", from, StoreFormat, err, from)
		}
	}
	if err := s.recordStoreFormat(ctx, from); err != nil {
		return err
	}
	s.format = StoreFormat
	s.log.Info().Int("from", from).Int("to", StoreFormat).Msg("store format upgraded")
	return nil
}

// Format is the store's format version: StoreFormat once Open returns; an
// older one while Upgrade runs.
func (s *Engine) Format() int { return s.format }

// CollRestore holds the restore marker (restoreMarkerID): present and
// "incomplete" while a restore into the store has not finished.
const CollRestore = "restore_state"

const restoreMarkerID = "restore"

// Restore marker states.
const (
	RestoreIncomplete = "incomplete"
	RestoreComplete   = "complete"
)

// RestoreMarker is the store's record of the restore that filled it.
type RestoreMarker struct {
	ID      string    `bson:"_id"`
	State   string    `bson:"state"`
	Source  string    `bson:"source"`
	Counter int64     `bson:"counter"`
	Started time.Time `bson:"started"`
	Done    time.Time `bson:"done,omitempty"`
}

// ErrRestoreIncomplete is returned by Open on a store whose restore did
// not finish.
var ErrRestoreIncomplete = errors.New("a restore into this store did not finish")

// Bookkeeping collections a backup leaves out: the write protocol's intents
// and plans (settled at the copy's counter, so they carry nothing a restored
// store needs), the capability probes' scratch documents and the restore
// marker.
var notBackedUp = []string{collIntents, collPlans, collPlanSteps, CollProbes, CollRestore, CollStoreInfo}

// BackedUp reports whether a backup copies the collection coll.
func BackedUp(coll string) bool {
	return !slices.Contains(notBackedUp, coll) && !strings.HasPrefix(coll, "system.")
}

// RecordCollections are the domain's collections of records (Schema.Records).
func (s *Engine) RecordCollections() []string { return slices.Clone(s.schema.Records) }

// RedactedFields are coll's fields whose values never enter the change log.
func (s *Engine) RedactedFields(coll string) []string { return slices.Clone(s.schema.Redacted[coll]) }

// FixPoint returns the change counter n a copy of the store stands at:
// every change entry with a seq up to n is settled (applied or aborted) and
// every change written afterwards gets a higher seq. Writers wait while it
// is fixed (the serial lock for a counter read; on a shared store, until
// the entries in flight up to n are settled); reads never wait.
func (s *Engine) FixPoint(ctx context.Context) (int64, time.Time, error) {
	var n int64
	var at time.Time
	if s.serialWrites {
		for {
			s.writeMu.Lock()
			err := s.settleOwnIntent(ctx)
			if err == nil && len(s.running) == 0 {
				// A group being rolled forward would leave part of itself
				// on each side of the counter: wait for it.
				s.seqs.drop()
				n, err = s.changeCounter(ctx)
				at = time.Now().UTC()
				s.writeMu.Unlock()
				if err != nil {
					return 0, at, err
				}
				break
			}
			s.writeMu.Unlock()
			if err != nil {
				return 0, at, fmt.Errorf("settling an earlier write: %w", err)
			}
			select {
			case <-ctx.Done():
				return 0, at, ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
		if s.exclusive {
			return n, at, nil
		}
	} else {
		var err error
		if n, err = s.changeCounter(ctx); err != nil {
			return 0, at, err
		}
		at = time.Now().UTC()
	}
	// Another process may have entries up to n in flight: they settle
	// within their lease (their writer, or recovery).
	deadline := time.Now().Add(2*s.lease + 10*time.Second)
	for {
		k, err := s.coll(collChangeLog).CountDocuments(ctx, bson.M{"state": audit.StatePending, "seq": bson.M{"$lte": n}})
		if err != nil {
			return 0, at, err
		}
		if k == 0 {
			return n, at, nil
		}
		if time.Now().After(deadline) {
			return 0, at, fmt.Errorf("%d changes up to counter %d are still pending after %s: run recovery (restart a server) and try again", k, n, 2*s.lease)
		}
		select {
		case <-ctx.Done():
			return 0, at, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkRestoreMarker refuses a store whose restore did not finish.
func (s *Engine) checkRestoreMarker(ctx context.Context) error {
	var m RestoreMarker
	err := s.coll(CollRestore).FindOne(ctx, bson.M{"_id": restoreMarkerID}).Decode(&m)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the restore marker: %w", err)
	}
	if m.State == RestoreIncomplete {
		return fmt.Errorf("%w: database %s holds part of the backup %s (restore to counter %d started %s). "+
			"Empty the target (remove the data directory, or drop the database) and restore again",
			ErrRestoreIncomplete, s.db.Name(), m.Source, m.Counter, m.Started.Format(time.RFC3339))
	}
	return nil
}

// RestoredFrom is the marker of the restore that filled the store, if any.
func (s *Engine) RestoredFrom(ctx context.Context) (*RestoreMarker, error) {
	var m RestoreMarker
	err := s.coll(CollRestore).FindOne(ctx, bson.M{"_id": restoreMarkerID}).Decode(&m)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	return &m, err
}

// contents names the collections of the store holding documents, with
// their counts (the capability probes' scratch documents aside).
func (s *Engine) contents(ctx context.Context) ([]string, error) {
	names, err := s.db.ListCollectionNames(ctx, bson.M{})
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var out []string
	for _, name := range names {
		if name == CollProbes || name == CollStoreInfo || strings.HasPrefix(name, "system.") {
			continue
		}
		n, err := s.coll(name).CountDocuments(ctx, bson.M{})
		if err != nil {
			return nil, fmt.Errorf("counting %s: %w", name, err)
		}
		if n > 0 {
			out = append(out, fmt.Sprintf("%s (%d documents)", name, n))
		}
	}
	return out, nil
}

// restoreState rebuilds a record from the change entry that left it: the
// entry's after state, the bookkeeping fields, and the redacted fields as
// cur (the record as stored now, nil if none) holds them. A redacted field
// cur lacks keeps the entry's placeholder, so the record still equals its
// entry: a key created after the copy has no hash and cannot be used.
func (s *Engine) restoreState(e audit.Entry, cur bson.M) bson.M {
	doc := make(bson.M, len(e.After)+3)
	for k, v := range e.After {
		doc[k] = v
	}
	for _, f := range s.schema.Redacted[e.Collection] {
		if _, ok := doc[f]; !ok {
			continue
		}
		if v, ok := cur[f]; ok {
			doc[f] = v
		}
	}
	doc["_id"] = e.RecordID
	doc[fieldVersion] = e.VersionAfter
	doc[fieldLastChange] = e.ID
	return doc
}

// StateAt rebuilds the record e left, with the redacted fields of cur: what
// a backup copies of a record changed after the copy's counter.
func (s *Engine) StateAt(e audit.Entry, cur bson.M) bson.M { return s.restoreState(e, cur) }

// rebuildAfterRestore readies the service's own indexes once a restore has
// written the store: the restore's writes kept them, unless one failed and
// left them stale, when they are built again from the store.
func (s *Engine) rebuildAfterRestore(ctx context.Context) error {
	if s.mirror == nil {
		return nil
	}
	if err := s.IndexesReady(ctx); err != nil {
		return err
	}
	if s.cache != nil {
		s.cache.clear()
	}
	if s.mirror.follow != nil {
		// A server: the restore wrote around the change log's order, so
		// the index is read again from the store.
		s.mirror.stale.Store(true)
		_, err := s.buildFollow(ctx)
		return err
	}
	if !s.mirror.stale.Load() {
		return nil
	}
	defer s.bumpSessionGen()
	return s.buildMirror(ctx)
}
