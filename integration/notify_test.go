package integration

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"outreach/delivery"
	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/repo/notify"
	"outreach/repo/outbox"
	"outreach/slackmsg"
	"outreach/tools"
)

const hookSecret = "whsec-test-secret"

type notifRig struct {
	env   *testenv.Env
	c     *testenv.Client
	slack *fakeSlack
	recv  *receiver
	cfg   delivery.Config
}

// newNotifRig starts the service with Slack (the library's test server) and
// a webhook receiver as delivery targets.
func newNotifRig(t *testing.T) *notifRig {
	t.Helper()
	fs := newFakeSlack(t)
	recv := newReceiver(t, hookSecret)
	sc := slackmsg.New(slackmsg.Config{BotToken: fs.Token, Channel: "C0TEAM", APIURL: fs.APIURL(), MaxWait: 5 * time.Second})
	env := testenv.NewWith(t, testenv.Options{Tools: []tools.Option{tools.WithSlack(sc)}})
	cfg := delivery.Config{Slack: sc, WebhookURL: recv.srv.URL, WebhookSecret: hookSecret,
		Interval: 30 * time.Millisecond, BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		Timeout: 500 * time.Millisecond, Lease: 2 * time.Second}
	outbox.Of(env.Store).SetDeliveryTargets(delivery.Targets(cfg))
	return &notifRig{env: env, c: env.Admin(), slack: fs, recv: recv, cfg: cfg}
}

type notification struct {
	ID            string         `json:"id"`
	UserID        string         `json:"user_id"`
	OpportunityID string         `json:"opportunity_id"`
	Event         string         `json:"event"`
	Text          string         `json:"text"`
	Data          map[string]any `json:"data"`
	ReadAt        *time.Time     `json:"read_at"`
	Delivery      struct {
		Done    bool `json:"done"`
		Targets []struct {
			Target      string     `json:"target"`
			Attempts    int        `json:"attempts"`
			DeliveredAt *time.Time `json:"delivered_at"`
		} `json:"targets"`
	} `json:"delivery"`
}

func notifications(t *testing.T, c *testenv.Client, args M) []notification {
	t.Helper()
	var out struct {
		Total         int            `json:"total"`
		Notifications []notification `json:"notifications"`
	}
	c.Must("list_notifications", args, &out)
	if out.Total != len(out.Notifications) && args["limit"] == nil {
		t.Fatalf("total %d, showing %d", out.Total, len(out.Notifications))
	}
	return out.Notifications
}

func (r *notifRig) opportunity(t *testing.T, title string) string {
	t.Helper()
	return testenv.ID(t, r.c.Must("create_opportunity", M{"title": title}, nil))
}

// runUntil runs the worker's scan until cond holds.
func runUntil(t *testing.T, w *delivery.Worker, what string, cond func() bool) {
	t.Helper()
	eventually(t, 15*time.Second, what, func() bool {
		if _, err := w.RunOnce(context.Background()); err != nil {
			t.Logf("worker: %v", err)
		}
		return cond()
	})
}

func TestNotifyStageChangeReachesSlackAndWebhookOnce(t *testing.T) {
	r := newNotifRig(t)
	opp := r.opportunity(t, "Launch interview")
	var sub struct {
		ID     string   `json:"id"`
		Events []string `json:"events"`
		UserID string   `json:"user_id"`
	}
	r.c.Must("subscribe_opportunity", M{"opportunity_id": opp}, &sub)
	if diff := cmp.Diff(sub.Events, outbox.Events); diff != "" || sub.UserID != r.env.AdminUserID {
		t.Fatalf("default subscription: user %s events (-got +want):\n%s", sub.UserID, diff)
	}
	var subs struct {
		Subscriptions []struct {
			OpportunityID    string `json:"opportunity_id"`
			OpportunityTitle string `json:"opportunity_title"`
			OpportunityStage string `json:"opportunity_stage"`
		} `json:"subscriptions"`
	}
	r.c.Must("list_subscriptions", M{}, &subs)
	if len(subs.Subscriptions) != 1 || subs.Subscriptions[0].OpportunityTitle != "Launch interview" || subs.Subscriptions[0].OpportunityStage != "researching" {
		t.Fatalf("list_subscriptions: %+v", subs)
	}

	r.c.Must("update_opportunity_stage", M{"id": opp, "stage": "pitched", "note": "sent the pitch"}, nil)
	ns := notifications(t, r.c, M{})
	if len(ns) != 1 || ns[0].Event != outbox.EventStageChanged || ns[0].OpportunityID != opp || ns[0].Data["from"] != "researching" || ns[0].Data["to"] != "pitched" {
		t.Fatalf("after the move: %+v", ns)
	}
	id := ns[0].ID
	// The outbox row was written by the change that caused it: same tool, same session.
	var log struct {
		Changes []struct {
			RecordID   string `json:"record_id"`
			Tool       string `json:"tool"`
			Action     string `json:"action"`
			Reversible bool   `json:"reversible"`
		} `json:"changes"`
	}
	r.c.Must("get_change_log", M{"collection": "notifications"}, &log)
	if len(log.Changes) != 1 || log.Changes[0].RecordID != id || log.Changes[0].Tool != "update_opportunity_stage" || log.Changes[0].Reversible {
		t.Fatalf("notification's change entry: %+v", log.Changes)
	}

	w := delivery.New(r.env.Store, r.cfg)
	runUntil(t, w, "delivery to Slack and the webhook", func() bool {
		return r.recv.count(id) == 1 && len(r.slack.postsContaining(id)) == 1
	})
	// More scans, on several workers, send nothing again.
	w2 := delivery.New(r.env.Store, r.cfg)
	for range 3 {
		w.RunOnce(context.Background())
		w2.RunOnce(context.Background())
	}
	accepted, _, bad := r.recv.stats()
	if diff := cmp.Diff(accepted, map[string]int{id: 1}); diff != "" || bad != 0 {
		t.Errorf("webhook deliveries (-got +want):\n%s\nbad signatures %d", diff, bad)
	}
	if p := r.slack.postsContaining(id); len(p) != 1 || p[0].Channel != "C0TEAM" || !strings.Contains(p[0].Text, "stage_changed") {
		t.Errorf("Slack posts of the notification: %+v", p)
	}
	body := r.recv.bodies[id]
	if body["event"] != "stage_changed" || body["opportunity_id"] != opp || body["opportunity_title"] != "Launch interview" {
		t.Errorf("webhook body: %v", body)
	}
	ns = notifications(t, r.c, M{})
	if !ns[0].Delivery.Done || len(ns[0].Delivery.Targets) != 2 {
		t.Fatalf("delivery state: %+v", ns[0].Delivery)
	}
	for _, ts := range ns[0].Delivery.Targets {
		if ts.Attempts != 1 || ts.DeliveredAt == nil {
			t.Errorf("target %s: %+v", ts.Target, ts)
		}
	}
	attempts, err := notify.Of(r.env.Store).DeliveryAttempts(context.Background(), id)
	if err != nil || len(attempts) != 2 {
		t.Fatalf("delivery records: %v %+v", err, attempts)
	}

	// Polling: unread, then marked read.
	if got := notifications(t, r.c, M{"unread_only": true}); len(got) != 1 {
		t.Fatalf("unread: %d", len(got))
	}
	var marked struct {
		Marked []string `json:"marked"`
	}
	r.c.Must("mark_notifications_read", M{"ids": []string{id}}, &marked)
	if diff := cmp.Diff(marked.Marked, []string{id}); diff != "" {
		t.Errorf("marked (-got +want):\n%s", diff)
	}
	if got := notifications(t, r.c, M{"unread_only": true}); len(got) != 0 {
		t.Errorf("unread after marking: %d", len(got))
	}
	r.c.Must("mark_notifications_read", M{"ids": []string{id}}, &marked)
	if len(marked.Marked) != 0 {
		t.Errorf("marking again marked %v", marked.Marked)
	}
}

func TestNotifyEventsNotesCoverageRollbackAndDueActions(t *testing.T) {
	r := newNotifRig(t)
	ctx := context.Background()
	opp := r.opportunity(t, "Podcast")
	other := r.opportunity(t, "Unfollowed")
	// A second team member follows notes only.
	var bob struct{ ID string }
	r.c.Must("create_user", M{"name": "Bob", "email": "bob@example.com", "slack_user_id": "U0BOB"}, &bob)
	r.c.Must("subscribe_opportunity", M{"opportunity_id": opp}, nil)
	r.c.Must("subscribe_opportunity", M{"opportunity_id": opp, "user_id": bob.ID, "events": []string{"note_added"}}, nil)

	r.c.Must("create_note", M{"content": "Host liked the angle", "opportunity_ids": []string{opp}}, nil)
	r.c.Must("create_note", M{"content": "not followed", "opportunity_ids": []string{other}}, nil)
	r.c.Must("create_coverage", M{"title": "Episode 12", "published_at": "2026-03-01", "opportunity_id": opp}, nil)
	kinds := func(user string) []string {
		var out []string
		for _, n := range notifications(t, r.c, M{"user_id": user}) {
			out = append(out, n.Event)
		}
		return out
	}
	if diff := cmp.Diff(kinds(r.env.AdminUserID), []string{"coverage_added", "note_added"}); diff != "" {
		t.Errorf("admin's notifications (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(kinds(bob.ID), []string{"note_added"}); diff != "" {
		t.Errorf("bob's notifications (-got +want):\n%s", diff)
	}
	bobs := notifications(t, r.c, M{"user_id": bob.ID})
	runUntil(t, delivery.New(r.env.Store, r.cfg), "Bob's notification in Slack", func() bool { return len(r.slack.postsContaining(bobs[0].ID)) == 1 })
	if p := r.slack.postsContaining(bobs[0].ID); !strings.HasPrefix(p[0].Text, "<@U0BOB> ") {
		t.Errorf("Bob is not mentioned: %q", p[0].Text)
	}

	// A stage move, then its rollback: the rollback is itself a move, so it
	// is an event; rolling back a note is not. Nothing sent is un-sent.
	var moved struct{ ID string }
	r.c.Must("update_opportunity_stage", M{"id": opp, "stage": "drafting"}, &moved)
	var log struct {
		Changes []struct {
			ID, Collection, Tool string
		} `json:"changes"`
	}
	r.c.Must("get_change_log", M{"record_id": opp, "limit": 1}, &log)
	r.c.Must("rollback_change", M{"id": log.Changes[0].ID}, nil)
	ns := notifications(t, r.c, M{})
	if len(ns) != 4 || ns[0].Event != "stage_changed" || ns[0].Data["rollback"] != true || ns[0].Data["to"] != "researching" || ns[1].Data["to"] != "drafting" {
		t.Fatalf("after move and rollback: %+v", ns)
	}
	r.c.Must("get_change_log", M{"collection": "notes", "limit": 1}, &log)
	r.c.Must("rollback_change", M{"id": log.Changes[0].ID}, nil)
	if got := notifications(t, r.c, M{}); len(got) != 4 {
		t.Errorf("a note's rollback made a notification: %d", len(got))
	}
	// A notification itself cannot be rolled back.
	r.c.Must("get_change_log", M{"collection": "notifications", "limit": 1}, &log)
	r.c.Fail("rollback_change", M{"id": log.Changes[0].ID}, repo.CodeFailedPrecondition)

	// next_action_due fires once per due date, however often the workers scan.
	r.c.Must("update_opportunity", M{"id": opp, "next_action": "send the brief", "next_action_date": "2026-01-02"}, nil)
	w1, w2 := delivery.New(r.env.Store, r.cfg), delivery.New(r.env.Store, r.cfg)
	var wg sync.WaitGroup
	for _, w := range []*delivery.Worker{w1, w2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				w.RunOnce(ctx)
			}
		}()
	}
	wg.Wait()
	count := func() int {
		n := 0
		for _, x := range notifications(t, r.c, M{}) {
			if x.Event == outbox.EventNextActionDue {
				n++
			}
		}
		return n
	}
	if n := count(); n != 1 {
		t.Fatalf("next_action_due notifications: %d, want 1", n)
	}
	r.c.Must("update_opportunity", M{"id": opp, "next_action_date": "2026-01-05"}, nil)
	w1.RunOnce(ctx)
	w1.RunOnce(ctx)
	if n := count(); n != 2 {
		t.Errorf("after a new due date: %d next_action_due notifications, want 2", n)
	}

	// Unsubscribed: no more notifications.
	r.c.Must("unsubscribe_opportunity", M{"opportunity_id": opp}, nil)
	r.c.Fail("unsubscribe_opportunity", M{"opportunity_id": opp}, repo.CodeFailedPrecondition)
	before := len(notifications(t, r.c, M{}))
	r.c.Must("update_opportunity_stage", M{"id": opp, "stage": "pitched"}, nil)
	if got := len(notifications(t, r.c, M{})); got != before {
		t.Errorf("unsubscribed user got %d new notifications", got-before)
	}
}

func TestNotifyBadInputWritesNothing(t *testing.T) {
	r := newNotifRig(t)
	opp := r.opportunity(t, "Award")
	followed := r.opportunity(t, "Followed")
	r.c.Must("subscribe_opportunity", M{"opportunity_id": followed}, nil)
	var before struct{ Total int }
	r.c.Must("get_change_log", M{}, &before)
	cases := []struct {
		tool  string
		args  M
		code  string
		field string
	}{
		{"subscribe_opportunity", M{"opportunity_id": opp, "events": []string{"stage_changed", "bogus"}}, repo.CodeInvalid, "events[1]"},
		{"subscribe_opportunity", M{"opportunity_id": "nope"}, repo.CodeInvalid, "opportunity_id"},
		{"subscribe_opportunity", M{"opportunity_id": "7b0c3f8e-4a8e-4b6e-9d61-2f4f6b7b1a11"}, repo.CodeNotFound, "opportunity_id"},
		{"subscribe_opportunity", M{"opportunity_id": opp, "user_id": "7b0c3f8e-4a8e-4b6e-9d61-2f4f6b7b1a11"}, repo.CodeNotFound, "user_id"},
		{"unsubscribe_opportunity", M{"opportunity_id": opp}, repo.CodeNotFound, "opportunity_id"},
		{"mark_notifications_read", M{"ids": []string{}}, repo.CodeInvalid, "ids"},
		{"mark_notifications_read", M{"ids": []string{"7b0c3f8e-4a8e-4b6e-9d61-2f4f6b7b1a11"}}, repo.CodeNotFound, "ids[0]"},
		{"list_notifications", M{"limit": 500}, repo.CodeInvalid, "limit"},
		{"list_questions", M{"status": "closed"}, repo.CodeInvalid, "status"},
		{"send_slack_message", M{"text": "  "}, repo.CodeInvalid, "text"},
		{"ask_slack", M{"question": "Which?", "options": []string{"a", ""}}, repo.CodeInvalid, "options[1]"},
		{"get_slack_answer", M{"question_id": "7b0c3f8e-4a8e-4b6e-9d61-2f4f6b7b1a11"}, repo.CodeNotFound, ""},
		// A change refused on a followed opportunity makes no notification.
		{"update_opportunity_stage", M{"id": followed, "stage": "researching"}, repo.CodeFailedPrecondition, "stage"},
		{"update_opportunity_stage", M{"id": followed, "stage": "lost"}, repo.CodeInvalid, "lost_reason"},
		{"create_note", M{"content": "x", "opportunity_ids": []string{followed}, "type": "memo"}, repo.CodeInvalid, "type"},
	}
	for _, tc := range cases {
		e := r.c.Fail(tc.tool, tc.args, tc.code)
		if tc.field != "" && e.Field != tc.field {
			t.Errorf("%s %v: field %q, want %q (%s)", tc.tool, tc.args, e.Field, tc.field, e.Message)
		}
		if tc.code == repo.CodeInvalid && !strings.Contains(e.Message, " ") {
			t.Errorf("%s: message says too little: %q", tc.tool, e.Message)
		}
	}
	var after struct{ Total int }
	r.c.Must("get_change_log", M{}, &after)
	if after.Total != before.Total {
		t.Errorf("refused calls wrote %d changes", after.Total-before.Total)
	}
	if len(r.slack.postsContaining("")) != 0 {
		t.Errorf("refused calls posted to Slack")
	}
	if ns := notifications(t, r.c, M{}); len(ns) != 0 {
		t.Errorf("refused changes made notifications: %+v", ns)
	}
}

// A receiver that is down for a while gets the notification once it is back;
// a receiver that hangs does not slow the service's calls.
func TestNotifyWebhookDownThenBackAndSlowReceiver(t *testing.T) {
	r := newNotifRig(t)
	opp := r.opportunity(t, "Keynote")
	r.c.Must("subscribe_opportunity", M{"opportunity_id": opp, "events": []string{"stage_changed"}}, nil)
	r.recv.down.Store(true)
	r.c.Must("update_opportunity_stage", M{"id": opp, "stage": "drafting"}, nil)
	id := notifications(t, r.c, M{})[0].ID
	w := delivery.New(r.env.Store, r.cfg)
	runUntil(t, w, "three refused attempts", func() bool {
		_, refused, _ := r.recv.stats()
		return refused >= 3
	})
	if n := r.recv.count(id); n != 0 {
		t.Fatalf("accepted while down: %d", n)
	}
	if p := r.slack.postsContaining(id); len(p) != 1 {
		t.Fatalf("Slack got %d posts while the webhook was down; want 1 (targets are independent)", len(p))
	}
	r.recv.down.Store(false)
	runUntil(t, w, "delivery after the receiver came back", func() bool { return r.recv.count(id) == 1 })
	attempts, err := notify.Of(r.env.Store).DeliveryAttempts(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var hooks []bool
	for _, a := range attempts {
		if a.Target == outbox.TargetWebhook {
			hooks = append(hooks, a.OK)
			if !a.OK && a.HTTPStatus != 503 {
				t.Errorf("failed attempt recorded status %d", a.HTTPStatus)
			}
		}
	}
	if len(hooks) < 4 || hooks[len(hooks)-1] != true || hooks[0] != false {
		t.Errorf("webhook attempts: %v", hooks)
	}
	if p := r.slack.postsContaining(id); len(p) != 1 {
		t.Errorf("Slack posts: %d, want 1", len(p))
	}
	// Backoff: the gaps between failed attempts grow (full jitter keeps
	// each within [d/2, d], so attempt 3's wait is at least attempt 1's).
	// A hanging receiver: the worker runs beside the service; calls stay fast.
	r.recv.hang.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	opp2 := r.opportunity(t, "Keynote 2")
	r.c.Must("subscribe_opportunity", M{"opportunity_id": opp2}, nil)
	for _, stage := range []string{"drafting", "pitched", "responded"} {
		start := time.Now()
		r.c.Must("update_opportunity_stage", M{"id": opp2, "stage": stage}, nil)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("a call took %s while the receiver hung", d)
		}
	}
	cancel()
}

// Several workers on one store: each notification is sent once per target
// (the claim is a version-guarded write; one claimant wins), and a worker
// that dies holding a claim delays the send only until its lease runs out.
func TestNotifySeveralWorkersAndAClaimThatDies(t *testing.T) {
	r := newNotifRig(t)
	ctx := context.Background()
	var opps []string
	for i := range 6 {
		o := r.opportunity(t, "Opp "+string(rune('A'+i)))
		r.c.Must("subscribe_opportunity", M{"opportunity_id": o}, nil)
		opps = append(opps, o)
	}
	for _, o := range opps {
		r.c.Must("update_opportunity_stage", M{"id": o, "stage": "drafting"}, nil)
		r.c.Must("update_opportunity_stage", M{"id": o, "stage": "pitched"}, nil)
	}
	ns := notifications(t, r.c, M{})
	if len(ns) != 12 {
		t.Fatalf("%d notifications, want 12", len(ns))
	}
	// A worker claims one and dies before sending (its lease: 300 ms).
	sys := contextWithSystem(ctx)
	if _, err := notify.Of(r.env.Store).ClaimNotification(sys, ns[0].ID, "dead-worker", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	claimedAt := time.Now()
	var workers []*delivery.Worker
	for range 4 {
		workers = append(workers, delivery.New(r.env.Store, r.cfg))
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var once sync.Once
	halt := func() { once.Do(func() { close(stop) }); wg.Wait() }
	defer halt() // the workers end before the test's cleanup, on every path out of it
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				w.RunOnce(ctx)
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	eventually(t, 20*time.Second, "all 12 delivered", func() bool {
		acc, _, _ := r.recv.stats()
		return len(acc) == 12
	})
	if d := time.Since(claimedAt); d < 300*time.Millisecond {
		t.Errorf("the dead worker's claim was taken over after %s, before its lease ended", d)
	}
	// Let the workers scan some more before stopping them.
	time.Sleep(200 * time.Millisecond)
	halt()
	acc, _, bad := r.recv.stats()
	for _, n := range ns {
		if acc[n.ID] != 1 {
			t.Errorf("notification %s accepted %d times by the webhook", n.ID, acc[n.ID])
		}
		if p := r.slack.postsContaining(n.ID); len(p) != 1 {
			t.Errorf("notification %s posted %d times to Slack", n.ID, len(p))
		}
	}
	if bad != 0 {
		t.Errorf("%d requests with a bad signature", bad)
	}
}

func TestSlackMessagingSendAskAnswer(t *testing.T) {
	r := newNotifRig(t)
	var msg struct {
		ID, Channel, TS, Via string
	}
	r.c.Must("send_slack_message", M{"text": "Coverage is *live*"}, &msg)
	if msg.Channel != "C0TEAM" || msg.TS == "" || msg.Via != slackmsg.ViaWebAPI || len(r.slack.postsContaining("Coverage is *live*")) != 1 {
		t.Fatalf("send: %+v", msg)
	}
	// The send is a change: attributed, listed, not reversible.
	var log struct {
		Changes []struct {
			ID         string `json:"id"`
			Action     string `json:"action"`
			Tool       string `json:"tool"`
			AgentID    string `json:"agent_id"`
			Reversible bool   `json:"reversible"`
		} `json:"changes"`
	}
	r.c.Must("get_change_log", M{"action": "send"}, &log)
	if len(log.Changes) != 1 || log.Changes[0].Tool != "send_slack_message" || log.Changes[0].AgentID == "" || log.Changes[0].Reversible {
		t.Fatalf("send in the change log: %+v", log.Changes)
	}
	e := r.c.Fail("rollback_change", M{"id": log.Changes[0].ID}, repo.CodeFailedPrecondition)
	if !strings.Contains(e.Message, "left the system") {
		t.Errorf("rollback of a send: %s", e.Message)
	}

	// ask → a reply in the thread → get_slack_answer.
	var asked struct {
		QuestionID string `json:"question_id"`
	}
	r.c.Must("ask_slack", M{"question": "Which spokesperson for the podcast?", "context": "Recording on Friday", "options": []string{"Ann", "Raj"}}, &asked)
	posts := r.slack.postsContaining("Which spokesperson for the podcast?")
	if len(posts) != 1 || !strings.Contains(posts[0].Text, "Recording on Friday") || !strings.Contains(posts[0].Text, "2. Raj") {
		t.Fatalf("question as posted: %+v", posts)
	}
	type answer struct {
		Answered bool   `json:"answered"`
		Status   string `json:"status"`
		Answers  []struct {
			User, Text string
		} `json:"answers"`
	}
	var a answer
	r.c.Must("get_slack_answer", M{"question_id": asked.QuestionID}, &a)
	if a.Answered || len(a.Answers) != 0 || a.Status != "open" {
		t.Fatalf("before any reply: %+v", a)
	}
	var open struct {
		Total int `json:"total"`
	}
	r.c.Must("list_questions", M{"status": "open"}, &open)
	if open.Total != 1 {
		t.Errorf("open questions: %d", open.Total)
	}
	r.slack.reply("C0TEAM", posts[0].TS, "U0ANN", "Raj, he knows the product")
	r.c.Must("get_slack_answer", M{"question_id": asked.QuestionID}, &a)
	if !a.Answered || a.Status != "answered" || len(a.Answers) != 1 || a.Answers[0].Text != "Raj, he knows the product" || a.Answers[0].User != "U0ANN" {
		t.Fatalf("after a reply: %+v", a)
	}
	var answered struct {
		Total     int `json:"total"`
		Questions []struct {
			ID      string
			Answers []json.RawMessage
		} `json:"questions"`
	}
	r.c.Must("list_questions", M{"status": "answered"}, &answered)
	if answered.Total != 1 || answered.Questions[0].ID != asked.QuestionID || len(answered.Questions[0].Answers) != 1 {
		t.Errorf("answered questions: %+v", answered)
	}
	r.c.Must("list_questions", M{"status": "open"}, &open)
	if open.Total != 0 {
		t.Errorf("open questions after the answer: %d", open.Total)
	}

	// rollback_session lists the sends as not reversible, never skipped.
	var sess struct {
		SessionID string `json:"session_id"`
	}
	r.c.Must("whoami", M{}, &sess)
	var plan struct {
		NotReversible []struct {
			Action string `json:"action"`
		} `json:"not_reversible"`
	}
	r.c.Must("rollback_session", M{"session_id": sess.SessionID, "dry_run": true}, &plan)
	if len(plan.NotReversible) != 2 || plan.NotReversible[0].Action != "send" {
		t.Errorf("not reversible in the session's rollback: %+v", plan.NotReversible)
	}
}

// Slack's rate limit (HTTP 429 with Retry-After) is waited out.
func TestSlackRateLimitIsHonoured(t *testing.T) {
	r := newNotifRig(t)
	r.slack.mu.Lock()
	r.slack.limited = 1
	r.slack.mu.Unlock()
	start := time.Now()
	r.c.Must("send_slack_message", M{"text": "after the limit"}, nil)
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("sent %s after a 429 with Retry-After: 1", d)
	}
	r.slack.mu.Lock()
	hits := r.slack.hits429
	r.slack.mu.Unlock()
	if hits != 1 || len(r.slack.postsContaining("after the limit")) != 1 {
		t.Errorf("429s %d, posts %d", hits, len(r.slack.postsContaining("after the limit")))
	}
}

// With only an incoming webhook, sends work and reading replies says it
// needs a bot token.
func TestSlackWebhookOnlySetup(t *testing.T) {
	hook := newReceiver(t, "")
	var mu sync.Mutex
	var got []map[string]any
	hook.srv.Config.Handler = httpFunc(func(body []byte) {
		var m map[string]any
		json.Unmarshal(body, &m)
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	})
	sc := slackmsg.New(slackmsg.Config{WebhookURL: hook.srv.URL + "/services/T0/B0/secret"})
	env := testenv.NewWith(t, testenv.Options{Tools: []tools.Option{tools.WithSlack(sc)}})
	c := env.Admin()
	var msg struct{ Via string }
	c.Must("send_slack_message", M{"text": "hello from the webhook"}, &msg)
	mu.Lock()
	n := len(got)
	text := ""
	if n == 1 {
		text, _ = got[0]["text"].(string)
	}
	mu.Unlock()
	if n != 1 || text != "hello from the webhook" || msg.Via != slackmsg.ViaWebhook {
		t.Fatalf("webhook send: %d posts %q via %s", n, text, msg.Via)
	}
	for tool, args := range map[string]M{"ask_slack": {"question": "Which?"}, "get_slack_answer": {"question_id": "7b0c3f8e-4a8e-4b6e-9d61-2f4f6b7b1a11"}} {
		e := c.Fail(tool, args, repo.CodeFailedPrecondition)
		if !strings.Contains(e.Message, "bot token") {
			t.Errorf("%s in webhook mode: %s", tool, e.Message)
		}
	}
	var log struct {
		Changes []struct{ After map[string]any } `json:"changes"`
	}
	c.Must("get_change_log", M{"action": "send"}, &log)
	raw, _ := json.Marshal(log)
	if len(log.Changes) != 1 || strings.Contains(string(raw), "secret") {
		t.Errorf("send entry: %s", raw)
	}
}
