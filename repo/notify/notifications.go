package notify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger"
	"outreach/repo"
	"outreach/repo/outbox"
	"outreach/repo/pipeline"
)

// DeliveryAttempt is the record of one attempt to deliver a notification to
// one target.
type DeliveryAttempt struct {
	repo.Meta      `bson:",inline"`
	NotificationID string    `bson:"notification_id" json:"notification_id"`
	Target         string    `bson:"target" json:"target"`
	Attempt        int       `bson:"attempt" json:"attempt"`
	Worker         string    `bson:"worker" json:"worker"`
	OK             bool      `bson:"ok" json:"ok"`
	HTTPStatus     int       `bson:"http_status,omitempty" json:"http_status,omitempty"`
	Error          string    `bson:"error,omitempty" json:"error,omitempty"`
	StartedAt      time.Time `bson:"started_at" json:"started_at"`
	DurationMS     int64     `bson:"duration_ms" json:"duration_ms"`
}

func checkEvents(events []string) ([]string, error) {
	if len(events) == 0 {
		return slices.Clone(outbox.Events), nil
	}
	var out []string
	for i, e := range events {
		if !slices.Contains(outbox.Events, e) {
			return nil, repo.Invalid(fmt.Sprintf("events[%d]", i), "%q is not an event kind; use any of: %s", e, strings.Join(outbox.Events, ", "))
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return slices.Index(outbox.Events, a) - slices.Index(outbox.Events, b) })
	return out, nil
}

// subscriptionID is the one id of user's subscription to an opportunity, so
// two subscribes racing cannot make two subscriptions.
func subscriptionID(oppID, userID string) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte("subscription/"+oppID+"/"+userID)).String()
}

// Subscribe subscribes user to the events of an opportunity (all of them
// when events is empty). Subscribing again replaces the event kinds.
func (s *Store) Subscribe(ctx context.Context, oppID, userID string, events []string) (*outbox.Subscription, error) {
	events, err := checkEvents(events)
	if err != nil {
		return nil, err
	}
	if err := s.MustExist(ctx, repo.CollOpportunities, "opportunity_id", oppID); err != nil {
		return nil, err
	}
	if err := s.MustExist(ctx, repo.CollUsers, "user_id", userID); err != nil {
		return nil, err
	}
	id := subscriptionID(oppID, userID)
	for attempt := 1; ; attempt++ {
		sub, err := repo.Find[*outbox.Subscription](ctx, s.Store, repo.CollSubscriptions, id)
		if repo.IsNotFound(err) {
			sub = &outbox.Subscription{Meta: repo.Meta{ID: id}, OpportunityID: oppID, UserID: userID, Events: events}
			err = repo.Insert(ctx, s.Store, repo.CollSubscriptions, sub)
			if ledger.IsConflict(err) && attempt < 3 {
				continue // another subscribe created it: update that one
			}
			return sub, err
		}
		if err != nil {
			return nil, err
		}
		action := audit.ActionUpdate
		if sub.Archived() {
			action = audit.ActionRestore
		}
		return repo.Modify(ctx, s.Store, repo.CollSubscriptions, id, action, func(sub *outbox.Subscription) error {
			sub.ArchivedAt = nil
			sub.Events = events
			return nil
		})
	}
}

// Unsubscribe ends user's subscription to an opportunity (archives it).
func (s *Store) Unsubscribe(ctx context.Context, oppID, userID string) (*outbox.Subscription, error) {
	if ledger.CheckID(oppID) != nil {
		return nil, repo.Invalid("opportunity_id", "%q is not a UUID", oppID)
	}
	if ledger.CheckID(userID) != nil {
		return nil, repo.Invalid("user_id", "%q is not a UUID", userID)
	}
	sub, err := repo.Archive[*outbox.Subscription](ctx, s.Store, repo.CollSubscriptions, subscriptionID(oppID, userID), nil)
	if repo.IsNotFound(err) {
		return nil, &repo.Error{Code: repo.CodeNotFound, Field: "opportunity_id", Message: fmt.Sprintf("user %s is not subscribed to opportunity %s", userID, oppID)}
	}
	var e *repo.Error
	if errors.As(err, &e) && e.Code == repo.CodeFailedPrecondition {
		return nil, &repo.Error{Code: repo.CodeFailedPrecondition, Field: "opportunity_id", Message: fmt.Sprintf("user %s is no longer subscribed to opportunity %s", userID, oppID)}
	}
	return sub, err
}

// SubscriptionView is a subscription with its opportunity's current title
// and stage.
type SubscriptionView struct {
	outbox.Subscription `bson:",inline"`
	OpportunityTitle    string `json:"opportunity_title"`
	OpportunityStage    string `json:"opportunity_stage"`
	OpportunityGone     bool   `json:"opportunity_archived"`
}

// Subscriptions lists user's active subscriptions, newest first.
func (s *Store) Subscriptions(ctx context.Context, userID string, limit, offset int) (repo.Page[SubscriptionView], error) {
	p, err := repo.ListPage[SubscriptionView](ctx, s.Store, repo.CollSubscriptions, bson.M{"user_id": userID, "archived_at": nil},
		bson.D{{Key: "updated_at", Value: -1}, {Key: "_id", Value: -1}}, limit, offset)
	if err != nil {
		return p, err
	}
	for i := range p.Items {
		o, err := repo.Find[*pipeline.Opportunity](ctx, s.Store, repo.CollOpportunities, p.Items[i].OpportunityID)
		if err != nil {
			return p, err
		}
		p.Items[i].OpportunityTitle, p.Items[i].OpportunityStage, p.Items[i].OpportunityGone = o.Title, o.Stage, o.Archived()
	}
	return p, nil
}

// Notifications lists user's notifications, newest first.
func (s *Store) Notifications(ctx context.Context, userID string, unreadOnly bool, limit, offset int) (repo.Page[outbox.Notification], error) {
	f := bson.M{"user_id": userID}
	if unreadOnly {
		f["read_at"] = nil
	}
	return repo.ListPage[outbox.Notification](ctx, s.Store, repo.CollNotifications, f, bson.D{{Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}, limit, offset)
}

// ActFor checks that the caller may act on userID's own data (their
// notifications and subscriptions): a key acts on its own user's, and a key
// with the admin scope on anyone's (the change entries then name the member
// in on_behalf_of). Otherwise it is permission_denied naming field.
func ActFor(ctx context.Context, field, userID string) error {
	a, _ := audit.ActorFrom(ctx)
	if userID == a.UserID || slices.Contains(a.Scopes, repo.ScopeAdmin) {
		return nil
	}
	what := "names another team member"
	if strings.HasPrefix(field, "ids[") {
		what = "is another team member's notification"
	}
	return &repo.Error{Code: repo.CodePermissionDenied, Field: field, Message: fmt.Sprintf("%s %s: a key reads and changes only its own user's notifications and subscriptions (user %s); acting for another member needs the admin scope", field, what, a.UserID)}
}

// MarkRead marks notifications read, as one unit; one already read is left
// as it is. It returns the ids it marked. Only the caller's own
// notifications, or anyone's with the admin scope (ActFor).
func (s *Store) MarkRead(ctx context.Context, ids []string) ([]string, error) {
	for i, id := range ids {
		if ledger.CheckID(id) != nil {
			return nil, repo.Invalid(fmt.Sprintf("ids[%d]", i), "%q is not a UUID", id)
		}
	}
	var marked []string
	err := s.WriteGroup(ctx, func() ([]ledger.Mutation, error) {
		marked = nil
		var muts []ledger.Mutation
		seen := map[string]bool{}
		for i, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			owner := ""
			_, m, err := repo.Prepare(ctx, s.Store, repo.CollNotifications, id, audit.ActionUpdate, func(n *outbox.Notification) error {
				if err := ActFor(ctx, fmt.Sprintf("ids[%d]", i), n.UserID); err != nil {
					return err
				}
				owner = n.UserID
				if n.ReadAt == nil {
					t := repo.Now()
					n.ReadAt = &t
				}
				return nil
			})
			if repo.IsNotFound(err) {
				return nil, repo.NotFoundField(fmt.Sprintf("ids[%d]", i), "notification", id)
			}
			if err != nil {
				return nil, err
			}
			if m != nil {
				if a, _ := audit.ActorFrom(ctx); owner != a.UserID {
					m.OnBehalfOf = owner
				}
				muts = append(muts, *m)
				marked = append(marked, id)
			}
		}
		return muts, nil
	})
	if marked == nil {
		marked = []string{}
	}
	return marked, err
}

// DueNotifications returns up to limit notifications a worker may try now:
// not done, due, and not held by a live lease.
func (s *Store) DueNotifications(ctx context.Context, at time.Time, limit int) ([]outbox.Notification, error) {
	cur, err := s.Collection(repo.CollNotifications).Find(ctx, bson.M{"delivery.done": false, "delivery.next_attempt_at": bson.M{"$lte": at}},
		options.Find().SetSort(bson.D{{Key: "delivery.next_attempt_at", Value: 1}, {Key: "_id", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, ledger.DriverErr(err, "notification", "due")
	}
	var out []outbox.Notification
	if err := cur.All(ctx, &out); err != nil {
		return nil, ledger.DriverErr(err, "notification", "due")
	}
	live := out[:0]
	for _, n := range out {
		if n.Delivery.LeaseUntil == nil || !n.Delivery.LeaseUntil.After(at) {
			live = append(live, n)
		}
	}
	return live, nil
}

// ErrClaimed says another worker holds a notification's delivery.
var ErrClaimed = errors.New("the notification is being delivered by another worker")

// ClaimNotification takes the delivery lease of notification id for worker
// until lease has passed. The claim is a version-guarded write: of workers
// claiming at once, one wins and the others get ErrClaimed (or find it done).
func (s *Store) ClaimNotification(ctx context.Context, id, worker string, lease time.Duration) (*outbox.Notification, error) {
	return repo.Modify(ctx, s.Store, repo.CollNotifications, id, audit.ActionUpdate, func(n *outbox.Notification) error {
		t := repo.Now()
		if n.Delivery.Done {
			return ErrClaimed
		}
		if n.Delivery.LeaseUntil != nil && n.Delivery.LeaseUntil.After(t) && n.Delivery.LeaseOwner != worker {
			return ErrClaimed
		}
		until := t.Add(lease)
		n.Delivery.LeaseOwner, n.Delivery.LeaseUntil = worker, &until
		return nil
	})
}

// FinishDelivery records a worker's attempts on a claimed notification, in
// one unit with the notification's new delivery state: targets reached,
// errors, and when to try again (done once every target has it). If the
// worker's lease was lost meanwhile (another worker holds or finished it),
// only the attempts are recorded, and it returns ErrClaimed.
func (s *Store) FinishDelivery(ctx context.Context, id, worker string, attempts []DeliveryAttempt, retryAt time.Time) (*outbox.Notification, error) {
	var out *outbox.Notification
	lost := false
	err := s.WriteGroup(ctx, func() ([]ledger.Mutation, error) {
		lost = false
		n, m, err := repo.Prepare(ctx, s.Store, repo.CollNotifications, id, audit.ActionUpdate, func(n *outbox.Notification) error {
			if n.Delivery.LeaseOwner != worker {
				return ErrClaimed
			}
			done := true
			for _, a := range attempts {
				ts := n.Delivery.Target(a.Target)
				if ts == nil {
					continue
				}
				ts.Attempts++
				if a.OK {
					t := a.StartedAt
					ts.DeliveredAt, ts.LastError = &t, ""
				} else {
					ts.LastError = a.Error
				}
			}
			for _, ts := range n.Delivery.Targets {
				if ts.DeliveredAt == nil {
					done = false
				}
			}
			n.Delivery.Done = done
			n.Delivery.NextAttemptAt = retryAt.UTC().Truncate(time.Millisecond)
			n.Delivery.LeaseOwner, n.Delivery.LeaseUntil = "", nil
			return nil
		})
		if errors.Is(err, ErrClaimed) {
			lost, err = true, nil
		}
		if err != nil {
			return nil, err
		}
		out = n
		var muts []ledger.Mutation
		if m != nil && !lost {
			muts = append(muts, *m)
		}
		for i := range attempts {
			a := attempts[i]
			a.Meta = repo.Meta{}
			a.NotificationID, a.Worker = id, worker
			am, err := repo.Creation(repo.CollDeliveries, &a)
			if err != nil {
				return nil, err
			}
			muts = append(muts, am)
		}
		return muts, nil
	})
	if err == nil && lost {
		return nil, ErrClaimed
	}
	return out, err
}

// DeliveryAttempts lists the attempts to deliver notification id, oldest first.
func (s *Store) DeliveryAttempts(ctx context.Context, id string) ([]DeliveryAttempt, error) {
	cur, err := s.Collection(repo.CollDeliveries).Find(ctx, bson.M{"notification_id": id}, options.Find().SetSort(bson.D{{Key: "started_at", Value: 1}, {Key: "_id", Value: 1}}))
	if err != nil {
		return nil, ledger.DriverErr(err, "delivery", id)
	}
	out := []DeliveryAttempt{}
	return out, ledger.DriverErr(cur.All(ctx, &out), "delivery", id)
}

// Notification returns one notification.
func (s *Store) Notification(ctx context.Context, id string) (*outbox.Notification, error) {
	return repo.Find[*outbox.Notification](ctx, s.Store, repo.CollNotifications, id)
}
