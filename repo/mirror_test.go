package repo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/embedded"
	"outreach/ledger"
)

// Every list the tools serve gives the same page and total through the
// service's indexes as through the store's own query, after random
// creates, updates, archives, groups, a rollback, failed writes and a
// restart that rebuilds the indexes.
func TestIndexesAnswerAsTheStoreThroughWritesFaultsAndRestart(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("the service keeps its own indexes for the embedded store only")
	}
	ctx := testCtx()
	dir := t.TempDir()
	es, err := embedded.Start(context.Background(), embedded.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	open := func() *Store {
		s, err := Open(context.Background(), es.URI, "mirror", Options{Logger: zerolog.Nop(), Exclusive: true, PrepareStore: es.IndexIDs})
		if err != nil {
			t.Fatal(err)
		}
		if !s.Internals().IndexKept() {
			t.Fatal("the exclusive embedded store keeps no indexes")
		}
		waitIndexes(t, s)
		return s
	}
	s := open()
	rng := rand.New(rand.NewPCG(7, 18))
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = uuid.NewString()
		}
		return out
	}
	contacts, outlets, opps := ids(4), ids(2), ids(3)
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	day := func() time.Time { return base.Add(time.Duration(rng.IntN(40)) * 24 * time.Hour) }
	var notes, coverage, threads []string
	for _, c := range contacts {
		if _, err := s.Fixture(ctx, CollContacts, map[string]any{"_id": c, "name": "Contact " + c, "affiliations": bson.A{}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range outlets {
		if _, err := s.Fixture(ctx, CollOutlets, map[string]any{"_id": o, "name": "Outlet " + o}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range opps {
		if _, err := s.Fixture(ctx, CollOpportunities, map[string]any{"_id": p, "title": "Opportunity " + p, "stage": "identified", "contact_ids": bson.A{}}); err != nil {
			t.Fatal(err)
		}
	}
	create := func() {
		links := bson.A{}
		for range rng.IntN(3) + 1 {
			l := bson.M{"id": uuid.NewString(), "created_at": base}
			switch rng.IntN(3) {
			case 0:
				l["contact_id"] = pick(contacts)
			case 1:
				l["outlet_id"] = pick(outlets)
			default:
				l["opportunity_id"] = pick(opps)
			}
			links = append(links, l)
		}
		id, err := s.Fixture(ctx, CollNotes, map[string]any{"type": pick([]string{"call", "meeting"}), "title": "t", "content": "c", "occurred_at": day(), "links": links})
		if err != nil {
			t.Fatal(err)
		}
		notes = append(notes, id)
		cov := map[string]any{"title": "cov", "published_at": day(), "type": "article", "contact_ids": bson.A{pick(contacts)}, "outlet_id": pick(outlets)}
		if rng.IntN(2) == 0 {
			cov["opportunity_id"] = pick(opps)
		}
		if id, err = s.Fixture(ctx, CollCoverage, cov); err != nil {
			t.Fatal(err)
		}
		coverage = append(coverage, id)
		msgs := bson.A{}
		last := base
		for range rng.IntN(3) + 1 {
			d := day()
			if d.After(last) {
				last = d
			}
			msgs = append(msgs, bson.M{"id": uuid.NewString(), "message_id": uuid.NewString(), "from": "a@x.org", "to": bson.A{}, "subject": "s", "date": d, "body_text": "b", "contact_ids": bson.A{pick(contacts)}})
		}
		if id, err = s.Fixture(ctx, CollEmails, map[string]any{"subject": "s", "messages": msgs, "contact_ids": bson.A{}, "opportunity_links": bson.A{bson.M{"id": uuid.NewString(), "opportunity_id": pick(opps), "linked_at": base}}, "last_message_at": last}); err != nil {
			t.Fatal(err)
		}
		threads = append(threads, id)
	}
	update := func(coll, id string, set bson.M) error {
		var cur bson.M
		if err := s.coll(coll).FindOne(context.Background(), bson.M{"_id": id}).Decode(&cur); err != nil {
			t.Fatal(err)
		}
		v, _ := ledger.AsInt(cur[fieldVersion])
		before := ledger.Strip(cur)
		after := ledger.Strip(cur)
		for k, x := range set {
			after[k] = x
		}
		_, err := s.write(ctx, mutation{Coll: coll, ID: id, Action: "update", Before: before, After: after, Version: v})
		return err
	}
	compare := func(stage string) {
		t.Helper()
		answered := 0
		for _, q := range listQueries(contacts, outlets, opps, base) {
			ids, total, ok := s.Internals().IndexIDs(q.coll, q.filter, q.sort, q.skip, q.limit)
			if !ok {
				t.Errorf("%s: %s %v: the index does not answer", stage, q.coll, q.filter)
				continue
			}
			answered++
			want, wantTotal, err := s.Internals().StoreIDs(context.Background(), q.coll, q.filter, q.sort, q.skip, q.limit)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids, want) || total != wantTotal {
				t.Errorf("%s: %s %v sort %v skip %d limit %d: index %v (%d), store %v (%d)", stage, q.coll, q.filter, q.sort, q.skip, q.limit, ids, total, want, wantTotal)
			}
		}
		if answered == 0 {
			t.Fatalf("%s: no query answered", stage)
		}
	}
	for range 30 {
		create()
	}
	compare("after creates")
	for range 20 {
		i := rng.IntN(len(notes))
		if err := update(CollNotes, notes[i], bson.M{"occurred_at": day(), "links": bson.A{bson.M{"id": uuid.NewString(), "contact_id": pick(contacts), "created_at": base}}}); err != nil {
			t.Fatal(err)
		}
		if err := update(CollCoverage, coverage[rng.IntN(len(coverage))], bson.M{"archived_at": base, "outlet_id": pick(outlets)}); err != nil {
			t.Fatal(err)
		}
	}
	compare("after updates and archives")
	// A group (the serial plan) and a rollback of the whole session.
	sctx := testCtxSession("s-group")
	var muts []mutation
	for _, id := range notes[:5] {
		var cur bson.M
		if err := s.coll(CollNotes).FindOne(context.Background(), bson.M{"_id": id}).Decode(&cur); err != nil {
			t.Fatal(err)
		}
		v, _ := ledger.AsInt(cur[fieldVersion])
		after := ledger.Strip(cur)
		after["occurred_at"] = base.Add(-24 * time.Hour)
		muts = append(muts, mutation{Coll: CollNotes, ID: id, Action: "update", Before: ledger.Strip(cur), After: after, Version: v})
	}
	if _, err := s.write(sctx, muts...); err != nil {
		t.Fatal(err)
	}
	compare("after a group")
	if _, err := s.RollbackSession(sctx, "s-group", RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	compare("after a session rollback")
	// Writes that fail at each step, with recovery after each.
	for _, point := range []string{"entry", "record", "entry-insert", "applied"} {
		crashAt(s, point, 1)
		err := update(CollNotes, notes[rng.IntN(len(notes))], bson.M{"links": bson.A{bson.M{"id": uuid.NewString(), "outlet_id": pick(outlets), "created_at": base}}})
		*s.Internals().Hook = nil
		if err == nil {
			t.Fatalf("a write crashed at %s succeeded", point)
		}
		if _, err := s.Recover(context.Background(), true); err != nil {
			t.Fatal(err)
		}
		waitIndexes(t, s)
		compare("after a crash at " + point)
	}
	for range 10 {
		create()
	}
	compare("after more creates")
	before := map[string][]string{}
	for _, q := range listQueries(contacts, outlets, opps, base) {
		ids, _, _ := s.Internals().IndexIDs(q.coll, q.filter, q.sort, q.skip, q.limit)
		before[fmt.Sprint(q)] = ids
	}
	// A fetch the index covers gives what the store gives for the same projection.
	proj := projection(TrimCoverage)
	got, ok := s.Internals().Covered(CollCoverage, coverage, proj)
	if !ok || len(got) != len(coverage) {
		t.Fatalf("the index does not cover %v (%v, %d of %d)", proj, ok, len(got), len(coverage))
	}
	for i, id := range coverage {
		var want, have bson.M
		if err := s.coll(CollCoverage).FindOne(context.Background(), bson.M{"_id": id}, options.FindOne().SetProjection(proj)).Decode(&want); err != nil {
			t.Fatal(err)
		}
		if err := ledger.DecodeRaw(got[i], &have); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(want, have) {
			t.Errorf("covered %s: index %v, store %v", id, have, want)
		}
	}
	for _, p := range []bson.M{{"summary": 1}, {"archived_at": 0}, {"links.contact_id": 1}} {
		if _, ok := s.Internals().Covered(CollCoverage, coverage[:1], p); ok {
			t.Errorf("the index covered %v, which it cannot", p)
		}
	}
	s.Close(context.Background())
	s = open()
	defer s.Close(context.Background())
	compare("after a restart")
	for _, q := range listQueries(contacts, outlets, opps, base) {
		if ids, _, _ := s.Internals().IndexIDs(q.coll, q.filter, q.sort, q.skip, q.limit); !slices.Equal(ids, before[fmt.Sprint(q)]) {
			t.Errorf("%v: rebuilt index %v, before the restart %v", q.filter, ids, before[fmt.Sprint(q)])
		}
	}
}

// mirrorQuery is a find the index may answer: the collection, filter,
// sort, skip and limit (0: no limit).
type mirrorQuery struct {
	coll        string
	filter      bson.M
	sort        bson.D
	skip, limit int64
}

func testCtxSession(session string) context.Context {
	return audit.WithActor(context.Background(), audit.Actor{UserID: "u-test", AgentID: "a-test", SessionID: session, Tool: "test"})
}

// listQueries are the queries the list tools, the interaction log and the
// dossiers make, over the given ids.
func listQueries(contacts, outlets, opps []string, base time.Time) []mirrorQuery {
	byDate := func(f string) bson.D { return bson.D{{Key: f, Value: -1}, {Key: "_id", Value: -1}} }
	var qs []mirrorQuery
	for _, c := range contacts {
		for _, page := range [][2]int64{{0, 50}, {0, 3}, {3, 3}, {100, 10}} {
			qs = append(qs,
				mirrorQuery{coll: CollNotes, filter: bson.M{"links.contact_id": c, "archived_at": nil}, sort: byDate("occurred_at"), skip: page[0], limit: page[1]},
				mirrorQuery{coll: CollCoverage, filter: bson.M{"contact_ids": c, "archived_at": nil}, sort: byDate("published_at"), skip: page[0], limit: page[1]},
				mirrorQuery{coll: CollEmails, filter: bson.M{"messages.contact_ids": c, "archived_at": nil}, sort: byDate("last_message_at"), skip: page[0], limit: page[1]},
			)
		}
		qs = append(qs,
			mirrorQuery{coll: CollNotes, filter: bson.M{"links.contact_id": c, "archived_at": nil, "occurred_at": bson.M{"$gte": base.Add(5 * 24 * time.Hour), "$lte": base.Add(20 * 24 * time.Hour)}}, sort: byDate("occurred_at")},
			mirrorQuery{coll: CollEmails, filter: bson.M{"$or": bson.A{bson.M{"messages.contact_ids": c}, bson.M{"contact_ids": c}}, "archived_at": nil}},
			mirrorQuery{coll: CollChangeLog, filter: bson.M{"record_id": c, "state": "applied"}, sort: bson.D{{Key: "seq", Value: -1}}},
		)
	}
	for _, o := range outlets {
		qs = append(qs,
			mirrorQuery{coll: CollNotes, filter: bson.M{"links.outlet_id": o, "archived_at": nil}, sort: byDate("occurred_at"), limit: 50},
			mirrorQuery{coll: CollCoverage, filter: bson.M{"outlet_id": o, "archived_at": nil}, sort: byDate("published_at")},
			mirrorQuery{coll: CollCoverage, filter: bson.M{"outlet_id": o}, sort: byDate("published_at")},
		)
	}
	for _, p := range opps {
		qs = append(qs,
			mirrorQuery{coll: CollNotes, filter: bson.M{"links.opportunity_id": bson.M{"$in": bson.A{p, "none"}}, "archived_at": nil}},
			mirrorQuery{coll: CollCoverage, filter: bson.M{"opportunity_id": p, "archived_at": nil}, sort: byDate("published_at")},
			mirrorQuery{coll: CollEmails, filter: bson.M{"opportunity_links.opportunity_id": p, "archived_at": nil}, sort: byDate("last_message_at")},
		)
	}
	qs = append(qs,
		mirrorQuery{coll: CollChangeLog, filter: bson.M{"session_id": "s-group", "state": "applied"}, sort: bson.D{{Key: "seq", Value: -1}}},
		mirrorQuery{coll: CollChangeLog, filter: bson.M{"session_id": "s-test"}, sort: bson.D{{Key: "seq", Value: -1}}, skip: 5, limit: 20},
		mirrorQuery{coll: CollChangeLog, filter: bson.M{"collection": CollNotes, "at": bson.M{"$gte": base}}, sort: bson.D{{Key: "seq", Value: -1}}, limit: 50},
		mirrorQuery{coll: CollNotes, filter: bson.M{"archived_at": nil}, sort: byDate("occurred_at"), limit: 50},
	)
	return qs
}

// waitIndexes waits until the service's indexes are built (again).
func waitIndexes(t *testing.T, s *Store) {
	t.Helper()
	if err := s.IndexesReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); s.Internals().IndexStale(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the service's indexes were not rebuilt within a minute")
		}
	}
}

// Writes made while the indexes are (re)built, and a write whose outcome
// was lost during a build, end up in them: the build applies what was
// written meanwhile, and a build that overlapped a lost write is redone.
func TestIndexBuildWhileWriting(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("the service keeps its own indexes for the embedded store only")
	}
	s := openStore(t, "")
	ctx := testCtx()
	contact, err := s.Fixture(ctx, CollContacts, map[string]any{"name": "Ann", "affiliations": bson.A{}})
	if err != nil {
		t.Fatal(err)
	}
	note := func(i int) {
		if _, err := s.Fixture(ctx, CollNotes, map[string]any{"type": "call", "title": fmt.Sprint("n", i), "content": "c",
			"occurred_at": time.Now().UTC().Truncate(time.Millisecond), "links": bson.A{bson.M{"id": uuid.NewString(), "contact_id": contact, "created_at": time.Now().UTC()}}}); err != nil {
			t.Error(err)
		}
	}
	for i := range 5 {
		note(i)
	}
	reads, written := 0, 0
	*s.Internals().Hook = func(p string) error {
		if p != "index-read" {
			return nil
		}
		reads++
		switch reads {
		case 1, 3, 5:
			written++
			note(100 + reads) // a write while the build reads
		case 2:
			s.Internals().IndexLost(CollNotes, errors.New("a write's outcome is unknown")) // the build must be redone
		}
		return nil
	}
	s.Internals().IndexLost(CollNotes, errors.New("test: rebuild"))
	waitIndexes(t, s)
	*s.Internals().Hook = nil
	if reads <= len(mirrorSpecs) {
		t.Errorf("%d collection reads: the build overlapping a lost write was not redone", reads)
	}
	ids, total, ok := s.Internals().IndexIDs(CollNotes, bson.M{"links.contact_id": contact, "archived_at": nil}, nil, 0, 0)
	if !ok || total != int64(5+written) || len(ids) != 5+written {
		t.Errorf("index: %d notes of the contact (ok %v), want %d", total, ok, 5+written)
	}
	checkInvariants(t, s) // compares the index with the store, record by record
}
