package directory_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/ledger"
	"outreach/repo"
	"outreach/repo/directory"
	"outreach/repo/repotest"
)

// These tests reach below the tools for what a client cannot arrange:
// records created in the same millisecond, and opportunities (written by
// another group) that name a contact.

func openTestStore(t *testing.T) (*directory.Store, context.Context) {
	t.Helper()
	s, ctx := repotest.OpenVerified(t, "directory_test")
	return directory.Of(s), ctx
}

// createAt writes rec as created at t, through the write path.
func createAt(t *testing.T, ctx context.Context, s *directory.Store, coll string, m *repo.Meta, rec any, at time.Time) {
	t.Helper()
	m.ID, m.CreatedAt, m.UpdatedAt = uuid.NewString(), at, at
	after, err := ledger.ToM(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, repo.Mutation{Coll: coll, ID: m.ID, Action: audit.ActionCreate, After: after}); err != nil {
		t.Fatal(err)
	}
}

func TestDirectoryPagingWithIdenticalTimestamps(t *testing.T) {
	s, ctx := openTestStore(t)
	at := repo.Now()
	outletID := ""
	for i := range 7 {
		o := &directory.Outlet{Name: fmt.Sprintf("Outlet %d", i), Type: "publication", Topics: []string{"AI"}}
		createAt(t, ctx, s, repo.CollOutlets, &o.Meta, o, at)
		outletID = o.ID
		c := &directory.Contact{FirstName: "R", LastName: fmt.Sprint(i), Name: fmt.Sprintf("R %d", i), Beats: []string{"AI"},
			Affiliations: []directory.Affiliation{{ID: uuid.NewString(), OutletID: outletID}}}
		createAt(t, ctx, s, repo.CollContacts, &c.Meta, c, at)
		ch := &directory.Channel{OutletID: outletID, Type: "website"}
		createAt(t, ctx, s, repo.CollChannels, &ch.Meta, ch, at)
	}
	ids := func(all func(limit, offset int) ([]string, int64)) {
		t.Helper()
		full, total := all(50, 0)
		if total != 7 || len(full) != 7 {
			t.Fatalf("total %d, %d items; want 7", total, len(full))
		}
		// Equal timestamps leave the order to the tie-break: _id, descending.
		if !slices.IsSortedFunc(full, func(a, b string) int { return strings.Compare(b, a) }) {
			t.Errorf("records with equal created_at are not ordered by _id descending: %v", full)
		}
		var paged []string
		for off := 0; off < 9; off += 3 {
			p, _ := all(3, off)
			paged = append(paged, p...)
		}
		if diff := cmp.Diff(full, paged); diff != "" {
			t.Errorf("pages of 3 differ from the full list (-full +pages):\n%s", diff)
		}
		seen := map[string]bool{}
		for _, id := range paged {
			if seen[id] {
				t.Errorf("%s repeated", id)
			}
			seen[id] = true
		}
	}
	ids(func(l, o int) ([]string, int64) {
		p, err := s.ListOutlets(ctx, directory.OutletFilter{Topic: "ai"}, l, o)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range p.Items {
			out = append(out, x.ID)
		}
		return out, p.Total
	})
	ids(func(l, o int) ([]string, int64) {
		p, err := s.ListContacts(ctx, directory.ContactFilter{Beat: "AI"}, l, o)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range p.Items {
			out = append(out, x.ID)
		}
		return out, p.Total
	})
	ids(func(l, o int) ([]string, int64) {
		p, err := s.ListChannels(ctx, directory.ChannelFilter{Type: "website"}, l, o)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range p.Items {
			out = append(out, x.ID)
		}
		return out, p.Total
	})
}

func TestContactDetailShowsOpportunities(t *testing.T) {
	s, ctx := openTestStore(t)
	c, err := s.CreateContact(ctx, directory.ContactFields{FirstName: ptrTo("Ann"), LastName: ptrTo("Lee")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.CreateContact(ctx, directory.ContactFields{FirstName: ptrTo("Bo"), LastName: ptrTo("Ng")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Opportunities are another group's records; only their stored field
	// names matter here.
	opp := func(title, stage string, contacts []string, archived bool) string {
		id := uuid.NewString()
		t0 := repo.Now()
		doc := bson.M{"_id": id, "title": title, "stage": stage, "contact_ids": contacts, "created_at": t0, "updated_at": t0, "archived_at": nil}
		if archived {
			doc["archived_at"] = t0
		}
		if _, err := s.Write(ctx, repo.Mutation{Coll: repo.CollOpportunities, ID: id, Action: audit.ActionCreate, After: doc}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // distinct created_at, so the order below is the creation order
		return id
	}
	o1 := opp("Launch exclusive", "pitched", []string{c.ID, other.ID}, false)
	opp("Someone else's", "researching", []string{other.ID}, false)
	o3 := opp("Old idea", "lost", []string{c.ID}, true)

	d, err := s.ContactDetail(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []directory.OpportunitySummary{
		{ID: o3, Title: "Old idea", Stage: "lost", Archived: true},
		{ID: o1, Title: "Launch exclusive", Stage: "pitched"},
	}
	if diff := cmp.Diff(want, d.Opportunities); diff != "" {
		t.Errorf("opportunities (-want +got):\n%s", diff)
	}
}

func ptrTo[T any](v T) *T { return &v }
