package integration

import (
	"context"
	"encoding/json"
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
)

// changeEntry is a change_log entry as the Audit tools return it.
type changeEntry struct {
	ID         string         `json:"id"`
	Seq        int64          `json:"seq"`
	Collection string         `json:"collection"`
	RecordID   string         `json:"record_id"`
	Action     string         `json:"action"`
	Before     map[string]any `json:"before"`
	After      map[string]any `json:"after"`
	UserID     string         `json:"user_id"`
	AgentID    string         `json:"agent_id"`
	SessionID  string         `json:"session_id"`
	Tool       string         `json:"tool"`
	Reverts    string         `json:"reverts"`
}

type rollbackStep struct {
	ChangeID   string             `json:"change_id"`
	Seq        int64              `json:"seq"`
	Collection string             `json:"collection"`
	RecordID   string             `json:"record_id"`
	Action     string             `json:"action"`
	Status     string             `json:"status"`
	Set        map[string]any     `json:"set"`
	Unset      []string           `json:"unset"`
	Conflicts  []rollbackConflict `json:"conflicts"`
	Forced     bool               `json:"forced"`
	RollbackID string             `json:"rollback_id"`
	RolledBack string             `json:"rolled_back_by"`
	Reason     string             `json:"reason"`
}

type rollbackConflict struct {
	ChangeID string `json:"change_id,omitempty"`
	RecordID string `json:"record_id,omitempty"`
	Field    string `json:"field"`
	Current  any    `json:"current"`
	Expected any    `json:"expected"`
}

type rollbackResult struct {
	SessionID         string         `json:"session_id"`
	DryRun            bool           `json:"dry_run"`
	Force             bool           `json:"force"`
	Applied           bool           `json:"applied"`
	Message           string         `json:"message"`
	Changes           int            `json:"changes"`
	Conflicts         int            `json:"conflicts"`
	Violations        int            `json:"violations"`
	Steps             []rollbackStep `json:"steps"`
	NotReversible     []rollbackStep `json:"not_reversible"`
	AlreadyRolledBack []rollbackStep `json:"already_rolled_back"`
}

// changes lists the change log with filter, oldest first.
func changes(t testing.TB, c *testenv.Client, filter M) []changeEntry {
	t.Helper()
	var out []changeEntry
	for offset := 0; ; offset += 200 {
		args := M{"limit": 200, "offset": offset}
		for k, v := range filter {
			args[k] = v
		}
		var page struct {
			Total   int           `json:"total"`
			Changes []changeEntry `json:"changes"`
		}
		c.Must("get_change_log", args, &page)
		out = append(out, page.Changes...)
		if offset+200 >= page.Total {
			break
		}
	}
	slices.Reverse(out)
	return out
}

func lastChange(t testing.TB, c *testenv.Client, recordID, action string) changeEntry {
	t.Helper()
	cs := changes(t, c, M{"record_id": recordID, "action": action})
	if len(cs) == 0 {
		t.Fatalf("no %s change of %s", action, recordID)
	}
	return cs[len(cs)-1]
}

type auditEnv struct {
	env                       *testenv.Env
	a, b, r                   *testenv.Client
	contact, contact2, outlet string
}

// newAuditEnv starts a service with three agents: a makes changes in session
// sess-a, b (another agent) in sess-b, r rolls back in sess-r.
func newAuditEnv(t *testing.T) *auditEnv {
	env := testenv.New(t)
	// The linked records come from the admin, outside the three sessions.
	admin := env.Admin()
	return &auditEnv{
		env:      env,
		a:        env.Client(env.Key("read", "write"), "sess-a"),
		b:        env.Client(env.Key("read", "write"), "sess-b"),
		r:        env.Client(env.Key("read", "write"), "sess-r"),
		contact:  mk(t, admin, "create_contact", M{"first_name": "Ada", "last_name": "Lovelace"}),
		contact2: mk(t, admin, "create_contact", M{"first_name": "Bo", "last_name": "Diddley"}),
		outlet:   mk(t, admin, "create_outlet", M{"name": "The Wire", "type": "online"}),
	}
}

func (e *auditEnv) note(t *testing.T, c *testenv.Client, title string) string {
	t.Helper()
	return testenv.ID(t, c.Must("create_note", M{"title": title, "content": "body", "contact_ids": []string{e.contact}}, nil))
}

func getNote(t *testing.T, c *testenv.Client, id string) note {
	t.Helper()
	var n note
	c.Must("get_note", M{"id": id}, &n)
	return n
}

func linkTargets(n note) []string {
	var out []string
	for _, l := range n.Links {
		out = append(out, l.ContactID+l.OutletID+l.OpportunityID+l.ChannelID)
	}
	slices.Sort(out)
	return out
}

func TestRollbackChangeConflictDryRunAndForce(t *testing.T) {
	e := newAuditEnv(t)
	id := e.note(t, e.a, "t1")
	e.a.Must("update_note", M{"id": id, "title": "t2"}, nil)
	change := lastChange(t, e.a, id, "update")
	e.b.Must("update_note", M{"id": id, "title": "t3"}, nil)

	er := e.r.Fail("rollback_change", M{"id": change.ID}, repo.CodeConflict)
	var details struct {
		Conflicts []rollbackConflict `json:"conflicts"`
	}
	if err := json.Unmarshal(er.Details, &details); err != nil {
		t.Fatalf("details %s: %v", er.Details, err)
	}
	want := []rollbackConflict{{ChangeID: change.ID, RecordID: id, Field: "title", Current: "t3", Expected: "t2"}}
	if diff := cmp.Diff(want, details.Conflicts); diff != "" || er.Retryable {
		t.Errorf("conflicts (-want +got):\n%s\nretryable %v", diff, er.Retryable)
	}
	if got := getNote(t, e.r, id).Title; got != "t3" {
		t.Errorf("title after a refused rollback = %q, want t3 (nothing written)", got)
	}

	var dry rollbackResult
	e.r.Must("rollback_change", M{"id": change.ID, "dry_run": true}, &dry)
	if dry.Applied || !dry.DryRun || len(dry.Steps) != 1 || dry.Steps[0].Status != "conflict" || dry.Steps[0].Set["title"] != "t1" || dry.Conflicts != 1 {
		t.Errorf("dry run = %+v", dry)
	}
	if n := len(changes(t, e.r, M{"action": "rollback"})); n != 0 {
		t.Fatalf("%d rollback entries after a refused rollback and a dry run, want 0", n)
	}

	var forced rollbackResult
	e.r.Must("rollback_change", M{"id": change.ID, "force": true}, &forced)
	if !forced.Applied || len(forced.Steps) != 1 || !forced.Steps[0].Forced || forced.Steps[0].RollbackID == "" {
		t.Fatalf("forced = %+v", forced)
	}
	if got := getNote(t, e.r, id).Title; got != "t1" {
		t.Errorf("title after a forced rollback = %q, want t1", got)
	}
	var rb changeEntry
	e.r.Must("get_change", M{"id": forced.Steps[0].RollbackID}, &rb)
	var who struct {
		UserID  string `json:"user_id"`
		AgentID string `json:"agent_id"`
	}
	e.r.Must("whoami", nil, &who)
	got := []any{rb.Action, rb.Reverts, rb.SessionID, rb.UserID, rb.AgentID, rb.Before["title"], rb.After["title"]}
	if diff := cmp.Diff([]any{"rollback", change.ID, "sess-r", who.UserID, who.AgentID, "t3", "t1"}, got); diff != "" {
		t.Errorf("rollback entry (-want +got):\n%s", diff)
	}
}

func TestRollbackTwiceAndRollbackOfRollback(t *testing.T) {
	e := newAuditEnv(t)
	id := e.note(t, e.a, "t1")
	e.a.Must("update_note", M{"id": id, "title": "t2", "content": "new body"}, nil)
	change := lastChange(t, e.a, id, "update")

	var r1 rollbackResult
	e.r.Must("rollback_change", M{"id": change.ID}, &r1)
	n := getNote(t, e.r, id)
	if n.Title != "t1" || n.Content != "body" {
		t.Fatalf("after rollback: %q %q", n.Title, n.Content)
	}
	first := r1.Steps[0].RollbackID

	er := e.r.Fail("rollback_change", M{"id": change.ID}, repo.CodeFailedPrecondition)
	if !strings.Contains(er.Message, first) {
		t.Errorf("second rollback: %q does not name the first rollback %s", er.Message, first)
	}
	e.r.Fail("rollback_change", M{"id": change.ID, "dry_run": true}, repo.CodeFailedPrecondition)

	// A rollback of the rollback restores the state it undid.
	var r2 rollbackResult
	e.r.Must("rollback_change", M{"id": first}, &r2)
	if n := getNote(t, e.r, id); n.Title != "t2" || n.Content != "new body" {
		t.Fatalf("after rolling back the rollback: %q %q", n.Title, n.Content)
	}
	second := r2.Steps[0].RollbackID
	var rb changeEntry
	e.r.Must("get_change", M{"id": second}, &rb)
	if rb.Reverts != first || rb.Action != "rollback" {
		t.Errorf("rollback of rollback: reverts %q action %q", rb.Reverts, rb.Action)
	}
	// The original change stays rolled back once; the message says how to undo it again.
	er = e.r.Fail("rollback_change", M{"id": change.ID}, repo.CodeFailedPrecondition)
	if !strings.Contains(er.Message, first) || !strings.Contains(er.Message, second) {
		t.Errorf("message %q should name %s and suggest %s", er.Message, first, second)
	}
	e.r.Must("rollback_change", M{"id": second}, nil)
	if n := getNote(t, e.r, id); n.Title != "t1" {
		t.Errorf("after a third rollback: %q", n.Title)
	}
}

func TestRollbackOfEachActionOverMCP(t *testing.T) {
	e := newAuditEnv(t)
	id := e.note(t, e.a, "t1")
	create := lastChange(t, e.a, id, "create")

	// Links: the rollback of an add removes that link only; links others
	// added since stay.
	e.a.Must("add_note_link", M{"note_id": id, "outlet_id": e.outlet}, nil)
	link := lastChange(t, e.a, id, "link")
	e.b.Must("add_note_link", M{"note_id": id, "contact_id": e.contact2}, nil)
	e.r.Must("rollback_change", M{"id": link.ID}, nil)
	want := []string{e.contact, e.contact2}
	slices.Sort(want)
	if diff := cmp.Diff(want, linkTargets(getNote(t, e.r, id))); diff != "" {
		t.Errorf("links after rolling back a link (-want +got):\n%s", diff)
	}
	// An unlink is rolled back by putting the very link back.
	n := getNote(t, e.r, id)
	e.a.Must("remove_note_link", M{"id": n.Links[0].ID}, nil)
	unlink := lastChange(t, e.a, id, "unlink")
	e.r.Must("rollback_change", M{"id": unlink.ID}, nil)
	if diff := cmp.Diff(n.Links, getNote(t, e.r, id).Links); diff != "" {
		t.Errorf("links after rolling back an unlink (-want +got):\n%s", diff)
	}
	// Archive → restore; restore → archive.
	e.a.Must("archive_note", M{"id": id}, nil)
	archive := lastChange(t, e.a, id, "archive")
	e.r.Must("rollback_change", M{"id": archive.ID}, nil)
	if getNote(t, e.r, id).ArchivedAt != nil {
		t.Errorf("rollback of an archive left the note archived")
	}
	e.a.Must("archive_note", M{"id": id}, nil)
	archivedAt := getNote(t, e.r, id).ArchivedAt
	e.a.Must("restore_note", M{"id": id}, nil)
	restore := lastChange(t, e.a, id, "restore")
	e.r.Must("rollback_change", M{"id": restore.ID}, nil)
	if got := getNote(t, e.r, id).ArchivedAt; got == nil || !got.Equal(*archivedAt) {
		t.Errorf("rollback of a restore: archived_at %v, want %v", got, archivedAt)
	}
	// Create → archive. b linked the note since its creation: every field a
	// create wrote counts, so that is a conflict until forced.
	e.a.Must("restore_note", M{"id": id}, nil)
	er := e.r.Fail("rollback_change", M{"id": create.ID}, repo.CodeConflict)
	if !strings.Contains(string(er.Details), `"field":"links"`) {
		t.Errorf("create rollback conflicts: %s", er.Details)
	}
	e.r.Must("rollback_change", M{"id": create.ID, "force": true}, nil)
	if getNote(t, e.r, id).ArchivedAt == nil {
		t.Errorf("rollback of a create left the note active")
	}
}

// sessionWork makes, in session sess-a, changes of every kind on two notes:
// one that existed before the session (pre) and one created in it (fresh).
// b, another agent, links pre to another contact in between.
func (e *auditEnv) sessionWork(t *testing.T) (pre, fresh string, before note) {
	t.Helper()
	setup := e.env.Client(e.env.AdminKey, "setup")
	pre = e.note(t, setup, "pre")
	setup.Must("add_note_link", M{"note_id": pre, "outlet_id": e.outlet}, nil)
	before = getNote(t, e.r, pre)

	e.a.Must("update_note", M{"id": pre, "title": "pre, edited", "type": "meeting"}, nil)
	e.b.Must("add_note_link", M{"note_id": pre, "contact_id": e.contact2}, nil)
	e.a.Must("remove_note_link", M{"id": before.Links[0].ID}, nil)
	fresh = e.note(t, e.a, "fresh")
	e.a.Must("add_note_link", M{"note_id": fresh, "outlet_id": e.outlet}, nil)
	e.a.Must("update_note", M{"id": fresh, "content": "more"}, nil)
	e.a.Must("archive_note", M{"id": fresh}, nil)
	e.a.Must("update_note", M{"id": pre, "content": "pre content"}, nil)
	return pre, fresh, before
}

func TestRollbackSessionDryRunThenRollbackThenAgain(t *testing.T) {
	e := newAuditEnv(t)
	pre, fresh, before := e.sessionWork(t)
	session := changes(t, e.r, M{"session_id": "sess-a"})
	logSize := len(changes(t, e.r, nil))

	var dry rollbackResult
	e.r.Must("rollback_session", M{"session_id": "sess-a", "dry_run": true}, &dry)
	var got, want []string
	for _, st := range dry.Steps {
		got = append(got, st.ChangeID+" "+st.Status)
	}
	for i := len(session) - 1; i >= 0; i-- {
		want = append(want, session[i].ID+" would_roll_back")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dry run steps, newest first (-want +got):\n%s", diff)
	}
	if dry.Applied || dry.Changes != len(session) || dry.Conflicts != 0 || !strings.Contains(dry.Message, "nothing was written") {
		t.Errorf("dry run = %+v", dry)
	}
	if st := dry.Steps[0]; st.Set["content"] != "body" {
		t.Errorf("first step would set %v, want content back to body", st.Set)
	}
	if n := len(changes(t, e.r, nil)); n != logSize {
		t.Fatalf("dry run wrote %d changes", n-logSize)
	}

	var res rollbackResult
	e.r.Must("rollback_session", M{"session_id": "sess-a"}, &res)
	if !res.Applied || len(res.Steps) != len(session) {
		t.Fatalf("rollback = %+v", res)
	}
	// pre is back as it was, with b's link kept; fresh is archived.
	p := getNote(t, e.r, pre)
	if p.Title != before.Title || p.Type != before.Type || p.Content != before.Content {
		t.Errorf("pre after rollback: %q %q %q, want %q %q %q", p.Title, p.Type, p.Content, before.Title, before.Type, before.Content)
	}
	wantLinks := append(linkTargets(before), e.contact2)
	slices.Sort(wantLinks)
	if diff := cmp.Diff(wantLinks, linkTargets(p)); diff != "" {
		t.Errorf("pre's links (-want +got):\n%s", diff)
	}
	if getNote(t, e.r, fresh).ArchivedAt == nil {
		t.Error("fresh note is not archived")
	}
	// The rollback's changes are the caller's, each reverting one change.
	mine := changes(t, e.r, M{"session_id": "sess-r"})
	var reverted []string
	for _, c := range mine {
		if c.Action != "rollback" {
			t.Errorf("change %s of the rollback session has action %s", c.ID, c.Action)
		}
		reverted = append(reverted, c.Reverts)
	}
	var ids []string
	for i := len(session) - 1; i >= 0; i-- {
		ids = append(ids, session[i].ID)
	}
	if diff := cmp.Diff(ids, reverted); diff != "" {
		t.Errorf("reverted changes (-want +got):\n%s", diff)
	}

	// Twice: everything is already rolled back, and the answer says so.
	er := e.r.Fail("rollback_session", M{"session_id": "sess-a"}, repo.CodeFailedPrecondition)
	if !strings.Contains(er.Message, "already rolled back") {
		t.Errorf("second rollback: %q", er.Message)
	}
	var again rollbackResult
	e.r.Must("rollback_session", M{"session_id": "sess-a", "dry_run": true}, &again)
	if len(again.Steps) != 0 || len(again.AlreadyRolledBack) != len(session) || again.AlreadyRolledBack[0].RolledBack != mine[0].ID {
		t.Errorf("dry run after the rollback = %+v", again)
	}
	// Rolling back the rollback session brings the session's work back.
	e.env.Admin().Must("rollback_session", M{"session_id": "sess-r"}, nil)
	if p := getNote(t, e.r, pre); p.Title != "pre, edited" || p.Content != "pre content" {
		t.Errorf("after rolling back the rollback: %q %q", p.Title, p.Content)
	}
	e.r.Fail("rollback_session", M{"session_id": "no-such-session"}, repo.CodeNotFound)
}

func TestRollbackSessionAllOrNothingOnConflict(t *testing.T) {
	e := newAuditEnv(t)
	pre, fresh, _ := e.sessionWork(t)
	e.b.Must("update_note", M{"id": pre, "title": "b's title"}, nil)
	stateOf := func() []note { return []note{getNote(t, e.r, pre), getNote(t, e.r, fresh)} }
	was := stateOf()

	er := e.r.Fail("rollback_session", M{"session_id": "sess-a"}, repo.CodeConflict)
	if !strings.Contains(string(er.Details), `"field":"title"`) || !strings.Contains(string(er.Details), "b's title") {
		t.Errorf("conflict details: %s", er.Details)
	}
	if diff := cmp.Diff(was, stateOf()); diff != "" {
		t.Errorf("a refused session rollback changed data (-before +after):\n%s", diff)
	}
	if n := len(changes(t, e.r, M{"session_id": "sess-r"})); n != 0 {
		t.Errorf("a refused session rollback wrote %d changes", n)
	}
	var dry rollbackResult
	e.r.Must("rollback_session", M{"session_id": "sess-a", "dry_run": true}, &dry)
	if dry.Conflicts != 1 || dry.Steps[len(dry.Steps)-1].Status != "conflict" {
		t.Errorf("dry run: %d conflicts, oldest step %+v", dry.Conflicts, dry.Steps[len(dry.Steps)-1])
	}

	var forced rollbackResult
	e.r.Must("rollback_session", M{"session_id": "sess-a", "force": true}, &forced)
	if !forced.Applied || forced.Conflicts != 1 {
		t.Fatalf("forced = %+v", forced)
	}
	if p := getNote(t, e.r, pre); p.Title != "pre" {
		t.Errorf("forced: title %q, want pre", p.Title)
	}
}

func TestRollbackOfAdminChangesNeedsAdmin(t *testing.T) {
	env := testenv.New(t)
	admin := env.Client(env.AdminKey, "admin-sess")
	var k struct {
		AgentKey struct{ ID string } `json:"agent_key"`
	}
	admin.Must("create_agent_key", M{"name": "temp", "scopes": []string{"read"}}, &k)
	admin.Must("revoke_agent_key", M{"id": k.AgentKey.ID}, nil)
	revoke := lastChange(t, admin, k.AgentKey.ID, "update")
	writer := env.Client(env.Key("read", "write"), "w")
	writer.Fail("rollback_change", M{"id": revoke.ID}, repo.CodePermissionDenied)
	writer.Fail("rollback_session", M{"session_id": "admin-sess"}, repo.CodePermissionDenied)
	// An admin may: the key's secret is untouched by the round trip.
	admin.Must("rollback_session", M{"session_id": "admin-sess"}, nil)
	var keys struct {
		AgentKeys []struct {
			ID        string  `json:"id"`
			RevokedAt *string `json:"revoked_at"`
		} `json:"agent_keys"`
	}
	admin.Must("list_agent_keys", nil, &keys)
	for _, kk := range keys.AgentKeys {
		if kk.ID == k.AgentKey.ID && kk.RevokedAt != nil {
			t.Errorf("key still revoked after rolling back the revocation")
		}
	}
}

// A client that asks for progress hears it during a session rollback.
func TestRollbackSessionSendsProgress(t *testing.T) {
	e := newAuditEnv(t)
	e.sessionWork(t)
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	client := mcp.NewClient(&mcp.Implementation{Name: "progress-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			got = append(got, req.Params)
			mu.Unlock()
		},
	})
	hc := &http.Client{Transport: sessionBearer{key: e.env.AdminKey, session: "progress"}}
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.env.URL, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "rollback_session", Arguments: M{"session_id": "sess-a"}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("rollback_session: %v %+v", err, res)
	}
	// Notifications are handled concurrently with the result: wait for the
	// final one a little.
	doneLocked := func(got []*mcp.ProgressNotificationParams) bool {
		return slices.ContainsFunc(got, func(p *mcp.ProgressNotificationParams) bool { return p.Total > 0 && p.Progress == p.Total })
	}
	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return doneLocked(got)
	}
	for deadline := time.Now().Add(time.Minute); !done() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 2 || !doneLocked(got) {
		t.Fatalf("progress notifications %+v: want several, the last at progress = total", got)
	}
	for _, p := range got {
		if p.ProgressToken != "tok-1" || p.Total != 7 {
			t.Errorf("progress = %+v, want token tok-1 and total 7", p)
		}
	}
}

type sessionBearer struct{ key, session string }

func (b sessionBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	r.Header.Set("X-Agent-Session-Id", b.session)
	return http.DefaultTransport.RoundTrip(r)
}
