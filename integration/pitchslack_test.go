package integration

import (
	"strings"
	"testing"
	"time"

	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/slackmsg"
	"outreach/tools"
)

// Approval of a pitch from Slack over MCP against the Slack library's test
// server: the pitch posted with its content hash, answers read back from
// the thread, only a mapped team member with the approver scope counts, the
// approval recorded as approve_pitch records it, and an edit voids it.
func TestPitchSlackApproval(t *testing.T) {
	fs := newFakeSlack(t)
	sc := slackmsg.New(slackmsg.Config{BotToken: fs.Token, Channel: "C0TEAM", APIURL: fs.APIURL(), MaxWait: 5 * time.Second})
	env := testenv.NewWith(t, testenv.Options{Tools: []tools.Option{tools.WithSlack(sc)}})
	admin := env.Admin()
	agent := env.Client(env.Key("read", "write"), "drafting")

	// Ann is an approver (an admin key), Bob holds only a write key, Cy has
	// an admin key but a revoked one.
	member := func(name, slackID string, scopes ...string) (string, string) {
		var u struct {
			ID string `json:"id"`
		}
		admin.Must("create_user", M{"name": name, "email": strings.ToLower(name) + "@team.example", "slack_user_id": slackID}, &u)
		var k struct {
			AgentKey struct {
				ID string `json:"id"`
			} `json:"agent_key"`
		}
		admin.Must("create_agent_key", M{"user_id": u.ID, "name": name + "'s client", "agent_type": "other", "scopes": scopes}, &k)
		return u.ID, k.AgentKey.ID
	}
	ann, _ := member("Ann", "U0ANN", "read", "write", "admin")
	member("Bob", "U0BOB", "read", "write")
	_, cyKey := member("Cy", "U0CY", "read", "write", "admin")
	admin.Must("revoke_agent_key", M{"id": cyKey}, nil)

	nia := mk(t, agent, "create_contact", M{"first_name": "Nia", "last_name": "Okafor", "email": "nia@paper.example"})
	opp := mk(t, agent, "create_opportunity", M{"title": "Launch story", "contact_ids": []string{nia}})
	id := mk(t, agent, "create_pitch", M{"opportunity_id": opp, "contact_ids": []string{nia}, "subject": "{{first_name}}, a launch", "body": "Hi {{first_name}},\nnews."})
	p := getPitch(t, agent, id)

	type request struct {
		RequestID   string `json:"request_id"`
		ContentHash string `json:"content_hash"`
	}
	var req request
	agent.Must("request_pitch_approval", M{"id": id, "confirm": true}, &req)
	posts := fs.postsContaining(id)
	if len(posts) != 1 || req.ContentHash != p.ContentHash || !strings.Contains(posts[0].Text, p.ContentHash) ||
		!strings.Contains(posts[0].Text, "nia@paper.example") || !strings.Contains(posts[0].Text, "{{first_name}}, a launch") || !strings.Contains(posts[0].Text, "news.") {
		t.Fatalf("approval request as posted (%+v): %+v", req, posts)
	}

	type check struct {
		Status    string `json:"status"`
		DecidedBy *struct {
			UserID      string `json:"user_id"`
			SlackUserID string `json:"slack_user_id"`
		} `json:"decided_by"`
		Ignored []struct {
			User, Reason string
		} `json:"ignored"`
	}
	var c check
	agent.Must("check_pitch_approval", M{"request_id": req.RequestID}, &c)
	if c.Status != "waiting" || c.DecidedBy != nil {
		t.Fatalf("before any answer: %+v", c)
	}

	// Answers from someone who is no team member, a member without the
	// approver scope and one whose approver key is revoked are ignored, as
	// is talk that is no verdict.
	fs.reply("C0TEAM", posts[0].TS, "U0STRANGER", "approve")
	fs.reply("C0TEAM", posts[0].TS, "U0BOB", "Approved!")
	fs.reply("C0TEAM", posts[0].TS, "U0CY", "approve")
	fs.reply("C0TEAM", posts[0].TS, "U0ANN", "looks good, one moment")
	agent.Must("check_pitch_approval", M{"request_id": req.RequestID}, &c)
	if c.Status != "waiting" || len(c.Ignored) != 3 || !strings.Contains(c.Ignored[0].Reason, "no team member") ||
		!strings.Contains(c.Ignored[1].Reason, "admin scope") || !strings.Contains(c.Ignored[2].Reason, "admin scope") {
		t.Fatalf("after answers that do not count: %+v", c)
	}
	if p := getPitch(t, agent, id); p.State != "draft" || p.Approval != nil {
		t.Fatalf("pitch approved by answers that do not count: %+v", p)
	}

	fs.reply("C0TEAM", posts[0].TS, "U0ANN", "approve")
	agent.Must("check_pitch_approval", M{"request_id": req.RequestID}, &c)
	if c.Status != "approved" || c.DecidedBy == nil || c.DecidedBy.UserID != ann || c.DecidedBy.SlackUserID != "U0ANN" {
		t.Fatalf("after Ann approved: %+v", c)
	}
	p = getPitch(t, agent, id)
	if p.State != "approved" || p.Approval == nil || p.Approval.By.UserID != ann || p.Approval.ContentHash != req.ContentHash {
		t.Fatalf("approved from Slack: %+v", p)
	}
	approval := lastChange(t, agent, id, "update")
	if approval.UserID != ann || approval.AgentID != "slack:U0ANN" || approval.Tool != "check_pitch_approval" {
		t.Errorf("the approval's change entry: %+v", approval)
	}
	// Reading again records nothing more.
	agent.Must("check_pitch_approval", M{"request_id": req.RequestID}, &c)
	if c.Status != "approved" || len(changes(t, agent, M{"record_id": id})) != 2 {
		t.Errorf("read again: %+v", c)
	}

	// An edit voids the approval, and the answers in the old thread: a new
	// request is needed, and a deny there leaves the draft.
	agent.Must("update_pitch", M{"id": id, "body": "Hi {{first_name}},\nbetter news."}, nil)
	if p := getPitch(t, agent, id); p.State != "draft" || p.Approval != nil || len(p.VoidedApprovals) != 1 {
		t.Fatalf("after the edit: %+v", p)
	}
	refuses(t, agent, "check_pitch_approval", M{"request_id": req.RequestID}, repo.CodeConflict, "changed since it was posted", "request_pitch_approval again")
	var req2 request
	agent.Must("request_pitch_approval", M{"id": id, "confirm": true}, &req2)
	posts = fs.postsContaining(req2.ContentHash)
	if len(posts) != 1 || req2.ContentHash == req.ContentHash {
		t.Fatalf("second request: %+v %+v", req2, posts)
	}
	fs.reply("C0TEAM", posts[0].TS, "U0ANN", "Deny: not before the embargo")
	agent.Must("check_pitch_approval", M{"request_id": req2.RequestID}, &c)
	if c.Status != "denied" || c.DecidedBy == nil || c.DecidedBy.UserID != ann {
		t.Fatalf("after a deny: %+v", c)
	}
	if p := getPitch(t, agent, id); p.State != "draft" || p.Approval != nil {
		t.Fatalf("denied pitch: %+v", p)
	}

	// Only a draft is put up; the request is a send in the change log.
	admin.Must("approve_pitch", M{"id": id}, nil)
	refuses(t, agent, "request_pitch_approval", M{"id": id, "confirm": true}, repo.CodeFailedPrecondition, "only a draft")
	n := 0
	for _, e := range changes(t, agent, M{"action": "send"}) {
		if e.Tool == "request_pitch_approval" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("request sends in the change log: %d, want 2", n)
	}
}

// Without Slack the approval tools say how to configure it.
func TestPitchSlackApprovalNotConfigured(t *testing.T) {
	env := testenv.New(t)
	agent := env.Client(env.Key("read", "write"), "drafting")
	nia := mk(t, agent, "create_contact", M{"first_name": "Nia", "last_name": "Okafor", "email": "nia@paper.example"})
	opp := mk(t, agent, "create_opportunity", M{"title": "Launch", "contact_ids": []string{nia}})
	id := mk(t, agent, "create_pitch", M{"opportunity_id": opp, "contact_ids": []string{nia}, "subject": "Hi", "body": "x"})
	refuses(t, agent, "request_pitch_approval", M{"id": id, "confirm": true}, repo.CodeFailedPrecondition, "OUTREACH_SLACK_BOT_TOKEN")
	refuses(t, agent, "check_pitch_approval", M{"request_id": "7b0c3f8e-4a8e-4b6e-9d61-2f4f6b7b1a11"}, repo.CodeNotFound)
}
