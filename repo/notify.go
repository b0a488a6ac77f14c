package repo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger"
)

// This file is the outbox: subscriptions to opportunities, and the
// notifications an event on a subscribed opportunity becomes. A
// notification is created by a mutation of the same group as the change
// that caused it, so both land or neither does; its delivery state is then
// advanced by delivery workers through the same write path (claim, then
// finish), each attempt leaving a delivery record.

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
	Meta          `bson:",inline"`
	OpportunityID string   `bson:"opportunity_id" json:"opportunity_id"`
	UserID        string   `bson:"user_id" json:"user_id"`
	Events        []string `bson:"events" json:"events"`
}

// Notification is one event for one subscriber: the outbox row.
type Notification struct {
	Meta          `bson:",inline"`
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

// DeliveryAttempt is the record of one attempt to deliver a notification to
// one target.
type DeliveryAttempt struct {
	Meta           `bson:",inline"`
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
		return slices.Clone(Events), nil
	}
	var out []string
	for i, e := range events {
		if !slices.Contains(Events, e) {
			return nil, Invalid(fmt.Sprintf("events[%d]", i), "%q is not an event kind; use any of: %s", e, strings.Join(Events, ", "))
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return slices.Index(Events, a) - slices.Index(Events, b) })
	return out, nil
}

// subscriptionID is the one id of user's subscription to an opportunity, so
// two subscribes racing cannot make two subscriptions.
func subscriptionID(oppID, userID string) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte("subscription/"+oppID+"/"+userID)).String()
}

// Subscribe subscribes user to the events of an opportunity (all of them
// when events is empty). Subscribing again replaces the event kinds.
func (s *Store) Subscribe(ctx context.Context, oppID, userID string, events []string) (*Subscription, error) {
	events, err := checkEvents(events)
	if err != nil {
		return nil, err
	}
	if err := s.MustExist(ctx, CollOpportunities, "opportunity_id", oppID); err != nil {
		return nil, err
	}
	if err := s.MustExist(ctx, CollUsers, "user_id", userID); err != nil {
		return nil, err
	}
	id := subscriptionID(oppID, userID)
	for attempt := 1; ; attempt++ {
		sub, err := Find[*Subscription](ctx, s, CollSubscriptions, id)
		if isNotFound(err) {
			sub = &Subscription{Meta: Meta{ID: id}, OpportunityID: oppID, UserID: userID, Events: events}
			err = Insert(ctx, s, CollSubscriptions, sub)
			if isConflict(err) && attempt < 3 {
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
		return Modify(ctx, s, CollSubscriptions, id, action, func(sub *Subscription) error {
			sub.ArchivedAt = nil
			sub.Events = events
			return nil
		})
	}
}

// Unsubscribe ends user's subscription to an opportunity (archives it).
func (s *Store) Unsubscribe(ctx context.Context, oppID, userID string) (*Subscription, error) {
	if ledger.CheckID(oppID) != nil {
		return nil, Invalid("opportunity_id", "%q is not a UUID", oppID)
	}
	if ledger.CheckID(userID) != nil {
		return nil, Invalid("user_id", "%q is not a UUID", userID)
	}
	sub, err := Archive[*Subscription](ctx, s, CollSubscriptions, subscriptionID(oppID, userID), nil)
	if isNotFound(err) {
		return nil, &Error{Code: CodeNotFound, Field: "opportunity_id", Message: fmt.Sprintf("user %s is not subscribed to opportunity %s", userID, oppID)}
	}
	var e *Error
	if errors.As(err, &e) && e.Code == CodeFailedPrecondition {
		return nil, &Error{Code: CodeFailedPrecondition, Field: "opportunity_id", Message: fmt.Sprintf("user %s is no longer subscribed to opportunity %s", userID, oppID)}
	}
	return sub, err
}

// SubscriptionView is a subscription with its opportunity's current title
// and stage.
type SubscriptionView struct {
	Subscription     `bson:",inline"`
	OpportunityTitle string `json:"opportunity_title"`
	OpportunityStage string `json:"opportunity_stage"`
	OpportunityGone  bool   `json:"opportunity_archived"`
}

// Subscriptions lists user's active subscriptions, newest first.
func (s *Store) Subscriptions(ctx context.Context, userID string, limit, offset int) (Page[SubscriptionView], error) {
	p, err := ListPage[SubscriptionView](ctx, s, CollSubscriptions, bson.M{"user_id": userID, "archived_at": nil},
		bson.D{{Key: "updated_at", Value: -1}, {Key: "_id", Value: -1}}, limit, offset)
	if err != nil {
		return p, err
	}
	for i := range p.Items {
		o, err := Find[*Opportunity](ctx, s, CollOpportunities, p.Items[i].OpportunityID)
		if err != nil {
			return p, err
		}
		p.Items[i].OpportunityTitle, p.Items[i].OpportunityStage, p.Items[i].OpportunityGone = o.Title, o.Stage, o.Archived()
	}
	return p, nil
}

// subscribers returns the active subscriptions to opportunity oppID that
// ask for event.
func (s *Store) subscribers(ctx context.Context, oppID, event string) ([]Subscription, error) {
	cur, err := s.coll(CollSubscriptions).Find(ctx, bson.M{"opportunity_id": oppID, "archived_at": nil},
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
func (s *Store) SetDeliveryTargets(targets []string) { s.targets.Store(&targets) }

func (s *Store) deliveryTargets() []string {
	if t := s.targets.Load(); t != nil {
		return *t
	}
	return nil
}

// event describes what happened to an opportunity.
type event struct {
	kind  string
	oppID string
	title string // the opportunity's title
	text  string
	data  map[string]any
	// key, when set, makes the notifications' ids a function of it and the
	// subscriber, so the same event is never notified twice.
	key string
}

// eventMutations returns the mutations that create one notification per
// subscriber of ev. They go into the group of the change that caused the
// event. A notification cannot be rolled back: a rollback of the change
// does not un-send what was sent.
func (s *Store) eventMutations(ctx context.Context, ev event) ([]mutation, error) {
	subs, err := s.subscribers(ctx, ev.oppID, ev.kind)
	if err != nil || len(subs) == 0 {
		return nil, err
	}
	t := Now()
	var targets []TargetStatus
	for _, name := range s.deliveryTargets() {
		targets = append(targets, TargetStatus{Target: name})
	}
	var muts []mutation
	for _, sub := range subs {
		n := &Notification{UserID: sub.UserID, OpportunityID: ev.oppID, Event: ev.kind, Title: ev.title, Text: ev.text,
			Data: ev.data, OccurredAt: t, Delivery: Delivery{Done: len(targets) == 0, Targets: targets, NextAttemptAt: t}}
		if n.Data == nil {
			n.Data = map[string]any{}
		}
		if ev.key != "" {
			n.ID = uuid.NewSHA1(uuid.NameSpaceOID, []byte("notification/"+ev.key+"/"+sub.UserID)).String()
		}
		m, err := creation(CollNotifications, n)
		if err != nil {
			return nil, err
		}
		m.Irreversible = true
		muts = append(muts, m)
	}
	return muts, nil
}

// stageEvent is the event of opportunity o moving from stage from.
func stageEvent(o *Opportunity, from string) event {
	return event{kind: EventStageChanged, oppID: o.ID, title: o.Title,
		text: fmt.Sprintf("%q moved from %s to %s", o.Title, from, o.Stage),
		data: map[string]any{"from": from, "to": o.Stage}}
}

// rollbackEvents returns the events of a rollback's mutations: a rollback
// produces no event of the change it undoes, unless it is itself a move
// (an opportunity's stage changes back).
func (s *Store) rollbackEvents(ctx context.Context, muts []mutation) ([]mutation, error) {
	var out []mutation
	for _, m := range muts {
		if m.Coll != CollOpportunities || m.Before == nil {
			continue
		}
		from, _ := m.Before["stage"].(string)
		to, _ := m.After["stage"].(string)
		if from == to || m.After["archived_at"] != nil {
			continue
		}
		title, _ := m.After["title"].(string)
		ev := stageEvent(&Opportunity{Meta: Meta{ID: m.ID}, Title: title, Stage: to}, from)
		ev.data["rollback"] = true
		evm, err := s.eventMutations(ctx, ev)
		if err != nil {
			return nil, err
		}
		out = append(out, evm...)
	}
	return out, nil
}

// Notifications lists user's notifications, newest first.
func (s *Store) Notifications(ctx context.Context, userID string, unreadOnly bool, limit, offset int) (Page[Notification], error) {
	f := bson.M{"user_id": userID}
	if unreadOnly {
		f["read_at"] = nil
	}
	return ListPage[Notification](ctx, s, CollNotifications, f, bson.D{{Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}, limit, offset)
}

// ActFor checks that the caller may act on userID's own data (their
// notifications and subscriptions): a key acts on its own user's, and a key
// with the admin scope on anyone's (the change entries then name the member
// in on_behalf_of). Otherwise it is permission_denied naming field.
func ActFor(ctx context.Context, field, userID string) error {
	a, _ := audit.ActorFrom(ctx)
	if userID == a.UserID || slices.Contains(a.Scopes, ScopeAdmin) {
		return nil
	}
	what := "names another team member"
	if strings.HasPrefix(field, "ids[") {
		what = "is another team member's notification"
	}
	return &Error{Code: CodePermissionDenied, Field: field, Message: fmt.Sprintf("%s %s: a key reads and changes only its own user's notifications and subscriptions (user %s); acting for another member needs the admin scope", field, what, a.UserID)}
}

// MarkRead marks notifications read, as one unit; one already read is left
// as it is. It returns the ids it marked. Only the caller's own
// notifications, or anyone's with the admin scope (ActFor).
func (s *Store) MarkRead(ctx context.Context, ids []string) ([]string, error) {
	for i, id := range ids {
		if ledger.CheckID(id) != nil {
			return nil, Invalid(fmt.Sprintf("ids[%d]", i), "%q is not a UUID", id)
		}
	}
	var marked []string
	err := s.writeGroup(ctx, func() ([]mutation, error) {
		marked = nil
		var muts []mutation
		seen := map[string]bool{}
		for i, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			owner := ""
			_, m, err := Prepare(ctx, s, CollNotifications, id, audit.ActionUpdate, func(n *Notification) error {
				if err := ActFor(ctx, fmt.Sprintf("ids[%d]", i), n.UserID); err != nil {
					return err
				}
				owner = n.UserID
				if n.ReadAt == nil {
					t := Now()
					n.ReadAt = &t
				}
				return nil
			})
			if isNotFound(err) {
				return nil, NotFoundField(fmt.Sprintf("ids[%d]", i), "notification", id)
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
func (s *Store) DueNotifications(ctx context.Context, at time.Time, limit int) ([]Notification, error) {
	cur, err := s.coll(CollNotifications).Find(ctx, bson.M{"delivery.done": false, "delivery.next_attempt_at": bson.M{"$lte": at}},
		options.Find().SetSort(bson.D{{Key: "delivery.next_attempt_at", Value: 1}, {Key: "_id", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, ledger.DriverErr(err, "notification", "due")
	}
	var out []Notification
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
func (s *Store) ClaimNotification(ctx context.Context, id, worker string, lease time.Duration) (*Notification, error) {
	return Modify(ctx, s, CollNotifications, id, audit.ActionUpdate, func(n *Notification) error {
		t := Now()
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
func (s *Store) FinishDelivery(ctx context.Context, id, worker string, attempts []DeliveryAttempt, retryAt time.Time) (*Notification, error) {
	var out *Notification
	lost := false
	err := s.writeGroup(ctx, func() ([]mutation, error) {
		lost = false
		n, m, err := Prepare(ctx, s, CollNotifications, id, audit.ActionUpdate, func(n *Notification) error {
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
		var muts []mutation
		if m != nil && !lost {
			muts = append(muts, *m)
		}
		for i := range attempts {
			a := attempts[i]
			a.Meta = Meta{}
			a.NotificationID, a.Worker = id, worker
			am, err := creation(CollDeliveries, &a)
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
	cur, err := s.coll(CollDeliveries).Find(ctx, bson.M{"notification_id": id}, options.Find().SetSort(bson.D{{Key: "started_at", Value: 1}, {Key: "_id", Value: 1}}))
	if err != nil {
		return nil, ledger.DriverErr(err, "delivery", id)
	}
	out := []DeliveryAttempt{}
	return out, ledger.DriverErr(cur.All(ctx, &out), "delivery", id)
}

// Notification returns one notification.
func (s *Store) Notification(ctx context.Context, id string) (*Notification, error) {
	return Find[*Notification](ctx, s, CollNotifications, id)
}

// NotifyDueActions creates a next_action_due notification for each
// subscriber of every active opportunity whose next action is due at at.
// It fires once per due date: the notification's id is a function of the
// opportunity, the date and the subscriber, so scanning again (here or on
// another instance) finds it made and writes nothing. It returns how many
// notifications it created.
func (s *Store) NotifyDueActions(ctx context.Context, at time.Time) (int, error) {
	cur, err := s.find(ctx, CollOpportunities, bson.M{"archived_at": nil, "next_action_date": bson.M{"$lte": at}})
	if err != nil {
		return 0, ledger.DriverErr(err, "opportunity", "due")
	}
	var opps []Opportunity
	if err := cur.All(ctx, &opps); err != nil {
		return 0, ledger.DriverErr(err, "opportunity", "due")
	}
	made := 0
	for i := range opps {
		o := &opps[i]
		if o.NextActionDate == nil || Terminal(o.Stage) {
			continue
		}
		day := o.NextActionDate.UTC().Format(time.RFC3339)
		ev := event{kind: EventNextActionDue, oppID: o.ID, title: o.Title, key: "next_action_due/" + o.ID + "/" + day,
			text: fmt.Sprintf("next action on %q is due (%s): %s", o.Title, day, o.NextAction),
			data: map[string]any{"next_action": o.NextAction, "next_action_date": *o.NextActionDate, "next_action_owner": o.NextActionOwner}}
		muts, err := s.eventMutations(ctx, ev)
		if err != nil {
			return made, err
		}
		fresh := muts[:0]
		for _, m := range muts {
			var meta Meta
			err := s.coll(CollNotifications).FindOne(ctx, bson.M{"_id": m.ID}).Decode(&meta)
			if errors.Is(err, mongo.ErrNoDocuments) {
				fresh = append(fresh, m)
			} else if err != nil {
				return made, ledger.DriverErr(err, "notification", m.ID)
			}
		}
		if len(fresh) == 0 {
			continue
		}
		if _, err := s.write(ctx, fresh...); err != nil {
			if isConflict(err) {
				continue // another instance made them first
			}
			return made, err
		}
		made += len(fresh)
	}
	return made, nil
}

func isNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeNotFound
}

// insertWithEvents creates rec in coll together with the notifications of
// the events it causes, as one unit (a group of creates: no version race
// to retry). events runs after rec has its id.
func insertWithEvents[P interface {
	*T
	record
}, T any](ctx context.Context, s *Store, coll string, rec P, events func() ([]event, error)) error {
	m, err := creation(coll, rec)
	if err != nil {
		return err
	}
	evs, err := events()
	if err != nil {
		return err
	}
	muts := []mutation{m}
	for _, ev := range evs {
		em, err := s.eventMutations(ctx, ev)
		if err != nil {
			return err
		}
		muts = append(muts, em...)
	}
	entries, err := s.write(ctx, muts...)
	if err != nil {
		return err
	}
	rec.meta().Version, rec.meta().LastChange = 1, entries[0].ID
	return nil
}

// noteGist is a short text for a note: its title, else its content's first line.
func noteGist(title, content string) string {
	if t := strings.TrimSpace(title); t != "" {
		return t
	}
	l, _, _ := strings.Cut(strings.TrimSpace(content), "\n")
	if len(l) > 200 {
		l = l[:200]
	}
	return l
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
	cur, err := s.coll(CollKeys).Find(ctx, bson.M{"scopes": ScopeAdmin, "revoked_at": nil, "$or": bson.A{bson.M{"expires_at": nil}, bson.M{"expires_at": bson.M{"$gt": Now()}}}}, options.Find().SetProjection(bson.M{"user_id": 1}))
	if err != nil {
		return 0, ledger.DriverErr(err, "agent key", "admin")
	}
	var keys []AgentKey
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
	t := Now()
	var targets []TargetStatus
	for _, name := range s.deliveryTargets() {
		targets = append(targets, TargetStatus{Target: name})
	}
	var muts []mutation
	for _, user := range admins {
		id := uuid.NewSHA1(uuid.NameSpaceOID, []byte("notification/"+kind+"/"+key+"/"+user)).String()
		var meta Meta
		err := s.coll(CollNotifications).FindOne(ctx, bson.M{"_id": id}).Decode(&meta)
		if err == nil {
			continue
		}
		if !errors.Is(err, mongo.ErrNoDocuments) {
			return 0, ledger.DriverErr(err, "notification", id)
		}
		if data == nil {
			data = map[string]any{}
		}
		n := &Notification{Meta: Meta{ID: id}, UserID: user, Event: kind, Title: title, Text: text, Data: data, OccurredAt: t,
			Delivery: Delivery{Done: len(targets) == 0, Targets: targets, NextAttemptAt: t}}
		m, err := creation(CollNotifications, n)
		if err != nil {
			return 0, err
		}
		m.Irreversible = true
		muts = append(muts, m)
	}
	if len(muts) == 0 {
		return 0, nil
	}
	if _, err := s.write(ctx, muts...); err != nil {
		if isConflict(err) {
			return 0, nil // another instance made them first
		}
		return 0, err
	}
	return len(muts), nil
}
