package ledger

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/embedded"
	"outreach/indexes"
	"outreach/ledger/index"
)

// The engine's tests write records of a tiny schema of their own: users
// (a name and an email), and the notes, coverage and email threads the
// index keeps. The engine knows no kind of record by name; the domain's own
// schema is tested in package repo.

const (
	collUsers    = "users"
	collNotes    = "notes"
	collCoverage = "coverage"
	collEmails   = "email_threads"
)

// testSchema is what the tests register with the engine at Open.
var testSchema = Schema{
	Kinds:   map[string]string{collUsers: "user", collNotes: "note", collCoverage: "coverage", collEmails: "email thread"},
	Records: []string{collUsers, collNotes, collCoverage, collEmails},
	Index: map[string]index.Spec{
		collNotes:     {Drop: []string{"content"}, Keys: []string{"links.contact_id", "links.outlet_id", "links.opportunity_id", "links.id"}},
		collChangeLog: {Drop: []string{"before", "after", "sealed"}, Keys: []string{"record_id", "session_id", "idempotency_key", "reverts"}},
	},
}

// openDB connects to uri and opens the engine on database with the test
// schema and the service's index list, as the domain's Open does.
func openDB(ctx context.Context, uri, database string, opts Options) (*Engine, error) {
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetTimeout(30 * time.Second).
		SetBSONOptions(&options.BSONOptions{DefaultDocumentM: true}))
	if err != nil {
		return nil, err
	}
	probeKey := uri
	if opts.Exclusive {
		probeKey = "embedded"
	}
	opts.Schema, opts.ApplyIndexes, opts.TextColl = testSchema, indexes.Apply, collNotes
	s, err := Open(ctx, client, database, probeKey, opts)
	if err != nil {
		client.Disconnect(context.WithoutCancel(ctx))
		return nil, err
	}
	return s, nil
}

// closeDB closes the engine and its connection, as a process stopping.
func closeDB(ctx context.Context, s *Engine) {
	s.Close(ctx)
	s.client.Disconnect(ctx)
}

// User is the tests' record: a team member's name and email.
type User struct {
	ID         string     `bson:"_id"`
	CreatedAt  time.Time  `bson:"created_at"`
	UpdatedAt  time.Time  `bson:"updated_at"`
	ArchivedAt *time.Time `bson:"archived_at"`
	Version    int64      `bson:"version"`
	LastChange string     `bson:"last_change"`
	Name       string     `bson:"name"`
	Email      string     `bson:"email"`
}

// now is the tests' clock, truncated to what BSON dates keep.
func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// CreateUser creates a user through the write path.
func (s *Engine) CreateUser(ctx context.Context, name, email, _ string) (*User, error) {
	u := &User{ID: uuid.NewString(), Name: name, Email: strings.ToLower(email)}
	t := now()
	u.CreatedAt, u.UpdatedAt = t, t
	after := bson.M{"_id": u.ID, "created_at": t, "updated_at": t, "archived_at": nil, "name": u.Name, "email": u.Email}
	entries, err := s.write(ctx, Mutation{Coll: collUsers, ID: u.ID, Action: audit.ActionCreate, After: after})
	if err != nil {
		return nil, err
	}
	u.Version, u.LastChange = 1, entries[0].ID
	return u, nil
}

// prepare reads user id, lets fn change it, and returns the user and the
// mutation that stores it (nil when fn changed nothing).
func prepare(ctx context.Context, s *Engine, coll, id, action string, fn func(*User) error) (*User, *Mutation, error) {
	var raw bson.M
	if err := s.coll(coll).FindOne(ctx, bson.M{"_id": id}).Decode(&raw); err != nil {
		return nil, nil, DriverErr(err, s.schema.Kind(coll), id)
	}
	u := new(User)
	if err := DecodeM(raw, u); err != nil {
		return nil, nil, err
	}
	if err := fn(u); err != nil {
		return nil, nil, err
	}
	before := Strip(raw)
	after := Strip(bson.M{"_id": u.ID, "created_at": u.CreatedAt, "updated_at": u.UpdatedAt, "archived_at": u.ArchivedAt, "name": u.Name, "email": u.Email})
	cmp := Strip(before)
	delete(cmp, "updated_at")
	delete(after, "updated_at")
	if SameState(cmp, after) {
		return u, nil, nil
	}
	u.UpdatedAt = now()
	after["updated_at"] = u.UpdatedAt
	return u, &Mutation{Coll: coll, ID: id, Action: action, Before: before, After: after, Version: u.Version}, nil
}

// modify reads user id, lets fn change it and writes it guarded by the
// version it read; a lost race runs fn again on the fresh state.
func modify(ctx context.Context, s *Engine, coll, id, action string, fn func(*User) error) (*User, error) {
	const attempts = 5
	for attempt := 1; ; attempt++ {
		u, m, err := prepare(ctx, s, coll, id, action, fn)
		if err != nil || m == nil {
			return u, err
		}
		entries, err := s.write(ctx, *m)
		if isConflict(err) && errors.Is(err, ErrConflict) && attempt < attempts {
			time.Sleep(time.Duration(attempt*attempt) * 2 * time.Millisecond)
			continue
		}
		if err != nil {
			return nil, err
		}
		u.Version, u.LastChange = u.Version+1, entries[0].ID
		return u, nil
	}
}

// openTestStoreB opens an engine on a fresh embedded store for a benchmark.
func openTestStoreB(b *testing.B) (*Engine, context.Context) {
	ctx := audit.WithActor(context.Background(), audit.Actor{UserID: "u-bench", AgentID: "a-bench", SessionID: "s-bench", Tool: "bench"})
	es, err := embedded.Start(ctx, embedded.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(es.Close)
	s, err := openDB(ctx, es.URI, "bench", Options{Exclusive: true, PrepareStore: es.IndexIDs})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { closeDB(context.Background(), s) })
	return s, ctx
}
