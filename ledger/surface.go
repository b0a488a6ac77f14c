package ledger

import (
	"context"
	"errors"
	"io"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
)

// The engine's surface to the domain, in one place: writes (a set of
// mutations as one unit, with the actor and session from the context, the
// idempotency tag and the events the domain computed for the change among
// the mutations), reads (through the engine's index where it answers, the
// store otherwise), and the operational documents it keeps for the domain.

// Precheck is a condition the write path re-checks where no other write of
// the process can slip in between the check and the write (see precheck).
type Precheck = precheck

// Found is what Find returns: the records the index chose, or the store's
// cursor; All decodes them.
type Found = found

// Write applies muts as one unit and returns their change entries, in
// order: one mutation, or a group, is all or nothing on every write mode.
// The actor (user, agent, session, tool, idempotency tag) comes from ctx
// (audit.WithActor); the outbox's events are mutations of the group like
// any other, so they land with the change or not at all.
func (s *Engine) Write(ctx context.Context, muts ...Mutation) ([]audit.Entry, error) {
	return s.counted(s.writeChecked(ctx, nil, muts...))
}

// WriteChecked is Write with a precondition checked where no other write
// of this process can come between it and the write.
func (s *Engine) WriteChecked(ctx context.Context, chk Precheck, muts ...Mutation) ([]audit.Entry, error) {
	return s.counted(s.writeChecked(ctx, chk, muts...))
}

// WriteGroup writes the mutations build returns as one unit. build reads
// fresh state each time: a lost race (another call changed one of the
// records) runs it again.
func (s *Engine) WriteGroup(ctx context.Context, build func() ([]Mutation, error)) error {
	const attempts = 5
	for attempt := 1; ; attempt++ {
		muts, err := build()
		if err != nil {
			return err
		}
		_, err = s.counted(s.writeChecked(ctx, nil, muts...))
		if isConflict(err) && errors.Is(err, ErrConflict) && attempt < attempts {
			time.Sleep(time.Duration(attempt*attempt) * 2 * time.Millisecond)
			continue
		}
		return err
	}
}

// IsConflict reports whether err is a conflict (a lost race or a record
// locked by a group in progress).
func IsConflict(err error) bool { return isConflict(err) }

// Find runs a query on coll, answered by the engine's index where it can.
func (s *Engine) Find(ctx context.Context, coll string, filter bson.M, opts ...*options.FindOptionsBuilder) (*Found, error) {
	return s.find(ctx, coll, filter, opts...)
}

// FindAll decodes every record of coll matching filter into out.
func (s *Engine) FindAll(ctx context.Context, coll string, filter bson.M, opts *options.FindOptionsBuilder, out any) error {
	return s.findAll(ctx, coll, filter, opts, out)
}

// FindOne reads one record of coll, through the index where it answers.
func (s *Engine) FindOne(ctx context.Context, coll string, filter bson.M, opts ...*options.FindOneOptionsBuilder) *mongo.SingleResult {
	return s.findOne(ctx, coll, filter, opts...)
}

// FetchByID reads the records ids of coll by _id, in order, a few at a
// time (the record cache first); a record not stored is left out.
func (s *Engine) FetchByID(ctx context.Context, coll string, ids []string) ([]bson.Raw, error) {
	return s.fetch(ctx, coll, ids, nil, nil)
}

// DecodeAll decodes raws into out, a pointer to a slice.
func DecodeAll(raws []bson.Raw, out any) error { return decodeAll(raws, out) }

// Count counts the records of coll matching filter.
func (s *Engine) Count(ctx context.Context, coll string, filter bson.M) (int64, error) {
	return s.count(ctx, coll, filter)
}

// OpenSession records a session opened by the domain (bookkeeping: no
// change entry) and binds it to its agent.
func (s *Engine) OpenSession(ctx context.Context, doc bson.M) error { return s.openSession(ctx, doc) }

// TouchKeyUsage records when a key was last used (telemetry, no change entry).
func (s *Engine) TouchKeyUsage(ctx context.Context, keyID string, at time.Time) error {
	return s.touchKeyUsage(ctx, keyID, at)
}

// PutBlob streams r into the GridFS bucket as file fileID and returns its
// length; the file exists only once all its bytes do.
func (s *Engine) PutBlob(ctx context.Context, fileID, filename string, r io.Reader, metadata bson.M) (int64, error) {
	return s.putBlob(ctx, fileID, filename, r, metadata)
}
