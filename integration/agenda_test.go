package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/repo"
)

type agenda struct {
	AsOf   time.Time      `json:"as_of"`
	Scope  string         `json:"scope"`
	UserID string         `json:"user_id"`
	Total  int            `json:"total"`
	Counts map[string]int `json:"counts"`
	Items  []struct {
		Reason     string    `json:"reason"`
		Message    string    `json:"message"`
		RecordType string    `json:"record_type"`
		RecordID   string    `json:"record_id"`
		Title      string    `json:"title"`
		Date       time.Time `json:"date"`
		Days       int       `json:"days"`
	} `json:"items"`
}

func TestAgenda(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	base := ms(time.Now())
	dayd := 24 * time.Hour
	at := func(d time.Duration) string { return base.Add(d).Format(time.RFC3339Nano) }
	ann := mk(t, c, "create_user", M{"name": "Ann Author", "email": "ann@team.example"})
	lois := mk(t, c, "create_contact", M{"first_name": "Lois", "last_name": "Lane", "email": "lois@planet.example"})
	names := map[string]string{}
	opp := func(name string, args M) string {
		args["title"] = name
		args["contact_ids"] = []string{lois}
		id := mk(t, c, "create_opportunity", args)
		names[id] = name
		return id
	}
	// Next actions: a1 (Ann's, by her address) two days overdue, a2 (the
	// admin's, by user id) due in three days, a3 (nobody's: its creator's,
	// the admin) in twenty days and an hour.
	a1 := opp("a1", M{"next_action": "call", "next_action_date": at(-2*dayd - time.Hour), "next_action_owner": "ANN@team.example"})
	a2 := opp("a2", M{"next_action": "write", "next_action_date": at(3 * dayd), "next_action_owner": env.AdminUserID})
	a3 := opp("a3", M{"next_action": "meet", "next_action_date": at(20*dayd + time.Hour)})
	mk(t, c, "create_note", M{"title": "Prep", "occurred_at": at(10 * dayd), "opportunity_ids": []string{a3}}) // a3 touched in ten days
	// a4 pitched with no reply; a5 (Ann's, by name) pitched and answered.
	a4 := opp("a4", M{})
	c.Must("update_opportunity_stage", M{"id": a4, "stage": "pitched"}, nil)
	a5 := opp("a5", M{"next_action_owner": "Ann Author"})
	c.Must("update_opportunity_stage", M{"id": a5, "stage": "pitched", "override_reason": "fixture: the same contact is pitched on purpose"}, nil)
	// Closed and archived opportunities are never on the agenda.
	opp("won", M{"next_action_date": at(-5 * dayd), "stage": "won"})
	mkArchived(t, c, "opportunity", M{"title": "archived", "next_action_date": at(-5 * dayd)})

	ctx := audit.WithActor(context.Background(), repo.SystemActor("fixtures"))
	thread := func(name, from string, date time.Time, links ...string) {
		t.Helper()
		ls := []map[string]any{}
		for _, l := range links {
			ls = append(ls, map[string]any{"id": uuid.NewString(), "opportunity_id": l, "linked_at": date})
		}
		id, err := env.Store.Fixture(ctx, "email_threads", map[string]any{"subject": name, "contact_ids": []string{lois}, "opportunity_links": ls, "last_message_at": date,
			"messages": []map[string]any{{"id": uuid.NewString(), "message_id": "<" + name + "@mail>", "from": from, "to": []string{"x@example.com"},
				"subject": name, "date": date, "body_text": "hi", "contact_ids": []string{lois}}}})
		if err != nil {
			t.Fatal(err)
		}
		names[id] = name
	}
	replyAt := ms(time.Now())
	thread("reply-a5", "Lois <lois@planet.example>", replyAt, a5)
	// Replies linked to no opportunity: t1 from Lois a day ago; t2 only from
	// the team; t3 from Lois thirty days ago (older than reply_days).
	thread("t1", "lois@planet.example", base.Add(-dayd))
	thread("t2", "press@team.example", base.Add(-dayd))
	thread("t3", "lois@planet.example", base.Add(-30*dayd))
	h4 := history(t, c, a4)
	upd := func(id string) time.Time {
		var o struct {
			UpdatedAt time.Time `json:"updated_at"`
		}
		c.Must("get_opportunity", M{"id": id}, &o)
		return o.UpdatedAt
	}
	date := map[string]time.Time{a1: base.Add(-2*dayd - time.Hour), a2: base.Add(3 * dayd), a3: base.Add(20*dayd + time.Hour)}

	get := func(args M) (agenda, []string) {
		t.Helper()
		var a agenda
		c.Must("get_agenda", args, &a)
		got := []string{}
		for _, it := range a.Items {
			got = append(got, fmt.Sprintf("%s %s %d", it.Reason, names[it.RecordID], it.Days))
		}
		return a, got
	}
	days := func(d time.Duration) int { return int(d / dayd) }

	// Now, for the team: a1 overdue, t1 unlinked, a2 due. a4 was pitched
	// just now (not 5 days ago); nothing is untouched for 14 days.
	a, got := get(M{})
	want := []string{
		fmt.Sprintf("next_action_overdue a1 %d", days(a.AsOf.Sub(date[a1]))),
		fmt.Sprintf("unlinked_reply t1 %d", days(a.AsOf.Sub(base.Add(-dayd)))),
		fmt.Sprintf("next_action_due a2 %d", days(date[a2].Sub(a.AsOf))),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agenda now (-want +got):\n%s", diff)
	}
	if a.Scope != "team" || a.Total != 3 || !cmp.Equal(map[string]int{"next_action_overdue": 1, "no_reply": 0, "unlinked_reply": 1, "next_action_due": 1, "embargo_lifting": 0, "untouched": 0}, a.Counts) {
		t.Errorf("scope %s total %d counts %v", a.Scope, a.Total, a.Counts)
	}
	if it := a.Items[1]; it.RecordType != "email_thread" || it.Title != "t1" || a.Items[0].RecordType != "opportunity" || a.Items[0].Message == "" {
		t.Errorf("items %+v", a.Items)
	}
	// Windows: with no_reply_days 0 the fresh pitch a4 is listed; with
	// due_days 30, a3 is due too.
	if _, got := get(M{"no_reply_days": 0}); !cmp.Equal(got[1], "no_reply a4 0") {
		t.Errorf("no_reply_days 0: %v", got)
	}
	if a30, got := get(M{"due_days": 30}); len(got) != 4 || got[3] != fmt.Sprintf("next_action_due a3 %d", days(date[a3].Sub(a30.AsOf))) {
		t.Errorf("due_days 30: %v", got)
	}

	// Twenty days on: a1 and a2 overdue; a4 without a reply for 20 days (a5
	// was answered); a3 due within 7 days; every open opportunity untouched
	// for 14 days but a3 (its note is 10 days old then), oldest touch first
	// (a5 last touched by the reply).
	asOf := base.Add(20 * dayd)
	a, got = get(M{"as_of": asOf.Format(time.RFC3339Nano)})
	touched := map[string]time.Time{a1: upd(a1), a2: upd(a2), a4: upd(a4)}
	want = []string{
		fmt.Sprintf("next_action_overdue a1 %d", days(asOf.Sub(date[a1]))),
		fmt.Sprintf("next_action_overdue a2 %d", days(asOf.Sub(date[a2]))),
		fmt.Sprintf("no_reply a4 %d", days(asOf.Sub(h4[1].At))),
		fmt.Sprintf("next_action_due a3 %d", days(date[a3].Sub(asOf))),
		fmt.Sprintf("untouched a1 %d", days(asOf.Sub(touched[a1]))),
		fmt.Sprintf("untouched a2 %d", days(asOf.Sub(touched[a2]))),
		fmt.Sprintf("untouched a4 %d", days(asOf.Sub(touched[a4]))),
		fmt.Sprintf("untouched a5 %d", days(asOf.Sub(replyAt))),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agenda in 20 days (-want +got):\n%s", diff)
	}
	if len(a.Items) == 8 && (!a.Items[7].Date.Equal(replyAt) || !a.Items[4].Date.Equal(touched[a1])) {
		t.Errorf("last touches: a5 %v, want the reply %v; a1 %v, want %v", a.Items[7].Date, replyAt, a.Items[4].Date, touched[a1])
	}
	// Paging keeps the order and the totals.
	if p, got := get(M{"as_of": asOf.Format(time.RFC3339Nano), "limit": 2, "offset": 3}); !cmp.Equal(got, want[3:5]) || p.Total != 8 {
		t.Errorf("page: %v (total %d), want %v", got, p.Total, want[3:5])
	}

	// One member's agenda: Ann owns a1 (her address) and a5 (her name);
	// the admin (mine) owns a2 (user id), a3 and a4 (created by the admin,
	// no owner). Unlinked replies are the team's only.
	_, got = get(M{"as_of": asOf.Format(time.RFC3339Nano), "user_id": ann})
	if diff := cmp.Diff([]string{want[0], want[4], want[7]}, got); diff != "" {
		t.Errorf("Ann's agenda (-want +got):\n%s", diff)
	}
	a, got = get(M{"as_of": asOf.Format(time.RFC3339Nano), "mine": true})
	if diff := cmp.Diff([]string{want[1], want[2], want[3], want[5], want[6]}, got); diff != "" {
		t.Errorf("the admin's agenda (-want +got):\n%s", diff)
	}
	if a.Scope != "user" || a.UserID != env.AdminUserID {
		t.Errorf("scope %s user %s", a.Scope, a.UserID)
	}
	if _, got := get(M{"user_id": ann}); !cmp.Equal(got, []string{fmt.Sprintf("next_action_overdue a1 %d", days(time.Now().Sub(date[a1])))}) {
		t.Errorf("Ann's agenda now: %v", got)
	}

	if e := c.Fail("get_agenda", M{"user_id": uuid.NewString()}, "not_found"); e.Field != "user_id" {
		t.Errorf("unknown user: field %q", e.Field)
	}
	for _, tc := range []struct {
		args  M
		field string
	}{
		{M{"mine": true, "user_id": ann}, "mine"},
		{M{"untouched_days": 0}, "untouched_days"},
		{M{"due_days": 366}, "due_days"},
		{M{"as_of": "soon"}, "as_of"},
		{M{"user_id": "ann"}, "user_id"},
	} {
		if e := c.Fail("get_agenda", tc.args, "invalid_argument"); e.Field != tc.field {
			t.Errorf("%v: field %q, want %q", tc.args, e.Field, tc.field)
		}
	}
}
