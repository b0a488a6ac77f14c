package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/repo/directory"
)

// importRowCount is the size of the contact import: 1,000 rows (five
// batches) in the test command, 2,000 in the long run
// (OUTREACH_LONG_TESTS=1). Rolling the import back dominates its time.
func importRowCount() int {
	if longRuns() {
		return 2000
	}
	return 1000
}

type importRow struct {
	Row     int      `json:"row"`
	Key     string   `json:"key"`
	Status  string   `json:"status"`
	ID      string   `json:"id"`
	Changed []string `json:"changed"`
	Field   string   `json:"field"`
	Reason  string   `json:"reason"`
}

type importResult struct {
	DryRun    bool        `json:"dry_run"`
	Total     int         `json:"total"`
	Created   int         `json:"created"`
	Updated   int         `json:"updated"`
	Unchanged int         `json:"unchanged"`
	Refused   int         `json:"refused"`
	Rows      []importRow `json:"rows"`
}

type importAuth struct{ key, session string }

func (b importAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	r.Header.Set("X-Agent-Session-Id", b.session)
	return http.DefaultTransport.RoundTrip(r)
}

// progressCall calls tool with a progress token and returns its result and
// the progress notifications received.
func progressCall(t *testing.T, env *testenv.Env, key, session, tool string, args map[string]any, out any) []float64 {
	t.Helper()
	var mu sync.Mutex
	var got []float64
	c := mcp.NewClient(&mcp.Implementation{Name: "import-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			got = append(got, req.Params.Progress)
			mu.Unlock()
		}})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: env.URL, HTTPClient: &http.Client{Transport: importAuth{key, session}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	p.SetProgressToken("import-1")
	res, err := cs.CallTool(context.Background(), p)
	if err != nil || res.IsError {
		t.Fatalf("%s: %v %+v", tool, err, res)
	}
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), out); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return got
}

// TestImportContacts imports 2,000 contact rows as CSV, with duplicates and
// bad rows: the dry run and the real run agree row by row, a rerun changes
// nothing, and rollback_session undoes the import.
func TestImportContacts(t *testing.T) {
	parallelOnEmbedded(t)
	importRows := importRowCount()
	env := testenv.New(t)
	key := env.Key("read", "write")
	setup := env.Client(key, "setup")
	old := testenv.ID(t, setup.Must("create_contact", M{"first_name": "Olga", "last_name": "Old", "email": "olga@example.com", "title": "Editor"}, nil))
	same := testenv.ID(t, setup.Must("create_contact", M{"first_name": "Sam", "last_name": "Same", "email": "sam@example.com", "title": "Reporter", "beats": []string{"ai", "chips"}}, nil))
	dnc := testenv.ID(t, setup.Must("create_contact", M{"first_name": "Dina", "last_name": "Quiet", "email": "dina@example.com", "do_not_contact": true, "do_not_contact_reason": "asked"}, nil))

	// The rows and, worked out as they are made, what each must become.
	var b strings.Builder
	b.WriteString("email,first_name,last_name,title,beats,timezone,do_not_contact\n")
	want := map[int]string{} // row -> status
	wantField := map[int]string{}
	for i := 1; i <= importRows; i++ {
		email, tz, flag := fmt.Sprintf("c%d@example.com", i), "Europe/London", ""
		status := directory.ImportCreated
		switch {
		case i == 1:
			email, status = "OLGA@example.com", directory.ImportUpdated
		case i == 2:
			b.WriteString("sam@example.com,Sam,Same,Reporter,ai;chips,,\n")
			want[i] = directory.ImportUnchanged
			continue
		case i == 3:
			email, flag, status = "dina@example.com", "false", directory.ImportRefused
			wantField[i] = "do_not_contact"
		case i%100 == 7:
			email, status = "", directory.ImportRefused
			wantField[i] = "email"
		case i%100 == 13:
			email, status = "not-an-email", directory.ImportRefused
			wantField[i] = "email"
		case i%100 == 21:
			email, status = fmt.Sprintf("C%d@example.com", i-1), directory.ImportRefused // a duplicate of the row before
			wantField[i] = "email"
		case i%100 == 33:
			tz, status = "Mars/Olympus", directory.ImportRefused
			wantField[i] = "timezone"
		}
		want[i] = status
		fmt.Fprintf(&b, "%s,First%d,\"Last, %d\",Reporter,tech;media,%s,%s\n", email, i, i, tz, flag)
	}
	csvText := b.String()
	start := time.Now()
	lap := func(what string) { t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond)) }
	c := env.Client(key, "import")

	before := changeCount(t, setup)
	var dry importResult
	c.Must("import_contacts", M{"csv": csvText, "dry_run": true}, &dry)
	if n := changeCount(t, setup); n != before {
		t.Fatalf("the dry run wrote %d changes", n-before)
	}
	if len(dry.Rows) != importRows || !dry.DryRun {
		t.Fatalf("dry run: %d rows, dry_run %v", len(dry.Rows), dry.DryRun)
	}
	counts := map[string]int{}
	for _, r := range dry.Rows {
		counts[r.Status]++
		if r.Status != want[r.Row] || (wantField[r.Row] != "" && r.Field != wantField[r.Row]) {
			t.Errorf("dry run row %d: %s field %s (%s); want %s field %s", r.Row, r.Status, r.Field, r.Reason, want[r.Row], wantField[r.Row])
		}
		if r.Status == directory.ImportRefused && r.Reason == "" {
			t.Errorf("row %d refused without a reason", r.Row)
		}
	}
	if dry.Rows[0].ID != old || !cmp.Equal(dry.Rows[0].Changed, []string{"email", "email_lower", "first_name", "last_name", "name", "timezone", "title", "beats"}[:0]) && dry.Rows[0].Status != directory.ImportUpdated {
		t.Errorf("row 1: %+v", dry.Rows[0])
	}
	if dry.Rows[1].ID != same || !strings.Contains(dry.Rows[2].Reason, "admin") || !strings.Contains(dry.Rows[2].Reason, dnc) {
		t.Errorf("rows 2 and 3: %+v %+v", dry.Rows[1], dry.Rows[2])
	}
	if !strings.Contains(dry.Rows[20].Reason, "duplicate of row 20") {
		t.Errorf("row 21: %+v", dry.Rows[20])
	}
	if counts[directory.ImportCreated] != dry.Created || dry.Created+dry.Updated+dry.Unchanged+dry.Refused != importRows || dry.Refused != 1+4*importRows/100 || dry.Updated != 1 || dry.Unchanged != 1 {
		t.Errorf("dry run counts %+v (by status %v)", dry, counts)
	}

	lap("dry run")
	var real importResult
	progress := progressCall(t, env, key, "import", "import_contacts", M{"csv": csvText}, &real)
	// One notification per batch written; the last ones may arrive after
	// the result, so only the ones before it are checked: at least half.
	batches := (real.Created + real.Updated + directory.ImportBatch - 1) / directory.ImportBatch
	if len(progress) == 0 || !slices.IsSorted(progress) || progress[len(progress)-1] > float64(importRows) || len(progress) < (batches+1)/2 {
		t.Errorf("progress notifications %v; want one per batch of %d records, rising, at most %d", progress, directory.ImportBatch, importRows)
	}
	if real.DryRun || len(real.Rows) != len(dry.Rows) {
		t.Fatalf("real run: dry_run %v, %d rows", real.DryRun, len(real.Rows))
	}
	for i := range real.Rows {
		r, d := real.Rows[i], dry.Rows[i]
		if r.Status == directory.ImportCreated && r.ID == "" {
			t.Errorf("row %d created without an id", r.Row)
		}
		if d.Status == directory.ImportCreated {
			d.ID = r.ID
		}
		if diff := cmp.Diff(r, d); diff != "" {
			t.Errorf("row %d: real run differs from the dry run (-real +dry):\n%s", r.Row, diff)
		}
	}
	lap("real run")
	written := changeCount(t, setup) - before
	if written != real.Created+real.Updated {
		t.Errorf("the import wrote %d changes; want %d created + %d updated", written, real.Created, real.Updated)
	}
	var olga struct{ Title, Email string }
	setup.Must("get_contact", M{"id": old}, &olga)
	if olga.Title != "Reporter" || olga.Email != "olga@example.com" {
		t.Errorf("updated contact: %+v", olga)
	}

	// The same import again changes nothing.
	var again importResult
	c.Must("import_contacts", M{"csv": csvText}, &again)
	if again.Created != 0 || again.Updated != 0 || again.Unchanged != real.Created+real.Updated+real.Unchanged || again.Refused != real.Refused {
		t.Errorf("rerun: %+v", again)
	}
	if n := changeCount(t, setup) - before; n != written {
		t.Errorf("the rerun wrote %d changes", n-written)
	}

	lap("rerun")
	// One rollback_session undoes the import.
	var rb struct {
		Applied bool `json:"applied"`
		Changes int  `json:"changes"`
	}
	c.Must("rollback_session", M{"session_id": "import"}, &rb)
	if !rb.Applied || rb.Changes != written {
		t.Errorf("rollback_session: applied %v, %d changes; want %d", rb.Applied, rb.Changes, written)
	}
	lap("rollback")
	var list struct{ Total int }
	setup.Must("list_contacts", M{"limit": 1}, &list)
	if list.Total != 3 {
		t.Errorf("%d active contacts after the rollback, want the 3 from before", list.Total)
	}
	setup.Must("get_contact", M{"id": old}, &olga)
	if olga.Title != "Editor" || olga.Email != "olga@example.com" {
		t.Errorf("contact after the rollback: %+v", olga)
	}
}

// Defect: a row matching a contact's email ignoring case rewrote the stored
// address's case, wrote a change and reported `updated, changed: ["email"]`,
// so a dry run of a lower-cased CRM export showed every capitalised address
// as updated. The case an address is written in is not a change.
func TestImportContactsEmailCaseIsNotAChange(t *testing.T) {
	env := testenv.New(t)
	c := env.Client(env.AdminKey, "import-case")
	jane := testenv.ID(t, c.Must("create_contact", M{"first_name": "Jane", "last_name": "Doe", "email": "Jane.Doe@Example.com", "title": "Editor"}, nil))
	bob := testenv.ID(t, c.Must("create_contact", M{"first_name": "Bob", "last_name": "Ray", "email": "bob@example.org", "title": "Reporter"}, nil))
	csvText := "email,first_name,last_name,title\n" +
		"jane.doe@example.com,Jane,Doe,Editor\n" + // the export lower-cased it
		"BOB@EXAMPLE.ORG,Bob,Ray,Senior Reporter\n" // upper-cased, and a real change
	want := []importRow{
		{Row: 1, Key: "jane.doe@example.com", Status: directory.ImportUnchanged, ID: jane},
		{Row: 2, Key: "bob@example.org", Status: directory.ImportUpdated, ID: bob, Changed: []string{"title"}},
	}
	before := changeCount(t, c)
	for _, dry := range []bool{true, false} {
		var res importResult
		c.Must("import_contacts", M{"csv": csvText, "dry_run": dry}, &res)
		if diff := cmp.Diff(res.Rows, want); diff != "" {
			t.Errorf("dry_run %v: rows (-got +want):\n%s", dry, diff)
		}
		if res.Unchanged != 1 || res.Updated != 1 {
			t.Errorf("dry_run %v: %d unchanged, %d updated; want 1 and 1", dry, res.Unchanged, res.Updated)
		}
	}
	if n := changeCount(t, c) - before; n != 1 {
		t.Errorf("the import wrote %d changes; want 1 (Bob's title)", n)
	}
	for id, email := range map[string]string{jane: "Jane.Doe@Example.com", bob: "bob@example.org"} {
		var got struct{ Email string }
		c.Must("get_contact", M{"id": id}, &got)
		if got.Email != email {
			t.Errorf("contact %s: email %q after the import; want the stored %q", id, got.Email, email)
		}
	}
}

// TestImportOutlets imports outlets as JSON rows, matched on the domain.
func TestImportOutlets(t *testing.T) {
	env := testenv.New(t)
	c := env.Client(env.Key("read", "write"), "outlets")
	planet := testenv.ID(t, c.Must("create_outlet", M{"name": "The Planet", "website": "https://www.planet.example/news", "tier": 2}, nil))
	rows := []M{
		{"name": "The Planet", "website": "planet.example", "tier": 1},
		{"name": "Wire", "website": "https://wire.example", "type": "wire_service", "topics": []string{"markets"}, "audience_size": 5000},
		{"name": "Wire again", "website": "http://WWW.wire.example/"},
		{"name": "No site"},
		{"name": "Bad tier", "website": "bad.example", "tier": 7},
		{"name": "Odd", "website": "odd.example", "colour": "red"},
	}
	var dry, real, again importResult
	c.Must("import_outlets", M{"rows": rows, "dry_run": true}, &dry)
	c.Must("import_outlets", M{"rows": rows}, &real)
	c.Must("import_outlets", M{"rows": rows}, &again)
	got := []string{}
	for i, r := range real.Rows {
		got = append(got, r.Status+":"+r.Field)
		if dry.Rows[i].Status != r.Status || dry.Rows[i].Reason != r.Reason {
			t.Errorf("row %d: dry %+v real %+v", r.Row, dry.Rows[i], r)
		}
	}
	want := []string{"updated:", "created:", "refused:website", "refused:website", "refused:tier", "refused:colour"}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("statuses (-got +want):\n%s", diff)
	}
	if real.Rows[0].ID != planet || again.Created != 0 || again.Updated != 0 || again.Unchanged != 2 {
		t.Errorf("row 1 %+v; rerun %+v", real.Rows[0], again)
	}
	c.Fail("import_outlets", M{"csv": "name,colour\nA,red\n"}, repo.CodeInvalid)
	var fromCSV importResult
	c.Must("import_outlets", M{"csv": "name,website,topics\nCSV Times,csvtimes.example,politics;europe\n"}, &fromCSV)
	if fromCSV.Created != 1 {
		t.Errorf("CSV import: %+v", fromCSV)
	}
}
