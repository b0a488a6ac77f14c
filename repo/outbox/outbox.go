package outbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/ledger"
	"outreach/repo"
)

// Event kinds a subscription can ask for.
const (
	EventStageChanged  = "stage_changed"
	EventCoverageAdded = "coverage_added"
	EventNoteAdded     = "note_added"
	EventEmailReceived = "email_received"
	EventNextActionDue = "next_action_due"
)

// Events are the event kinds, in the order a subscription lists them.
var Events = []string{EventStageChanged, EventCoverageAdded, EventNoteAdded, EventEmailReceived, EventNextActionDue}

// Delivery targets of a notification.
const (
	TargetSlack   = "slack"
	TargetWebhook = "webhook"
)

// Subscription is a team member's subscription to an opportunity's events.
// Unsubscribing archives it; subscribing again restores it.
type Subscription struct {
	repo.Meta     `bson:",inline"`
	OpportunityID string   `bson:"opportunity_id" json:"opportunity_id"`
	UserID        string   `bson:"user_id" json:"user_id"`
	Events        []string `bson:"events" json:"events"`
}

// Notification is one event for one subscriber: the outbox row.
type Notification struct {
	repo.Meta     `bson:",inline"`
	UserID        string         `bson:"user_id" json:"user_id"`
	OpportunityID string         `bson:"opportunity_id" json:"opportunity_id"`
	Event         string         `bson:"event" json:"event"`
	Title         string         `bson:"title" json:"title"`
	Text          string         `bson:"text" json:"text"`
	Data          map[string]any `bson:"data" json:"data"`
	OccurredAt    time.Time      `bson:"occurred_at" json:"occurred_at"`
	ReadAt        *time.Time     `bson:"read_at" json:"read_at"`
	Delivery      Delivery       `bson:"delivery" json:"delivery"`
}

// Delivery is a notification's delivery state. Done is set when every
// target it was due to reach has it; until then NextAttemptAt says when a
// worker may try again. A worker holds the notification by a lease (owner
// and expiry) while it sends, so workers on several instances never send
// it at once; a worker that dies leaves the lease to expire.
type Delivery struct {
	Done          bool           `bson:"done" json:"done"`
	Targets       []TargetStatus `bson:"targets" json:"targets"`
	NextAttemptAt time.Time      `bson:"next_attempt_at" json:"next_attempt_at"`
	LeaseOwner    string         `bson:"lease_owner" json:"-"`
	LeaseUntil    *time.Time     `bson:"lease_until" json:"-"`
}

// TargetStatus is the state of one delivery target.
type TargetStatus struct {
	Target      string     `bson:"target" json:"target"`
	Attempts    int        `bson:"attempts" json:"attempts"`
	DeliveredAt *time.Time `bson:"delivered_at" json:"delivered_at"`
	LastError   string     `bson:"last_error,omitempty" json:"last_error,omitempty"`
}

// Target returns the status of target t, or nil.
func (d *Delivery) Target(t string) *TargetStatus {
	for i := range d.Targets {
		if d.Targets[i].Target == t {
			return &d.Targets[i]
		}
	}
	return nil
}

// subscribers returns the active subscriptions to opportunity oppID that
// ask for event.
func (s *Store) subscribers(ctx context.Context, oppID, event string) ([]Subscription, error) {
	cur, err := s.Collection(repo.CollSubscriptions).Find(ctx, bson.M{"opportunity_id": oppID, "archived_at": nil},
		options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, ledger.DriverErr(err, "subscription", oppID)
	}
	var subs []Subscription
	if err := cur.All(ctx, &subs); err != nil {
		return nil, ledger.DriverErr(err, "subscription", oppID)
	}
	out := subs[:0]
	for _, sub := range subs {
		if slices.Contains(sub.Events, event) {
			out = append(out, sub)
		}
	}
	return out, nil
}

// SetDeliveryTargets sets the targets new notifications are due to reach,
// from the service's configuration at start (none: notifications are only
// polled with list_notifications).
func (s *Store) SetDeliveryTargets(targets []string) { s.state().targets.Store(&targets) }

func (s *Store) deliveryTargets() []string {
	if t := s.state().targets.Load(); t != nil {
		return *t
	}
	return nil
}

// OppEvent describes what happened to an opportunity.
type OppEvent struct {
	Kind  string
	OppID string
	Title string // the opportunity's title
	Text  string
	Data  map[string]any
	// key, when set, makes the notifications' ids a function of it and the
	// subscriber, so the same event is never notified twice.
	Key string
}

// EventMutations returns the mutations that create one notification per
// subscriber of ev. They go into the group of the change that caused the
// event. A notification cannot be rolled back: a rollback of the change
// does not un-send what was sent.
func (s *Store) EventMutations(ctx context.Context, ev OppEvent) ([]repo.Mutation, error) {
	subs, err := s.subscribers(ctx, ev.OppID, ev.Kind)
	if err != nil || len(subs) == 0 {
		return nil, err
	}
	t := repo.Now()
	var targets []TargetStatus
	for _, name := range s.deliveryTargets() {
		targets = append(targets, TargetStatus{Target: name})
	}
	var muts []repo.Mutation
	for _, sub := range subs {
		n := &Notification{UserID: sub.UserID, OpportunityID: ev.OppID, Event: ev.Kind, Title: ev.Title, Text: ev.Text,
			Data: ev.Data, OccurredAt: t, Delivery: Delivery{Done: len(targets) == 0, Targets: targets, NextAttemptAt: t}}
		if n.Data == nil {
			n.Data = map[string]any{}
		}
		if ev.Key != "" {
			n.ID = uuid.NewSHA1(uuid.NameSpaceOID, []byte("notification/"+ev.Key+"/"+sub.UserID)).String()
		}
		m, err := repo.Creation(repo.CollNotifications, n)
		if err != nil {
			return nil, err
		}
		m.Irreversible = true
		muts = append(muts, m)
	}
	return muts, nil
}

// StageEvent is the event of opportunity oppID, titled title, moving from
// stage from to stage to.
func StageEvent(oppID, title, from, to string) OppEvent {
	return OppEvent{Kind: EventStageChanged, OppID: oppID, Title: title,
		Text: fmt.Sprintf("%q moved from %s to %s", title, from, to),
		Data: map[string]any{"from": from, "to": to}}
}

// rollbackEvents returns the events of a rollback's mutations: a rollback
// produces no event of the change it undoes, unless it is itself a move
// (an opportunity's stage changes back).
func (s *Store) rollbackEvents(ctx context.Context, muts []repo.Mutation) ([]repo.Mutation, error) {
	var out []repo.Mutation
	for _, m := range muts {
		if m.Coll != repo.CollOpportunities || m.Before == nil {
			continue
		}
		from, _ := m.Before["stage"].(string)
		to, _ := m.After["stage"].(string)
		if from == to || m.After["archived_at"] != nil {
			continue
		}
		title, _ := m.After["title"].(string)
		ev := StageEvent(m.ID, title, from, to)
		ev.Data["rollback"] = true
		evm, err := s.EventMutations(ctx, ev)
		if err != nil {
			return nil, err
		}
		out = append(out, evm...)
	}
	return out, nil
}

// InsertWithEvents creates rec in coll together with the notifications of
// the events it causes, as one unit (a group of creates: no version race
// to retry). events runs after rec has its id.
func InsertWithEvents[P interface {
	*T
	repo.Record
}, T any](ctx context.Context, s *repo.Store, coll string, rec P, events func() ([]OppEvent, error)) error {
	m, err := repo.Creation(coll, rec)
	if err != nil {
		return err
	}
	evs, err := events()
	if err != nil {
		return err
	}
	muts := []repo.Mutation{m}
	for _, ev := range evs {
		em, err := Of(s).EventMutations(ctx, ev)
		if err != nil {
			return err
		}
		muts = append(muts, em...)
	}
	entries, err := s.Write(ctx, muts...)
	if err != nil {
		return err
	}
	repo.MetaOf(rec).Version, repo.MetaOf(rec).LastChange = 1, entries[0].ID
	return nil
}

// Service events: notified to every admin, of no opportunity.
const (
	EventBackupFailing   = "backup_failing"
	EventBackupRecovered = "backup_recovered"
)

// NotifyAdmins notifies every admin (a member holding an unrevoked key
// with the admin scope) of a service event, delivered like any
// notification. key makes the notification's ids a function of it and the
// admin, so the same event is notified once however often it is told. It
// returns how many notifications it created.
func (s *Store) NotifyAdmins(ctx context.Context, kind, title, text string, data map[string]any, key string) (int, error) {
	cur, err := s.Collection(repo.CollKeys).Find(ctx, bson.M{"scopes": repo.ScopeAdmin, "revoked_at": nil, "$or": bson.A{bson.M{"expires_at": nil}, bson.M{"expires_at": bson.M{"$gt": repo.Now()}}}}, options.Find().SetProjection(bson.M{"user_id": 1}))
	if err != nil {
		return 0, ledger.DriverErr(err, "agent key", "admin")
	}
	var keys []struct {
		UserID string `bson:"user_id"`
	}
	if err := cur.All(ctx, &keys); err != nil {
		return 0, ledger.DriverErr(err, "agent key", "admin")
	}
	var admins []string
	for _, k := range keys {
		if !slices.Contains(admins, k.UserID) {
			admins = append(admins, k.UserID)
		}
	}
	slices.Sort(admins)
	t := repo.Now()
	var targets []TargetStatus
	for _, name := range s.deliveryTargets() {
		targets = append(targets, TargetStatus{Target: name})
	}
	var muts []repo.Mutation
	for _, user := range admins {
		id := uuid.NewSHA1(uuid.NameSpaceOID, []byte("notification/"+kind+"/"+key+"/"+user)).String()
		var meta repo.Meta
		err := s.Collection(repo.CollNotifications).FindOne(ctx, bson.M{"_id": id}).Decode(&meta)
		if err == nil {
			continue
		}
		if !errors.Is(err, mongo.ErrNoDocuments) {
			return 0, ledger.DriverErr(err, "notification", id)
		}
		if data == nil {
			data = map[string]any{}
		}
		n := &Notification{Meta: repo.Meta{ID: id}, UserID: user, Event: kind, Title: title, Text: text, Data: data, OccurredAt: t,
			Delivery: Delivery{Done: len(targets) == 0, Targets: targets, NextAttemptAt: t}}
		m, err := repo.Creation(repo.CollNotifications, n)
		if err != nil {
			return 0, err
		}
		m.Irreversible = true
		muts = append(muts, m)
	}
	if len(muts) == 0 {
		return 0, nil
	}
	if _, err := s.Write(ctx, muts...); err != nil {
		if ledger.IsConflict(err) {
			return 0, nil // another instance made them first
		}
		return 0, err
	}
	return len(muts), nil
}
