// Package mailboxes is the domain's area of the team mailbox's connection
// by OAuth sign-in (package mailauth runs the flows and keeps the access
// token): one record per team mailbox holding the provider, the mailbox
// address, the refresh token sealed under a key that is never in the store,
// and whether the connection works (connected, disconnected and why). The
// sealed token is a redacted field: its change entries show "[redacted]".
// It registers with the core at init the rollback rule of its records.
package mailboxes

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"outreach/audit"
	"outreach/ledger"
	"outreach/repo"
)

// Store is the core's store seen from this area.
type Store struct{ *repo.Store }

// Of returns the area's face of s.
func Of(s *repo.Store) *Store { return &Store{Store: s} }

// Status of a connection.
const (
	// StatusConnected: a refresh token is kept and the provider accepts it.
	StatusConnected = "connected"
	// StatusDisconnected: the provider refused the refresh token (revoked,
	// password changed, consent withdrawn) or an admin disconnected the
	// mailbox; the sync and pitch sending wait until an admin reconnects.
	StatusDisconnected = "disconnected"
)

// EventDisconnected is the admins' notification of a mailbox the provider
// disconnected.
const EventDisconnected = "mailbox_disconnected"

// Connection is the team mailbox's OAuth connection.
type Connection struct {
	repo.Meta `bson:",inline"`
	// Provider is the configured provider's name (google, microsoft, or the
	// name given to a provider configured by its endpoints).
	Provider string `bson:"provider" json:"provider"`
	// Address is the mailbox address the connection is for.
	Address string `bson:"address" json:"address"`
	Status  string `bson:"status" json:"status"`
	// Reason says why the mailbox is disconnected, in the provider's words
	// where it gave some.
	Reason string `bson:"reason" json:"reason,omitempty"`
	// RefreshSealed is the refresh token sealed (AES-256-GCM) under the
	// mailbox key, which is not in the store; never shown, never logged.
	RefreshSealed string `bson:"refresh_sealed" json:"-"`
	// Scopes granted by the provider.
	Scopes         []string   `bson:"scopes" json:"scopes"`
	ConnectedBy    string     `bson:"connected_by" json:"connected_by"`
	ConnectedAt    *time.Time `bson:"connected_at" json:"connected_at"`
	DisconnectedAt *time.Time `bson:"disconnected_at" json:"disconnected_at"`
	// RotatedAt is when the provider last handed a new refresh token.
	RotatedAt *time.Time `bson:"rotated_at" json:"rotated_at"`
}

// ConnectionID is the id of the connection of mailbox address: one record
// per address, whoever connects it and however often.
func ConnectionID(address string) string {
	return uuid.NewSHA1(uuid.MustParse("5b0e2f7a-9c41-4d8e-a6f3-2c7d1e9b4a60"), []byte(strings.ToLower(strings.TrimSpace(address)))).String()
}

// Connection returns the connection of mailbox address, or nil when it was
// never connected.
func (s *Store) Connection(ctx context.Context, address string) (*Connection, error) {
	var c Connection
	err := s.ByID(ctx, repo.CollMailboxes, ConnectionID(address), &c)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, ledger.DriverErr(err, "mailbox connection", address)
	}
	return &c, nil
}

// Connect keeps the sealed refresh token of mailbox address, marking it
// connected (a reconnect replaces the token and clears the reason).
func (s *Store) Connect(ctx context.Context, provider, address, sealed string, scopes []string) (*Connection, error) {
	if sealed == "" {
		return nil, repo.Invalid("refresh_token", "is empty: the provider gave no refresh token (for Microsoft, offline_access must be granted)")
	}
	t := repo.Now()
	a, _ := audit.ActorFrom(ctx)
	who := a.UserID
	apply := func(c *Connection) error {
		c.Provider, c.Address, c.Status, c.Reason, c.RefreshSealed = provider, strings.ToLower(address), StatusConnected, "", sealed
		c.Scopes, c.ConnectedBy, c.ConnectedAt, c.DisconnectedAt = append([]string{}, scopes...), who, &t, nil
		return nil
	}
	cur, err := s.Connection(ctx, address)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		c := &Connection{Meta: repo.Meta{ID: ConnectionID(address)}}
		_ = apply(c)
		if err := repo.Insert(ctx, s.Store, repo.CollMailboxes, c); err != nil {
			return nil, err
		}
		return c, nil
	}
	return repo.Modify(ctx, s.Store, repo.CollMailboxes, cur.ID, audit.ActionUpdate, apply)
}

// Rotate replaces the sealed refresh token of a connected mailbox with the
// one the provider handed at a refresh.
func (s *Store) Rotate(ctx context.Context, address, sealed string) (*Connection, error) {
	t := repo.Now()
	return repo.Modify(ctx, s.Store, repo.CollMailboxes, ConnectionID(address), audit.ActionUpdate, func(c *Connection) error {
		if c.Status != StatusConnected {
			return repo.Errorf(repo.CodeFailedPrecondition, "mailbox %s is %s; a rotated token is kept only for a connected mailbox", address, c.Status)
		}
		c.RefreshSealed, c.RotatedAt = sealed, &t
		return nil
	})
}

// Disconnect marks mailbox address disconnected for reason and forgets its
// refresh token. It reports whether it changed anything (a mailbox already
// disconnected stays as it is, with its first reason).
func (s *Store) Disconnect(ctx context.Context, address, reason string) (*Connection, bool, error) {
	t := repo.Now()
	changed := false
	c, err := repo.Modify(ctx, s.Store, repo.CollMailboxes, ConnectionID(address), audit.ActionUpdate, func(c *Connection) error {
		if c.Status == StatusDisconnected && c.RefreshSealed == "" {
			return nil
		}
		changed = true
		c.Status, c.Reason, c.RefreshSealed, c.DisconnectedAt = StatusDisconnected, reason, "", &t
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return c, changed, nil
}

// connectionRule is the rule a rollback keeps for mailbox connections: a
// rollback never brings back a refresh token that was forgotten (revoked
// at the provider, or refused by it): the mailbox is reconnected by
// signing in again.
func connectionRule(_ context.Context, _ *repo.RuleView, id string, state bson.M) error {
	if repo.Str(state, "status") == StatusConnected {
		return repo.Violated("mailbox_token", "the rollback would make mailbox connection %s connected again with a token that was forgotten or replaced; connect the mailbox again by signing in (outreach mailbox connect)", id)
	}
	return nil
}

func init() { repo.RegisterRule(repo.CollMailboxes, connectionRule) }
