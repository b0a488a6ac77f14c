package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/ledger"
	"outreach/repo"
	"outreach/repo/pipeline"
	"outreach/repo/repotest"
)

// TestStageChangeWithNoteSurvivesCrashes stops the ordered group protocol
// after each of its steps (a group that changes the opportunity and creates
// its note), runs recovery, and checks that the stage change and the note
// landed together or not at all, and that the invariants hold.
func TestStageChangeWithNoteSurvivesCrashes(t *testing.T) {
	s := repotest.OpenEmbedded(t)
	ctx := audit.WithActor(context.Background(), audit.Actor{UserID: "u", AgentID: "a", SessionID: "s", Tool: "test"})
	if err := pipeline.Of(s).Seed(ctx); err != nil {
		t.Fatal(err)
	}
	type point struct {
		point  string
		nth    int
		landed bool
	}
	ordered := []point{
		{"plan", 1, false},
		{"lock", 1, false},
		{"locked", 1, true},
		{"step-entry", 1, true},
		{"step-record", 1, true},
		{"step-entry", 2, true},
		{"step-record", 2, true},
	}
	// The serial protocol's plan is decided once persisted.
	serial := []point{{"plan", 1, true}, {"step-record", 1, true}, {"step-entry", 1, true}, {"step-record", 2, true}, {"step-entry", 2, true}}
	for _, tc := range append(append([]point{}, serial...), ordered...) {
		protocol := "serial"
		if len(serial) == 0 {
			protocol = "ordered"
		}
		if len(serial) > 0 {
			serial = serial[1:]
		}
		t.Run(fmt.Sprintf("%s/%s#%d", protocol, tc.point, tc.nth), func(t *testing.T) {
			*s.Internals().SerialWrites = protocol == "serial"
			o, err := pipeline.Of(s).CreateOpportunity(ctx, &pipeline.Opportunity{Title: "crash " + tc.point})
			if err != nil {
				t.Fatal(err)
			}
			seen := 0
			*s.Internals().Hook = func(p string) error {
				if p == tc.point {
					if seen++; seen == tc.nth {
						return errors.New("stop")
					}
				}
				return nil
			}
			_, err = pipeline.Of(s).ChangeStage(ctx, o.ID, pipeline.StageMove{Stage: "pitched", Note: "sent"})
			*s.Internals().Hook = nil
			if !errors.Is(err, ledger.ErrCrashed) {
				t.Fatalf("ChangeStage: %v, want a simulated crash", err)
			}
			if _, err := s.Recover(context.Background(), true); err != nil {
				t.Fatalf("recover: %v", err)
			}
			got, err := pipeline.Of(s).Opportunity(ctx, o.ID)
			if err != nil {
				t.Fatal(err)
			}
			notes, err := s.Collection(repo.CollNotes).CountDocuments(ctx, bson.M{"links.opportunity_id": o.ID})
			if err != nil {
				t.Fatal(err)
			}
			if tc.landed {
				last := got.StageHistory[len(got.StageHistory)-1]
				n, _ := s.Collection(repo.CollNotes).CountDocuments(ctx, bson.M{"_id": last.NoteID})
				if got.Stage != "pitched" || notes != 1 || n != 1 {
					t.Errorf("rolled forward: stage %s, %d notes, history note found %d; want pitched with its note", got.Stage, notes, n)
				}
			} else if got.Stage != pipeline.StageResearching || notes != 0 || len(got.StageHistory) != 1 {
				t.Errorf("voided: stage %s, %d notes; want researching and no note", got.Stage, notes)
			}
			v, err := s.Verify(context.Background())
			if err != nil || len(v) > 0 {
				t.Errorf("invariants: %v %+v", err, v)
			}
			// The opportunity is not left locked: it can move again.
			if _, err := pipeline.Of(s).ChangeStage(ctx, o.ID, pipeline.StageMove{Stage: "responded"}); err != nil {
				t.Errorf("move after recovery: %v", err)
			}
		})
	}
}

// TestGroupRefusesCreatingRedactedRecords: a plan cannot carry a create of
// a collection with redacted fields, whose values it could not restore.
func TestGroupRefusesCreatingRedactedRecords(t *testing.T) {
	s := repotest.OpenEmbedded(t)
	ctx := audit.WithActor(context.Background(), audit.Actor{UserID: "u", AgentID: "a", SessionID: "s"})
	if err := pipeline.Of(s).Seed(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := pipeline.Of(s).CreateCampaign(ctx, &pipeline.Campaign{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	_, m, err := repo.Prepare(ctx, s, repo.CollCampaigns, c.ID, audit.ActionUpdate, func(c *pipeline.Campaign) error { c.Goals = "g"; return nil })
	if err != nil || m == nil {
		t.Fatal(m, err)
	}
	k, err := repo.Creation(repo.CollKeys, &repo.AgentKey{Name: "k", KeyHash: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, *m, k); err == nil {
		t.Fatal("a group creating an agent key was written")
	}
	n, _ := s.Collection(repo.CollKeys).CountDocuments(ctx, bson.M{})
	if got, _ := pipeline.Of(s).Campaign(ctx, c.ID); got.Goals != "" || n != 0 {
		t.Errorf("refused group wrote: goals %q, %d keys", got.Goals, n)
	}
}
