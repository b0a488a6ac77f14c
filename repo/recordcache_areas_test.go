package repo_test

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
	"outreach/repo"
	"outreach/repo/directory"
	"outreach/repo/notes"
	"outreach/repo/repotest"
)

// The record cache read through the notes area: an external test of the
// core, which sits above every area.

// Reads served by the record cache (a record by id, a linked record's name,
// a list's page) answer what is stored after every kind of write: an update,
// a link, a rename of the linked record, an archive and a restore, a group,
// a change in a session and its rollback, and a write whose outcome was lost
// (the record changed in the store while the engine could not tell).
func TestRecordCacheAnswersAsTheStore(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("the record cache serves the embedded store only")
	}
	s := repo.OpenStore(t, repo.ModeSerial)
	if !s.Internals().IndexKept() {
		t.Fatal("the exclusive embedded store keeps no indexes")
	}
	ctx := repotest.Ctx()
	first, last := "Ada", "Lovelace"
	c, err := directory.Of(s).CreateContact(ctx, directory.ContactFields{FirstName: &first, LastName: &last}, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := directory.Of(s).CreateContact(ctx, directory.ContactFields{FirstName: &first, LastName: &last}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var noteIDs []string
	for _, title := range []string{"one", "two", "three"} {
		n, err := notes.Of(s).CreateNote(ctx, notes.NewNote{Title: title, Content: "about " + title, Links: notes.LinkTargets{ContactIDs: []string{c.ID}}})
		if err != nil {
			t.Fatal(err)
		}
		noteIDs = append(noteIDs, n.ID)
	}
	stored := func(coll, id string) bson.Raw {
		t.Helper()
		var raw bson.Raw
		if err := s.Collection(coll).FindOne(context.Background(), bson.M{"_id": id}).Decode(&raw); err != nil {
			t.Fatal(err)
		}
		return raw
	}
	check := func(stage string) {
		t.Helper()
		// Twice: the first read may fill the cache, the second is served by it.
		for range 2 {
			for _, r := range []struct{ coll, id string }{{repo.CollContacts, c.ID}, {repo.CollContacts, other.ID}, {repo.CollNotes, noteIDs[0]}, {repo.CollNotes, noteIDs[1]}, {repo.CollNotes, noteIDs[2]}} {
				var got bson.Raw
				if err := s.ByID(ctx, r.coll, r.id, &got); err != nil {
					t.Fatalf("%s: read %s/%s: %v", stage, r.coll, r.id, err)
				}
				if want := stored(r.coll, r.id); !bytes.Equal(got, want) {
					t.Errorf("%s: %s/%s read %v, stored %v", stage, r.coll, r.id, got, want)
				}
			}
			for _, id := range noteIDs {
				got, err := notes.Of(s).Note(ctx, id)
				if err != nil {
					t.Fatalf("%s: get note: %v", stage, err)
				}
				var want notes.Note
				if err := ledger.DecodeRaw(stored(repo.CollNotes, id), &want); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(*got, want) {
					t.Errorf("%s: get note %s: %+v, stored %+v", stage, id, *got, want)
				}
			}
			var contact bson.M
			if err := ledger.DecodeRaw(stored(repo.CollContacts, c.ID), &contact); err != nil {
				t.Fatal(err)
			}
			e := notes.Of(s).Entity(ctx, repo.CollContacts, c.ID)
			if want := strings.TrimSpace(contact["first_name"].(string) + " " + contact["last_name"].(string)); e.Name != want || e.Archived != (contact["archived_at"] != nil) {
				t.Errorf("%s: linked contact %+v, stored %q (archived %v)", stage, e, want, contact["archived_at"] != nil)
			}
			page, err := notes.Of(s).ListNotes(ctx, notes.NoteFilter{ContactID: c.ID, IncludeArchived: true}, 50, 0)
			if err != nil {
				t.Fatalf("%s: list notes: %v", stage, err)
			}
			if len(page.Items) == 0 {
				t.Fatalf("%s: list notes: empty", stage)
			}
			for _, got := range page.Items {
				var want notes.Note
				if err := ledger.DecodeRaw(stored(repo.CollNotes, got.ID), &want); err != nil {
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
	if _, err := notes.Of(s).UpdateNote(ctx, noteIDs[0], notes.NoteChanges{Title: &title}); err != nil {
		t.Fatal(err)
	}
	check("after an update")
	if _, _, err := notes.Of(s).AddNoteLinks(ctx, noteIDs[1], notes.LinkTargets{ContactIDs: []string{other.ID}}); err != nil {
		t.Fatal(err)
	}
	check("after a link")
	renamed := "Byron"
	if _, err := directory.Of(s).UpdateContact(ctx, c.ID, directory.ContactFields{LastName: &renamed}); err != nil {
		t.Fatal(err)
	}
	check("after the linked contact's rename")
	if _, err := notes.Of(s).ArchiveNote(ctx, noteIDs[2]); err != nil {
		t.Fatal(err)
	}
	check("after an archive")
	if _, err := notes.Of(s).RestoreNote(ctx, noteIDs[2]); err != nil {
		t.Fatal(err)
	}
	check("after a restore")

	// A group: two records changed as one unit (the serial plan).
	var muts []ledger.Mutation
	for _, r := range []struct{ coll, id, field, value string }{{repo.CollNotes, noteIDs[1], "title", "two, in a group"}, {repo.CollContacts, c.ID, "first_name", "Augusta"}} {
		var cur bson.M
		if err := ledger.DecodeRaw(stored(r.coll, r.id), &cur); err != nil {
			t.Fatal(err)
		}
		v, _ := ledger.AsInt(cur[ledger.FieldVersion])
		after := ledger.Strip(cur)
		after[r.field] = r.value
		muts = append(muts, ledger.Mutation{Coll: r.coll, ID: r.id, Action: "update", Before: ledger.Strip(cur), After: after, Version: v})
	}
	if _, err := s.Write(ctx, muts...); err != nil {
		t.Fatal(err)
	}
	check("after a group")

	// Changes in a session, then the session's rollback.
	sctx := repo.TestCtxSession("s-record-cache")
	title = "three, in a session"
	if _, err := notes.Of(s).UpdateNote(sctx, noteIDs[2], notes.NoteChanges{Title: &title}); err != nil {
		t.Fatal(err)
	}
	renamed = "Noel"
	if _, err := directory.Of(s).UpdateContact(sctx, c.ID, directory.ContactFields{LastName: &renamed}); err != nil {
		t.Fatal(err)
	}
	check("after changes in a session")
	if _, err := s.RollbackSession(ctx, "s-record-cache", repo.RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	check("after the session's rollback")

	// A write whose outcome was lost: the record changed in the store while
	// the engine could not tell, and the index is rebuilt. Then the store is
	// put back the same way, so that the store ends as the write path left it.
	var before bson.M
	if err := ledger.DecodeRaw(stored(repo.CollNotes, noteIDs[0]), &before); err != nil {
		t.Fatal(err)
	}
	for _, title := range []string{"landed without a reply", before["title"].(string)} {
		if _, err := s.Collection(repo.CollNotes).UpdateOne(context.Background(), bson.M{"_id": noteIDs[0]}, bson.M{"$set": bson.M{"title": title}}); err != nil {
			t.Fatal(err)
		}
		s.Internals().IndexLost(repo.CollNotes, errors.New("the store failed without a reply"))
		waitIndexes(t, s)
		check("after a lost write: " + title)
	}
	repo.CheckInvariants(t, s)
}
