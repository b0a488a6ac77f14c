package repo

import (
	"bytes"
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/ledger"
)

// Reads served by the record cache (a record by id, a linked record's name,
// a list's page) answer what is stored after every kind of write: an update,
// a link, a rename of the linked record, an archive and a restore, a group,
// a change in a session and its rollback, and a write whose outcome was lost
// (the record changed in the store while the engine could not tell).
func TestRecordCacheAnswersAsTheStore(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("the record cache serves the embedded store only")
	}
	s := openStore(t, modeSerial)
	if !s.Internals().IndexKept() {
		t.Fatal("the exclusive embedded store keeps no indexes")
	}
	ctx := testCtx()
	first, last := "Ada", "Lovelace"
	c, err := s.CreateContact(ctx, ContactFields{FirstName: &first, LastName: &last}, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.CreateContact(ctx, ContactFields{FirstName: &first, LastName: &last}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, title := range []string{"one", "two", "three"} {
		n, err := s.CreateNote(ctx, NewNote{Title: title, Content: "about " + title, Links: LinkTargets{ContactIDs: []string{c.ID}}})
		if err != nil {
			t.Fatal(err)
		}
		notes = append(notes, n.ID)
	}
	stored := func(coll, id string) bson.Raw {
		t.Helper()
		var raw bson.Raw
		if err := s.coll(coll).FindOne(context.Background(), bson.M{"_id": id}).Decode(&raw); err != nil {
			t.Fatal(err)
		}
		return raw
	}
	check := func(stage string) {
		t.Helper()
		// Twice: the first read may fill the cache, the second is served by it.
		for range 2 {
			for _, r := range []struct{ coll, id string }{{CollContacts, c.ID}, {CollContacts, other.ID}, {CollNotes, notes[0]}, {CollNotes, notes[1]}, {CollNotes, notes[2]}} {
				var got bson.Raw
				if err := s.ByID(ctx, r.coll, r.id, &got); err != nil {
					t.Fatalf("%s: read %s/%s: %v", stage, r.coll, r.id, err)
				}
				if want := stored(r.coll, r.id); !bytes.Equal(got, want) {
					t.Errorf("%s: %s/%s read %v, stored %v", stage, r.coll, r.id, got, want)
				}
			}
			for _, id := range notes {
				got, err := s.Note(ctx, id)
				if err != nil {
					t.Fatalf("%s: get note: %v", stage, err)
				}
				var want Note
				if err := ledger.DecodeRaw(stored(CollNotes, id), &want); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(*got, want) {
					t.Errorf("%s: get note %s: %+v, stored %+v", stage, id, *got, want)
				}
			}
			var contact bson.M
			if err := ledger.DecodeRaw(stored(CollContacts, c.ID), &contact); err != nil {
				t.Fatal(err)
			}
			e := s.Entity(ctx, CollContacts, c.ID)
			if want := strings.TrimSpace(contact["first_name"].(string) + " " + contact["last_name"].(string)); e.Name != want || e.Archived != (contact["archived_at"] != nil) {
				t.Errorf("%s: linked contact %+v, stored %q (archived %v)", stage, e, want, contact["archived_at"] != nil)
			}
			page, err := s.ListNotes(ctx, NoteFilter{ContactID: c.ID, IncludeArchived: true}, 50, 0)
			if err != nil {
				t.Fatalf("%s: list notes: %v", stage, err)
			}
			if len(page.Items) == 0 {
				t.Fatalf("%s: list notes: empty", stage)
			}
			for _, got := range page.Items {
				var want Note
				if err := ledger.DecodeRaw(stored(CollNotes, got.ID), &want); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: list notes, %s: %+v, stored %+v", stage, got.ID, got, want)
				}
			}
		}
		if n, _ := s.RecordCacheStats(); n == 0 {
			t.Fatalf("%s: the record cache holds nothing: the reads were not served by it", stage)
		}
	}
	check("after creates")

	title := "one, renamed"
	if _, err := s.UpdateNote(ctx, notes[0], NoteChanges{Title: &title}); err != nil {
		t.Fatal(err)
	}
	check("after an update")
	if _, _, err := s.AddNoteLinks(ctx, notes[1], LinkTargets{ContactIDs: []string{other.ID}}); err != nil {
		t.Fatal(err)
	}
	check("after a link")
	renamed := "Byron"
	if _, err := s.UpdateContact(ctx, c.ID, ContactFields{LastName: &renamed}); err != nil {
		t.Fatal(err)
	}
	check("after the linked contact's rename")
	if _, err := s.ArchiveNote(ctx, notes[2]); err != nil {
		t.Fatal(err)
	}
	check("after an archive")
	if _, err := s.RestoreNote(ctx, notes[2]); err != nil {
		t.Fatal(err)
	}
	check("after a restore")

	// A group: two records changed as one unit (the serial plan).
	var muts []mutation
	for _, r := range []struct{ coll, id, field, value string }{{CollNotes, notes[1], "title", "two, in a group"}, {CollContacts, c.ID, "first_name", "Augusta"}} {
		var cur bson.M
		if err := ledger.DecodeRaw(stored(r.coll, r.id), &cur); err != nil {
			t.Fatal(err)
		}
		v, _ := ledger.AsInt(cur[fieldVersion])
		after := ledger.Strip(cur)
		after[r.field] = r.value
		muts = append(muts, mutation{Coll: r.coll, ID: r.id, Action: "update", Before: ledger.Strip(cur), After: after, Version: v})
	}
	if _, err := s.write(ctx, muts...); err != nil {
		t.Fatal(err)
	}
	check("after a group")

	// Changes in a session, then the session's rollback.
	sctx := testCtxSession("s-record-cache")
	title = "three, in a session"
	if _, err := s.UpdateNote(sctx, notes[2], NoteChanges{Title: &title}); err != nil {
		t.Fatal(err)
	}
	renamed = "Noel"
	if _, err := s.UpdateContact(sctx, c.ID, ContactFields{LastName: &renamed}); err != nil {
		t.Fatal(err)
	}
	check("after changes in a session")
	if _, err := s.RollbackSession(ctx, "s-record-cache", RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	check("after the session's rollback")

	// A write whose outcome was lost: the record changed in the store while
	// the engine could not tell, and the index is rebuilt. Then the store is
	// put back the same way, so that the store ends as the write path left it.
	var before bson.M
	if err := ledger.DecodeRaw(stored(CollNotes, notes[0]), &before); err != nil {
		t.Fatal(err)
	}
	for _, title := range []string{"landed without a reply", before["title"].(string)} {
		if _, err := s.coll(CollNotes).UpdateOne(context.Background(), bson.M{"_id": notes[0]}, bson.M{"$set": bson.M{"title": title}}); err != nil {
			t.Fatal(err)
		}
		s.Internals().IndexLost(CollNotes, errors.New("the store failed without a reply"))
		waitIndexes(t, s)
		check("after a lost write: " + title)
	}
	checkInvariants(t, s)
}

// The record cache's size: the default, a given size, and a wrong value
// refused with what is allowed.
func TestRecordCacheSize(t *testing.T) {
	t.Setenv(RecordCacheEnv, "")
	if n, err := recordCacheBytes(nil); err != nil || n != 32<<20 {
		t.Fatalf("default: %d, %v", n, err)
	}
	t.Setenv(RecordCacheEnv, "0")
	if n, err := recordCacheBytes(nil); err != nil || n != 0 {
		t.Fatalf("0: %d, %v", n, err)
	}
	t.Setenv(RecordCacheEnv, "64")
	if n, err := recordCacheBytes(nil); err != nil || n != 64<<20 {
		t.Fatalf("64: %d, %v", n, err)
	}
	for _, bad := range []string{"lots", "-1", "32MB", "5000"} {
		t.Setenv(RecordCacheEnv, bad)
		if _, err := recordCacheBytes(nil); err == nil || !strings.Contains(err.Error(), RecordCacheEnv) || !strings.Contains(err.Error(), "4096") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
