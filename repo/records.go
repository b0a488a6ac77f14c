package repo

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger"
)

// Meta is what every stored record carries. Version and LastChange tie the
// record to the change entry that produced its state (see write.go).
type Meta struct {
	ID         string     `bson:"_id" json:"id"`
	CreatedAt  time.Time  `bson:"created_at" json:"created_at"`
	UpdatedAt  time.Time  `bson:"updated_at" json:"updated_at"`
	ArchivedAt *time.Time `bson:"archived_at" json:"archived_at"`
	Version    int64      `bson:"version" json:"-"`
	LastChange string     `bson:"last_change" json:"-"`
	LockedBy   string     `bson:"locked_by,omitempty" json:"-"`
}

func (m *Meta) meta() *Meta { return m }

// Archived reports whether the record is archived.
func (m *Meta) Archived() bool { return m.ArchivedAt != nil }

type record interface{ meta() *Meta }

// Now is the service's clock, truncated to what BSON dates keep.
func Now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// Insert creates rec in coll through the write path.
func Insert[P interface {
	*T
	record
}, T any](ctx context.Context, s *Store, coll string, rec P) error {
	m := rec.meta()
	if m.ID == "" {
		m.ID = uuid.NewString()
	}
	t := Now()
	m.CreatedAt, m.UpdatedAt, m.ArchivedAt = t, t, nil
	after, err := ledger.ToM(rec)
	if err != nil {
		return err
	}
	entries, err := s.write(ctx, mutation{Coll: coll, ID: m.ID, Action: audit.ActionCreate, After: after})
	if err != nil {
		return err
	}
	m.Version, m.LastChange = 1, entries[0].ID
	return nil
}

// Find returns the record id of coll, or a not_found error naming its kind.
func Find[P interface {
	*T
	record
}, T any](ctx context.Context, s *Store, coll, id string) (P, error) {
	if err := ledger.CheckID(id); err != nil {
		return nil, NotFound(kinds[coll], id)
	}
	rec := P(new(T))
	err := s.ByID(ctx, coll, id, rec)
	if err != nil {
		return nil, ledger.DriverErr(err, kinds[coll], id)
	}
	return rec, nil
}

// Modify reads record id of coll, lets fn change it, and writes it through
// the write path guarded by the version it read. A lost race is retried on
// the fresh state (fn runs again), so concurrent updates never lose a write.
// fn returning an error writes nothing. An update that changes nothing writes
// nothing either.
//
// The updates of one record made in this process take turns (see
// recordTurns): each reads the record after the one before it wrote, so
// concurrent calls that change different fields of a shared record (eight
// agents updating the settings) each apply their own fields to the record
// as it stands, instead of losing the race and running out of retries. The
// version guard still decides: another process, a rollback or a group may
// write between the read and the write.
func Modify[P interface {
	*T
	record
}, T any](ctx context.Context, s *Store, coll, id, action string, fn func(P) error) (P, error) {
	const attempts = 5
	release, err := s.turns.take(ctx, coll+"/"+id)
	if err != nil {
		return nil, err
	}
	defer release()
	for attempt := 1; ; attempt++ {
		var raw bson.M
		if err := ledger.CheckID(id); err != nil {
			return nil, NotFound(kinds[coll], id)
		}
		if err := s.coll(coll).FindOne(ctx, bson.M{"_id": id}).Decode(&raw); err != nil {
			return nil, ledger.DriverErr(err, kinds[coll], id)
		}
		rec := P(new(T))
		if err := ledger.DecodeM(raw, rec); err != nil {
			return nil, err
		}
		if err := fn(rec); err != nil {
			return nil, err
		}
		before := ledger.Strip(raw)
		after, err := ledger.ToM(rec)
		if err != nil {
			return nil, err
		}
		delete(after, "updated_at")
		cmp := ledger.Strip(before)
		delete(cmp, "updated_at")
		if ledger.SameState(cmp, after) {
			return rec, nil
		}
		m := rec.meta()
		m.UpdatedAt = Now()
		after["updated_at"] = m.UpdatedAt
		entries, err := s.write(ctx, mutation{Coll: coll, ID: id, Action: action, Before: before, After: after, Version: m.Version})
		if isConflict(err) && errors.Is(err, ErrConflict) && attempt < attempts {
			time.Sleep(time.Duration(attempt*attempt) * 2 * time.Millisecond)
			continue
		}
		if err != nil {
			return nil, err
		}
		m.Version, m.LastChange = m.Version+1, entries[0].ID
		return rec, nil
	}
}

// Archive sets archived_at of a record; archiving an archived record is an error.
func Archive[P interface {
	*T
	record
}, T any](ctx context.Context, s *Store, coll, id string, check func(P) error) (P, error) {
	return Modify(ctx, s, coll, id, audit.ActionArchive, func(rec P) error {
		m := rec.meta()
		if m.ArchivedAt != nil {
			return Errorf(CodeFailedPrecondition, "%s %s is already archived (since %s); restore it first", kinds[coll], id, m.ArchivedAt.Format(time.RFC3339))
		}
		if check != nil {
			if err := check(rec); err != nil {
				return err
			}
		}
		t := Now()
		m.ArchivedAt = &t
		return nil
	})
}

// Restore clears archived_at; restoring an active record is an error.
func Restore[P interface {
	*T
	record
}, T any](ctx context.Context, s *Store, coll, id string) (P, error) {
	return Modify(ctx, s, coll, id, audit.ActionRestore, func(rec P) error {
		m := rec.meta()
		if m.ArchivedAt == nil {
			return Errorf(CodeFailedPrecondition, "%s %s is not archived", kinds[coll], id)
		}
		m.ArchivedAt = nil
		return nil
	})
}

// MustExist checks that each id names an active record of coll; field names
// the argument in the error.
func (s *Store) MustExist(ctx context.Context, coll, field string, ids ...string) error {
	for _, id := range ids {
		if err := ledger.CheckID(id); err != nil {
			return Invalid(field, "%q is not a UUID", id)
		}
		var m Meta
		err := s.coll(coll).FindOne(ctx, bson.M{"_id": id}).Decode(&m)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return NotFoundField(field, kinds[coll], id)
		}
		if err != nil {
			return ledger.DriverErr(err, kinds[coll], id)
		}
		if m.ArchivedAt != nil {
			return &Error{Code: CodeNotFound, Field: field, Message: fmt.Sprintf("%s: %s %s is archived; restore it first", field, kinds[coll], id)}
		}
	}
	return nil
}

// Ref is an optional reference, given in field, to a record of coll.
type Ref struct {
	Coll, Field string
	ID          *string
}

// CheckRefs checks that every reference given (not nil, not empty) and every
// contact id names an active record.
func (s *Store) CheckRefs(ctx context.Context, refs []Ref, contactIDs *[]string) error {
	for _, r := range refs {
		if r.ID != nil && *r.ID != "" {
			if err := s.MustExist(ctx, r.Coll, r.Field, *r.ID); err != nil {
				return err
			}
		}
	}
	if contactIDs != nil {
		seen := map[string]bool{}
		for i, id := range *contactIDs {
			if seen[id] {
				continue // looked up already
			}
			seen[id] = true
			if err := s.MustExist(ctx, CollContacts, fmt.Sprintf("contact_ids[%d]", i), id); err != nil {
				return err
			}
		}
	}
	return nil
}

// isZero reports whether v is its type's zero value.
func isZero(v any) bool { return v == nil || reflect.ValueOf(v).IsZero() }

// recordTurns queues the updates of one record made in this process, so
// that they do not race each other to the version guard. A turn is held for
// one read-modify-write. Waiting is bounded: a caller that waited
// turnWait (a turn held across a nested update of another record, say)
// goes on without its turn, and the version guard and retries decide as
// they do between processes. So turns never deadlock, and only order.
type recordTurns struct {
	mu sync.Mutex
	m  map[string]*recordTurn
}

type recordTurn struct {
	slot chan struct{} // holds a token while the turn is taken
	refs int           // holders and waiters, under recordTurns.mu
}

// turnWait bounds how long an update waits for its record's turn.
const turnWait = 5 * time.Second

// take waits for the turn of key and returns its release.
func (r *recordTurns) take(ctx context.Context, key string) (func(), error) {
	r.mu.Lock()
	if r.m == nil {
		r.m = map[string]*recordTurn{}
	}
	t := r.m[key]
	if t == nil {
		t = &recordTurn{slot: make(chan struct{}, 1)}
		r.m[key] = t
	}
	t.refs++
	r.mu.Unlock()
	leave := func() {
		r.mu.Lock()
		if t.refs--; t.refs == 0 {
			delete(r.m, key)
		}
		r.mu.Unlock()
	}
	release := func() { <-t.slot; leave() }
	select {
	case t.slot <- struct{}{}:
		return release, nil // the usual case: nobody else is updating the record
	default:
	}
	timer := time.NewTimer(turnWait)
	defer timer.Stop()
	select {
	case t.slot <- struct{}{}:
		return release, nil
	case <-timer.C:
		leave()
		return func() {}, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

// DistinctIDs returns the ids of the records of coll matching filter.
func (s *Store) DistinctIDs(ctx context.Context, coll string, filter bson.M) ([]string, error) {
	cur, err := s.find(ctx, coll, filter, options.Find().SetProjection(bson.M{"_id": 1}))
	if err != nil {
		return nil, err
	}
	var docs []struct {
		ID string `bson:"_id"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, err
	}
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	return ids, nil
}

// FindProjected decodes every document of coll matching filter, with
// projection, into out (a pointer to a slice).
func (s *Store) FindProjected(ctx context.Context, coll string, filter, projection bson.M, out any) error {
	opts := options.Find()
	if projection != nil {
		opts.SetProjection(projection)
	}
	return s.findAll(ctx, coll, filter, opts, out)
}

// MaxFigure bounds an audience figure (reach, audience_size) on input: a
// trillion, far enough from the int64 limit that sums of them never wrap.
const MaxFigure = 1_000_000_000_000

// NonEmpty is ids without empty strings.
func NonEmpty(ids ...string) []string {
	out := []string{}
	for _, id := range ids {
		if id != "" {
			out = append(out, id)
		}
	}
	return out
}

// SetText sets *dst to the trimmed *v when v is given.
func SetText(dst *string, v *string) {
	if v != nil {
		*dst = strings.TrimSpace(*v)
	}
}

// Record is what a stored record is: a type that embeds Meta, as an area
// names it in its own helpers over the core's.
type Record = record

// MetaOf returns the bookkeeping fields of rec.
func MetaOf(rec Record) *Meta { return rec.meta() }
