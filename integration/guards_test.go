package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/repo/pipeline"
)

// The pipeline's guards over MCP: each refuses with a message naming what
// it found and writes nothing; the override of a double pitch is recorded;
// a rollback cannot bring back a state a guard forbids.

// refuses calls tool, which must fail with code, with a message holding
// every one of want, and checks that the change log did not grow.
func refuses(t *testing.T, c *testenv.Client, tool string, args M, code string, want ...string) *testenv.Error {
	t.Helper()
	before := len(changes(t, c, M{}))
	e := c.Fail(tool, args, code)
	for _, w := range want {
		if !strings.Contains(e.Message, w) {
			t.Errorf("%s: message %q does not name %q", tool, e.Message, w)
		}
	}
	if after := len(changes(t, c, M{})); after != before {
		t.Errorf("%s: refused, but the change log grew by %d", tool, after-before)
	}
	return e
}

func TestGuardDoNotContact(t *testing.T) {
	e := newRuleEnv(t)
	const reason = "asked not to be pitched until March"
	dnc := e.id(t, "create_contact", M{"first_name": "Dana", "last_name": "Nolan", "do_not_contact": true, "do_not_contact_reason": reason})
	ok := e.id(t, "create_contact", M{"first_name": "Olu", "last_name": "Kay"})

	// Created pitched with the contact, moved to pitched with them, or the
	// contact added to a pitched opportunity: each refused.
	refuses(t, e.c, "create_opportunity", M{"title": "Launch", "stage": "pitched", "contact_ids": []string{dnc}}, repo.CodeFailedPrecondition, dnc, "Dana Nolan", reason)
	opp := e.id(t, "create_opportunity", M{"title": "Launch", "contact_ids": []string{ok, dnc}})
	refuses(t, e.c, "update_opportunity_stage", M{"id": opp, "stage": "in_progress"}, repo.CodeFailedPrecondition, dnc, reason, "do-not-contact")
	refuses(t, e.c, "update_opportunity_stage", M{"id": opp, "stage": "pitched", "override_reason": "urgent"}, repo.CodeFailedPrecondition, dnc, reason)
	pitched := e.id(t, "create_opportunity", M{"title": "Review", "stage": "pitched", "contact_ids": []string{ok}})
	refuses(t, e.c, "add_opportunity_contact", M{"opportunity_id": pitched, "contact_id": dnc}, repo.CodeFailedPrecondition, dnc, reason)
	refuses(t, e.c, "update_opportunity", M{"id": pitched, "contact_ids": []string{ok, dnc}}, repo.CodeFailedPrecondition, dnc, reason)

	// Before pitched the contact may be on the opportunity; lost or
	// researching moves are free.
	e.c.Must("update_opportunity_stage", M{"id": opp, "stage": "drafting"}, nil)

	// Clearing the flag needs the admin scope.
	refuses(t, e.c, "update_contact", M{"id": dnc, "do_not_contact": false}, repo.CodePermissionDenied, "admin", reason)
	e.env.Admin().Must("update_contact", M{"id": dnc, "do_not_contact": false}, nil)
	e.c.Must("update_opportunity_stage", M{"id": opp, "stage": "pitched", "override_reason": "Olu asked for both"}, nil)

	// Marking a contact do-not-contact while they are on a pitched
	// opportunity records the request; the opportunity can still be edited.
	e.c.Must("update_contact", M{"id": ok, "do_not_contact": true, "do_not_contact_reason": "left journalism"}, nil)
	e.c.Must("update_opportunity", M{"id": pitched, "description": "still editable"}, nil)

	// Rollbacks: bringing a removed do-not-contact contact back onto a
	// pitched opportunity, moving back to pitched with one, and clearing
	// the flag without the admin scope are refused.
	e.c.Must("remove_opportunity_contact", M{"opportunity_id": pitched, "contact_id": ok}, nil)
	unlink := lastChange(t, e.c, pitched, "unlink")
	e.refused(t, "rollback_change", M{"id": unlink.ID}, unlink.ID, pitched, "do_not_contact")

	third := e.id(t, "create_contact", M{"first_name": "Tess", "last_name": "Ward"})
	back := e.id(t, "create_opportunity", M{"title": "Interview", "stage": "pitched", "contact_ids": []string{third}})
	e.c.Must("update_opportunity_stage", M{"id": back, "stage": "drafting"}, nil)
	toDrafting := lastChange(t, e.c, back, "update")
	e.c.Must("update_contact", M{"id": third, "do_not_contact": true, "do_not_contact_reason": "on leave"}, nil)
	e.refused(t, "rollback_change", M{"id": toDrafting.ID}, toDrafting.ID, back, "do_not_contact")
	setFlag := lastChange(t, e.c, third, "update")
	e.refused(t, "rollback_change", M{"id": setFlag.ID}, setFlag.ID, third, "do_not_contact_admin")
	// An admin may roll the flag back.
	e.env.Admin().Must("rollback_change", M{"id": setFlag.ID}, nil)

	// Restoring an archived pitched opportunity with a contact marked
	// do-not-contact since is refused too.
	q := e.id(t, "create_contact", M{"first_name": "Quinn", "last_name": "Ray"})
	parked := e.id(t, "create_opportunity", M{"title": "Parked", "stage": "pitched", "contact_ids": []string{q}})
	e.c.Must("archive_opportunity", M{"id": parked}, nil)
	e.c.Must("update_contact", M{"id": q, "do_not_contact": true, "do_not_contact_reason": "changed beat"}, nil)
	refuses(t, e.c, "restore_opportunity", M{"id": parked}, repo.CodeFailedPrecondition, q, "changed beat")
}

func TestGuardDoublePitch(t *testing.T) {
	e := newRuleEnv(t)
	owner := testenv.ID(t, e.env.Admin().Must("create_user", M{"name": "Priya Shah", "email": "priya@example.com"}, nil))
	x := e.id(t, "create_contact", M{"first_name": "Xavier", "last_name": "Lin", "owner_id": owner})
	first := e.id(t, "create_opportunity", M{"title": "Funding story", "contact_ids": []string{x}, "owner_id": owner})
	e.c.Must("update_opportunity_stage", M{"id": first, "stage": "pitched"}, nil)

	second := e.id(t, "create_opportunity", M{"title": "Product review", "contact_ids": []string{x}})
	today := time.Now().UTC().Format("2006-01-02")
	refuses(t, e.c, "update_opportunity_stage", M{"id": second, "stage": "pitched"}, repo.CodeFailedPrecondition,
		x, "Xavier Lin", first, "Funding story", "Priya Shah", owner, today, "14-day", "override_reason")
	refuses(t, e.c, "create_opportunity", M{"title": "Third", "stage": "pitched", "contact_ids": []string{x}}, repo.CodeFailedPrecondition, first, "Priya Shah")
	refuses(t, e.c, "update_opportunity_stage", M{"id": second, "stage": "drafting", "override_reason": "x"}, repo.CodeInvalid, "pitched")

	// The override goes through and is kept in the stage history and the
	// change log.
	const why = "different desk: Xavier asked for the review separately"
	var o struct {
		StageHistory []struct {
			Stage          string `json:"stage"`
			OverrideReason string `json:"override_reason"`
		} `json:"stage_history"`
	}
	e.c.Must("update_opportunity_stage", M{"id": second, "stage": "pitched", "override_reason": why}, &o)
	if n := len(o.StageHistory); n == 0 || o.StageHistory[n-1].OverrideReason != why || o.StageHistory[n-1].Stage != "pitched" {
		t.Errorf("stage history %+v does not end with the override", o.StageHistory)
	}
	ch := lastChange(t, e.c, second, "update")
	if !strings.Contains(toJSON(t, ch.After["stage_history"]), why) {
		t.Errorf("change log entry %s does not keep the override reason: %v", ch.ID, ch.After["stage_history"])
	}

	// The owners show in the dossiers.
	var dossier struct {
		Owner struct{ UserID, Name string } `json:"owner"`
	}
	e.c.Must("get_contact_dossier", M{"contact_id": x}, &dossier)
	if dossier.Owner.Name != "Priya Shah" {
		t.Errorf("contact dossier owner %+v", dossier.Owner)
	}
	e.c.Must("get_opportunity_status", M{"opportunity_id": first}, &dossier)
	if dossier.Owner.Name != "Priya Shah" {
		t.Errorf("opportunity status owner %+v", dossier.Owner)
	}
	refuses(t, e.c, "update_opportunity", M{"id": first, "owner_id": "6f1c2a3e-0000-4000-8000-000000000000"}, repo.CodeNotFound)

	// A window of one hour lets a pitch of yesterday pass, and a rollback
	// that moves an opportunity back to pitched within the window of a
	// pitch of the same contact is refused.
	y := e.id(t, "create_contact", M{"first_name": "Yara", "last_name": "Bell"})
	early := e.id(t, "create_opportunity", M{"title": "Early", "stage": "pitched", "contact_ids": []string{y}})
	e.c.Must("update_opportunity_stage", M{"id": early, "stage": "drafting"}, nil)
	undo := lastChange(t, e.c, early, "update")
	later := e.id(t, "create_opportunity", M{"title": "Later", "contact_ids": []string{y}})
	e.c.Must("update_opportunity_stage", M{"id": later, "stage": "pitched", "override_reason": "Early was parked"}, nil)
	e.refused(t, "rollback_change", M{"id": undo.ID}, undo.ID, early, "double_pitch")

	pipeline.Of(e.env.Store).SetPitchWindow(time.Nanosecond)
	t.Cleanup(func() { pipeline.Of(e.env.Store).SetPitchWindow(0) })
	fresh := e.id(t, "create_opportunity", M{"title": "Window passed", "contact_ids": []string{x}})
	e.c.Must("update_opportunity_stage", M{"id": fresh, "stage": "pitched"}, nil)
}

func TestGuardEmbargo(t *testing.T) {
	e := newRuleEnv(t)
	refuses(t, e.c, "create_opportunity", M{"title": "Bad", "embargo_until": "2026-12-01"}, repo.CodeInvalid, "RFC 3339")
	var opp struct {
		ID           string    `json:"id"`
		EmbargoUntil time.Time `json:"embargo_until"`
		EmbargoZone  string    `json:"embargo_zone"`
	}
	e.c.Must("create_opportunity", M{"title": "Results", "embargo_until": "2026-12-01T09:00:00+01:00"}, &opp)
	if !opp.EmbargoUntil.Equal(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)) || opp.EmbargoZone != "+01:00" {
		t.Errorf("embargo stored as %v zone %q", opp.EmbargoUntil, opp.EmbargoZone)
	}
	refuses(t, e.c, "create_coverage", M{"title": "Leak", "published_at": "2026-12-01T07:59:00Z", "opportunity_id": opp.ID}, repo.CodeFailedPrecondition,
		"embargo", opp.ID, "2026-12-01T08:00:00Z")
	cov := e.id(t, "create_coverage", M{"title": "On time", "published_at": "2026-12-02T00:00:00Z", "opportunity_id": opp.ID})
	refuses(t, e.c, "update_coverage", M{"id": cov, "published_at": "2026-11-30"}, repo.CodeFailedPrecondition, "embargo")
	refuses(t, e.c, "update_opportunity", M{"id": opp.ID, "embargo_until": "2026-12-03T00:00:00Z"}, repo.CodeFailedPrecondition, cov, "embargo_until")

	// A campaign's embargo holds for the coverage of its opportunities.
	camp := e.id(t, "create_campaign", M{"name": "Q1", "embargo_until": "2027-01-10T00:00:00-05:00"})
	inCamp := e.id(t, "create_opportunity", M{"title": "Q1 story", "campaign_id": camp})
	refuses(t, e.c, "create_coverage", M{"title": "Early", "published_at": "2027-01-10T04:00:00Z", "opportunity_id": inCamp}, repo.CodeFailedPrecondition, "campaign "+camp)
	e.c.Must("create_coverage", M{"title": "Fine", "published_at": "2027-01-10T05:00:00Z", "opportunity_id": inCamp}, nil)

	// A rollback that sets coverage back to before a later embargo is refused.
	e.c.Must("update_coverage", M{"id": cov, "published_at": "2026-12-05T00:00:00Z"}, nil)
	moved := lastChange(t, e.c, cov, "update")
	e.c.Must("update_opportunity", M{"id": opp.ID, "embargo_until": "2026-12-03T12:00:00+02:00"}, nil)
	e.refused(t, "rollback_change", M{"id": moved.ID}, moved.ID, cov, "embargo")

	// The agenda lists embargoes lifting soon.
	soon := time.Now().Add(50 * time.Hour).Truncate(time.Second)
	lifting := e.id(t, "create_opportunity", M{"title": "Lifting soon", "embargo_until": soon.In(time.FixedZone("", 3600*9)).Format(time.RFC3339)})
	campLifting := e.id(t, "create_campaign", M{"name": "Lifting soon", "embargo_until": soon.In(time.FixedZone("", -3600*5)).Format(time.RFC3339)})
	var agenda struct {
		Counts map[string]int
		Items  []struct {
			Reason   string `json:"reason"`
			RecordID string `json:"record_id"`
			Message  string `json:"message"`
			Days     int    `json:"days"`
			// Local is the embargo in the zone it was given in, as briefs
			// show it (docs/guardrails.md).
			Local string `json:"embargo_until_local"`
		}
	}
	e.c.Must("get_agenda", M{"embargo_days": 3, "limit": 200}, &agenda)
	found := false
	for _, it := range agenda.Items {
		if it.Reason == "embargo_lifting" && it.RecordID == lifting {
			found = true
			if !strings.Contains(it.Message, "+09:00") || it.Days != 2 || it.Local != soon.In(time.FixedZone("", 3600*9)).Format(time.RFC3339) {
				t.Errorf("agenda item %+v: want the local time (+09:00), also as embargo_until_local, and 2 days", it)
			}
		}
		if it.Reason == "embargo_lifting" && it.RecordID == campLifting && it.Local != soon.In(time.FixedZone("", -3600*5)).Format(time.RFC3339) {
			t.Errorf("campaign agenda item %+v: want embargo_until_local in -05:00", it)
		}
		if it.Reason == "embargo_lifting" && it.RecordID == opp.ID {
			t.Errorf("an embargo long past is on the agenda: %+v", it)
		}
	}
	if !found || agenda.Counts["embargo_lifting"] != 2 {
		t.Errorf("agenda counts %v; opportunity %s found %v", agenda.Counts, lifting, found)
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
