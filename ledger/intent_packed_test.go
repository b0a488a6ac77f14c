package ledger

import (
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
)

// An intent of the batch form written before the entries were packed (an
// array of entries) is still settled by recovery after an upgrade: each
// entry goes in if its record carries it, and not otherwise. And an intent
// of the packed form (what a batch now writes) is stored with no entries
// array.
func TestGroupCommitRecoversAnIntentOfTheArrayForm(t *testing.T) {
	dir := t.TempDir()
	s, stop := restartableStore(t, dir)
	ctx := testCtx()
	actor, _ := audit.ActorFrom(ctx)
	landed, lost := newUser(t, s, ctx), newUser(t, s, ctx)
	var stored bson.M
	if err := s.coll(collIntents).FindOne(ctx, bson.M{"_id": s.intentID}).Decode(&stored); err != nil {
		t.Fatal(err)
	}
	if _, ok := stored["packed"]; !ok || stored["entries"] != nil {
		t.Fatalf("a batch's intent is stored with fields %v; want its entries packed", keysOf(stored))
	}
	var olds []audit.Entry
	for i, id := range []string{landed, lost} {
		m := renameMutation(t, s, id, fmt.Sprint("array form ", i))
		e := s.newEntry(actor, m, "")
		seq, err := s.nextSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		e.Seq, e.At, e.State = seq, time.Now().UTC(), audit.StateApplied
		if id == landed {
			// The writer stopped after this record, before the entries.
			if err := s.writeRecord(ctx, m, e.ID, "", false); err != nil {
				t.Fatal(err)
			}
		}
		olds = append(olds, e)
	}
	if _, err := s.coll(collIntents).InsertOne(ctx, bson.M{"_id": "array-form-process", "state": audit.StatePending, "at": olds[0].At, "entries": olds}); err != nil {
		t.Fatal(err)
	}
	stop()
	s, stop = restartableStore(t, dir) // Open recovers
	defer stop()
	checkInvariants(t, s)
	if n := appliedEntries(t, s, bson.M{"_id": olds[0].ID}); n != 1 {
		t.Errorf("the landed change has %d applied entries, want 1", n)
	}
	if n, _ := s.coll(collChangeLog).CountDocuments(ctx, bson.M{"_id": olds[1].ID}); n != 0 {
		t.Errorf("the change whose record was never written has %d entries, want none", n)
	}
	if n, _ := s.coll(collIntents).CountDocuments(ctx, bson.M{"state": audit.StatePending}); n != 0 {
		t.Errorf("%d intents still pending", n)
	}
}

func keysOf(m bson.M) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
