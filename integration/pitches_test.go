package integration

import (
	"strings"
	"testing"

	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/repo/pitches"
)

// Pitches over MCP without a mail server: drafting, the approval policy
// (never the drafter; the approver's scope), an edit voiding the approval,
// and sending refused while nothing is configured to send.

type pitchView struct {
	ID          string `json:"id"`
	State       string `json:"state"`
	ContentHash string `json:"content_hash"`
	From        string `json:"from"`
	DraftedBy   struct {
		KeyID string `json:"key_id"`
	} `json:"drafted_by"`
	Approval *struct {
		ContentHash    string `json:"content_hash"`
		OverrideReason string `json:"override_reason"`
		By             struct {
			UserID string `json:"user_id"`
		} `json:"by"`
	} `json:"approval"`
	VoidedApprovals []struct {
		ContentHash string `json:"content_hash"`
		VoidedAt    string `json:"voided_at"`
	} `json:"voided_approvals"`
	Recipients []struct {
		ContactID string `json:"contact_id"`
		Email     string `json:"email"`
		State     string `json:"state"`
		Guard     string `json:"guard"`
		Reason    string `json:"reason"`
		MessageID string `json:"message_id"`
		Attempts  int    `json:"attempts"`
		Note      string `json:"note"`
	} `json:"recipients"`
	FailReason string `json:"fail_reason"`
	StageNote  string `json:"stage_note"`
}

func getPitch(t *testing.T, c *testenv.Client, id string) pitchView {
	t.Helper()
	var p pitchView
	c.Must("get_pitch", M{"id": id}, &p)
	return p
}

func TestPitchDraftAndApproval(t *testing.T) {
	env := testenv.New(t)
	agent := env.Client(env.Key("read", "write"), "drafting")
	writer := env.Client(env.Key("read", "write"), "other-writer")
	admin := env.Admin()

	nia := mk(t, agent, "create_contact", M{"first_name": "Nia", "last_name": "Okafor", "email": "nia@paper.example"})
	noMail := mk(t, agent, "create_contact", M{"first_name": "Ben", "last_name": "Lutz"})
	opp := mk(t, agent, "create_opportunity", M{"title": "Launch story", "contact_ids": []string{nia, noMail}})

	// Bad drafts: unknown merge field, a contact without address or not on
	// the opportunity; nothing written.
	refuses(t, agent, "create_pitch", M{"opportunity_id": opp, "contact_ids": []string{nia}, "subject": "Hi {{nickname}}", "body": "x"}, repo.CodeInvalid, "{{nickname}}", "first_name")
	refuses(t, agent, "create_pitch", M{"opportunity_id": opp, "contact_ids": []string{noMail}, "subject": "Hi", "body": "x"}, repo.CodeInvalid, noMail, "no email address")
	other := mk(t, agent, "create_contact", M{"first_name": "Ola", "last_name": "Berg", "email": "ola@paper.example"})
	refuses(t, agent, "create_pitch", M{"opportunity_id": opp, "contact_ids": []string{other}, "subject": "Hi", "body": "x"}, repo.CodeInvalid, other, "not on opportunity")

	id := mk(t, agent, "create_pitch", M{"opportunity_id": opp, "contact_ids": []string{nia}, "subject": "{{first_name}}, a launch", "body": "Hi {{first_name}},\nnews."})
	p := getPitch(t, agent, id)
	if p.State != "draft" || p.ContentHash == "" || len(p.Recipients) != 1 || p.Recipients[0].State != "pending" || p.DraftedBy.KeyID == "" {
		t.Fatalf("new pitch: %+v", p)
	}

	// The drafter cannot approve its own draft, even with the admin scope
	// on a key of the same agent; a write key is not an approver by default.
	refuses(t, agent, "approve_pitch", M{"id": id}, repo.CodePermissionDenied, "admin")
	refuses(t, writer, "approve_pitch", M{"id": id}, repo.CodePermissionDenied, "admin")
	pitches.Of(env.Store).SetPitchPolicy(pitches.PitchPolicy{ApproverScope: repo.ScopeWrite})
	refuses(t, agent, "approve_pitch", M{"id": id}, repo.CodePermissionDenied, "drafted by this agent")
	pitches.Of(env.Store).SetPitchPolicy(pitches.PitchPolicy{})

	// An approval of content the approver did not see is refused.
	refuses(t, admin, "approve_pitch", M{"id": id, "content_hash": "0000"}, repo.CodeConflict, "content_hash")
	admin.Must("approve_pitch", M{"id": id, "content_hash": p.ContentHash}, nil)
	p = getPitch(t, agent, id)
	if p.State != "approved" || p.Approval == nil || p.Approval.ContentHash != p.ContentHash || p.Approval.By.UserID != env.AdminUserID {
		t.Fatalf("approved: %+v", p)
	}

	// An edit of what is sent voids the approval.
	agent.Must("update_pitch", M{"id": id, "body": "Hi {{first_name}},\nbetter news."}, nil)
	p2 := getPitch(t, agent, id)
	if p2.State != "draft" || p2.Approval != nil || len(p2.VoidedApprovals) != 1 || p2.VoidedApprovals[0].ContentHash != p.ContentHash || p2.ContentHash == p.ContentHash {
		t.Fatalf("after the edit: %+v", p2)
	}
	// Sending needs an approval, and a configured mail server.
	refuses(t, agent, "send_pitch", M{"id": id}, repo.CodeFailedPrecondition, "OUTREACH_SMTP")
	admin.Must("approve_pitch", M{"id": id}, nil)
	refuses(t, agent, "send_pitch", M{"id": id}, repo.CodeFailedPrecondition, "OUTREACH_SMTP")

	// Every step has its change entry.
	if n := len(changes(t, agent, M{"record_id": id})); n != 4 {
		t.Errorf("pitch %s has %d change entries, want 4 (create, approve, edit, approve)", id, n)
	}

	// The suppression list: manual entries, one per address, removal by an admin.
	agent.Must("add_suppression", M{"email": "Nia@Paper.example", "note": "asked by phone"}, nil)
	refuses(t, agent, "add_suppression", M{"email": "nia@paper.example"}, repo.CodeFailedPrecondition, "already")
	refuses(t, agent, "add_suppression", M{"email": "not an address"}, repo.CodeInvalid, "email")
	agent.Fail("remove_suppression", M{"email": "nia@paper.example"}, repo.CodePermissionDenied)
	admin.Must("remove_suppression", M{"email": "nia@paper.example"}, nil)

	// A rollback never leaves a pitch armed to be sent: undoing the cancel
	// of an approved pitch is refused; undoing an approval is allowed.
	agent.Must("cancel_pitch", M{"id": id}, nil)
	cancel := lastChange(t, agent, id, "update")
	e := agent.Fail("rollback_change", M{"id": cancel.ID}, repo.CodeFailedPrecondition)
	if !strings.Contains(e.Message, "pitch_send") {
		t.Errorf("rollback of the cancel: %s", e.Message)
	}
	second := mk(t, agent, "create_pitch", M{"opportunity_id": opp, "contact_ids": []string{nia}, "subject": "Again", "body": "Hi"})
	admin.Must("approve_pitch", M{"id": second}, nil)
	approval := lastChange(t, agent, second, "update")
	agent.Must("rollback_change", M{"id": approval.ID}, nil)
	if p := getPitch(t, agent, second); p.State != "draft" || p.Approval != nil {
		t.Errorf("after the rollback of the approval: %+v", p)
	}
	agent.Must("archive_pitch", M{"id": id}, nil)
	var list struct {
		Pitches []pitchView `json:"pitches"`
	}
	agent.Must("list_pitches", M{"opportunity_id": opp}, &list)
	if len(list.Pitches) != 1 || list.Pitches[0].ID != second {
		t.Errorf("list_pitches, the archived pitch left out: %+v", list.Pitches)
	}
}
