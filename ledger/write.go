package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"outreach/audit"
)

// This file is the single write path: the only place in the service that
// calls a driver write. A test fails if any other non-test file does.

// Bookkeeping fields every stored record carries; they are not part of a
// change's before/after.
const (
	fieldVersion    = FieldVersion
	fieldLastChange = FieldLastChange
	fieldLockedBy   = FieldLockedBy
)

// groupTxLimit is the largest group written as one transaction; larger groups
// take the plan protocol on every server, to stay inside the transaction
// time limit.
const groupTxLimit = 500

// The protocol's states, in one place. A change entry is born pending (the
// ordered protocols) or applied (a transaction, or the serial protocol,
// which inserts it only once its record carries it):
//
//	pending  -> applied   its record carries it (the writer, a later writer
//	                      about to overwrite that record, or recovery)
//	pending  -> aborted   its record moved past the entry's base version
//	                      without it, so it can never land
//
// Nothing else moves an entry: a pending entry whose writer went away is
// rolled forward by recovery (its record written, if still at the base
// version), never voided on a timer. So no path writes a record after its
// entry was voided, and a record never carries a voided entry. A plan
// (a group without a transaction) moves locking -> locked -> applied, or
// locking -> aborted; once locked it is only ever rolled forward.

// mutation is one record change handed to the write path (Mutation).
type mutation = Mutation

// precheck is a condition the write path re-checks where no other write of
// the process can slip in between the check and the write (under the
// serial lock, inside the transaction, or after the pending entries that
// make concurrent writers visible; in a batch of the serial protocol, only
// writes of other records come between, see commitBatch). A rollback uses
// it to re-read whether its change was rolled back meanwhile.
type precheck func(ctx context.Context) error

// errCrashed is returned when a test hook stops the protocol as a crash would.
var errCrashed = errors.New("simulated crash")

// errInjected marks a store failure a test hook injects: unlike a crash,
// the protocol goes on and must handle it as it handles a driver error.
var errInjected = errors.New("injected store failure")

// at runs the test hook at a point of the protocol. An error from it is a
// crash there, unless it wraps errInjected (a failing store).
func (s *Engine) at(point string) error {
	if s.hook == nil {
		return nil
	}
	if err := s.hook(point); err != nil {
		if errors.Is(err, errInjected) {
			return err
		}
		return fmt.Errorf("%w at %s: %v", errCrashed, point, err)
	}
	return nil
}

// errOutcomePending answers a write whose store failed after the change was
// decided: recovery completes it (or finds that it cannot land) within the
// lease, so the caller must look before retrying.
var errOutcomePending = &Error{Code: CodeUnavailable, Retryable: false,
	Message: "the store failed while the change was being written; it will be completed or voided within a minute. Check get_change_log (or read the record) before retrying, so the change is not made twice"}

// write applies muts as one unit and returns their change entries, in order.
// One mutation, or a group, is all or nothing on every write mode.
func (s *Engine) write(ctx context.Context, muts ...mutation) ([]audit.Entry, error) {
	return s.writeChecked(ctx, nil, muts...)
}

// writeChecked is write with a precondition (see precheck).
func (s *Engine) writeChecked(ctx context.Context, chk precheck, muts ...mutation) ([]audit.Entry, error) {
	actor, ok := audit.ActorFrom(ctx)
	if !ok || actor.UserID == "" || actor.AgentID == "" || actor.SessionID == "" {
		return nil, errors.New("write without a complete actor (user, agent, session)")
	}
	if len(muts) == 0 {
		return nil, nil
	}
	// Reads after this write must see it (WithReadPoint).
	defer s.writesDone.Add(1)
	for _, m := range muts {
		if drop := s.schema.Caches[m.Coll]; drop != nil {
			// A change to a cached collection (the verified keys) empties
			// the cache before and after it lands, so no request is let in
			// on the record's old state.
			drop()
			defer drop()
			break
		}
	}
	if err := s.bindSession(ctx, actor); err != nil {
		return nil, err
	}
	planID := ""
	if len(muts) > 1 {
		planID = uuid.NewString()
	}
	entries := make([]audit.Entry, len(muts))
	for i, m := range muts {
		entries[i] = s.newEntry(actor, m, planID)
	}
	var err error
	switch {
	case s.caps.WriteMode == ModeTransaction && len(muts) <= groupTxLimit:
		err = s.writeTx(ctx, chk, muts, entries)
	case s.serialWrites && len(muts) == 1:
		err = s.writeSerial(ctx, chk, muts[0], &entries[0])
	case s.serialWrites:
		err = s.writePlanSerial(ctx, chk, planID, muts, entries)
	default:
		if chk != nil {
			if err = chk(ctx); err != nil {
				return nil, err
			}
		}
		if len(muts) == 1 {
			err = s.writeOrdered(ctx, muts[0], &entries[0])
		} else {
			err = s.writePlan(ctx, planID, muts, entries)
		}
	}
	if err != nil {
		// The write may have stopped half-way: let the recovery timer look.
		s.unsettled.Store(true)
	}
	return entries, err
}

func (s *Engine) newEntry(actor audit.Actor, m mutation, planID string) audit.Entry {
	return audit.Entry{
		ID:           uuid.NewString(),
		Collection:   m.Coll,
		RecordID:     m.ID,
		Action:       m.Action,
		Before:       s.redact(m.Coll, m.Before),
		After:        s.redact(m.Coll, m.After),
		UserID:       actor.UserID,
		AgentID:      actor.AgentID,
		SessionID:    actor.SessionID,
		Tool:         actor.Tool,
		OnBehalfOf:   cmp.Or(m.OnBehalfOf, actor.OnBehalfOf),
		Reverts:      m.Reverts,
		Reversible:   !m.Irreversible,
		VersionAfter: m.Version + 1,
		PlanID:       planID,
		// The call's idempotency claim (tools/idempotency.go).
		IdempotencyKey: actor.IdempotencyKey,
	}
}

func (s *Engine) redact(coll string, doc bson.M) bson.M {
	fields := s.schema.Redacted[coll]
	if doc == nil || len(fields) == 0 {
		return doc
	}
	out := make(bson.M, len(doc))
	for k, v := range doc {
		out[k] = v
	}
	for _, f := range fields {
		if _, ok := out[f]; ok {
			out[f] = "[redacted]"
		}
	}
	return out
}

// keepRedacted gives doc (a group step's new state, planned over the
// redacted placeholders) the redacted fields of coll as the stored record
// cur holds them: present with the stored value, absent where the record
// has none. A group never changes a redacted field, and copying an absent
// one would add it as null, a state no change entry holds.
func (s *Engine) keepRedacted(coll string, doc, cur bson.M) {
	for _, f := range s.schema.Redacted[coll] {
		if v, ok := cur[f]; ok {
			doc[f] = v
		} else {
			delete(doc, f)
		}
	}
}

// sealed holds the redacted values of a create, so that recovery can roll
// the create forward; it is kept on the entry only while the entry is
// pending (settling it removes the field), never on an applied entry.
func (s *Engine) sealed(m mutation) bson.M {
	if m.Before != nil || len(s.schema.Redacted[m.Coll]) == 0 {
		return nil
	}
	out := bson.M{}
	for _, f := range s.schema.Redacted[m.Coll] {
		if v, ok := m.After[f]; ok {
			out[f] = v
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Sessions are bound to the agent that first wrote in them, so no other key
// can file changes into (or block the rollback of) another agent's session.
// The binding is bookkeeping of the transport, like key usage: it is not a
// record and has no change entry.

func (s *Engine) bindSession(ctx context.Context, a audit.Actor) error {
	if owner, ok := s.sessions.Load(a.SessionID); ok {
		return sessionOwner(a, owner.(string))
	}
	for attempt := 0; attempt < 3; attempt++ {
		var b struct {
			AgentID string `bson:"agent_id"`
		}
		err := s.coll(collSessions).FindOne(ctx, bson.M{"_id": a.SessionID}).Decode(&b)
		if err == nil {
			s.sessions.Store(a.SessionID, b.AgentID)
			return sessionOwner(a, b.AgentID)
		}
		if !errors.Is(err, mongo.ErrNoDocuments) {
			return fmt.Errorf("session %s: %w", a.SessionID, err)
		}
		_, err = s.coll(collSessions).InsertOne(ctx, bson.M{"_id": a.SessionID, "agent_id": a.AgentID,
			"user_id": a.UserID, "created_at": time.Now().UTC()})
		s.bumpSessionGen() // whatever the outcome: a session may be bound
		if err == nil {
			s.sessions.Store(a.SessionID, a.AgentID)
			return nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return fmt.Errorf("session %s: %w", a.SessionID, err)
		}
		// Another call bound it first: read whose it is.
	}
	return &Error{Code: CodeUnavailable, Retryable: true, Message: "could not bind the session; try again"}
}

// openSession records a session opened by start_session (bookkeeping, like
// bindSession: no change entry) and binds it to its agent.
func (s *Engine) openSession(ctx context.Context, doc bson.M) error {
	_, err := s.coll(collSessions).InsertOne(ctx, doc)
	s.bumpSessionGen() // whatever the outcome: a session may be opened
	if err != nil {
		return fmt.Errorf("open session: %w", err)
	}
	s.sessions.Store(doc["_id"], doc["agent_id"])
	return nil
}

func sessionOwner(a audit.Actor, owner string) error {
	if owner == a.AgentID {
		return nil
	}
	return &Error{Code: CodePermissionDenied, Field: "X-Agent-Session-Id",
		Message: fmt.Sprintf("session %q belongs to another agent (key %s); a session is bound to the agent that first wrote in it: choose a session id of your own", a.SessionID, owner)}
}

// ---------------------------------------------------------------------------
// Transaction mode.

// writeTx writes the entries and records in one transaction, with majority
// write concern and snapshot read concern set explicitly rather than taken
// from the server's defaults. The callback may run more than once, so it
// only does database work and never swallows an error.
func (s *Engine) writeTx(ctx context.Context, chk precheck, muts []mutation, entries []audit.Entry) error {
	sess, err := s.client.StartSession()
	if err != nil {
		return fmt.Errorf("start session: %w", err)
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		if chk != nil {
			if err := chk(ctx); err != nil {
				return nil, err
			}
		}
		for i := range muts {
			seq, err := s.nextSeq(ctx)
			if err != nil {
				return nil, err
			}
			e := entries[i]
			e.Seq, e.At, e.State = seq, time.Now().UTC(), audit.StateApplied
			if _, err := s.coll(collChangeLog).InsertOne(ctx, e); err != nil {
				return nil, err
			}
			if err := s.at("entry"); err != nil {
				return nil, err
			}
			if err := s.writeRecord(ctx, muts[i], e.ID, "", false); err != nil {
				return nil, err
			}
			if err := s.at("record"); err != nil {
				return nil, err
			}
			entries[i] = e
		}
		return nil, nil
	}, txOptions())
	return err
}

// txOptions are the transaction's concerns, set explicitly: a change and its
// entry are acknowledged only once a majority has them, and the callback
// reads one snapshot.
func txOptions() *options.TransactionOptionsBuilder {
	return options.Transaction().SetWriteConcern(writeconcern.Majority()).SetReadConcern(readconcern.Snapshot())
}

// ---------------------------------------------------------------------------
// Ordered mode (a server without transactions whose filtered writes are
// atomic: a standalone mongod, FerretDB v2 on DocumentDB). Many processes
// may write at once; every step is idempotent and guarded.

// writeOrdered: entry pending, record guarded by its version, entry applied.
// Once the entry is inserted the change is decided: it lands unless the
// record moves past its base version first, whoever finishes it (this
// writer, or recovery if this writer stops).
func (s *Engine) writeOrdered(ctx context.Context, m mutation, e *audit.Entry) error {
	if m.Before != nil {
		// A record another write moved, or a group holds, refuses the write
		// before anything is decided.
		var cur bson.M
		err := s.coll(m.Coll).FindOne(ctx, bson.M{"_id": m.ID}, options.FindOne().SetProjection(bson.M{fieldVersion: 1, fieldLockedBy: 1})).Decode(&cur)
		if err != nil {
			return DriverErr(err, s.schema.Kinds[m.Coll], m.ID)
		}
		if v, _ := AsInt(cur[fieldVersion]); v != m.Version || cur[fieldLockedBy] != nil {
			return ErrConflict
		}
	}
	seq, err := s.nextSeq(ctx)
	if err != nil {
		return err
	}
	e.Seq, e.At, e.State = seq, time.Now().UTC(), audit.StatePending
	e.Sealed = s.sealed(m)
	if err := s.insertEntry(ctx, e); err != nil {
		if isStoreRefusal(err) {
			return err
		}
		return errors.Join(errOutcomePending, err)
	}
	e.Sealed = nil
	// From here the change is decided: finish it whatever the caller does.
	ctx = context.WithoutCancel(ctx)
	if err := s.at("entry"); err != nil {
		return err
	}
	state, err := s.land(ctx, *e, m)
	if errors.Is(err, errCrashed) {
		return err
	}
	if err != nil {
		s.log.Error().Err(err).Str("change", e.ID).Msg("write left to recovery")
		return errors.Join(errOutcomePending, err)
	}
	if state == audit.StateAborted {
		return ErrConflict // modify retries on the fresh state
	}
	e.State = audit.StateApplied
	return s.at("applied")
}

// isStoreRefusal tells an error the store answered with (nothing was
// written) from one whose outcome is unknown (a timeout, a lost connection).
func isStoreRefusal(err error) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && !mongo.IsTimeout(err) && !mongo.IsNetworkError(err)
}

// land finishes pending entry e (whose mutation is m): writes its record if
// the record is still at the entry's base version, and settles the entry.
// It returns the entry's final state, or an error when it cannot tell yet
// (the store failing, a plan holding the record): the entry stays pending
// and a later call settles it. The writer and recovery may run it at once.
func (s *Engine) land(ctx context.Context, e audit.Entry, m mutation) (string, error) {
	base := e.VersionAfter - 1
	for attempt := 0; attempt < 5; attempt++ {
		if err := s.at("land-read"); err != nil {
			return "", err
		}
		var cur bson.M
		err := s.coll(e.Collection).FindOne(ctx, bson.M{"_id": e.RecordID}).Decode(&cur)
		found := err == nil
		if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			return "", fmt.Errorf("read %s/%s: %w", e.Collection, e.RecordID, err) // unknown: wait, never void
		}
		lc, _ := cur[fieldLastChange].(string)
		v, _ := AsInt(cur[fieldVersion])
		switch {
		case found && lc == e.ID:
			return s.settle(ctx, e.ID, audit.StateApplied)
		case found && base == 0:
			// The record exists without this entry on it. Either this entry
			// created it and a later writer settled it (applied) before moving
			// the record on, or another create of the same id (a record with a
			// fixed id, such as a sync state or the organisation settings) won:
			// then this entry is still pending and can never land.
			st, err := s.settle(ctx, e.ID, audit.StateAborted)
			if st == audit.StateApplied {
				return st, nil
			}
			return st, err
		case !found && base > 0:
			return s.settle(ctx, e.ID, audit.StateAborted) // nothing is ever deleted: cannot happen
		case found && v != base:
			// Moved past the base version without this entry: it can never land.
			return s.settle(ctx, e.ID, audit.StateAborted)
		case found && cur[fieldLockedBy] != nil:
			// A group took the record at this version after this entry was
			// written: it decides first (it moves the record, and this entry
			// cannot land, or it is voided and this one lands).
			if attempt < 4 {
				time.Sleep(time.Duration(attempt+1) * 50 * time.Millisecond)
				continue
			}
			return "", ErrConflict
		}
		if found {
			// The state this write replaces is final: settle its entry before
			// overwriting it, so that a pending entry of a record that moved
			// on always means "did not land".
			if err := s.settlePrev(ctx, lc); err != nil {
				return "", err
			}
		}
		if m.Coll == "" { // recovery: rebuild the mutation from the entry
			m = mutation{Coll: e.Collection, ID: e.RecordID, Before: e.Before, After: cloneM(e.After), Version: base}
			for k, v := range e.Sealed {
				m.After[k] = v
			}
			if found && len(e.Sealed) == 0 {
				s.keepRedacted(e.Collection, m.After, cur)
			}
		}
		err = s.writeRecord(ctx, m, e.ID, "", false)
		if err != nil && !isConflict(err) {
			return "", err
		}
		if err := s.at("record"); err != nil {
			return "", err
		}
		// Landed, or someone else moved first: the next read tells which.
	}
	return "", fmt.Errorf("change %s: the record kept moving", e.ID)
}

func cloneM(m bson.M) bson.M {
	out := make(bson.M, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// settlePrev marks applied the entry a record carries, if it is still
// pending: the record carrying it proves it landed.
func (s *Engine) settlePrev(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	_, err := s.coll(collChangeLog).UpdateOne(ctx, bson.M{"_id": id, "state": audit.StatePending},
		bson.M{"$set": bson.M{"state": audit.StateApplied}, "$unset": bson.M{"sealed": ""}})
	return err
}

// settle moves pending entry id to state and returns the state it has: the
// one asked for, or the one another settler gave it. Two settlers never
// disagree (both read the same record); if they do, that is reported.
func (s *Engine) settle(ctx context.Context, id, state string) (string, error) {
	res, err := s.coll(collChangeLog).UpdateOne(ctx, bson.M{"_id": id, "state": audit.StatePending},
		bson.M{"$set": bson.M{"state": state}, "$unset": bson.M{"sealed": ""}})
	if err != nil {
		return "", fmt.Errorf("settle change %s: %w", id, err)
	}
	if res.MatchedCount == 1 {
		return state, nil
	}
	var e struct {
		State string `bson:"state"`
	}
	if err := s.coll(collChangeLog).FindOne(ctx, bson.M{"_id": id}).Decode(&e); err != nil {
		return "", fmt.Errorf("settle change %s: %w", id, err)
	}
	if e.State != state {
		return e.State, fmt.Errorf("change %s is %s, but its record says %s", id, e.State, state)
	}
	return state, nil
}

// insertEntry inserts e. A duplicate key is either this very entry (a retry
// whose first try landed) or another entry holding e's seq; the second takes
// a new seq.
func (s *Engine) insertEntry(ctx context.Context, e *audit.Entry) error {
	_, err := s.insertEntryOnce(ctx, e)
	return err
}

// insertEntryOnce is insertEntry, and reports whether this call inserted the
// entry (false: it was in already).
func (s *Engine) insertEntryOnce(ctx context.Context, e *audit.Entry) (bool, error) {
	for attempt := 0; ; attempt++ {
		_, err := s.coll(collChangeLog).InsertOne(ctx, e)
		if err == nil {
			s.mirrorPut(collChangeLog, e)
			return true, nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			s.mirrorRefresh(ctx, collChangeLog, e.ID) // it may have landed
			return false, err
		}
		n, cerr := s.coll(collChangeLog).CountDocuments(ctx, bson.M{"_id": e.ID})
		if cerr != nil {
			s.mirrorRefresh(ctx, collChangeLog, e.ID)
			return false, errors.Join(err, cerr)
		}
		if n == 1 {
			s.mirrorRefresh(ctx, collChangeLog, e.ID) // an earlier attempt landed without a reply
			return attempt > 0, nil
		}
		if attempt == 4 {
			return false, fmt.Errorf("change %s: seq %d is taken: %w", e.ID, e.Seq, err)
		}
		s.seqs.drop() // the counter is behind the log: read it again
		seq, serr := s.nextSeq(ctx)
		if serr != nil {
			return false, serr
		}
		s.log.Warn().Int64("seq", e.Seq).Int64("new_seq", seq).Msg("change seq already taken: counter behind the log")
		e.Seq = seq
	}
}

// ---------------------------------------------------------------------------
// Serial mode: the embedded store, whose filtered updates are not atomic
// (two guarded writes at one version can both match, two $inc can return
// one number). One process owns it (a lock file), and writeMu makes each
// write's steps atomic among that process's writers. Every step is an insert
// or a write by _id, since the store scans a whole collection for any other
// query.

// intent is the write-ahead record of the serial protocol: one document per
// process, rewritten by each of its batches once the previous one is settled.
type intent struct {
	ID    string    `bson:"_id"`
	State string    `bson:"state"` // pending or done
	At    time.Time `bson:"at"`
	// Entries are the changes of one batch, in seq order. A batch stores
	// them packed (intent_packed.go); unpackIntents fills Entries from it.
	Entries []audit.Entry `bson:"entries,omitempty"`
	Packed  []byte        `bson:"packed,omitempty"`
	// Entry is the one change of an intent written before writes were
	// batched; such an intent is only ever read (a store written by an
	// earlier version and stopped with its last intent unsettled).
	Entry *audit.Entry `bson:"entry,omitempty"`
}

// changes returns the entries an intent holds, in either form.
func (in intent) changes() []audit.Entry {
	if len(in.Entries) == 0 && in.Entry != nil {
		return []audit.Entry{*in.Entry}
	}
	return in.Entries
}

// Group commit. Single-record writes that arrive while others are being
// written wait in a queue; the writer at its head (the leader) takes writeMu
// and then the queue, and writes what it took as one batch: one intent
// holding every entry, each record through writeRecord, the entries with
// one InsertMany. It gives each writer its own result and names the new
// head of the queue leader. A batch costs one intent write and one insert
// of entries, however many writers it carries, so more clients bring more
// throughput instead of a longer wait for the lock.
//
// A batch never holds two writes of one record. The later one was read
// before the earlier was written, so beside it in a batch it could only
// conflict, whatever became of the earlier one. It waits for the next batch
// instead and meets the earlier one's outcome there, as it would without
// batching: a conflict if that landed (modify retries it on the fresh
// state), written if that was refused. So a precheck, too, never runs
// before a write of its own record by its own batch.

// maxCommitBatch bounds the writers one batch carries. A variable, so that
// a benchmark can set it to 1 (one write at a time, as before batching) and
// compare the two in one run.
var maxCommitBatch = 32

// commitBatchBytes bounds the entries one intent holds, well under the
// store's 16 MiB document limit (an entry holds two states of its record).
// A batch always takes its first writer.
const commitBatchBytes = 8 << 20

// commitQueue holds the single-record writes waiting for the serial lock.
// busy is set while a leader is named: from the moment a writer finds the
// queue idle until a leader finds it empty after its batch. A non-empty
// queue always has a leader.
type commitQueue struct {
	mu      sync.Mutex
	waiting []*commitReq
	busy    bool
}

// commitReq is one writer's mutation in the queue.
type commitReq struct {
	ctx  context.Context
	chk  precheck
	m    mutation
	e    *audit.Entry
	size int // the entry's size as stored, to bound the intent
	// wake is signalled once: the writer is named leader, or its result is set.
	wake chan struct{}
	// lead and taken are read and written under commitQueue.mu.
	lead, taken bool
	// err is the writer's result, set by the leader before wake.
	err error
}

// writeSerial queues m and waits until a batch carrying it is written (or
// leads that batch itself). A writer whose ctx ends while it is queued
// leaves the queue with ctx's error and nothing written; once a batch has
// taken it, it waits for the batch, which writes it or not as one write
// alone would (see commitBatch).
func (s *Engine) writeSerial(ctx context.Context, chk precheck, m mutation, e *audit.Entry) error {
	// The entry is marshalled here, outside the lock, for its size; an
	// entry that cannot be stored fails alone, not the batch it would join.
	probe := *e
	probe.Seq, probe.At, probe.State = 1, time.Now().UTC(), audit.StateApplied
	raw, err := bson.Marshal(probe)
	if err != nil {
		return fmt.Errorf("change %s: %w", e.ID, err)
	}
	r := &commitReq{ctx: ctx, chk: chk, m: m, e: e, size: len(raw), wake: make(chan struct{}, 1)}
	q := &s.commits
	q.mu.Lock()
	q.waiting = append(q.waiting, r)
	if !q.busy {
		q.busy, r.lead = true, true
	}
	lead := r.lead
	q.mu.Unlock()
	if !lead {
		select {
		case <-r.wake:
		case <-ctx.Done():
			if q.withdraw(r) {
				return ctx.Err()
			}
			<-r.wake // taken into a batch, or named leader: see it through
		}
		q.mu.Lock()
		lead = r.lead && !r.taken
		q.mu.Unlock()
		if !lead {
			return r.err
		}
	}
	s.leadBatch(r)
	return r.err
}

// leadBatch writes one batch, led by r (the head of the queue, so the batch
// carries it), wakes its writers and names the next leader.
func (s *Engine) leadBatch(r *commitReq) {
	q := &s.commits
	s.writeMu.Lock()
	// The queue is taken once the lock is held: the writers that queued
	// while another write held it all join this batch.
	q.mu.Lock()
	batch := q.take()
	q.mu.Unlock()
	s.commitBatch(batch)
	s.writeMu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, w := range batch {
		if w != r {
			w.wake <- struct{}{}
		}
	}
	if len(q.waiting) == 0 {
		q.busy = false
		return
	}
	next := q.waiting[0]
	next.lead = true
	next.wake <- struct{}{}
}

// take removes the next batch from the queue, in arrival order: at most
// maxCommitBatch writers and commitBatchBytes of entries, one write per
// record (a later write of a record already taken stays queued, ahead of
// the writers that came after it). q.mu held.
func (q *commitQueue) take() []*commitReq {
	var batch, rest []*commitReq
	records := map[string]bool{}
	size := 0
	for _, w := range q.waiting {
		k := w.m.Key()
		if len(batch) == maxCommitBatch || records[k] || (len(batch) > 0 && size+w.size > commitBatchBytes) {
			rest = append(rest, w)
			continue
		}
		records[k] = true
		size += w.size
		w.taken = true
		batch = append(batch, w)
	}
	q.waiting = rest
	return batch
}

// withdraw removes r from the queue if no batch has taken it and it was
// not named leader, and reports whether it did.
func (q *commitQueue) withdraw(r *commitReq) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r.taken || r.lead {
		return false
	}
	q.waiting = slices.DeleteFunc(q.waiting, func(w *commitReq) bool { return w == r })
	return true
}

// commitBatch writes a batch (writeMu held) and sets each writer's result:
// intent pending (holding every entry), each record written by _id after
// its guard is checked, the entries inserted applied. Each writer's
// precheck and guard are its own: one that fails, or whose caller went
// away before the batch, is left out before anything is written, and the
// others go on. Once the intent is written every change in it is decided
// and finished regardless of the callers, and the intent is never
// overwritten before it is settled: a failure settles it at once, or leaves
// it for the next batch of the process (which settles it first) and for
// recovery. A precheck sees the store as the batch found it: the other
// writes of its batch are of other records, and are not yet written.
func (s *Engine) commitBatch(batch []*commitReq) {
	ctx := context.WithoutCancel(batch[0].ctx)
	fail := func(rs []*commitReq, err error) {
		for _, w := range rs {
			w.err = err
		}
	}
	if len(batch) > 1 {
		if err := s.at("batch"); err != nil {
			fail(batch, err)
			return
		}
	}
	if err := s.settleOwnIntent(ctx); err != nil {
		fail(batch, &Error{Code: CodeUnavailable, Retryable: true, Message: "the store failed while finishing an earlier write; try again in a moment"})
		return
	}
	var live []*commitReq
	for _, w := range batch {
		switch {
		case w.ctx.Err() != nil:
			w.err = w.ctx.Err()
		case s.locks[w.m.Key()] != "":
			w.err = ErrConflict
		case w.chk != nil:
			w.err = w.chk(w.ctx)
		}
		if w.err == nil {
			live = append(live, w)
		}
	}
	if len(live) == 0 {
		return
	}
	last, err := s.nextSeqs(ctx, len(live))
	if err != nil {
		fail(live, err)
		return
	}
	at := time.Now().UTC()
	in := intent{ID: s.intentID, State: audit.StatePending, At: at, Entries: make([]audit.Entry, len(live))}
	raws := make([]any, len(live))
	for i, w := range live {
		w.e.Seq, w.e.At, w.e.State = last-int64(len(live)-1-i), at, audit.StateApplied
		in.Entries[i] = *w.e
		// Marshalled once for the intent and the insert of the entries.
		raw, err := bson.Marshal(w.e)
		if err != nil {
			fail(live, fmt.Errorf("change %s: %w", w.e.ID, err))
			return
		}
		raws[i] = bson.Raw(raw)
	}
	// Even a failed intent write may have landed: settle it before the next.
	s.ownIntent, s.intentStored = &in, true
	doc := bson.D{{Key: "_id", Value: in.ID}, {Key: "state", Value: in.State}, {Key: "at", Value: in.At}, {Key: "packed", Value: packEntries(raws)}}
	if _, err := s.coll(collIntents).ReplaceOne(ctx, bson.M{"_id": in.ID}, doc, options.Replace().SetUpsert(true)); err != nil {
		if serr := s.settleOwnIntent(ctx); serr == nil {
			fail(live, fmt.Errorf("write intent: %w", err)) // settled: nothing was written
		} else {
			fail(live, errors.Join(errOutcomePending, err))
		}
		return
	}
	if err := s.at("entry"); err != nil {
		fail(live, err)
		return
	}
	// Each record: a conflict is certain (nothing written); any other
	// failure leaves its outcome to be read back from the record.
	werrs := make([]error, len(live))
	var landed []any
	certain := true
	for i, w := range live {
		err := s.writeRecord(context.WithoutCancel(w.ctx), w.m, w.e.ID, "", false)
		if err == nil {
			if err = s.at("record"); errors.Is(err, errCrashed) {
				fail(live, err)
				return
			}
		}
		werrs[i] = err
		switch {
		case err == nil:
			landed = append(landed, raws[i])
		case !isConflict(err):
			certain = false
		}
	}
	err = s.at("entry-insert")
	if errors.Is(err, errCrashed) {
		fail(live, err)
		return
	}
	if err == nil && certain {
		if len(landed) > 0 {
			_, err = s.coll(collChangeLog).InsertMany(ctx, landed, options.InsertMany().SetOrdered(true))
			if err == nil {
				for _, raw := range landed {
					s.mirrorPut(collChangeLog, raw)
				}
			}
		}
		if err == nil {
			if err = s.at("applied"); errors.Is(err, errCrashed) {
				fail(live, err)
				return
			}
		}
		if err == nil {
			// The entries are in: the intent is settled. Its stored state
			// is not marked done (one store write less per batch, under the
			// lock): the process's next batch overwrites it, and should the
			// process stop first, recovery at start settles it again, which
			// is idempotent (each record carries its entry, the entry is
			// there, or the record does not carry it).
			s.ownIntent = nil
			for i, w := range live {
				w.err = werrs[i]
			}
			return
		}
	}
	// A step failed: settle the intent by reading each record (a write may
	// have landed without a reply), inserting the entries one by one.
	carried, _, serr := s.settleIntent(ctx, in)
	if serr != nil {
		s.log.Error().Err(serr).Str("intent", in.ID).Msg("write left to recovery")
		for i, w := range live {
			if isConflict(werrs[i]) {
				w.err = werrs[i]
			} else {
				w.err = errors.Join(errOutcomePending, werrs[i], serr)
			}
		}
		return
	}
	s.ownIntent, s.intentStored = nil, false
	for i, w := range live {
		w.e.Seq = in.Entries[i].Seq // a duplicate seq took a new one
		switch {
		case carried[w.e.ID]:
			w.err = nil
		case werrs[i] != nil:
			w.err = werrs[i]
		default:
			w.err = fmt.Errorf("change %s: record write reported success but the record does not carry it", w.e.ID)
		}
	}
}

// settleOwnIntent settles this process's intent left pending by a failed
// write (writeMu held).
func (s *Engine) settleOwnIntent(ctx context.Context) error {
	if s.ownIntent == nil {
		return nil
	}
	if _, _, err := s.settleIntent(context.WithoutCancel(ctx), *s.ownIntent); err != nil {
		return err
	}
	s.ownIntent = nil
	s.intentStored = false
	return nil
}

// closeIntent settles this process's intent at a clean stop (writeMu held):
// a pending one as settleOwnIntent does, a finished one by marking its
// stored state done.
func (s *Engine) closeIntent(ctx context.Context) error {
	if s.ownIntent != nil {
		return s.settleOwnIntent(ctx)
	}
	if !s.intentStored {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := s.coll(collIntents).UpdateOne(ctx, bson.M{"_id": s.intentID}, bson.M{"$set": bson.M{"state": "done"}}); err != nil {
		return err
	}
	s.intentStored = false
	return nil
}

// settleIntent finishes or drops a pending intent (writeMu held): each entry
// goes in when its record carries it. It returns the ids of the entries
// whose records carry them, and how many of those it inserted (the others
// were in already: the write had finished). A read that fails settles
// nothing more: the intent stays pending, and settling it again is
// idempotent (an entry already in is found by its id). An entry given a
// new seq on insert (its seq taken) has it in in's entries.
func (s *Engine) settleIntent(ctx context.Context, in intent) (map[string]bool, int, error) {
	carried := map[string]bool{}
	added := 0
	es := in.changes()
	for i := range es {
		e := &es[i]
		if err := s.at("settle-read"); err != nil {
			return nil, 0, err
		}
		var rec bson.M
		err := s.coll(e.Collection).FindOne(ctx, bson.M{"_id": e.RecordID}).Decode(&rec)
		if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			return nil, 0, err
		}
		if err == nil && rec[fieldLastChange] == e.ID {
			inserted, err := s.insertEntryOnce(ctx, e)
			if err != nil {
				return nil, 0, err
			}
			carried[e.ID] = true
			if inserted {
				added++
			}
		}
	}
	_, err := s.coll(collIntents).UpdateOne(ctx, bson.M{"_id": in.ID}, bson.M{"$set": bson.M{"state": "done"}})
	return carried, added, err
}

func isConflict(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeConflict
}

// writeRecord writes m's new state, guarded by the version it was read at, and
// by the lock: only the plan holding it (planID) may write a locked record.
// The write releases the lock unless keepLock (the plan changes the record
// again in a later step).
func (s *Engine) writeRecord(ctx context.Context, m mutation, entryID, planID string, keepLock bool) error {
	if drop := s.schema.Caches[m.Coll]; drop != nil {
		defer drop() // recovery rolling a cached record's change forward
	}
	doc := make(bson.M, len(m.After)+4)
	for k, v := range m.After {
		doc[k] = v
	}
	doc["_id"] = m.ID
	doc[fieldVersion] = m.Version + 1
	doc[fieldLastChange] = entryID
	if keepLock && planID != "" {
		doc[fieldLockedBy] = planID
	}
	if m.Before == nil {
		_, err := s.coll(m.Coll).InsertOne(ctx, doc)
		switch {
		case mongo.IsDuplicateKeyError(err):
			return &Error{Code: CodeConflict, Message: fmt.Sprintf("a record with id %s already exists in %s", m.ID, m.Coll)}
		case err != nil:
			s.mirrorRefresh(ctx, m.Coll, m.ID) // it may have landed
		default:
			s.mirrorPut(m.Coll, doc)
		}
		return err
	}
	filter := bson.M{"_id": m.ID, fieldVersion: m.Version, fieldLockedBy: bson.M{"$exists": false}}
	if planID != "" {
		filter[fieldLockedBy] = planID
	}
	ok, err := s.guarded(ctx, m.Coll, filter, func(f bson.M) (*mongo.UpdateResult, error) {
		return s.coll(m.Coll).ReplaceOne(ctx, f, doc)
	})
	if err != nil {
		s.mirrorRefresh(ctx, m.Coll, m.ID) // it may have landed
		return err
	}
	if !ok {
		return ErrConflict
	}
	s.mirrorPut(m.Coll, doc)
	return nil
}

// guarded writes the one document whose _id is filter["_id"], if it matches
// the rest of filter (equalities and {$exists: false}), and reports whether
// it did. On a server whose filtered writes are atomic the filter goes to
// the server. The embedded store neither applies a filtered write atomically
// nor reads anything but an _id equality cheaply, so there the write path,
// serialised in this process, reads the document by _id (from its own
// index where it keeps one), checks the rest here, and writes by _id
// alone: the same outcome in constant time.
func (s *Engine) guarded(ctx context.Context, coll string, filter bson.M, write func(bson.M) (*mongo.UpdateResult, error)) (bool, error) {
	if !s.serialWrites {
		res, err := write(filter)
		if err != nil {
			return false, err
		}
		return res.MatchedCount == 1, nil
	}
	cur, found, err := s.guardRead(ctx, coll, filter) // guard_index.go
	if err != nil || !found {
		return false, err
	}
	if !matches(cur, filter) {
		return false, nil
	}
	res, err := write(bson.M{"_id": filter["_id"]})
	if err != nil {
		return false, err
	}
	return res.MatchedCount == 1, nil
}

// matches evaluates the guard filters the write path uses: field equality
// (numbers compared by value), {$exists: false} and {$in: [...]}.
func matches(doc, filter bson.M) bool {
	for k, want := range filter {
		got, present := doc[k]
		if cond, ok := want.(bson.M); ok && len(cond) == 1 {
			if exists, ok := cond["$exists"].(bool); ok {
				if present != exists {
					return false
				}
				continue
			}
			if in, ok := cond["$in"].(bson.A); ok {
				if !present || !slices.ContainsFunc(in, func(w any) bool { return sameValue(got, w) }) {
					return false
				}
				continue
			}
		}
		if !present || !sameValue(got, want) {
			return false
		}
	}
	return true
}

func sameValue(a, b any) bool {
	if x, ok := AsInt(a); ok {
		y, ok := AsInt(b)
		return ok && x == y
	}
	return a == b
}

// nextSeq takes the next change sequence number from the counter document.
func (s *Engine) nextSeq(ctx context.Context) (int64, error) {
	return s.nextSeqs(ctx, 1)
}

// nextSeqs takes n consecutive sequence numbers and returns the last. A
// store only this process writes (the embedded one) reserves them from the
// counter in blocks and hands them out from memory: one counter write per
// seqBlockSize changes instead of one per change. Numbers are still taken
// under the write lock, so they increase in the order entries are written;
// a block left unused when the process stops is a gap, which seq allows.
func (s *Engine) nextSeqs(ctx context.Context, n int) (int64, error) {
	if s.exclusive && s.serialWrites {
		return s.seqs.take(n, func(k int) (int64, error) { return s.reserveSeqs(ctx, k) })
	}
	return s.reserveSeqs(ctx, n)
}

// seqBlockSize is how many sequence numbers an exclusive store reserves at once.
const seqBlockSize = 64

// seqBlock holds the reserved sequence numbers next..last not handed out yet.
type seqBlock struct {
	mu         sync.Mutex
	next, last int64
}

func (b *seqBlock) take(n int, reserve func(int) (int64, error)) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.next == 0 || b.next+int64(n)-1 > b.last {
		k := max(n, seqBlockSize)
		last, err := reserve(k)
		if err != nil {
			return 0, err
		}
		b.next, b.last = last-int64(k)+1, last
	}
	b.next += int64(n)
	return b.next - 1, nil
}

// drop forgets the reserved numbers, so the next take reads the counter.
func (b *seqBlock) drop() {
	b.mu.Lock()
	b.next, b.last = 0, 0
	b.mu.Unlock()
}

// reserveSeqs takes n consecutive numbers from the counter document and
// returns the last.
func (s *Engine) reserveSeqs(ctx context.Context, n int) (int64, error) {
	var c struct {
		Seq int64 `bson:"seq"`
	}
	err := s.coll(collCounters).FindOneAndUpdate(ctx, bson.M{"_id": collChangeLog},
		bson.M{"$inc": bson.M{"seq": int64(n)}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&c)
	if err != nil {
		return 0, fmt.Errorf("next seq: %w", err)
	}
	return c.Seq, nil
}

// ---------------------------------------------------------------------------
// Groups without a transaction: plans.

// plan is a group of mutations written without a transaction. It is
// persisted before any record is touched, so recovery can finish or void it.
// Its steps are kept in plan_steps, in chunks well under the document size
// limit, so a group has no size limit of its own.
type plan struct {
	ID        string    `bson:"_id"`
	State     string    `bson:"state"` // locking, locked, applied, aborted
	At        time.Time `bson:"at"`
	Heartbeat time.Time `bson:"heartbeat"`
	// Serial: the plan of the serial protocol, whose records are locked in
	// the memory of the one process that owns the store.
	Serial bool `bson:"serial,omitempty"`
	Count  int  `bson:"count"`
	Chunks int  `bson:"chunks"`
	// Steps are loaded from plan_steps (older plans held them here).
	Steps []planStep `bson:"steps,omitempty"`
}

// planChunk is one document of plan_steps.
type planChunk struct {
	ID     string     `bson:"_id"`
	PlanID string     `bson:"plan_id"`
	N      int        `bson:"n"`
	Steps  []planStep `bson:"steps"`
}

type planStep struct {
	Entry audit.Entry `bson:"entry"`
	Coll  string      `bson:"coll"`
	ID    string      `bson:"record_id"`
	// Version is the version the step expects; the new state is Entry.After,
	// with redacted fields kept as stored (they never change in a group).
	Version int64 `bson:"version"`
	// More says a later step of the plan changes the same record again, so
	// this step keeps the record locked.
	More bool `bson:"more,omitempty"`
}

// creates reports whether the step creates its record: a create has no
// before state, takes no lock, and is an insert on roll-forward.
func (st planStep) creates() bool { return st.Version == 0 && st.Entry.Before == nil }

func (st planStep) key() string { return st.Coll + "/" + st.ID }

const (
	planLocking = "locking"
	planLocked  = "locked"
	planApplied = "applied"
	planAborted = "aborted"
)

// planChunkBytes bounds a plan_steps document (the store's limit is 16 MiB).
var planChunkBytes = 4 << 20

// newPlan checks that the steps of a group can be locked and applied in
// order: a record changed by several steps is changed by consecutive
// versions (a chain), locked once at the first; a record the group creates
// is changed by no other step (it cannot be locked before it exists).
func (s *Engine) newPlan(planID string, muts []mutation, entries []audit.Entry) (plan, error) {
	t := time.Now().UTC()
	p := plan{ID: planID, State: planLocking, At: t, Heartbeat: t}
	next := map[string]int64{} // coll/id -> version the next step must expect
	last := map[string]int{}   // coll/id -> index of its last step
	created := map[string]bool{}
	for i, m := range muts {
		k := m.Key()
		if created[k] {
			return p, fmt.Errorf("group step %d changes %s, which the group creates", i, k)
		}
		if m.Before == nil {
			// A create needs no lock (nobody else knows its fresh id) but its
			// redacted fields could not be restored from the plan on roll-forward.
			if len(s.schema.Redacted[m.Coll]) > 0 {
				return p, fmt.Errorf("a group may not create a record of %s", m.Coll)
			}
			if _, ok := next[k]; ok {
				return p, fmt.Errorf("group step %d creates %s, which an earlier step changes", i, k)
			}
			created[k] = true
		}
		if v, ok := next[k]; ok && v != m.Version {
			return p, fmt.Errorf("group step %d changes %s at version %d, want %d (steps of one record must chain)", i, k, m.Version, v)
		}
		next[k] = m.Version + 1
		last[k] = i
		p.Steps = append(p.Steps, planStep{Entry: entries[i], Coll: m.Coll, ID: m.ID, Version: m.Version})
	}
	for i := range p.Steps {
		p.Steps[i].More = last[p.Steps[i].key()] != i
	}
	p.Count = len(p.Steps)
	return p, nil
}

// persistPlan writes the plan's steps, then the plan itself in state: a plan
// document exists only with all its steps.
func (s *Engine) persistPlan(ctx context.Context, p *plan, state string) error {
	var chunk []planStep
	size := 0
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		c := planChunk{ID: fmt.Sprintf("%s/%d", p.ID, p.Chunks), PlanID: p.ID, N: p.Chunks, Steps: chunk}
		if _, err := s.coll(collPlanSteps).InsertOne(ctx, c); err != nil {
			return fmt.Errorf("plan steps: %w", err)
		}
		p.Chunks++
		chunk, size = nil, 0
		return nil
	}
	for _, st := range p.Steps {
		raw, err := bson.Marshal(st)
		if err != nil {
			return err
		}
		if size+len(raw) > planChunkBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		chunk = append(chunk, st)
		size += len(raw)
	}
	if err := flush(); err != nil {
		return err
	}
	doc := *p
	doc.State, doc.Steps = state, nil
	if _, err := s.coll(collPlans).InsertOne(ctx, doc); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	p.State = state
	return nil
}

// loadSteps reads the steps of a plan read from plans.
func (s *Engine) loadSteps(ctx context.Context, p *plan) error {
	if len(p.Steps) > 0 || p.Chunks == 0 {
		return nil
	}
	cur, err := s.coll(collPlanSteps).Find(ctx, bson.M{"plan_id": p.ID}, options.Find().SetSort(bson.D{{Key: "n", Value: 1}}))
	if err != nil {
		return err
	}
	var chunks []planChunk
	if err := cur.All(ctx, &chunks); err != nil {
		return err
	}
	if len(chunks) != p.Chunks {
		return fmt.Errorf("plan %s: %d of its %d step chunks found", p.ID, len(chunks), p.Chunks)
	}
	for _, c := range chunks {
		p.Steps = append(p.Steps, c.Steps...)
	}
	return nil
}

// heartbeat keeps a plan's lease alive while its writer works, so a large
// group is never taken for a dead one; the returned func stops it.
func (s *Engine) heartbeat(ctx context.Context, planID string) func() {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(max(s.lease/4, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_, err := s.coll(collPlans).UpdateOne(ctx, bson.M{"_id": planID, "state": bson.M{"$in": bson.A{planLocking, planLocked}}},
					bson.M{"$set": bson.M{"heartbeat": time.Now().UTC()}})
				if err != nil && ctx.Err() == nil {
					s.log.Warn().Err(err).Str("plan", planID).Msg("plan heartbeat")
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// writePlan (ordered mode): persist the plan, lock every record at its
// expected version, mark the plan locked (from here on it is decided and
// rolled forward by whoever gets there), apply each step as a single ordered
// write carrying the plan id, mark it applied. A heartbeat keeps the plan's
// lease while the writer works.
func (s *Engine) writePlan(ctx context.Context, planID string, muts []mutation, entries []audit.Entry) error {
	p, err := s.newPlan(planID, muts, entries)
	if err != nil {
		return err
	}
	if err := s.persistPlan(ctx, &p, planLocking); err != nil {
		return err
	}
	stop := s.heartbeat(ctx, planID)
	defer stop()
	if err := s.at("plan"); err != nil {
		return err
	}
	fail := func(err error) error {
		if rerr := s.abortPlan(context.WithoutCancel(ctx), planID); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	locked := map[string]bool{}
	for _, st := range p.Steps {
		k := st.key()
		if locked[k] || st.creates() {
			continue
		}
		ok, err := s.guarded(ctx, st.Coll, bson.M{"_id": st.ID, fieldVersion: st.Version, fieldLockedBy: bson.M{"$exists": false}},
			func(f bson.M) (*mongo.UpdateResult, error) {
				return s.coll(st.Coll).UpdateOne(ctx, f, bson.M{"$set": bson.M{fieldLockedBy: planID}})
			})
		if err == nil && !ok {
			err = ErrConflict
		}
		if err != nil {
			return fail(err)
		}
		locked[k] = true
		if err := s.at("lock"); err != nil {
			return err
		}
	}
	// Only a plan still locking may become locked: recovery may have voided
	// it meanwhile (and released its locks), and then it must stay void.
	ok, err := s.guarded(ctx, collPlans, bson.M{"_id": planID, "state": planLocking}, func(f bson.M) (*mongo.UpdateResult, error) {
		return s.coll(collPlans).UpdateOne(ctx, f, bson.M{"$set": bson.M{"state": planLocked}})
	})
	if err != nil {
		return err
	}
	if !ok {
		return fail(&Error{Code: CodeUnavailable, Message: "the store was too slow and the write was voided; nothing was changed, try again", Retryable: true})
	}
	if err := s.at("locked"); err != nil {
		return err
	}
	// From here the group is decided: finish it even if the caller goes away.
	p.State = planLocked
	done, err := s.rollForward(context.WithoutCancel(ctx), p)
	if err != nil {
		if errors.Is(err, errCrashed) {
			return err
		}
		return errors.Join(errOutcomePending, err)
	}
	copy(entries, done)
	return nil
}

// rollForward applies every step of a locked plan that has not landed yet,
// and returns the steps' entries as written. It is idempotent: run by the
// writer, and again by recovery after a crash, or by both at once. A step has
// landed when its record is past the step's version: a locked record is
// written by its plan only, and once released it may move on, never back.
func (s *Engine) rollForward(ctx context.Context, p plan) ([]audit.Entry, error) {
	out := make([]audit.Entry, len(p.Steps))
	for i := range p.Steps {
		st := &p.Steps[i]
		e := st.Entry
		for attempt := 0; ; attempt++ {
			var cur bson.M
			err := s.coll(st.Coll).FindOne(ctx, bson.M{"_id": st.ID}).Decode(&cur)
			if errors.Is(err, mongo.ErrNoDocuments) && st.creates() {
				err = nil // the create has not landed yet
			}
			if err != nil {
				return nil, fmt.Errorf("plan %s step %s: %w", p.ID, st.ID, err)
			}
			// A created record exists from version 1 on, so the same test
			// tells a landed create.
			if v, _ := AsInt(cur[fieldVersion]); v > st.Version {
				break
			}
			if (!st.creates() && cur[fieldLockedBy] != p.ID) || attempt > 0 {
				return nil, fmt.Errorf("plan %s lost its lock on %s/%s", p.ID, st.Coll, st.ID)
			}
			seq, err := s.nextSeq(ctx)
			if err != nil {
				return nil, err
			}
			e.Seq, e.At, e.State = seq, time.Now().UTC(), audit.StatePending
			if err := s.insertEntry(ctx, &e); err != nil {
				return nil, err
			}
			if err := s.at("step-entry"); err != nil {
				return nil, err
			}
			after := cloneM(e.After)
			if !st.creates() {
				lc, _ := cur[fieldLastChange].(string)
				if err := s.settlePrev(ctx, lc); err != nil {
					return nil, err
				}
				s.keepRedacted(st.Coll, after, cur)
			}
			err = s.writeRecord(ctx, mutation{Coll: st.Coll, ID: st.ID, Before: e.Before, After: after, Version: st.Version}, e.ID, p.ID, st.More)
			if isConflict(err) {
				continue // another roller landed it first: the next read shows it
			}
			if err != nil {
				return nil, err
			}
			if err := s.at("step-record"); err != nil {
				return nil, err
			}
			break
		}
		if _, err := s.settle(ctx, e.ID, audit.StateApplied); err != nil {
			return nil, err
		}
		// The entry as stored: a retried roll may have inserted it earlier,
		// with another seq.
		if err := s.coll(collChangeLog).FindOne(ctx, bson.M{"_id": e.ID}).Decode(&out[i]); err != nil {
			return nil, fmt.Errorf("plan %s step %s: %w", p.ID, e.ID, err)
		}
	}
	return out, s.setPlanState(ctx, p.ID, planApplied)
}

// abortPlan voids a plan that has not taken all its locks, and releases the
// locks it took. A plan already locked is never voided: it is rolled forward.
func (s *Engine) abortPlan(ctx context.Context, planID string) error {
	if _, err := s.guarded(ctx, collPlans, bson.M{"_id": planID, "state": planLocking}, func(f bson.M) (*mongo.UpdateResult, error) {
		return s.coll(collPlans).UpdateOne(ctx, f, bson.M{"$set": bson.M{"state": planAborted}})
	}); err != nil {
		return err
	}
	var p plan
	if err := s.coll(collPlans).FindOne(ctx, bson.M{"_id": planID}).Decode(&p); err != nil {
		return err
	}
	if p.State != planAborted {
		return nil
	}
	if err := s.loadSteps(ctx, &p); err != nil {
		return err
	}
	for _, st := range p.Steps {
		if _, err := s.guarded(ctx, st.Coll, bson.M{"_id": st.ID, fieldLockedBy: planID}, func(f bson.M) (*mongo.UpdateResult, error) {
			return s.coll(st.Coll).UpdateOne(ctx, f, bson.M{"$unset": bson.M{fieldLockedBy: ""}})
		}); err != nil {
			return err
		}
	}
	return nil
}

func (s *Engine) setPlanState(ctx context.Context, id, state string) error {
	_, err := s.coll(collPlans).UpdateOne(ctx, bson.M{"_id": id}, bson.M{"$set": bson.M{"state": state}})
	return err
}

// writePlanSerial is the group protocol of the serial mode. Under writeMu it
// checks every record's version (one read per collection and batch, not one
// per record), persists the plan already locked (decided) and locks the
// records in this process's memory: only this process writes the store, so
// other writers meet the lock there. It then applies the steps in batches,
// taking writeMu for one batch at a time, so other records' writes go on
// while a large group is written. After a crash, recovery at start rolls
// the plan forward before anything else writes.
func (s *Engine) writePlanSerial(ctx context.Context, chk precheck, planID string, muts []mutation, entries []audit.Entry) error {
	p, err := s.newPlan(planID, muts, entries)
	if err != nil {
		return err
	}
	p.Serial = true
	s.writeMu.Lock()
	err = s.settleOwnIntent(ctx)
	if err == nil {
		err = s.checkSerialPlan(ctx, p)
	}
	if err == nil && chk != nil {
		err = chk(ctx)
	}
	if err == nil {
		err = s.persistPlan(ctx, &p, planLocked)
	}
	if err == nil {
		for _, st := range p.Steps {
			s.locks[st.key()] = planID
		}
		s.running[planID] = true
	}
	s.writeMu.Unlock()
	if err != nil {
		return err
	}
	done, err := s.rollForwardSerial(context.WithoutCancel(ctx), p, false)
	if err != nil {
		// The plan keeps its locks until recovery rolls it forward.
		s.writeMu.Lock()
		delete(s.running, planID)
		s.writeMu.Unlock()
		if errors.Is(err, errCrashed) {
			return err
		}
		return errors.Join(errOutcomePending, err)
	}
	copy(entries, done)
	return nil
}

// lockedInMemory reports the serial plan holding a record, if any.
func (s *Engine) lockedInMemory(coll, id string) (string, bool) {
	if !s.serialWrites {
		return "", false
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	p, ok := s.locks[coll+"/"+id]
	return p, ok
}

// serialBatch is how many steps of a group are written under writeMu at once.
const serialBatch = 50

// checkSerialPlan checks that every record a plan changes is at the version
// its first step expects and not locked, and that no record it creates
// exists (writeMu held).
func (s *Engine) checkSerialPlan(ctx context.Context, p plan) error {
	want := map[string]int64{}
	byColl := map[string][]string{}
	for _, st := range p.Steps {
		k := st.key()
		if _, ok := want[k]; ok {
			continue
		}
		if s.locks[k] != "" {
			return ErrConflict
		}
		want[k] = st.Version
		byColl[st.Coll] = append(byColl[st.Coll], st.ID)
	}
	// Each record by _id (guard_index.go): an $in is a scan of the
	// collection on the embedded store.
	for coll, ids := range byColl {
		for _, id := range ids {
			r, found, err := s.serialRecord(ctx, coll, id, nil)
			if err != nil {
				return err
			}
			if !found {
				continue
			}
			k := coll + "/" + id
			v, _ := AsInt(r[fieldVersion])
			if v != want[k] || r[fieldLockedBy] != nil {
				return ErrConflict
			}
			delete(want, k)
		}
	}
	for k, v := range want {
		if v != 0 { // a record to change that does not exist
			return fmt.Errorf("group: %s does not exist", k)
		}
	}
	return nil
}

// rollForwardSerial applies the steps of a serial plan that have not landed,
// batch by batch, and returns their entries. recovering says earlier runs
// may have written some steps (a crash, a failed run): then the entries
// already in change_log are looked up instead of inserted again.
func (s *Engine) rollForwardSerial(ctx context.Context, p plan, recovering bool) ([]audit.Entry, error) {
	out := make([]audit.Entry, len(p.Steps))
	if err := s.at("plan"); err != nil {
		return nil, err
	}
	for start := 0; start < len(p.Steps); start += serialBatch {
		end := min(start+serialBatch, len(p.Steps))
		s.writeMu.Lock()
		err := s.rollBatchSerial(ctx, p, start, end, recovering, out)
		s.writeMu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.setPlanState(ctx, p.ID, planApplied); err != nil {
		return nil, err
	}
	for _, st := range p.Steps {
		if s.locks[st.key()] == p.ID {
			delete(s.locks, st.key())
		}
	}
	delete(s.running, p.ID)
	return out, nil
}

func (s *Engine) rollBatchSerial(ctx context.Context, p plan, start, end int, recovering bool, out []audit.Entry) error {
	steps := p.Steps[start:end]
	byColl := map[string][]string{}
	var entryIDs []string
	for _, st := range steps {
		byColl[st.Coll] = append(byColl[st.Coll], st.ID)
		entryIDs = append(entryIDs, st.Entry.ID)
	}
	// Each record by _id (guard_index.go), with the fields the step keeps
	// as stored: an $in is a scan of the collection on the embedded store.
	recs := map[string]bson.M{}
	for coll, ids := range byColl {
		for _, id := range ids {
			d, found, err := s.serialRecord(ctx, coll, id, s.schema.Redacted[coll])
			if err != nil {
				return err
			}
			if found {
				recs[coll+"/"+id] = d
			}
		}
	}
	stored := map[string]audit.Entry{}
	if recovering {
		cur, err := s.coll(collChangeLog).Find(ctx, bson.M{"_id": bson.M{"$in": entryIDs}})
		if err != nil {
			return err
		}
		var es []audit.Entry
		if err := cur.All(ctx, &es); err != nil {
			return err
		}
		for _, e := range es {
			stored[e.ID] = e
		}
	}
	last, err := s.nextSeqs(ctx, len(steps))
	if err != nil {
		return err
	}
	for i, st := range steps {
		e := st.Entry
		e.Seq, e.At, e.State = last-int64(len(steps)-1-i), time.Now().UTC(), audit.StateApplied
		k := st.key()
		cur := recs[k]
		v, _ := AsInt(cur[fieldVersion])
		if v <= st.Version {
			if v != st.Version || (cur == nil) != st.creates() {
				return fmt.Errorf("plan %s: %s is at version %d, its step expects %d", p.ID, k, v, st.Version)
			}
			doc := cloneM(e.After)
			if !st.creates() {
				s.keepRedacted(st.Coll, doc, cur)
			}
			doc["_id"], doc[fieldVersion], doc[fieldLastChange] = st.ID, st.Version+1, e.ID
			var err error
			if st.creates() {
				_, err = s.coll(st.Coll).InsertOne(ctx, doc)
			} else {
				_, err = s.coll(st.Coll).ReplaceOne(ctx, bson.M{"_id": st.ID}, doc)
			}
			if err != nil {
				s.mirrorRefresh(ctx, st.Coll, st.ID) // it may have landed
				return fmt.Errorf("plan %s step %s: %w", p.ID, k, err)
			}
			s.mirrorPut(st.Coll, doc)
			recs[k] = doc
			if err := s.at("step-record"); err != nil {
				return err
			}
		}
		if se, ok := stored[e.ID]; ok {
			out[start+i] = se
			continue
		}
		if err := s.insertEntry(ctx, &e); err != nil {
			return fmt.Errorf("plan %s step %s: %w", p.ID, k, err)
		}
		out[start+i] = e
		if err := s.at("step-entry"); err != nil {
			return err
		}
	}
	return nil
}

// touchKeyUsage records when a key was last used. Usage is telemetry, not a
// change of the key: it lives in its own collection and has no change entry.
func (s *Engine) touchKeyUsage(ctx context.Context, keyID string, at time.Time) error {
	_, err := s.coll(collKeyUsage).UpdateOne(ctx, bson.M{"_id": keyID},
		bson.M{"$set": bson.M{"last_used_at": at}}, options.UpdateOne().SetUpsert(true))
	return err
}

// putIdempotency stores an idempotency claim (idempotency.go): a new one
// when filter is nil (false if the id is taken), or in place of the claim
// that matches filter (false if none does). A claim is not a record: it has
// no change entry.
func (s *Engine) putIdempotency(ctx context.Context, filter bson.M, claim *Idempotency) (bool, error) {
	if filter == nil {
		_, err := s.coll(collIdempotency).InsertOne(ctx, claim)
		if mongo.IsDuplicateKeyError(err) {
			return false, nil
		}
		return err == nil, err
	}
	res, err := s.coll(collIdempotency).ReplaceOne(ctx, filter, claim)
	if err != nil {
		return false, err
	}
	return res.MatchedCount == 1, nil
}

// ---------------------------------------------------------------------------
// Blobs: the bytes of media files, in the GridFS bucket "fs" (fs.files and
// fs.chunks, the standard layout, so any GridFS tool reads them and a backup
// of the database is a backup of the files).
//
// The bytes are not a record: they have no change entry and are never
// changed or deleted. The media record that names them (size, SHA-256, file
// id) goes through the write path above, after the bytes have landed, so a
// record never points at bytes that are not there.
//
// The chunks are written one at a time rather than through the driver's
// upload stream: that stream buffers 16 MiB per upload and inserts 16 MiB
// batches (measured on the embedded store: ~200 MiB of heap for a 50 MiB
// file), caps the whole upload by the client's operation timeout, and
// deletes the chunks already written when the source fails. Here a chunk is
// the only buffer, each insert has its own timeout, and a failed upload
// leaves its chunks without an fs.files document: invisible, and kept.

// blobChunkSize is GridFS's default chunk size (255 KiB).
const blobChunkSize = 255 * 1024

// putBlob streams r into the bucket as file fileID and returns its length.
// fs.files is written last, so a file exists only once all its bytes do.
func (s *Engine) putBlob(ctx context.Context, fileID, filename string, r io.Reader, metadata bson.M) (int64, error) {
	buf := make([]byte, blobChunkSize)
	var length int64
	for n := int32(0); ; n++ {
		k, rerr := io.ReadFull(r, buf)
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			return length, rerr // the source failed: this chunk is not the file's
		}
		if k > 0 {
			chunk := bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "files_id", Value: fileID},
				{Key: "n", Value: n}, {Key: "data", Value: bson.Binary{Data: buf[:k]}}}
			if _, err := s.coll(collChunks).InsertOne(ctx, chunk); err != nil {
				return length, fmt.Errorf("blob %s chunk %d: %w", fileID, n, err)
			}
			length += int64(k)
		}
		if rerr != nil {
			break
		}
	}
	file := bson.D{{Key: "_id", Value: fileID}, {Key: "length", Value: length}, {Key: "chunkSize", Value: int32(blobChunkSize)},
		{Key: "uploadDate", Value: time.Now().UTC()}, {Key: "filename", Value: filename}, {Key: "metadata", Value: metadata}}
	if _, err := s.coll(collFiles).InsertOne(ctx, file); err != nil {
		return length, fmt.Errorf("blob %s: %w", fileID, err)
	}
	return length, nil
}

// recordStoreFormat records this binary's store format in a store of
// format from (0: none recorded). The write is guarded by from, so that a
// newer binary's record is never overwritten.
func (s *Engine) recordStoreFormat(ctx context.Context, from int) error {
	var err error
	if from == 0 {
		_, err = s.coll(CollStoreInfo).UpdateOne(ctx, bson.M{"_id": storeFormatID},
			bson.M{"$setOnInsert": bson.M{"format": StoreFormat, "since": time.Now().UTC()}}, options.UpdateOne().SetUpsert(true))
	} else {
		_, err = s.coll(CollStoreInfo).UpdateOne(ctx, bson.M{"_id": storeFormatID, "format": from},
			bson.M{"$set": bson.M{"format": StoreFormat, "since": time.Now().UTC()}})
	}
	if err != nil {
		return fmt.Errorf("recording the store's format: %w", err)
	}
	return nil
}

// ---------------------------------------------------------------------------
// Restore: a backup written into an empty store (ledger/backup.go). The
// marker goes in first (BeginRestore) and is marked complete last
// (CompleteRestore), so a restore stopped midway leaves a store that Open
// refuses. Nothing here runs on a store that serves: BeginRestore refuses
// a store holding anything.

var errNotRestoring = errors.New("restore writes outside a restore: call BeginRestore first")

// BeginRestore checks that the store is empty and marks it as being
// restored from source up to counter.
func (s *Engine) BeginRestore(ctx context.Context, source string, counter int64) error {
	held, err := s.contents(ctx)
	if err != nil {
		return err
	}
	if len(held) > 0 {
		return fmt.Errorf("the target database %s is not empty: it holds %s. Restore into an empty data directory or database", s.db.Name(), strings.Join(held, ", "))
	}
	m := RestoreMarker{ID: restoreMarkerID, State: RestoreIncomplete, Source: source, Counter: counter, Started: time.Now().UTC()}
	if _, err := s.coll(CollRestore).InsertOne(ctx, m); err != nil {
		return fmt.Errorf("restore marker: %w", err)
	}
	s.restoring.Store(true)
	return nil
}

// RestoreDocs inserts documents of a backup, as they were stored, into
// coll of the store being restored.
func (s *Engine) RestoreDocs(ctx context.Context, coll string, docs []bson.Raw) error {
	if !s.restoring.Load() {
		return errNotRestoring
	}
	if len(docs) == 0 {
		return nil
	}
	batch := make([]any, len(docs))
	for i, d := range docs {
		batch[i] = d
	}
	if _, err := s.coll(coll).InsertMany(ctx, batch, options.InsertMany().SetOrdered(true)); err != nil {
		if s.mirror != nil {
			s.mirrorLost(coll, err) // some may have landed: SetRestoredCounter rebuilds
		}
		return fmt.Errorf("%s: %w", coll, err)
	}
	for _, d := range docs {
		s.mirrorPut(coll, d)
	}
	return nil
}

// ReplayChange applies a change entry shipped after the backup: the entry
// joins the change log and, when applied, its record takes the entry's
// after state (the redacted fields it held before are kept).
func (s *Engine) ReplayChange(ctx context.Context, e audit.Entry) error {
	if !s.restoring.Load() {
		return errNotRestoring
	}
	if e.State == audit.StatePending {
		return fmt.Errorf("change %s (seq %d) is pending: a shipped change is settled", e.ID, e.Seq)
	}
	if e.State == audit.StateApplied && e.After != nil {
		var cur bson.M
		err := s.coll(e.Collection).FindOne(ctx, bson.M{"_id": e.RecordID}).Decode(&cur)
		if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			return fmt.Errorf("change %s: %w", e.ID, err)
		}
		doc := s.restoreState(e, cur)
		if _, err := s.coll(e.Collection).ReplaceOne(ctx, bson.M{"_id": e.RecordID}, doc, options.Replace().SetUpsert(true)); err != nil {
			s.mirrorRefresh(ctx, e.Collection, e.RecordID)
			return fmt.Errorf("change %s: %s/%s: %w", e.ID, e.Collection, e.RecordID, err)
		}
		s.mirrorPut(e.Collection, doc)
	}
	if _, err := s.coll(collChangeLog).InsertOne(ctx, e); err != nil {
		s.mirrorRefresh(ctx, collChangeLog, e.ID)
		return fmt.Errorf("change %s (seq %d): %w", e.ID, e.Seq, err)
	}
	s.mirrorPut(collChangeLog, e)
	return nil
}

// SetRestoredCounter sets the change counter of the store being restored
// and waits for the service's own indexes (kept by the restore's writes,
// rebuilt from the store if one of them failed); the caller then verifies
// the store, which holds the indexes to it.
func (s *Engine) SetRestoredCounter(ctx context.Context, counter int64) error {
	if !s.restoring.Load() {
		return errNotRestoring
	}
	s.writeMu.Lock()
	_, err := s.coll(collCounters).ReplaceOne(ctx, bson.M{"_id": collChangeLog}, bson.M{"_id": collChangeLog, "seq": counter}, options.Replace().SetUpsert(true))
	s.seqs.drop()
	s.writeMu.Unlock()
	if err != nil {
		return fmt.Errorf("change counter: %w", err)
	}
	s.schema.dropCaches()
	return s.rebuildAfterRestore(ctx)
}

// CompleteRestore marks the restore complete: Open serves the store again.
func (s *Engine) CompleteRestore(ctx context.Context, counter int64) error {
	if !s.restoring.Load() {
		return errNotRestoring
	}
	_, err := s.coll(CollRestore).UpdateOne(ctx, bson.M{"_id": restoreMarkerID},
		bson.M{"$set": bson.M{"state": RestoreComplete, "counter": counter, "done": time.Now().UTC()}})
	if err != nil {
		return fmt.Errorf("restore marker: %w", err)
	}
	s.restoring.Store(false)
	s.checkpointRestore(ctx)
	return nil
}
