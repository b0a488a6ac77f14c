package repo

import (
	"context"
	"fmt"
	"testing"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/embedded"
)

// TestSerialRestartSettlesTheLastIntentAndSeqGoesOn: the serial protocol
// leaves its last intent unmarked and reserves seqs in blocks. After a
// stop and a start on the same files, recovery settles that intent without
// adding or voiding anything, the invariants hold, and the next change's
// seq is above every earlier one (past the unused part of the old block).
func TestSerialRestartSettlesTheLastIntentAndSeqGoesOn(t *testing.T) {
	dir := t.TempDir()
	ctx := testCtx()
	open := func() (*Store, func()) {
		es, err := embedded.Start(context.Background(), embedded.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		s, err := Open(context.Background(), es.URI, "restart_test", Options{Exclusive: true, Logger: zerolog.Nop()})
		if err != nil {
			es.Close()
			t.Fatal(err)
		}
		return s, func() { s.Close(context.Background()); es.Close() }
	}
	s, stop := open()
	id := newUser(t, s, ctx)
	for i := range 3 {
		if err := rename(ctx, s, id, fmt.Sprint("name ", i)); err != nil {
			t.Fatal(err)
		}
	}
	pending, err := s.coll(collIntents).CountDocuments(ctx, bson.M{"state": audit.StatePending})
	if err != nil || pending != 1 {
		t.Fatalf("%d intents left pending (%v); the last write's intent is left unmarked by design", pending, err)
	}
	maxSeq := func(s *Store) int64 {
		var e audit.Entry
		if err := s.coll(collChangeLog).FindOne(ctx, bson.M{}, options.FindOne().SetSort(bson.D{{Key: "seq", Value: -1}})).Decode(&e); err != nil {
			t.Fatal(err)
		}
		return e.Seq
	}
	before := maxSeq(s)
	entries, err := s.coll(collChangeLog).CountDocuments(ctx, bson.M{})
	if err != nil {
		t.Fatal(err)
	}
	stop()

	s, stop = open()
	defer stop()
	rep, err := s.Recover(ctx, true)
	if err != nil || rep.Aborted != 0 {
		t.Fatalf("recovery after a clean stop: %+v %v", rep, err)
	}
	if n, _ := s.coll(collChangeLog).CountDocuments(ctx, bson.M{}); n != entries {
		t.Errorf("%d entries after restart; want the %d written before it", n, entries)
	}
	if pending, _ := s.coll(collIntents).CountDocuments(ctx, bson.M{"state": audit.StatePending}); pending != 0 {
		t.Errorf("%d intents still pending after the start's recovery", pending)
	}
	if err := rename(ctx, s, id, "after restart"); err != nil {
		t.Fatal(err)
	}
	if after := maxSeq(s); after <= before {
		t.Errorf("seq after restart %d; want above %d", after, before)
	}
	checkInvariants(t, s)
}
