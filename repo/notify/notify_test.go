package notify_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/ledger"
	"outreach/repo"
	"outreach/repo/notify"
	"outreach/repo/outbox"
	"outreach/repo/pipeline"
	"outreach/repo/repotest"
)

// TestOutboxLandsWithItsChange stops the stage-change group (the move and
// the subscriber's notification) after each step of both protocols, runs
// recovery, and checks that a notification exists exactly when the move
// landed: none is lost, and none stands for a change that did not happen.
func TestOutboxLandsWithItsChange(t *testing.T) {
	s := repotest.OpenEmbedded(t)
	ctx := audit.WithActor(context.Background(), audit.Actor{UserID: "u", AgentID: "a", SessionID: "s", Tool: "test"})
	if err := pipeline.Of(s).Seed(ctx); err != nil {
		t.Fatal(err)
	}
	outbox.Of(s).SetDeliveryTargets([]string{outbox.TargetWebhook})
	u := &repo.User{Name: "Ann", Email: "ann@example.com"}
	if err := repo.Insert(ctx, s, repo.CollUsers, u); err != nil {
		t.Fatal(err)
	}
	type point struct {
		protocol, point string
		nth             int
		landed          bool
	}
	points := []point{
		{"serial", "plan", 1, true}, {"serial", "step-record", 1, true}, {"serial", "step-entry", 1, true},
		{"serial", "step-record", 2, true}, {"serial", "step-entry", 2, true},
		{"ordered", "plan", 1, false}, {"ordered", "lock", 1, false}, {"ordered", "locked", 1, true},
		{"ordered", "step-entry", 1, true}, {"ordered", "step-record", 1, true},
		{"ordered", "step-entry", 2, true}, {"ordered", "step-record", 2, true},
	}
	for _, tc := range points {
		t.Run(fmt.Sprintf("%s/%s#%d", tc.protocol, tc.point, tc.nth), func(t *testing.T) {
			*s.Internals().SerialWrites = tc.protocol == "serial"
			o, err := pipeline.Of(s).CreateOpportunity(ctx, &pipeline.Opportunity{Title: "outbox " + tc.point})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := notify.Of(s).Subscribe(ctx, o.ID, u.ID, nil); err != nil {
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
			_, err = pipeline.Of(s).ChangeStage(ctx, o.ID, pipeline.StageMove{Stage: "pitched"})
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
			n, err := s.Collection(repo.CollNotifications).CountDocuments(ctx, bson.M{"opportunity_id": o.ID, "event": outbox.EventStageChanged})
			if err != nil {
				t.Fatal(err)
			}
			moved := got.Stage == "pitched"
			if moved != tc.landed || (moved && n != 1) || (!moved && n != 0) {
				t.Errorf("stage %s with %d notifications; want the move (%v) and one notification exactly when it landed", got.Stage, n, tc.landed)
			}
			if v, err := s.Verify(context.Background()); err != nil || len(v) > 0 {
				t.Errorf("invariants: %v %+v", err, v)
			}
		})
	}
}

// TestClaimHasOneWinner: workers claiming one notification at once, one
// wins; the others see its lease.
func TestClaimHasOneWinner(t *testing.T) {
	s := repotest.OpenEmbedded(t)
	*s.Internals().SerialWrites = true
	ctx := audit.WithActor(context.Background(), audit.Actor{UserID: "u", AgentID: "a", SessionID: "s", Tool: "test"})
	if err := pipeline.Of(s).Seed(ctx); err != nil {
		t.Fatal(err)
	}
	outbox.Of(s).SetDeliveryTargets([]string{outbox.TargetWebhook})
	u := &repo.User{Name: "Ann", Email: "ann@example.com"}
	if err := repo.Insert(ctx, s, repo.CollUsers, u); err != nil {
		t.Fatal(err)
	}
	o, err := pipeline.Of(s).CreateOpportunity(ctx, &pipeline.Opportunity{Title: "claims"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := notify.Of(s).Subscribe(ctx, o.ID, u.ID, []string{outbox.EventStageChanged}); err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.Of(s).ChangeStage(ctx, o.ID, pipeline.StageMove{Stage: "drafting"}); err != nil {
		t.Fatal(err)
	}
	var n outbox.Notification
	if err := s.Collection(repo.CollNotifications).FindOne(ctx, bson.M{"opportunity_id": o.ID}).Decode(&n); err != nil {
		t.Fatal(err)
	}
	const workers = 8
	errs := make(chan error, workers)
	for i := range workers {
		go func() {
			_, err := notify.Of(s).ClaimNotification(ctx, n.ID, fmt.Sprintf("w%d", i), 30e9)
			errs <- err
		}()
	}
	won := 0
	for range workers {
		err := <-errs
		switch {
		case err == nil:
			won++
		case errors.Is(err, notify.ErrClaimed), ledger.IsConflict(err):
		default:
			t.Errorf("claim: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d workers won the claim, want 1", won)
	}
}

// TestLostLeaseKeepsTheAttempt: a worker whose lease ran out and was taken
// over cannot finish the notification, but its attempt is still recorded;
// the worker holding the lease finishes it.
func TestLostLeaseKeepsTheAttempt(t *testing.T) {
	s := repotest.OpenEmbedded(t)
	*s.Internals().SerialWrites = true
	ctx := audit.WithActor(context.Background(), audit.Actor{UserID: "u", AgentID: "a", SessionID: "s", Tool: "test"})
	if err := pipeline.Of(s).Seed(ctx); err != nil {
		t.Fatal(err)
	}
	outbox.Of(s).SetDeliveryTargets([]string{outbox.TargetWebhook})
	u := &repo.User{Name: "Ann", Email: "ann@example.com"}
	if err := repo.Insert(ctx, s, repo.CollUsers, u); err != nil {
		t.Fatal(err)
	}
	o, err := pipeline.Of(s).CreateOpportunity(ctx, &pipeline.Opportunity{Title: "lease"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := notify.Of(s).Subscribe(ctx, o.ID, u.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.Of(s).ChangeStage(ctx, o.ID, pipeline.StageMove{Stage: "drafting"}); err != nil {
		t.Fatal(err)
	}
	due, err := notify.Of(s).DueNotifications(ctx, repo.Now(), 10)
	if err != nil || len(due) != 1 {
		t.Fatalf("due: %v %d", err, len(due))
	}
	id := due[0].ID
	if _, err := notify.Of(s).ClaimNotification(ctx, id, "slow", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := notify.Of(s).ClaimNotification(ctx, id, "fast", time.Minute); err != nil {
		t.Fatalf("take-over after the lease: %v", err)
	}
	if _, err := notify.Of(s).ClaimNotification(ctx, id, "third", time.Minute); !errors.Is(err, notify.ErrClaimed) {
		t.Fatalf("claim during a live lease: %v", err)
	}
	slow := []notify.DeliveryAttempt{{Target: outbox.TargetWebhook, Attempt: 1, OK: true, StartedAt: repo.Now().Add(-time.Second)}}
	if _, err := notify.Of(s).FinishDelivery(ctx, id, "slow", slow, repo.Now()); !errors.Is(err, notify.ErrClaimed) {
		t.Fatalf("finish by the worker that lost its lease: %v", err)
	}
	fast := []notify.DeliveryAttempt{{Target: outbox.TargetWebhook, Attempt: 1, OK: true, StartedAt: repo.Now()}}
	n, err := notify.Of(s).FinishDelivery(ctx, id, "fast", fast, repo.Now())
	if err != nil || !n.Delivery.Done || n.Delivery.Targets[0].Attempts != 1 {
		t.Fatalf("finish by the lease holder: %v %+v", err, n)
	}
	attempts, err := notify.Of(s).DeliveryAttempts(ctx, id)
	if err != nil || len(attempts) != 2 || attempts[0].Worker != "slow" || attempts[1].Worker != "fast" {
		t.Errorf("attempts: %v %+v", err, attempts)
	}
	if v, err := s.Verify(context.Background()); err != nil || len(v) > 0 {
		t.Errorf("invariants: %v %+v", err, v)
	}
}
