package bench

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestGrowthPrintsEveryTargetOnAServer is TestGrowthPrintsEveryTarget on
// the server MONGODB_URI names (the document engine, MongoDB): the same
// targets, the start ones read off the service's own open (the store is up
// and its indexes serve; the service builds none), the RSS the service's
// process's, and the table says which server ran. Speed itself is never
// asserted.
func TestGrowthPrintsEveryTargetOnAServer(t *testing.T) {
	uri := os.Getenv("MONGODB_URI")
	if uri == "" {
		t.Skip("needs a server: MONGODB_URI")
	}
	g, err := RunGrowth(context.Background(), GrowthConfig{Sizes: []int{20, 40}, Cell: 30 * time.Millisecond, Seed: SeedWrite, MongoURI: uri})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ch := range g.Checks() {
		got = append(got, ch.Operation+": "+strings.SplitN(ch.Target, " (", 2)[0])
	}
	want := []string{
		"40 notes: peak RSS while serving ≤ 400 MB",
		"40 notes: RSS held ≤ 300 MB",
		"40 notes: serving ≤ 10 s after a restart",
		"40 notes: serving ≤ 10 s after the first start on the seeded store",
		"40 notes: a backup while serving ≤ 60 s",
		"40 notes: writes paused while the backup's counter is fixed ≤ 200 ms",
		"40 notes: change shipping adds ≤ 5 % to a write's p50",
		"40 notes: a restore with its verify ≤ 2× the backup",
		"40 notes: a restore with its verify ≤ 120 s",
		"40 notes: a write's p50 with change shipping ≤ 100 ms",
		"get_note at 40 notes: p50 ≤ 100 ms",
		"get_note: p50 at 40 notes ≤ 1.5× at 20 notes",
		"list_notes (by contact) at 40 notes: p50 ≤ 100 ms",
		"list_notes (search) at 40 notes: p50 ≤ 100 ms",
		"get_interaction_log at 40 notes: p50 ≤ 100 ms",
		"list_contacts (search) at 40 notes: p50 ≤ 100 ms",
		"list_outlets (search) at 40 notes: p50 ≤ 100 ms",
		"list_campaigns (search) at 40 notes: p50 ≤ 100 ms",
		"list_opportunities (search) at 40 notes: p50 ≤ 100 ms",
		"list_coverage (search) at 40 notes: p50 ≤ 100 ms",
		"search_emails at 40 notes: p50 ≤ 100 ms",
		"get_contact_dossier at 40 notes: p50 ≤ 100 ms",
		"search at 40 notes: p50 ≤ 250 ms",
		"create_note at 40 notes: p50 ≤ 100 ms",
		"create_note: p50 at 40 notes ≤ 1.5× at 20 notes",
		"update_note at 40 notes: p50 ≤ 100 ms",
		"update_note: p50 at 40 notes ≤ 1.5× at 20 notes",
		"render_report (html, a year) at 40 notes: p50 ≤ 1000 ms",
		"render_report (pdf, a year) at 40 notes: p50 ≤ 3000 ms",
		"render_report (xlsx, a year) at 40 notes: p50 ≤ 3000 ms",
		"render_report (png, a year) at 40 notes: p50 ≤ 300 ms",
		"shared report page (GET) at 40 notes: p50 ≤ 100 ms",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("growth targets:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, ch := range g.Checks() {
		if strings.HasPrefix(ch.Target, "serving") && !strings.Contains(ch.Target, "the service's own open") {
			t.Errorf("start target %q: want it read off the service's own open", ch.Target)
		}
	}
	md := g.Markdown()
	server := g.Runs[0].Store
	if !strings.Contains(server, "MongoDB") || !strings.Contains(md, "Store: "+server) {
		t.Errorf("the table does not name the server it ran on (%q):\n%s", server, md)
	}
	for _, s := range []string{"| search |", "Targets: ", "| restart (clean stop, then start the service on the running store) |",
		"RSS of the bench process at the end (service and its clients; the store runs apart)"} {
		if !strings.Contains(md, s) {
			t.Errorf("the growth table lacks %q:\n%s", s, md)
		}
	}
	if strings.Contains(md, "the service's own indexes") {
		t.Errorf("the table on a server shows the service's own indexes, which it keeps only on the embedded store:\n%s", md)
	}
	// The raw writes' copy keeps the same indexes up to date as the
	// service's database does.
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	for _, r := range g.Runs {
		for coll, name := range map[string]string{"change_log": "session", "notes": "contact_links"} {
			specs, err := client.Database(r.Config.DB + "_raw").Collection(coll).Indexes().ListSpecifications(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(specs, func(s mongo.IndexSpecification) bool { return s.Name == name }) {
				t.Errorf("%d notes: the raw copy's %s lacks the index %s: %+v", r.Config.Notes, coll, name, specs)
			}
		}
	}
}
