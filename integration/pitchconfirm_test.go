package integration

import (
	"strings"
	"testing"

	"outreach/server"
)

// approve_pitch and send_pitch ask the user first, by elicitation on a
// stateful revision and by the input_required round trip on 2026-07-28: a
// no approves nothing and sends nothing; a yes does the step.
func TestPitchConfirmations(t *testing.T) {
	e := newMailEnv(t, "ada@paper.test", "ben@paper.test")
	for i, rev := range []string{"2025-11-25", server.StatelessRevision} {
		addr := []string{"ada@paper.test", "ben@paper.test"}[i]
		contact := mk(t, e.agent, "create_contact", M{"first_name": "Reporter", "last_name": string(rune('A' + i)), "email": addr})
		opp := mk(t, e.agent, "create_opportunity", M{"title": "Launch " + rev, "contact_ids": []string{contact}})
		id := mk(t, e.agent, "create_pitch", M{"opportunity_id": opp, "contact_ids": []string{contact}, "subject": "Launch " + rev, "body": "Hi {{first_name}}, news."})
		a := &asker{}
		s := elicitingClient(t, e.Env, rev, "confirm-pitch-"+rev, a)

		a.set("decline", false)
		if text, isErr := callText(t, s, "approve_pitch", M{"id": id}); !isErr || !strings.Contains(text, "not confirmed (decline)") {
			t.Errorf("%s: approve declined: %s", rev, text)
		}
		if q := a.asked(); len(q) != 1 || !strings.Contains(q[0], `Approve pitch "Launch `+rev+`" to `+addr) {
			t.Errorf("%s: approve questions %q", rev, q)
		}
		if p := getPitch(t, e.agent, id); p.State != "draft" || p.Approval != nil {
			t.Fatalf("%s: a declined approval approved: %+v", rev, p)
		}
		a.set("accept", true)
		if text, isErr := callText(t, s, "approve_pitch", M{"id": id}); isErr {
			t.Fatalf("%s: approve confirmed: %s", rev, text)
		}
		if p := getPitch(t, e.agent, id); p.State != "approved" || p.Approval == nil {
			t.Fatalf("%s: after the confirmed approval: %+v", rev, p)
		}

		a.set("accept", false)
		if text, isErr := callText(t, s, "send_pitch", M{"id": id}); !isErr || !strings.Contains(text, "not confirmed (answered no)") {
			t.Errorf("%s: send answered no: %s", rev, text)
		}
		if q := a.asked(); len(q) != 1 || !strings.Contains(q[0], `Send pitch "Launch `+rev+`" to `+addr) || !strings.Contains(q[0], "cannot be taken back") {
			t.Errorf("%s: send questions %q", rev, q)
		}
		if p := getPitch(t, e.agent, id); p.State != "approved" || len(e.mail.Messages(addr, "INBOX")) != 0 {
			t.Fatalf("%s: a refused send sent: %+v", rev, p)
		}
		a.set("accept", true)
		if text, isErr := callText(t, s, "send_pitch", M{"id": id}); isErr {
			t.Fatalf("%s: send confirmed: %s", rev, text)
		}
		if p := getPitch(t, e.agent, id); p.State != "sent" {
			t.Fatalf("%s: after the confirmed send: %+v", rev, p)
		}
		e.mail.WaitMessages(addr, "INBOX", 1)

		// confirm: true asks nothing.
		a.set("decline", false)
		again := mk(t, e.agent, "create_pitch", M{"opportunity_id": opp, "contact_ids": []string{contact}, "subject": "Again", "body": "Hi"})
		if text, isErr := callText(t, s, "approve_pitch", M{"id": again, "confirm": true}); isErr {
			t.Errorf("%s: approve with confirm: %s", rev, text)
		}
		if q := a.asked(); len(q) != 0 {
			t.Errorf("%s: asked with confirm: true: %q", rev, q)
		}
	}
}
