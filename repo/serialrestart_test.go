package repo

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/embedded"
)

// syncBuffer is a log sink the store may write from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestSerialRestartSettlesTheLastIntentAndSeqGoesOn: the serial protocol
// leaves its last intent unmarked while it runs and reserves seqs in
// blocks. A clean stop (Close) marks the intent done, so the next start
// finds nothing to settle and logs no half-done writes; a stop without
// Close (the process killed) leaves it pending, and recovery at the next
// start settles it without adding, voiding or reporting anything, since
// every entry is in already. Either way the invariants hold, and the next
// change's seq is above every earlier one (past the unused part of the old
// block).
func TestSerialRestartSettlesTheLastIntentAndSeqGoesOn(t *testing.T) {
	for _, clean := range []bool{true, false} {
		t.Run(fmt.Sprintf("clean-stop-%v", clean), func(t *testing.T) {
			serialRestart(t, clean)
		})
	}
}

func serialRestart(t *testing.T, clean bool) {
	dir := t.TempDir()
	ctx := testCtx()
	var logs syncBuffer
	open := func() (*Store, func()) {
		es, err := embedded.Start(context.Background(), embedded.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		s, err := Open(context.Background(), es.URI, "restart_test", Options{Exclusive: true, Logger: zerolog.New(&logs)})
		if err != nil {
			es.Close()
			t.Fatal(err)
		}
		return s, func() {
			if clean {
				s.Close(context.Background())
			} else {
				s.client.Disconnect(context.Background()) // as a killed process: nothing more written
			}
			es.Close()
		}
	}
	s, stop := open()
	id := newUser(t, s, ctx)
	for i := range 3 {
		if err := rename(ctx, s, id, fmt.Sprint("name ", i)); err != nil {
			t.Fatal(err)
		}
	}
	pending, err := s.coll(CollIntents).CountDocuments(ctx, bson.M{"state": audit.StatePending})
	if err != nil || pending != 1 {
		t.Fatalf("%d intents left pending (%v); while the process runs, the last write's intent is left unmarked by design", pending, err)
	}
	maxSeq := func(s *Store) int64 {
		var e audit.Entry
		if err := s.coll(CollChangeLog).FindOne(ctx, bson.M{}, options.FindOne().SetSort(bson.D{{Key: "seq", Value: -1}})).Decode(&e); err != nil {
			t.Fatal(err)
		}
		return e.Seq
	}
	before := maxSeq(s)
	entries, err := s.coll(CollChangeLog).CountDocuments(ctx, bson.M{})
	if err != nil {
		t.Fatal(err)
	}
	stop()

	s, stop = open()
	defer stop()
	if strings.Contains(logs.String(), "half-done") {
		t.Errorf("the start after a stop reported half-done writes, though every write had finished:\n%s", logs.String())
	}
	rep, err := s.Recover(ctx, true)
	if err != nil || rep != (RecoveryReport{}) {
		t.Fatalf("recovery after a stop: %+v %v; want nothing to settle", rep, err)
	}
	if n, _ := s.coll(CollChangeLog).CountDocuments(ctx, bson.M{}); n != entries {
		t.Errorf("%d entries after restart; want the %d written before it", n, entries)
	}
	if pending, _ := s.coll(CollIntents).CountDocuments(ctx, bson.M{"state": audit.StatePending}); pending != 0 {
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
