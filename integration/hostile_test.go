package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/repo/pipeline"
)

// The hostile-input battery: calls a hostile client would make, each of
// which must be refused with a clear answer and write nothing, and after each
// of which every list and get must still answer. The cases here are the
// classes that once got through (see docs/limits.md); the cleanup of every
// test runs the checks of `outreach verify` (testenv) and readsAnswer.

// hostile is a small world of one record of every kind, made through the tools.
type hostile struct {
	env                                                                    *testenv.Env
	c                                                                      *testenv.Client
	outlet, contact, channel, campaign, opportunity, coverage, note, media string
}

func newHostile(t *testing.T, o testenv.Options) *hostile {
	t.Helper()
	// Registered first, so it runs last: once the service and its store are
	// closed, `outreach verify` opens the store itself and checks it.
	// A database of its own: on a server given by MONGODB_URI every test
	// would otherwise find the previous one's keys (and no first key).
	o.DataDir, o.DB = dataDir(t), "outreach_hostile_"+strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	t.Cleanup(func() {
		out, errOut, err := runVerify(t, o.DataDir, o.DB)
		if err != nil || !strings.HasPrefix(out, "ok") {
			t.Errorf("outreach verify after the hostile calls: %v\n%s%s", err, out, errOut)
		}
	})
	env := testenv.NewWith(t, o)
	h := &hostile{env: env, c: env.Client(env.AdminKey, "hostile-"+strings.ReplaceAll(t.Name(), "/", "-"))}
	c := h.c
	h.outlet = mk(t, c, "create_outlet", M{"name": "The Wire", "tier": 1})
	h.contact = mk(t, c, "create_contact", M{"first_name": "Ada", "last_name": "Lovelace", "outlet_ids": []string{h.outlet}})
	h.channel = mk(t, c, "create_channel", M{"outlet_id": h.outlet, "type": "newsletter", "name": "Morning"})
	h.campaign = mk(t, c, "create_campaign", M{"name": "Launch"})
	h.opportunity = mk(t, c, "create_opportunity", M{"title": "Feature", "campaign_id": h.campaign, "outlet_id": h.outlet, "contact_ids": []string{h.contact}})
	h.coverage = mk(t, c, "create_coverage", M{"title": "Review", "published_at": "2026-03-01", "opportunity_id": h.opportunity, "reach": 1000})
	h.note = mk(t, c, "create_note", M{"title": "Call", "contact_ids": []string{h.contact}, "opportunity_ids": []string{h.opportunity}})
	h.media = testenv.ID(t, c.Must("upload_media", M{"coverage_id": h.coverage, "type": "document", "filename": "a.txt", "mime_type": "text/plain", "content_base64": "aGVsbG8="}, nil))
	// The first signed URL creates the signing secret (a change): make it now.
	c.Must("get_media", M{"id": h.media}, nil)
	t.Cleanup(func() {
		if !t.Failed() {
			h.readsAnswer(t, true)
		}
	})
	return h
}

// runVerify runs `outreach verify` on the store of data and db.
func runVerify(t *testing.T, data, db string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), "verify", "--data", data)
	cmd.Env = append(os.Environ(), "OUTREACH_DB="+db)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// readsAnswer calls every list and every get of the world's records and,
// with changeLog, pages through the whole change log and gets every change
// in it: none may fail.
func (h *hostile) readsAnswer(t *testing.T, changeLog bool) {
	t.Helper()
	c := h.c
	calls := []struct {
		tool string
		args M
	}{
		{"list_outlets", M{"include_archived": true}}, {"list_contacts", M{"include_archived": true}},
		{"list_channels", M{"include_archived": true}}, {"list_campaigns", M{"include_archived": true}},
		{"list_opportunities", M{"include_archived": true}}, {"list_coverage", M{"include_archived": true}},
		{"list_media", M{"include_archived": true}}, {"list_notes", M{"include_archived": true}},
		{"list_users", M{}}, {"list_agent_keys", M{}}, {"whoami", M{}}, {"get_service_info", M{}},
		{"get_outlet", M{"id": h.outlet}}, {"get_contact", M{"id": h.contact}}, {"get_channel", M{"id": h.channel}},
		{"get_campaign", M{"id": h.campaign}}, {"get_opportunity", M{"id": h.opportunity}},
		{"get_coverage", M{"id": h.coverage}}, {"get_note", M{"id": h.note}}, {"get_media", M{"id": h.media}},
		{"get_interaction_log", M{"contact_id": h.contact}}, {"get_interaction_log", M{"outlet_id": h.outlet}},
		{"get_interaction_log", M{"opportunity_id": h.opportunity}},
	}
	for _, call := range calls {
		if _, e := c.Call(call.tool, call.args); e != nil {
			t.Errorf("after the hostile calls, %s(%v) fails: %s: %s", call.tool, call.args, e.Code, e.Message)
		}
	}
	for offset := 0; changeLog; offset += 200 {
		var page struct {
			Total   int
			Changes []struct{ ID string }
		}
		raw, e := c.Call("get_change_log", M{"limit": 200, "offset": offset})
		if e != nil {
			t.Errorf("get_change_log offset %d fails: %s: %s", offset, e.Code, e.Message)
			break
		}
		json.Unmarshal(raw, &page)
		for _, ch := range page.Changes {
			if _, e := c.Call("get_change", M{"id": ch.ID}); e != nil {
				t.Errorf("get_change %s fails: %s: %s", ch.ID, e.Code, e.Message)
			}
		}
		if offset+200 >= page.Total {
			break
		}
	}
}

// refuse runs each refusal (see refuse) and, after each, checks that every
// list and get still answers; at the end, that none of them wrote anything.
func (h *hostile) refuse(t *testing.T, cases []refusal) {
	t.Helper()
	before := changeCount(t, h.c)
	for _, tc := range cases {
		refuse(t, h.c, []refusal{tc})
		h.readsAnswer(t, false)
		hostileCases.Add(1)
	}
	if after := changeCount(t, h.c); after != before {
		t.Errorf("refused calls wrote %d changes", after-before)
	}
}

// hostileCases counts the refused calls of a run (the figure in docs/tests.md).
var hostileCases atomic.Int64

// nested returns an object n levels deep: {"k": {"k": … {"k": "leaf"}}}.
func nested(n int) M {
	var v any = "leaf"
	for i := 0; i < n; i++ {
		v = M{"k": v}
	}
	return v.(M)
}

// Defect: a date that leaves years 0–9999 once in UTC was stored, and every
// read that met it failed. Every date argument refuses it, naming the field
// and the range, and writes nothing.
func TestHostileDatesOutsideTheRangeAreRefused(t *testing.T) {
	h := newHostile(t, testenv.Options{})
	late, early := "9999-12-31T23:59:59-23:00", "0000-01-01T00:00:00+01:00"
	var cases []refusal
	add := func(tool, field string, args M) {
		for _, v := range []string{late, early, "10000-01-01", "-0001-01-01"} {
			a := M{}
			for k, x := range args {
				a[k] = x
			}
			a[field] = v
			cases = append(cases, refusal{name: tool + " " + field + " " + v, tool: tool, args: a, code: repo.CodeInvalid, field: field, msg: "0000-01-01"})
		}
	}
	add("create_note", "occurred_at", M{"contact_ids": []string{h.contact}})
	add("update_note", "occurred_at", M{"id": h.note})
	add("create_opportunity", "next_action_date", M{"title": "x"})
	add("create_opportunity", "target_date", M{"title": "x"})
	add("update_opportunity", "next_action_date", M{"id": h.opportunity})
	add("create_coverage", "published_at", M{"title": "x"})
	add("update_coverage", "published_at", M{"id": h.coverage})
	add("create_campaign", "starts_on", M{"name": "x"})
	add("update_campaign", "ends_on", M{"id": h.campaign})
	add("add_contact_outlet", "started_on", M{"contact_id": h.contact, "outlet_id": mk(t, h.c, "create_outlet", M{"name": "Other"})})
	add("create_agent_key", "expires_at", M{"name": "k"})
	add("list_coverage", "since", M{})
	add("list_opportunities", "next_action_before", M{})
	add("get_change_log", "since", M{})
	add("get_interaction_log", "until", M{"contact_id": h.contact})
	h.refuse(t, cases)

	// The ends of the range are accepted.
	h.c.Must("update_note", M{"id": h.note, "occurred_at": "9999-12-31T23:59:59.999Z"}, nil)
	h.c.Must("update_note", M{"id": h.note, "occurred_at": "0000-01-01T00:00:00Z"}, nil)
}

// A value no tool would write now (an older version's, an analyst's) must
// not make a read fail: the readers still answer.
func TestHostileStoredDatesOutsideTheRangeStillRead(t *testing.T) {
	h := newHostile(t, testenv.Options{})
	ctx := audit.WithActor(context.Background(), repo.SystemActor("analyst"))
	far := time.Date(10000, 1, 1, 22, 59, 59, 0, time.UTC)
	before := time.Date(-1, 12, 31, 23, 0, 0, 0, time.UTC)
	farNote, err := h.env.Store.Fixture(ctx, "notes", map[string]any{"type": "general", "title": "far", "content": "", "occurred_at": far,
		"links": []any{map[string]any{"id": "0b9d5c55-6a7e-4a55-9a63-0c1c1c0a0a01", "contact_id": h.contact, "created_at": before}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.env.Store.Fixture(ctx, "opportunities", map[string]any{"title": "far", "campaign_id": h.campaign, "stage": "researching",
		"priority": "medium", "contact_ids": []string{h.contact}, "next_action_date": far, "stage_history": []any{}}); err != nil {
		t.Fatal(err)
	}
	var notes struct {
		Notes []struct {
			Title      string
			OccurredAt string `json:"occurred_at"`
		}
	}
	h.c.Must("list_notes", M{"contact_id": h.contact}, &notes)
	found := false
	for _, n := range notes.Notes {
		if n.Title == "far" {
			found = true
			if !strings.HasPrefix(n.OccurredAt, "9999-12-31T23:59:59") {
				t.Errorf("a date past 9999 reads as %q; want it shown at the end of the range", n.OccurredAt)
			}
		}
	}
	if !found {
		t.Errorf("list_notes does not show the note: %+v", notes)
	}
	// Such a record can still be changed, and the change rolled back.
	h.c.Must("update_note", M{"id": farNote, "title": "far, renamed"}, nil)
	var ch struct{ Changes []struct{ ID string } }
	h.c.Must("get_change_log", M{"record_id": farNote, "action": "update"}, &ch)
	if len(ch.Changes) != 1 {
		t.Fatalf("update of the far note: %+v", ch)
	}
	h.c.Must("rollback_change", M{"id": ch.Changes[0].ID}, nil)
	// readsAnswer (cleanup) covers every other reader and the change log.
}

// Defect: a refused upload left its streamed chunks in fs.chunks, and a URL
// could be retried until it expired. A refused upload leaves nothing.
func TestHostileRefusedUploadLeavesNoBytes(t *testing.T) {
	const capBytes = 600 << 10 // more than two GridFS chunks
	h := newHostile(t, testenv.Options{Media: pipeline.MediaOptions{MaxBytes: capBytes}})
	chunks := h.env.Store.RawCollections().Database.Collection("fs.chunks")
	count := func() int64 {
		n, err := chunks.CountDocuments(context.Background(), bson.M{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	var up uploadURL
	h.c.Must("upload_media_url", M{"coverage_id": h.coverage, "filename": "big.bin", "mime_type": "application/octet-stream"}, &up)
	start := count()
	for try := 0; try < 3; try++ {
		resp, body := send(t, http.MethodPut, up.UploadURL, newFile(1, 4*capBytes), -1)
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("try %d: status %d %s; want 413", try, resp.StatusCode, body)
		}
	}
	// A client that goes away mid-body leaves nothing either.
	pr, pw := io.Pipe()
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		pw.Write(make([]byte, 300<<10))
		pw.CloseWithError(fmt.Errorf("client gone"))
	}()
	req, _ := http.NewRequest(http.MethodPut, up.UploadURL, pr)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	pr.Close() // a write the request did not read returns
	<-gone
	if got := count(); got != start {
		t.Errorf("refused uploads left %d chunks in fs.chunks; want none", got-start)
	}
	// The URL still works for a file within the cap, once (409, retryable,
	// while the server is still finishing the cut-off upload).
	for try := 0; ; try++ {
		resp, body := send(t, http.MethodPut, up.UploadURL, newFile(2, capBytes), -1)
		if resp.StatusCode == http.StatusConflict && try < 50 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("upload within the cap: %d %s", resp.StatusCode, body)
		}
		break
	}
	if got, want := count(), start+3; got != want {
		t.Errorf("fs.chunks holds %d new chunks; want %d (the one stored file)", got-start, want-start)
	}

	// Two uploads to one URL at once: the second is refused while the first
	// runs, so a URL writes one file's bytes into the store, not one per try.
	h.c.Must("upload_media_url", M{"coverage_id": h.coverage, "filename": "race.bin", "mime_type": "application/octet-stream"}, &up)
	start = count()
	pr, pw = io.Pipe()
	first := make(chan int)
	go func() {
		req, _ := http.NewRequest(http.MethodPut, up.UploadURL, pr)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	pw.Write(make([]byte, 100<<10))    // the first upload is under way…
	time.Sleep(300 * time.Millisecond) // …and its handler has claimed the URL
	resp, body := send(t, http.MethodPut, up.UploadURL, newFile(3, 1000), 1000)
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("second upload while the first runs: %d %s; want 409", resp.StatusCode, body)
	}
	pw.Close()
	if status := <-first; status != http.StatusOK {
		t.Errorf("first upload: %d; want 200", status)
	}
	if resp, body := send(t, http.MethodPut, up.UploadURL, newFile(3, 1000), 1000); resp.StatusCode != http.StatusGone {
		t.Errorf("upload after the URL was used: %d %s; want 410", resp.StatusCode, body)
	}
	if got := count(); got != start+1 {
		t.Errorf("racing uploads to one URL wrote %d chunks; want 1 (one file of 100 KiB)", got-start)
	}
}

// Defect: deep free-form objects answered internal (500 levels) or were
// stored and then could not be rolled back (330 levels).
func TestHostileDeepNestingIsBoundedAndRollsBack(t *testing.T) {
	h := newHostile(t, testenv.Options{})
	before := changeCount(t, h.c)
	for _, depth := range []int{21, 100, 330, 500} {
		for _, call := range []struct {
			tool, field string
			args        M
		}{
			{"create_outlet", "social_links", M{"name": "Deep"}},
			{"update_contact", "preferences", M{"id": h.contact}},
			{"create_channel", "attributes", M{"outlet_id": h.outlet, "type": "website"}},
			{"attach_media", "metadata", M{"coverage_id": h.coverage, "media_id": h.media, "type": "document"}},
		} {
			args := M{}
			for k, v := range call.args {
				args[k] = v
			}
			args[call.field] = nested(depth)
			e := h.c.Fail(call.tool, args, repo.CodeInvalid)
			if e.Field != call.field || !strings.Contains(e.Message, "20 levels") {
				t.Errorf("%s %s %d levels deep: field %q message %q; want the field and the limit (20 levels)", call.tool, call.field, depth, e.Field, e.Message)
			}
		}
	}
	if after := changeCount(t, h.c); after != before {
		t.Errorf("refused deep objects wrote %d changes", after-before)
	}
	// The deepest object accepted is stored, and its session rolls back.
	sess := h.env.Client(h.env.AdminKey, "deep-session")
	deep := nested(20)
	id := mk(t, sess, "create_outlet", M{"name": "Deep", "social_links": deep})
	sess.Must("update_outlet", M{"id": id, "social_links": nested(19)}, nil)
	sess.Must("update_contact", M{"id": h.contact, "preferences": deep}, nil)
	sess.Must("create_channel", M{"outlet_id": h.outlet, "type": "website", "attributes": deep}, nil)
	var res rollbackResult
	h.c.Must("rollback_session", M{"session_id": "deep-session"}, &res)
	if !res.Applied || res.Changes != 4 {
		t.Errorf("rollback_session of deep objects: %+v", res)
	}
}

// Defect: a NUL byte in a free-form key answered internal.
func TestHostileNULInAFreeFormKey(t *testing.T) {
	h := newHostile(t, testenv.Options{})
	h.refuse(t, []refusal{
		{"NUL key", "create_outlet", M{"name": "x", "social_links": M{"a\x00b": "v"}}, repo.CodeInvalid, "social_links", "NUL"},
		{"nested NUL key", "update_contact", M{"id": h.contact, "preferences": M{"a": []any{M{"\x00": 1}}}}, repo.CodeInvalid, "preferences.a", "NUL"},
		{"overlong key", "create_channel", M{"outlet_id": h.outlet, "type": "website", "attributes": M{strings.Repeat("k", 201): 1}}, repo.CodeInvalid, "attributes", "200"},
	})
	// NUL inside a string value is a character like any other: stored and read back.
	var n struct{ Content string }
	h.c.Must("create_note", M{"content": "a\x00b", "contact_ids": []string{h.contact}}, &n)
	if n.Content != "a\x00b" {
		t.Errorf("content with NUL came back as %q", n.Content)
	}
}

// rawCall posts one tools/call with a hand-made JSON body.
func rawCall(t *testing.T, h *hostile, body []byte) (int, string) {
	t.Helper()
	sess := h.env.Client(h.env.AdminKey, "")
	req, _ := http.NewRequest(http.MethodPost, h.env.URL, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+h.env.AdminKey)
	req.Header.Set("Mcp-Session-Id", sess.Session.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Defect: invalid UTF-8 in a request body was replaced with U+FFFD and stored.
func TestHostileInvalidUTF8IsRefused(t *testing.T) {
	h := newHostile(t, testenv.Options{})
	before := changeCount(t, h.c)
	call := func(args string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"create_note","arguments":` + args + `}}`)
	}
	for _, tc := range []struct {
		name, field string
		body        []byte
	}{
		{"raw byte 0xff", "title", call(`{"title":"bad ` + "\xff" + `","contact_ids":["` + h.contact + `"]}`)},
		{"overlong form", "title", call(`{"title":"` + "\xc0\xaf" + `","contact_ids":["` + h.contact + `"]}`)},
		{"lone surrogate", "title", call(`{"title":"bad \ud800 x","contact_ids":["` + h.contact + `"]}`)},
		{"low surrogate", "content", call(`{"content":"\udc00","contact_ids":["` + h.contact + `"]}`)},
		{"surrogate in key", "arguments", call(`{"title":"x","contact_ids":["` + h.contact + `"],"\ud800":1}`)},
	} {
		status, text := rawCall(t, h, tc.body)
		for _, want := range []string{`"isError":true`, `invalid_argument`, "UTF-8", `\"field\":\"` + tc.field + `\"`} {
			if status != http.StatusOK || !strings.Contains(text, want) {
				t.Errorf("%s: %d %s; want a tool error with %s", tc.name, status, text, want)
			}
		}
	}
	// A valid pair of surrogates is one character and is accepted.
	status, text := rawCall(t, h, call(`{"title":"smile \ud83d\ude00","contact_ids":["`+h.contact+`"]}`))
	if status != http.StatusOK || !strings.Contains(text, "smile 😀") || strings.Contains(text, `"isError":true`) {
		t.Errorf("valid surrogate pair: %d %s", status, text)
	}
	if after := changeCount(t, h.c); after != before+1 {
		t.Errorf("%d changes written; want only the valid note's", after-before)
	}
}

// Defect: total_reach wrapped to a negative number with large reach values.
func TestHostileReachIsBoundedAndTotalsNeverWrap(t *testing.T) {
	h := newHostile(t, testenv.Options{})
	h.refuse(t, []refusal{
		{"reach over the limit", "create_coverage", M{"title": "x", "published_at": "2026-03-01", "reach": int64(math.MaxInt64)}, repo.CodeInvalid, "reach", "1000000000000"},
		{"reach update over the limit", "update_coverage", M{"id": h.coverage, "reach": int64(1e12) + 1}, repo.CodeInvalid, "reach", "1000000000000"},
		{"audience over the limit", "create_outlet", M{"name": "x", "audience_size": int64(math.MaxInt64)}, repo.CodeInvalid, "audience_size", "1000000000000"},
	})
	for i := 0; i < 3; i++ {
		mk(t, h.c, "create_coverage", M{"title": fmt.Sprint("big ", i), "published_at": "2026-03-01", "opportunity_id": h.opportunity, "reach": int64(1e12)})
	}
	// Figures stored before the limit (here: by an analyst) do not wrap either.
	ctx := audit.WithActor(context.Background(), repo.SystemActor("analyst"))
	for i := 0; i < 2; i++ {
		if _, err := h.env.Store.Fixture(ctx, "coverage", map[string]any{"title": "huge", "type": "article", "published_at": time.Now().UTC(),
			"campaign_id": h.campaign, "opportunity_id": h.opportunity, "reach": int64(math.MaxInt64 - 5)}); err != nil {
			t.Fatal(err)
		}
	}
	var m struct{ Metrics metrics }
	h.c.Must("get_campaign", M{"id": h.campaign}, &m)
	if r := m.Metrics.Coverage.TotalReach; r != math.MaxInt64 {
		t.Errorf("total_reach = %d; want it held at the largest figure, %d", r, int64(math.MaxInt64))
	}
}

// Defect: an existing id written in upper case was not_found. Ids are
// accepted in any case and stored and answered in lower case, in every tool.
func TestHostileUpperCaseIDs(t *testing.T) {
	h := newHostile(t, testenv.Options{})
	up := strings.ToUpper
	for tool, id := range map[string]string{"get_outlet": h.outlet, "get_contact": h.contact, "get_channel": h.channel, "get_campaign": h.campaign,
		"get_opportunity": h.opportunity, "get_coverage": h.coverage, "get_note": h.note, "get_media": h.media} {
		raw := h.c.Must(tool, M{"id": up(id)}, nil)
		if got := testenv.ID(t, raw); got != id {
			t.Errorf("%s(%s) answered id %s; want %s", tool, up(id), got, id)
		}
	}
	var n struct {
		Links []struct {
			ContactID string `json:"contact_id"`
		}
	}
	h.c.Must("create_note", M{"contact_ids": []string{up(h.contact), h.contact}}, &n)
	if len(n.Links) != 1 || n.Links[0].ContactID != h.contact {
		t.Errorf("create_note with the id in both cases: links %+v; want one link to %s", n.Links, h.contact)
	}
	var l struct{ Total int }
	h.c.Must("list_notes", M{"contact_id": up(h.contact)}, &l)
	if l.Total != 2 {
		t.Errorf("list_notes by an upper-case contact id: total %d; want 2", l.Total)
	}
	h.c.Must("get_change_log", M{"record_id": up(h.note)}, &l)
	if l.Total != 1 {
		t.Errorf("get_change_log by an upper-case record id: total %d; want 1", l.Total)
	}
	h.c.Must("update_opportunity", M{"id": up(h.opportunity), "outlet_id": up(h.outlet), "campaign_id": up(h.campaign)}, nil)
	h.c.Must("archive_note", M{"id": up(h.note)}, nil)
	h.c.Must("restore_note", M{"id": up(h.note)}, nil)
}

// Defect: create_note with 20,000 copies of one id took seconds (one look-up
// per copy). Arrays are bounded, and duplicates are dropped before looking up.
func TestHostileLongArrays(t *testing.T) {
	h := newHostile(t, testenv.Options{})
	many := make([]string, 20000)
	for i := range many {
		many[i] = h.contact
	}
	start := time.Now()
	e := h.c.Fail("create_note", M{"contact_ids": many}, repo.CodeInvalid)
	if e.Field != "contact_ids" || !strings.Contains(e.Message, "100") {
		t.Errorf("20,000 ids: field %q message %q; want contact_ids and the limit", e.Field, e.Message)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refusing 20,000 ids took %v", d)
	}
	start = time.Now()
	var n struct{ Links []any }
	h.c.Must("create_note", M{"contact_ids": many[:100], "outlet_ids": many[:0]}, &n)
	if len(n.Links) != 1 {
		t.Errorf("100 copies of one id made %d links; want 1", len(n.Links))
	}
	t.Logf("create_note with 100 copies of one id: %v", time.Since(start))
	h.refuse(t, []refusal{
		{"101 beats", "update_contact", M{"id": h.contact, "beats": make101("beat")}, repo.CodeInvalid, "beats", "100"},
		{"long title", "create_note", M{"title": strings.Repeat("t", 1001), "contact_ids": []string{h.contact}}, repo.CodeInvalid, "title", "1000"},
		{"long content", "create_note", M{"content": strings.Repeat("é", 100001), "contact_ids": []string{h.contact}}, repo.CodeInvalid, "content", "100000"},
		{"long search", "list_notes", M{"search": strings.Repeat("s", 1001)}, repo.CodeInvalid, "search", "1000"},
		{"many keys", "create_outlet", M{"name": "x", "social_links": manyKeys(1001)}, repo.CodeInvalid, "social_links", "1000"},
	})
}

func make101(prefix string) []string {
	out := make([]string, 101)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}

func manyKeys(n int) M {
	m := M{}
	for i := 0; i < n; i++ {
		m[fmt.Sprint("k", i)] = i
	}
	return m
}

// Search text is matched literally, whatever it holds.
func TestHostileSearchText(t *testing.T) {
	h := newHostile(t, testenv.Options{})
	mk(t, h.c, "create_note", M{"title": "a\x00b .* (x) [y] \\d $where", "contact_ids": []string{h.contact}})
	for _, q := range []string{"a\x00b", ".*", "(x)", "[y]", "\\d", "$where", "\x00", "é", "(?i)", "\\", "^", "|"} {
		for _, tool := range []string{"list_notes", "list_outlets", "list_contacts", "list_campaigns", "list_opportunities", "list_coverage"} {
			raw, e := h.c.Call(tool, M{"search": q})
			if e != nil {
				t.Errorf("%s search %q: %s: %s", tool, q, e.Code, e.Message)
				continue
			}
			if tool == "list_notes" {
				var l struct{ Total int }
				json.Unmarshal(raw, &l)
				want := 1
				if q == "é" || q == "(?i)" || q == "^" || q == "|" {
					want = 0
				}
				if l.Total != want {
					t.Errorf("list_notes search %q: %d notes; want %d", q, l.Total, want)
				}
			}
		}
	}
}

// Defect: an array directly inside an array in a free-form object passed
// validation and then failed in the embedded store. Every free-form field
// refuses it, naming the path of the outer array, and writes nothing; an
// array inside an object inside an array is stored and read back.
func TestHostileNestedArraysInFreeForm(t *testing.T) {
	h := newHostile(t, testenv.Options{})
	nestedArr := M{"scores": []any{[]any{1, 2}, []any{3}}}
	deeper := M{"a": []any{M{"b": []any{[]any{"x"}}}}}
	h.refuse(t, []refusal{
		{"outlet social_links", "create_outlet", M{"name": "x", "social_links": nestedArr}, repo.CodeInvalid, "social_links.scores", "array directly inside an array"},
		{"outlet social_links update", "update_outlet", M{"id": h.outlet, "social_links": deeper}, repo.CodeInvalid, "social_links.a.b", "array directly inside an array"},
		{"contact social_links", "create_contact", M{"first_name": "B", "last_name": "C", "social_links": nestedArr}, repo.CodeInvalid, "social_links.scores", "array directly inside an array"},
		{"contact preferences", "update_contact", M{"id": h.contact, "preferences": nestedArr}, repo.CodeInvalid, "preferences.scores", "array directly inside an array"},
		{"channel attributes", "create_channel", M{"outlet_id": h.outlet, "type": "website", "attributes": deeper}, repo.CodeInvalid, "attributes.a.b", "array directly inside an array"},
		{"channel attributes update", "update_channel", M{"id": h.channel, "attributes": nestedArr}, repo.CodeInvalid, "attributes.scores", "array directly inside an array"},
		{"media metadata", "attach_media", M{"coverage_id": h.coverage, "media_id": h.media, "type": "document", "metadata": nestedArr}, repo.CodeInvalid, "metadata.scores", "array directly inside an array"},
	})
	// An array of objects holding arrays is storable everywhere.
	ok := M{"a": []any{M{"b": []any{"x", 1.0}}}}
	var ch struct {
		Attributes map[string]any `json:"attributes"`
	}
	h.c.Must("update_channel", M{"id": h.channel, "attributes": ok}, &ch)
	h.c.Must("get_channel", M{"id": h.channel}, &ch)
	if diff := cmp.Diff(ch.Attributes, map[string]any(ok)); diff != "" {
		t.Errorf("attributes read back (-got +want):\n%s", diff)
	}
}
