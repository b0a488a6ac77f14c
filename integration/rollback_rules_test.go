package integration

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/repo"
)

// Rollbacks keep the rules of every record kind: a rollback whose result
// would break one is refused whole (failed_precondition), its dry run lists
// the violation, and force does not override it.

type ruleViolation struct {
	ChangeID string `json:"change_id"`
	RecordID string `json:"record_id"`
	Rule     string `json:"rule"`
	Message  string `json:"message"`
}

type ruleResult struct {
	Applied    bool   `json:"applied"`
	Message    string `json:"message"`
	Violations int    `json:"violations"`
	Steps      []struct {
		ChangeID   string          `json:"change_id"`
		RecordID   string          `json:"record_id"`
		Status     string          `json:"status"`
		RollbackID string          `json:"rollback_id"`
		Violations []ruleViolation `json:"violations"`
	} `json:"steps"`
}

// ruleEnv is a service with a client in session "rules" and another in
// session "other".
type ruleEnv struct {
	env      *testenv.Env
	c, other *testenv.Client
}

func newRuleEnv(t *testing.T) *ruleEnv {
	env := testenv.New(t)
	return &ruleEnv{env: env, c: env.Client(env.Key("read", "write"), "rules"), other: env.Client(env.Key("read", "write"), "other")}
}

func (e *ruleEnv) id(t *testing.T, tool string, args M) string {
	t.Helper()
	return testenv.ID(t, e.c.Must(tool, args, nil))
}

// refused checks that rolling back (tool, args) is refused for rule on
// record: the dry run lists the violation on the step writing record, the
// rollback and the forced rollback fail with failed_precondition naming
// change, record and rule, and no rollback is written.
func (e *ruleEnv) refused(t *testing.T, tool string, args M, change, record, rule string) {
	t.Helper()
	before := len(changes(t, e.c, M{"action": "rollback"}))
	dryArgs := M{"dry_run": true}
	for k, v := range args {
		dryArgs[k] = v
	}
	var dry ruleResult
	e.c.Must(tool, dryArgs, &dry)
	var got []ruleViolation
	for _, st := range dry.Steps {
		if len(st.Violations) > 0 && st.Status != "violation" {
			t.Errorf("dry run: step %s has violations but status %s", st.ChangeID, st.Status)
		}
		for _, v := range st.Violations {
			got = append(got, ruleViolation{ChangeID: st.ChangeID, RecordID: st.RecordID, Rule: v.Rule})
		}
	}
	want := []ruleViolation{{ChangeID: change, RecordID: record, Rule: rule}}
	if diff := cmp.Diff(got, want); diff != "" || dry.Violations != 1 || dry.Applied {
		t.Errorf("dry run violations (-got +want):\n%s\nviolations %d, applied %v", diff, dry.Violations, dry.Applied)
	}
	if !strings.Contains(dry.Message, "broken rule") {
		t.Errorf("dry run message %q does not mention the broken rule", dry.Message)
	}
	for _, force := range []bool{false, true} {
		a := M{"force": force}
		for k, v := range args {
			a[k] = v
		}
		er := e.c.Fail(tool, a, repo.CodeFailedPrecondition)
		var details struct {
			Violations []ruleViolation `json:"violations"`
		}
		if err := json.Unmarshal(er.Details, &details); err != nil {
			t.Fatalf("details %s: %v", er.Details, err)
		}
		for i := range details.Violations {
			if details.Violations[i].Message == "" {
				t.Errorf("violation without a message: %s", er.Details)
			}
			details.Violations[i].Message = ""
		}
		if diff := cmp.Diff(details.Violations, want); diff != "" {
			t.Errorf("force %v: violations (-got +want):\n%s", force, diff)
		}
		if !strings.Contains(er.Message, change) || !strings.Contains(er.Message, record) || !strings.Contains(er.Message, rule) || !strings.Contains(er.Message, "force does not override") {
			t.Errorf("force %v: message %q does not name the change, the record, the rule and force", force, er.Message)
		}
	}
	if after := len(changes(t, e.c, M{"action": "rollback"})); after != before {
		t.Errorf("%d rollback changes written by refused rollbacks", after-before)
	}
}

func TestRollbackRuleNoteKeepsALink(t *testing.T) {
	e := newRuleEnv(t)
	a := e.id(t, "create_outlet", M{"name": "A"})
	b := e.id(t, "create_outlet", M{"name": "B"})
	unrelated := e.id(t, "create_outlet", M{"name": "Unrelated"})
	noteID := e.id(t, "create_note", M{"title": "n", "outlet_ids": []string{a}})
	var added note
	e.c.Must("add_note_link", M{"note_id": noteID, "outlet_id": b}, &added)
	addLink := lastChange(t, e.c, noteID, "link")
	linkA := getNote(t, e.c, noteID).Links[0].ID
	e.c.Must("remove_note_link", M{"id": linkA}, nil)

	e.refused(t, "rollback_change", M{"id": addLink.ID}, addLink.ID, noteID, "note_has_link")
	if got := linkTargets(getNote(t, e.c, noteID)); !slices.Equal(got, []string{b}) {
		t.Errorf("links after the refused rollbacks: %v, want only %s", got, b)
	}

	// A session rollback refuses the whole session: session s links B to
	// another note and renames an outlet; the other session then removes
	// the note's first link.
	s := e.env.Client(e.env.Key("read", "write"), "s")
	n2 := e.id(t, "create_note", M{"title": "n2", "outlet_ids": []string{a}})
	s.Must("add_note_link", M{"note_id": n2, "outlet_id": b}, nil)
	s.Must("update_outlet", M{"id": unrelated, "name": "Renamed"}, nil)
	link2 := lastChange(t, e.c, n2, "link")
	e.other.Must("remove_note_link", M{"id": getNote(t, e.c, n2).Links[0].ID}, nil)
	e.refused(t, "rollback_session", M{"session_id": "s"}, link2.ID, n2, "note_has_link")
	var o struct{ Name string }
	e.c.Must("get_outlet", M{"id": unrelated}, &o)
	if o.Name != "Renamed" {
		t.Errorf("the refused session rollback wrote the outlet: name %q", o.Name)
	}

	// Fixed as the message says (another link first), the rollback goes through.
	e.c.Must("add_note_link", M{"note_id": noteID, "outlet_id": a}, nil)
	var res ruleResult
	e.c.Must("rollback_change", M{"id": addLink.ID}, &res)
	if got := linkTargets(getNote(t, e.c, noteID)); !res.Applied || !slices.Equal(got, []string{a}) {
		t.Errorf("after the fix: applied %v, links %v, want only %s", res.Applied, got, a)
	}
}

func TestRollbackRuleContactEmailUnique(t *testing.T) {
	e := newRuleEnv(t)
	x := e.id(t, "create_contact", M{"first_name": "X", "last_name": "One", "email": "jo@example.com"})
	e.c.Must("archive_contact", M{"id": x}, nil)
	archiveX := lastChange(t, e.c, x, "archive")
	y := e.id(t, "create_contact", M{"first_name": "Y", "last_name": "Two", "email": "JO@Example.com"})

	// Rolling back the archive would restore X beside Y, which has its address.
	e.refused(t, "rollback_change", M{"id": archiveX.ID}, archiveX.ID, x, "contact_email_unique")

	// The same through a restore's rollback rolled back: Y archived, X
	// restored and the restore rolled back (X archived), Y restored, then
	// the rollback of the restore rolled back (X active again).
	e.c.Must("archive_contact", M{"id": y}, nil)
	e.c.Must("restore_contact", M{"id": x}, nil)
	restoreX := lastChange(t, e.c, x, "restore")
	var rb ruleResult
	e.c.Must("rollback_change", M{"id": restoreX.ID}, &rb)
	e.c.Must("restore_contact", M{"id": y}, nil)
	e.refused(t, "rollback_change", M{"id": rb.Steps[0].RollbackID}, rb.Steps[0].RollbackID, x, "contact_email_unique")

	// A session that archived X and gave its address to a new contact Z
	// rolls back whole: Z is archived by the same rollback, so X's address
	// is free in the state the rollback leaves.
	e.c.Must("archive_contact", M{"id": y}, nil)
	s := e.env.Client(e.env.Key("read", "write"), "s")
	w := e.id(t, "create_contact", M{"first_name": "W", "last_name": "Three", "email": "w@example.com"})
	s.Must("archive_contact", M{"id": w}, nil)
	z := testenv.ID(t, s.Must("create_contact", M{"first_name": "Z", "last_name": "Four", "email": "W@example.com"}, nil))
	var res ruleResult
	e.c.Must("rollback_session", M{"session_id": "s"}, &res)
	var gw, gz struct {
		ArchivedAt *string `json:"archived_at"`
	}
	e.c.Must("get_contact", M{"id": w}, &gw)
	e.c.Must("get_contact", M{"id": z}, &gz)
	if !res.Applied || gw.ArchivedAt != nil || gz.ArchivedAt == nil {
		t.Errorf("session rollback: applied %v, w archived %v, z archived %v; want w active, z archived", res.Applied, gw.ArchivedAt, gz.ArchivedAt)
	}
}

func TestRollbackRuleLinksToArchivedAndMissingRecords(t *testing.T) {
	e := newRuleEnv(t)
	a := e.id(t, "create_contact", M{"first_name": "A", "last_name": "A"})
	b := e.id(t, "create_contact", M{"first_name": "B", "last_name": "B"})
	noteID := e.id(t, "create_note", M{"title": "n", "contact_ids": []string{a, b}})
	var linkB string
	for _, l := range getNote(t, e.c, noteID).Links {
		if l.ContactID == b {
			linkB = l.ID
		}
	}
	e.c.Must("remove_note_link", M{"id": linkB}, nil)
	unlink := lastChange(t, e.c, noteID, "unlink")
	e.c.Must("archive_contact", M{"id": b}, nil)
	// A link to an archived record comes back: rollback restores history,
	// and get_note shows the record as archived.
	e.c.Must("rollback_change", M{"id": unlink.ID}, nil)
	n := getNote(t, e.c, noteID)
	i := slices.IndexFunc(n.Links, func(l noteLink) bool { return l.ID == linkB })
	if i < 0 || !n.Links[i].Entity.Archived {
		t.Errorf("links after the rollback: %+v; want link %s back, to an archived contact", n.Links, linkB)
	}

	// So does an affiliation with an archived outlet.
	o := e.id(t, "create_outlet", M{"name": "O"})
	var aff struct {
		Affiliation struct{ ID string } `json:"affiliation"`
	}
	e.c.Must("add_contact_outlet", M{"contact_id": a, "outlet_id": o}, &aff)
	e.c.Must("remove_contact_outlet", M{"id": aff.Affiliation.ID}, nil)
	removeAff := lastChange(t, e.c, a, "unlink")
	e.c.Must("archive_outlet", M{"id": o}, nil)
	e.c.Must("rollback_change", M{"id": removeAff.ID}, nil)
	var c struct {
		Outlets []struct {
			AffiliationID  string `json:"affiliation_id"`
			OutletArchived bool   `json:"outlet_archived"`
		} `json:"outlets"`
	}
	e.c.Must("get_contact", M{"id": a}, &c)
	if len(c.Outlets) != 1 || c.Outlets[0].AffiliationID != aff.Affiliation.ID || !c.Outlets[0].OutletArchived {
		t.Errorf("affiliations after the rollback: %+v", c.Outlets)
	}

	// A link to a record that does not exist is never written back. Such a
	// link cannot be made through the tools; a fixture note has one.
	ctx := audit.WithActor(context.Background(), repo.SystemActor("fixtures"))
	missing := uuid.NewString()
	fixture, err := e.env.Store.Fixture(ctx, "notes", map[string]any{"type": "general", "title": "f", "content": "",
		"occurred_at": n.OccurredAt, "links": []map[string]any{{"id": uuid.NewString(), "contact_id": missing, "created_at": n.OccurredAt}}})
	if err != nil {
		t.Fatal(err)
	}
	e.c.Must("update_note", M{"id": fixture, "title": "g"}, nil)
	update := lastChange(t, e.c, fixture, "update")
	e.refused(t, "rollback_change", M{"id": update.ID}, update.ID, fixture, "link_target_exists")
}

func TestRollbackRuleGeneralCampaignStays(t *testing.T) {
	e := newRuleEnv(t)
	var list struct {
		Campaigns []struct{ ID, Name string } `json:"campaigns"`
	}
	e.c.Must("list_campaigns", M{}, &list)
	general := ""
	for _, c := range list.Campaigns {
		if c.Name == "General" {
			general = c.ID
		}
	}
	admin := e.env.Admin()
	create := lastChange(t, admin, general, "create")
	e.refused(t, "rollback_change", M{"id": create.ID}, create.ID, general, "general_campaign")
	var got struct {
		ArchivedAt *string `json:"archived_at"`
	}
	e.c.Must("get_campaign", M{"id": general}, &got)
	if got.ArchivedAt != nil {
		t.Errorf("General archived at %s", *got.ArchivedAt)
	}
}

func TestRollbackRuleChannelOfOutlet(t *testing.T) {
	e := newRuleEnv(t)
	o1 := e.id(t, "create_outlet", M{"name": "O1"})
	o2 := e.id(t, "create_outlet", M{"name": "O2"})
	c2 := e.id(t, "create_channel", M{"outlet_id": o2, "type": "podcast", "name": "C2"})
	opp := e.id(t, "create_opportunity", M{"title": "t", "outlet_id": o1})
	e.c.Must("update_opportunity", M{"id": opp, "outlet_id": o2}, nil)
	move := lastChange(t, e.c, opp, "update")
	e.c.Must("update_opportunity", M{"id": opp, "channel_id": c2}, nil)
	// Undoing the move alone would put the opportunity at O1 with O2's channel.
	e.refused(t, "rollback_change", M{"id": move.ID}, move.ID, opp, "channel_of_outlet")
	var got struct {
		OutletID  string `json:"outlet_id"`
		ChannelID string `json:"channel_id"`
	}
	e.c.Must("get_opportunity", M{"id": opp}, &got)
	if got.OutletID != o2 || got.ChannelID != c2 {
		t.Errorf("opportunity at outlet %s channel %s; want %s %s", got.OutletID, got.ChannelID, o2, c2)
	}
}

func TestRollbackRuleCoverageFollowsItsOpportunity(t *testing.T) {
	e := newRuleEnv(t)
	k1 := e.id(t, "create_campaign", M{"name": "K1"})
	k2 := e.id(t, "create_campaign", M{"name": "K2"})
	opp := e.id(t, "create_opportunity", M{"title": "t", "campaign_id": k1})
	cov := e.id(t, "create_coverage", M{"title": "piece", "published_at": "2026-01-02", "opportunity_id": opp})
	s := e.env.Client(e.env.Key("read", "write"), "s")
	s.Must("update_opportunity", M{"id": opp, "campaign_id": k2}, nil)
	move := lastChange(t, e.c, opp, "update")
	// The opportunity's change alone cannot be undone: its coverage moved with it.
	e.refused(t, "rollback_change", M{"id": move.ID}, move.ID, opp, "coverage_campaign")
	// The session holds both changes; undone together, the rules hold in the
	// state the rollback leaves, though not between its steps.
	var res ruleResult
	e.c.Must("rollback_session", M{"session_id": "s"}, &res)
	var gc struct {
		CampaignID string `json:"campaign_id"`
	}
	e.c.Must("get_coverage", M{"id": cov}, &gc)
	if !res.Applied || len(res.Steps) != 2 || gc.CampaignID != k1 {
		t.Errorf("session rollback: applied %v, %d steps, coverage in campaign %s; want %s", res.Applied, len(res.Steps), gc.CampaignID, k1)
	}
}
