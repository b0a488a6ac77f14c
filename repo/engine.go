package repo

import (
	"context"
	"io"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger"
)

// The domain's door to the engine (package ledger): every write and every
// query of the domain goes through these, under the names the domain's
// files use.

// mutation is one record change handed to the write path (ledger.Mutation).
type mutation = ledger.Mutation

// precheck is a condition the write path re-checks where no other write of
// the process can slip in (ledger.Precheck).
type precheck = ledger.Precheck

// Bookkeeping fields every stored record carries; they are not part of a
// change's before/after.
const (
	fieldVersion    = ledger.FieldVersion
	fieldLastChange = ledger.FieldLastChange
	fieldLockedBy   = ledger.FieldLockedBy
)

// write applies muts as one unit and returns their change entries, in order.
func (s *Store) write(ctx context.Context, muts ...mutation) ([]audit.Entry, error) {
	return s.Engine.Write(ctx, muts...)
}

// writeChecked is write with a precondition (see precheck).
func (s *Store) writeChecked(ctx context.Context, chk precheck, muts ...mutation) ([]audit.Entry, error) {
	return s.Engine.WriteChecked(ctx, chk, muts...)
}

// writeGroup writes the mutations build returns as one unit, building them
// again after a lost race.
func (s *Store) writeGroup(ctx context.Context, build func() ([]mutation, error)) error {
	return s.Engine.WriteGroup(ctx, build)
}

// isConflict reports whether err is a conflict (ledger.IsConflict).
func isConflict(err error) bool { return ledger.IsConflict(err) }

// coll is one of the store's collections, for reads.
func (s *Store) coll(name string) *mongo.Collection { return s.Collection(name) }

// find is Find on coll, through the engine's index where it answers.
func (s *Store) find(ctx context.Context, coll string, filter bson.M, opts ...*options.FindOptionsBuilder) (*ledger.Found, error) {
	return s.Engine.Find(ctx, coll, filter, opts...)
}

// findAll decodes every record of coll matching filter into out.
func (s *Store) findAll(ctx context.Context, coll string, filter bson.M, opts *options.FindOptionsBuilder, out any) error {
	return s.Engine.FindAll(ctx, coll, filter, opts, out)
}

// findOne reads one record of coll.
func (s *Store) findOne(ctx context.Context, coll string, filter bson.M, opts ...*options.FindOneOptionsBuilder) *mongo.SingleResult {
	return s.Engine.FindOne(ctx, coll, filter, opts...)
}

// count counts the records of coll matching filter.
func (s *Store) count(ctx context.Context, coll string, filter bson.M) (int64, error) {
	return s.Engine.Count(ctx, coll, filter)
}

// openSession records a session opened by start_session.
func (s *Store) openSession(ctx context.Context, doc bson.M) error { return s.OpenSession(ctx, doc) }

// touchKeyUsage records when a key was last used.
func (s *Store) touchKeyUsage(ctx context.Context, keyID string, at time.Time) error {
	return s.TouchKeyUsage(ctx, keyID, at)
}

// putBlob streams r into the GridFS bucket as file fileID.
func (s *Store) putBlob(ctx context.Context, fileID, filename string, r io.Reader, metadata bson.M) (int64, error) {
	return s.PutBlob(ctx, fileID, filename, r, metadata)
}

// The engine's reports, under the names the service's packages use.
type (
	// ChangeFilter selects change entries (ledger.ChangeFilter).
	ChangeFilter = ledger.ChangeFilter
	// RecoveryReport says what a recovery pass did (ledger.RecoveryReport).
	RecoveryReport = ledger.RecoveryReport
	// Violation is a broken invariant Verify found (ledger.Violation).
	Violation = ledger.Violation
	// InFlight is a change still being written (ledger.InFlight).
	InFlight = ledger.InFlight
	// VerifyResult is Verify's full report (ledger.VerifyResult).
	VerifyResult = ledger.VerifyResult
)
