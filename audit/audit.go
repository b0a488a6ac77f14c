// Package audit owns the change record: who made a change (the Actor that
// travels in the request context), what one change_log entry holds, and the
// pure planning of rollbacks. It does no I/O; package repo executes what it
// plans through the single write path.
package audit

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Actor is who performs a call: the team member owning the key, the agent the
// key names, and the session the call belongs to.
type Actor struct {
	UserID    string   `json:"user_id"`
	AgentID   string   `json:"agent_id"`
	SessionID string   `json:"session_id"`
	KeyID     string   `json:"key_id,omitempty"`
	KeyName   string   `json:"key_name,omitempty"`
	AgentType string   `json:"agent_type,omitempty"`
	Scopes    []string `json:"scopes,omitempty"`
	// Tool is the MCP tool (or command) being run.
	Tool string `json:"tool,omitempty"`
	// IdempotencyKey, when the call gave one, tags every change entry the
	// call writes (see Entry.IdempotencyKey).
	IdempotencyKey string `json:"-"`
	// OnBehalfOf, when an admin acts on another team member's own data
	// (their subscriptions), names that member on the change entries.
	OnBehalfOf string `json:"-"`
}

type actorKey struct{}

// WithActor returns ctx carrying a.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the actor of ctx and whether there is one.
func ActorFrom(ctx context.Context) (Actor, bool) {
	a, ok := ctx.Value(actorKey{}).(Actor)
	return a, ok
}

// Actions of change entries.
const (
	ActionCreate   = "create"
	ActionUpdate   = "update"
	ActionArchive  = "archive"
	ActionRestore  = "restore"
	ActionLink     = "link"
	ActionUnlink   = "unlink"
	ActionRollback = "rollback"
	ActionSend     = "send"
)

// Actions lists every action, for validating filters.
var Actions = []string{ActionCreate, ActionUpdate, ActionArchive, ActionRestore, ActionLink, ActionUnlink, ActionRollback, ActionSend}

// States of a change entry. Readers see applied entries only; pending ones are
// resolved by recovery and aborted ones are kept but are not changes.
const (
	StatePending = "pending"
	StateApplied = "applied"
	StateAborted = "aborted"
)

// Entry is one change_log document.
type Entry struct {
	ID         string    `bson:"_id" json:"id"`
	Seq        int64     `bson:"seq" json:"seq"`
	At         time.Time `bson:"at" json:"at"`
	Collection string    `bson:"collection" json:"collection"`
	RecordID   string    `bson:"record_id" json:"record_id"`
	Action     string    `bson:"action" json:"action"`
	Before     bson.M    `bson:"before" json:"before"`
	After      bson.M    `bson:"after" json:"after"`
	UserID     string    `bson:"user_id" json:"user_id"`
	AgentID    string    `bson:"agent_id" json:"agent_id"`
	SessionID  string    `bson:"session_id" json:"session_id"`
	Tool       string    `bson:"tool" json:"tool"`
	// OnBehalfOf names the team member whose own data (notifications,
	// subscriptions) an admin changed for them; empty when the actor
	// changed their own, or team records.
	OnBehalfOf   string `bson:"on_behalf_of,omitempty" json:"on_behalf_of,omitempty"`
	Reverts      string `bson:"reverts,omitempty" json:"reverts,omitempty"`
	Reversible   bool   `bson:"reversible" json:"reversible"`
	VersionAfter int64  `bson:"version_after" json:"-"`
	State        string `bson:"state" json:"-"`
	PlanID       string `bson:"plan_id,omitempty" json:"plan_id,omitempty"`
	// IdempotencyKey tags the entries of a call made with an idempotency
	// key, so a retry finds a write that landed even when its stored
	// result did not.
	IdempotencyKey string `bson:"idempotency_key,omitempty" json:"-"`
	// Sealed holds a pending create's redacted values, so recovery can roll
	// it forward; settling the entry removes it.
	Sealed bson.M `bson:"sealed,omitempty" json:"-"`
}
