package repo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
)

// This file is the single write path: the only place in the service that
// calls a driver write. A test fails if any other non-test file does.

// Bookkeeping fields every stored record carries; they are not part of a
// change's before/after.
const (
	fieldVersion    = "version"
	fieldLastChange = "last_change"
	fieldLockedBy   = "locked_by"
)

// redacted lists, per collection, fields whose values never enter change_log.
var redacted = map[string][]string{collKeys: {"key_hash"}, collSettings: {"secret"}}

// groupTxLimit is the largest group written as one transaction; larger groups
// take the plan protocol on every server, to stay inside the transaction
// time limit.
const groupTxLimit = 500

// mutation is one record change handed to the write path.
type mutation struct {
	coll   string
	id     string
	action string
	// before is the stored state (nil for a create), after the complete new
	// state; neither holds bookkeeping fields.
	before bson.M
	after  bson.M
	// version is the version of before (0 for a create).
	version int64
	// reverts names the change a rollback undoes.
	reverts string
	// irreversible marks an action that left the system (a message sent).
	irreversible bool
}

// errCrashed is returned when a test hook stops the protocol as a crash would.
var errCrashed = errors.New("simulated crash")

func (s *Store) at(point string) error {
	if s.hook == nil {
		return nil
	}
	if err := s.hook(point); err != nil {
		return fmt.Errorf("%w at %s: %v", errCrashed, point, err)
	}
	return nil
}

// write applies muts as one unit and returns their change entries, in order.
// One mutation, or a group, is all or nothing on both write modes.
func (s *Store) write(ctx context.Context, muts ...mutation) ([]audit.Entry, error) {
	actor, ok := audit.ActorFrom(ctx)
	if !ok || actor.UserID == "" || actor.AgentID == "" || actor.SessionID == "" {
		return nil, errors.New("write without a complete actor (user, agent, session)")
	}
	if len(muts) == 0 {
		return nil, nil
	}
	if s.serialWrites {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	planID := ""
	if len(muts) > 1 {
		planID = uuid.NewString()
	}
	entries := make([]audit.Entry, len(muts))
	for i, m := range muts {
		entries[i] = newEntry(actor, m, planID)
	}
	var err error
	switch {
	case s.caps.WriteMode == ModeTransaction && len(muts) <= groupTxLimit:
		err = s.writeTx(ctx, muts, entries)
	case len(muts) == 1 && s.serialWrites:
		err = s.writeSerial(ctx, muts[0], &entries[0])
	case len(muts) == 1:
		err = s.writeOrdered(ctx, muts[0], &entries[0])
	default:
		err = s.writePlan(ctx, planID, muts, entries)
	}
	if err != nil {
		// The write may have stopped half-way: let the recovery timer look.
		s.unsettled.Store(true)
	}
	return entries, err
}

func newEntry(actor audit.Actor, m mutation, planID string) audit.Entry {
	return audit.Entry{
		ID:           uuid.NewString(),
		Collection:   m.coll,
		RecordID:     m.id,
		Action:       m.action,
		Before:       redact(m.coll, m.before),
		After:        redact(m.coll, m.after),
		UserID:       actor.UserID,
		AgentID:      actor.AgentID,
		SessionID:    actor.SessionID,
		Tool:         actor.Tool,
		Reverts:      m.reverts,
		Reversible:   !m.irreversible,
		VersionAfter: m.version + 1,
		PlanID:       planID,
	}
}

func redact(coll string, doc bson.M) bson.M {
	fields := redacted[coll]
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

// writeTx writes the entries and records in one transaction. The callback
// may run more than once, so it only does database work and never swallows
// an error.
func (s *Store) writeTx(ctx context.Context, muts []mutation, entries []audit.Entry) error {
	sess, err := s.client.StartSession()
	if err != nil {
		return fmt.Errorf("start session: %w", err)
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
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
	})
	return err
}

// writeOrdered is the protocol for a server without transactions: entry
// pending, record guarded by its version, entry applied. Recovery completes
// an entry whose record write landed and voids one whose write did not.
func (s *Store) writeOrdered(ctx context.Context, m mutation, e *audit.Entry) error {
	seq, err := s.nextSeq(ctx)
	if err != nil {
		return err
	}
	e.Seq, e.At, e.State = seq, time.Now().UTC(), audit.StatePending
	if _, err := s.coll(collChangeLog).InsertOne(ctx, e); err != nil {
		return driverErr(err, "change", e.ID)
	}
	if err := s.at("entry"); err != nil {
		return err
	}
	// Past half the lease, recovery may be about to void this entry: give up
	// rather than race it.
	if time.Since(e.At) > s.lease/2 {
		s.setEntryState(ctx, e.ID, audit.StateAborted)
		return &Error{Code: CodeUnavailable, Message: "the store is too slow to complete the write; nothing was changed, try again", Retryable: true}
	}
	wctx, cancel := context.WithTimeout(ctx, s.lease/3)
	err = s.writeRecord(wctx, m, e.ID, "", false)
	cancel()
	if err != nil {
		if isConflict(err) {
			s.setEntryState(ctx, e.ID, audit.StateAborted)
		}
		return err
	}
	if err := s.at("record"); err != nil {
		return err
	}
	if err := s.setEntryState(ctx, e.ID, audit.StateApplied); err != nil {
		return err
	}
	e.State = audit.StateApplied
	return s.at("applied")
}

// intent is the write-ahead record of the serial protocol: one document per
// process, rewritten by each of its writes.
type intent struct {
	ID    string      `bson:"_id"`
	State string      `bson:"state"` // pending or done
	At    time.Time   `bson:"at"`
	Entry audit.Entry `bson:"entry"`
}

// writeSerial is the ordered protocol where this process is the store's only
// writer at a time (writeMu held; FerretDB). Everything but the record write
// is an insert or a one-document write, because FerretDB scans a whole
// collection for any other query: intent pending (the entry, in this
// process's intent document), record guarded by its version, entry inserted
// applied, intent done. Recovery inserts the entry of a pending intent whose
// record carries it, and drops one whose record does not.
func (s *Store) writeSerial(ctx context.Context, m mutation, e *audit.Entry) error {
	seq, err := s.nextSeq(ctx)
	if err != nil {
		return err
	}
	e.Seq, e.At, e.State = seq, time.Now().UTC(), audit.StateApplied
	in := intent{ID: s.intentID, State: audit.StatePending, At: e.At, Entry: *e}
	if _, err := s.coll(collIntents).ReplaceOne(ctx, bson.M{"_id": in.ID}, in, options.Replace().SetUpsert(true)); err != nil {
		return fmt.Errorf("write intent: %w", err)
	}
	if err := s.at("entry"); err != nil {
		return err
	}
	if err := s.writeRecord(ctx, m, e.ID, "", false); err != nil {
		if isConflict(err) {
			return errors.Join(err, s.intentDone(ctx))
		}
		return err
	}
	if err := s.at("record"); err != nil {
		return err
	}
	if _, err := s.coll(collChangeLog).InsertOne(ctx, e); err != nil {
		return driverErr(err, "change", e.ID)
	}
	if err := s.at("applied"); err != nil {
		return err
	}
	return s.intentDone(ctx)
}

func (s *Store) intentDone(ctx context.Context) error {
	_, err := s.coll(collIntents).UpdateOne(context.WithoutCancel(ctx), bson.M{"_id": s.intentID},
		bson.M{"$set": bson.M{"state": "done"}})
	return err
}

// settleIntent finishes or drops a pending intent (recovery, writeMu held).
func (s *Store) settleIntent(ctx context.Context, in intent) (applied bool, err error) {
	var rec bson.M
	err = s.coll(in.Entry.Collection).FindOne(ctx, bson.M{"_id": in.Entry.RecordID}).Decode(&rec)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return false, err
	}
	if err == nil && rec[fieldLastChange] == in.Entry.ID {
		if _, err := s.coll(collChangeLog).InsertOne(ctx, in.Entry); err != nil && !mongo.IsDuplicateKeyError(err) {
			return false, err
		}
		applied = true
	}
	_, err = s.coll(collIntents).UpdateOne(ctx, bson.M{"_id": in.ID}, bson.M{"$set": bson.M{"state": "done"}})
	return applied, err
}

func isConflict(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeConflict
}

// writeRecord writes m's new state, guarded by the version it was read at, and
// by the lock: only the plan holding it (planID) may write a locked record.
// The write releases the lock unless keepLock (the plan changes the record
// again in a later step).
func (s *Store) writeRecord(ctx context.Context, m mutation, entryID, planID string, keepLock bool) error {
	doc := make(bson.M, len(m.after)+4)
	for k, v := range m.after {
		doc[k] = v
	}
	doc["_id"] = m.id
	doc[fieldVersion] = m.version + 1
	doc[fieldLastChange] = entryID
	if keepLock && planID != "" {
		doc[fieldLockedBy] = planID
	}
	if m.before == nil {
		_, err := s.coll(m.coll).InsertOne(ctx, doc)
		if mongo.IsDuplicateKeyError(err) {
			return &Error{Code: CodeConflict, Message: fmt.Sprintf("a record with id %s already exists in %s", m.id, m.coll)}
		}
		return err
	}
	filter := bson.M{"_id": m.id, fieldVersion: m.version, fieldLockedBy: bson.M{"$exists": false}}
	if planID != "" {
		filter[fieldLockedBy] = planID
	}
	ok, err := s.guarded(ctx, m.coll, filter, func(f bson.M) (*mongo.UpdateResult, error) {
		return s.coll(m.coll).ReplaceOne(ctx, f, doc)
	})
	if err != nil {
		return err
	}
	if !ok {
		return ErrConflict
	}
	return nil
}

// guarded writes the one document whose _id is filter["_id"], if it matches
// the rest of filter (equalities and {$exists: false}), and reports whether
// it did. On MongoDB the filter goes to the server, which applies it
// atomically. FerretDB neither applies a filtered write atomically nor reads
// anything but an _id equality through an index (a filter with one more
// condition scans the whole collection), so there the write path, serialised
// in this process, reads the document by _id, checks the rest here, and
// writes by _id alone: the same outcome in constant time.
func (s *Store) guarded(ctx context.Context, coll string, filter bson.M, write func(bson.M) (*mongo.UpdateResult, error)) (bool, error) {
	if !s.serialWrites {
		res, err := write(filter)
		if err != nil {
			return false, err
		}
		return res.MatchedCount == 1, nil
	}
	var cur bson.M
	err := s.coll(coll).FindOne(ctx, bson.M{"_id": filter["_id"]}).Decode(&cur)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	if err != nil {
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
// (numbers compared by value) and {$exists: false}.
func matches(doc, filter bson.M) bool {
	for k, want := range filter {
		got, present := doc[k]
		if cond, ok := want.(bson.M); ok {
			if exists, ok := cond["$exists"].(bool); ok && len(cond) == 1 {
				if present != exists {
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
	if x, ok := asInt(a); ok {
		y, ok := asInt(b)
		return ok && x == y
	}
	return a == b
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}

func (s *Store) setEntryState(ctx context.Context, id, state string) error {
	ctx = context.WithoutCancel(ctx)
	filter := bson.M{"_id": id, "state": audit.StatePending}
	if s.serialWrites {
		// Every caller holds writeMu and knows the entry is pending (the
		// writer inserted it; recovery read it): the guard needs no read.
		filter = bson.M{"_id": id}
	}
	_, err := s.coll(collChangeLog).UpdateOne(ctx, filter, bson.M{"$set": bson.M{"state": state}})
	return err
}

// nextSeq takes the next change sequence number from the counter document.
func (s *Store) nextSeq(ctx context.Context) (int64, error) {
	var c struct {
		Seq int64 `bson:"seq"`
	}
	err := s.coll(collCounters).FindOneAndUpdate(ctx, bson.M{"_id": collChangeLog},
		bson.M{"$inc": bson.M{"seq": int64(1)}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&c)
	if err != nil {
		return 0, fmt.Errorf("next seq: %w", err)
	}
	return c.Seq, nil
}

// plan is a group of mutations written without a transaction. It is
// persisted before any record is touched, so recovery can finish or void it.
type plan struct {
	ID    string     `bson:"_id"`
	State string     `bson:"state"` // locking, locked, applied, aborted
	At    time.Time  `bson:"at"`
	Steps []planStep `bson:"steps"`
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

const (
	planLocking = "locking"
	planLocked  = "locked"
	planApplied = "applied"
	planAborted = "aborted"
)

// newPlan checks that the steps of a group can be locked and applied in
// order: a record changed by several steps is changed by consecutive
// versions (a chain), locked once at the first; a record the group creates
// is changed by no other step (it cannot be locked before it exists).
func newPlan(planID string, muts []mutation, entries []audit.Entry) (plan, error) {
	p := plan{ID: planID, State: planLocking, At: time.Now().UTC()}
	next := map[string]int64{} // coll/id -> version the next step must expect
	last := map[string]int{}   // coll/id -> index of its last step
	created := map[string]bool{}
	for i, m := range muts {
		k := m.coll + "/" + m.id
		if created[k] {
			return p, fmt.Errorf("group step %d changes %s, which the group creates", i, k)
		}
		if m.before == nil {
			// A create needs no lock (nobody else knows its fresh id) but its
			// redacted fields could not be restored from the plan on roll-forward.
			if len(redacted[m.coll]) > 0 {
				return p, fmt.Errorf("a group may not create a record of %s", m.coll)
			}
			if _, ok := next[k]; ok {
				return p, fmt.Errorf("group step %d creates %s, which an earlier step changes", i, k)
			}
			created[k] = true
		}
		if v, ok := next[k]; ok && v != m.version {
			return p, fmt.Errorf("group step %d changes %s at version %d, want %d (steps of one record must chain)", i, k, m.version, v)
		}
		next[k] = m.version + 1
		last[k] = i
		p.Steps = append(p.Steps, planStep{Entry: entries[i], Coll: m.coll, ID: m.id, Version: m.version})
	}
	for i := range p.Steps {
		p.Steps[i].More = last[p.Steps[i].Coll+"/"+p.Steps[i].ID] != i
	}
	return p, nil
}

// writePlan: persist the plan, lock every record at its expected version,
// mark the plan locked (from here on recovery rolls it forward), apply each
// step as a single ordered write carrying the plan id, mark it applied.
func (s *Store) writePlan(ctx context.Context, planID string, muts []mutation, entries []audit.Entry) error {
	p, err := newPlan(planID, muts, entries)
	if err != nil {
		return err
	}
	if _, err := s.coll(collPlans).InsertOne(ctx, p); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
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
		k := st.Coll + "/" + st.ID
		if locked[k] || st.creates() {
			continue
		}
		// Past half the lease, recovery may be about to void this plan: give
		// up rather than race it.
		if time.Since(p.At) > s.lease/2 {
			return fail(&Error{Code: CodeUnavailable, Message: "the store is too slow to complete the write; nothing was changed, try again", Retryable: true})
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
		return err
	}
	copy(entries, done)
	return nil
}

// rollForward applies every step of a locked plan that has not landed yet,
// and returns the steps' entries as written. It is idempotent: run by the
// writer, and again by recovery after a crash, or by both at once. A step has
// landed when its record is past the step's version: a locked record is
// written by its plan only, and once released it may move on, never back.
func (s *Store) rollForward(ctx context.Context, p plan) ([]audit.Entry, error) {
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
			if v, _ := cur[fieldVersion].(int64); v > st.Version {
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
			if _, err := s.coll(collChangeLog).InsertOne(ctx, e); err != nil && !mongo.IsDuplicateKeyError(err) {
				return nil, err
			}
			if err := s.at("step-entry"); err != nil {
				return nil, err
			}
			after := make(bson.M, len(e.After))
			for k, v := range e.After {
				after[k] = v
			}
			if !st.creates() {
				for _, f := range redacted[st.Coll] {
					after[f] = cur[f]
				}
			}
			err = s.writeRecord(ctx, mutation{coll: st.Coll, id: st.ID, before: e.Before, after: after, version: st.Version}, e.ID, p.ID, st.More)
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
		if err := s.setEntryState(ctx, e.ID, audit.StateApplied); err != nil {
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
func (s *Store) abortPlan(ctx context.Context, planID string) error {
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
	for _, st := range p.Steps {
		if _, err := s.guarded(ctx, st.Coll, bson.M{"_id": st.ID, fieldLockedBy: planID}, func(f bson.M) (*mongo.UpdateResult, error) {
			return s.coll(st.Coll).UpdateOne(ctx, f, bson.M{"$unset": bson.M{fieldLockedBy: ""}})
		}); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) setPlanState(ctx context.Context, id, state string) error {
	_, err := s.coll(collPlans).UpdateOne(ctx, bson.M{"_id": id}, bson.M{"$set": bson.M{"state": state}})
	return err
}

// touchKeyUsage records when a key was last used. Usage is telemetry, not a
// change of the key: it lives in its own collection and has no change entry.
func (s *Store) touchKeyUsage(ctx context.Context, keyID string, at time.Time) error {
	_, err := s.coll(collKeyUsage).UpdateOne(ctx, bson.M{"_id": keyID},
		bson.M{"$set": bson.M{"last_used_at": at}}, options.UpdateOne().SetUpsert(true))
	return err
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
func (s *Store) putBlob(ctx context.Context, fileID, filename string, r io.Reader, metadata bson.M) (int64, error) {
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
