package repo

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger"
)

// An agent session is one agent's run of work: the unit get_change_log
// filters by and rollback_session undoes. A session is bound to the agent
// that opened it (start_session) or first wrote in it (see bindSession).

// ImplicitIdle ends a key's implicit session: a call of the stateless MCP
// revision that names no session continues the key's latest implicit session
// while its last change is younger than this, and starts a new one otherwise.
const ImplicitIdle = 30 * time.Minute

// ImplicitPrefix starts the id of every implicit session; the key id and the
// minute the session started follow it.
const ImplicitPrefix = "auto-"

// sessionClock is the implicit sessions' clock (a test moves it on).
var sessionClock = Now

// MaxSessionID is the longest agent session id, in visible ASCII characters.
const MaxSessionID = 128

// MaxLabel is the longest session label.
const MaxLabel = 200

// Session is an agent session as list_sessions shows it.
type Session struct {
	ID      string `bson:"_id" json:"session_id"`
	Label   string `bson:"label,omitempty" json:"label,omitempty"`
	AgentID string `bson:"agent_id" json:"agent_id"`
	UserID  string `bson:"user_id" json:"user_id"`
	// Kind is "started" (start_session), "implicit" (the stateless
	// revision's per-key fallback) or "named" (an id the client sent, or an
	// MCP session's id).
	Kind         string     `bson:"-" json:"kind"`
	Started      bool       `bson:"started,omitempty" json:"-"`
	StartedAt    time.Time  `bson:"created_at" json:"started_at"`
	LastActiveAt *time.Time `bson:"-" json:"last_active_at"`
	// Changes counts the session's applied changes, rollbacks included.
	Changes int `bson:"-" json:"changes"`
	// RolledBackChanges counts the session's reversible changes whose
	// rollback stands; RolledBack is true when that is all of them.
	RolledBackChanges int  `bson:"-" json:"rolled_back_changes"`
	RolledBack        bool `bson:"-" json:"rolled_back"`
}

// CheckSessionID refuses an agent session id a client chose that is empty,
// too long or not visible ASCII, or that claims the implicit prefix.
func CheckSessionID(field, id string) error {
	if id == "" || len(id) > MaxSessionID || strings.ContainsFunc(id, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		return Invalid(field, "must be 1 to %d visible ASCII characters (a start_session handle, or an id of your own)", MaxSessionID)
	}
	if strings.HasPrefix(id, ImplicitPrefix) {
		return Invalid(field, "must not start with %q, which names implicit sessions; call start_session or choose another id", ImplicitPrefix)
	}
	return nil
}

// StartSession opens a new agent session for the caller's agent, with an
// optional label, and returns it. Its id is the handle tools accept.
func (s *Store) StartSession(ctx context.Context, label string) (*Session, error) {
	a, ok := audit.ActorFrom(ctx)
	if !ok || a.AgentID == "" {
		return nil, errors.New("start session without an actor")
	}
	label = strings.TrimSpace(label)
	if len([]rune(label)) > MaxLabel {
		return nil, Invalid("label", "is %d characters; use at most %d", len([]rune(label)), MaxLabel)
	}
	sess := &Session{ID: "s-" + uuid.NewString(), Label: label, AgentID: a.AgentID, UserID: a.UserID,
		Kind: "started", Started: true, StartedAt: Now()}
	doc := bson.M{"_id": sess.ID, "agent_id": sess.AgentID, "user_id": sess.UserID, "key_id": a.KeyID,
		"created_at": sess.StartedAt, "started": true}
	if label != "" {
		doc["label"] = label
	}
	if err := s.openSession(ctx, doc); err != nil {
		return nil, err
	}
	return sess, nil
}

// ImplicitSession returns the session a call of the stateless revision that
// names none belongs to: the key's implicit session whose last change is
// younger than ImplicitIdle, or else a new one named after the minute it
// starts (so concurrent first calls of one key agree on it). It reads only
// the store, so every instance behind a load balancer gives the same answer.
// Until is how long the answer stands whatever other instances do (the
// session cannot end before it); it is zero for a new session, which other
// instances may name after a later minute until it has a change.
func (s *Store) ImplicitSession(ctx context.Context, a audit.Actor) (id string, until time.Time, err error) {
	if a.KeyID == "" {
		return "", time.Time{}, errors.New("implicit session without a key")
	}
	prefix := ImplicitPrefix + a.KeyID + "-"
	t := sessionClock()
	f, err := s.implicitFacts(ctx, prefix)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("implicit session: %w", err)
	}
	if f.HasLast && t.Sub(f.LastAt) < ImplicitIdle {
		return f.LastID, f.LastAt.Add(ImplicitIdle), nil
	}
	// A session bound but whose first change is still being written counts
	// as active too.
	if f.HasBound && f.BoundAt.After(t.Add(-ImplicitIdle)) && f.BoundID > f.LastID {
		return f.BoundID, f.BoundAt.Add(ImplicitIdle), nil
	}
	return prefix + t.Format("20060102T1504Z"), time.Time{}, nil
}

// implicitFacts is what the implicit session of a key's prefix depends on:
// the last applied change in one of its sessions, and the newest of its
// sessions bound. Neither depends on the time of the call.
type implicitFacts struct {
	LastID, BoundID   string
	LastAt, BoundAt   time.Time
	HasLast, HasBound bool
	LastSeq           int64 // the last change's seq (to fold a newer one in)
}

// readImplicitFacts reads implicitFacts from the store.
func (s *Store) readImplicitFacts(ctx context.Context, prefix string) (implicitFacts, error) {
	var f implicitFacts
	match := bson.M{"$regex": "^" + regexp.QuoteMeta(prefix)}
	var last struct {
		SessionID string    `bson:"session_id"`
		At        time.Time `bson:"at"`
		Seq       int64     `bson:"seq"`
	}
	err := s.findOne(ctx, CollChangeLog, bson.M{"session_id": match, "state": audit.StateApplied},
		options.FindOne().SetSort(bson.D{{Key: "seq", Value: -1}}).SetProjection(bson.M{"session_id": 1, "at": 1, "seq": 1})).Decode(&last)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return f, err
	}
	if err == nil {
		f.LastID, f.LastAt, f.LastSeq, f.HasLast = last.SessionID, last.At, last.Seq, true
	}
	var bound struct {
		ID        string    `bson:"_id"`
		CreatedAt time.Time `bson:"created_at"`
	}
	err = s.coll(CollSessions).FindOne(ctx, bson.M{"_id": match},
		options.FindOne().SetSort(bson.D{{Key: "created_at", Value: -1}})).Decode(&bound)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return f, err
	}
	if err == nil {
		f.BoundID, f.BoundAt, f.HasBound = bound.ID, bound.CreatedAt, true
	}
	return f, nil
}

// SessionFilter selects sessions; empty fields do not filter.
type SessionFilter struct {
	AgentID, UserID string
}

// Sessions lists agent sessions, newest first, each with its activity: when
// it started and last changed something, how many changes it made, and
// whether they are rolled back.
func (s *Store) Sessions(ctx context.Context, f SessionFilter, limit, offset int) (Page[Session], error) {
	filter := bson.M{}
	if f.AgentID != "" {
		filter["agent_id"] = f.AgentID
	}
	if f.UserID != "" {
		filter["user_id"] = f.UserID
	}
	total, err := s.coll(CollSessions).CountDocuments(ctx, filter)
	if err != nil {
		return Page[Session]{}, ledger.DriverErr(err, "session", "list")
	}
	cur, err := s.coll(CollSessions).Find(ctx, filter, options.Find().
		SetSort(bson.D{{Key: "created_at", Value: -1}, {Key: "_id", Value: 1}}).SetSkip(int64(offset)).SetLimit(int64(limit)))
	if err != nil {
		return Page[Session]{}, ledger.DriverErr(err, "session", "list")
	}
	items := []Session{}
	if err := cur.All(ctx, &items); err != nil {
		return Page[Session]{}, ledger.DriverErr(err, "session", "list")
	}
	for i := range items {
		if err := s.sessionActivity(ctx, &items[i]); err != nil {
			return Page[Session]{}, err
		}
	}
	return Page[Session]{Total: total, Items: items}, nil
}

func (s *Store) sessionActivity(ctx context.Context, sess *Session) error {
	switch {
	case sess.Started:
		sess.Kind = "started"
	case strings.HasPrefix(sess.ID, ImplicitPrefix):
		sess.Kind = "implicit"
	default:
		sess.Kind = "named"
	}
	cur, err := s.find(ctx, CollChangeLog, bson.M{"session_id": sess.ID, "state": audit.StateApplied},
		options.Find().SetProjection(bson.M{"before": 0, "after": 0}))
	if err != nil {
		return ledger.DriverErr(err, "session", sess.ID)
	}
	var changes []audit.Entry
	if err := cur.All(ctx, &changes); err != nil {
		return ledger.DriverErr(err, "session", sess.ID)
	}
	sess.Changes = len(changes)
	if len(changes) == 0 {
		return nil
	}
	ids := make([]string, len(changes))
	inSession := make(map[string]bool, len(changes))
	for i, c := range changes {
		ids[i] = c.ID
		inSession[c.ID] = true
		if sess.LastActiveAt == nil || c.At.After(*sess.LastActiveAt) {
			at := c.At
			sess.LastActiveAt = &at
		}
	}
	g, err := s.revertGraph(ctx, ids)
	if err != nil {
		return err
	}
	reversible := 0
	for _, c := range changes {
		// A rollback of a change of the same session cancels out with it,
		// as rollback_session sees it.
		if !audit.Reversible(c) || (c.Reverts != "" && inSession[c.Reverts]) {
			continue
		}
		reversible++
		if g.liveReverter(c.ID) != "" {
			sess.RolledBackChanges++
		}
	}
	sess.RolledBack = reversible > 0 && sess.RolledBackChanges == reversible
	return nil
}
