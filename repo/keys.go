package repo

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"outreach/audit"
)

// Agent keys and users: the records and what the core keeps of them. Their
// methods (creating, listing and revoking keys, users, the authentication
// look-up) are the area's, package access; the core keeps the records
// (its outbox reads the admins' keys, its rollback the scopes), the cache
// of verified keys its schema empties on a change to a key, and the
// throttle of last-used writes.

// Scopes of agent keys.
const (
	ScopeRead  = "read"
	ScopeWrite = "write"
	ScopeAdmin = "admin"
)

// User is a team member: owner of agent keys and subscriptions.
type User struct {
	Meta        `bson:",inline"`
	Name        string `bson:"name" json:"name"`
	Email       string `bson:"email" json:"email"`
	SlackUserID string `bson:"slack_user_id,omitempty" json:"slack_user_id,omitempty"`
}

// AgentKey is a stored key: never the key itself, only its hash.
type AgentKey struct {
	Meta      `bson:",inline"`
	UserID    string   `bson:"user_id" json:"user_id"`
	Name      string   `bson:"name" json:"name"`
	AgentID   string   `bson:"agent_id" json:"agent_id"`
	AgentType string   `bson:"agent_type" json:"agent_type"`
	Scopes    []string `bson:"scopes" json:"scopes"`
	KeyHash   string   `bson:"key_hash" json:"-"`
	// SCRAM is the key's verifier for the analyst endpoint (serve
	// --mongo-listen): enough to check a password, never to recover it.
	// Keys created before the endpoint authenticated have none.
	SCRAM         *SCRAMVerifier `bson:"scram,omitempty" json:"-"`
	DisplayPrefix string         `bson:"display_prefix" json:"display_prefix"`
	ExpiresAt     *time.Time     `bson:"expires_at" json:"expires_at"`
	RevokedAt     *time.Time     `bson:"revoked_at" json:"revoked_at"`
	LastUsedAt    *time.Time     `bson:"-" json:"last_used_at"`
}

// SCRAMVerifier is what a SCRAM-SHA-256 server stores for a password
// (RFC 7677, as MongoDB stores it): the salt, the iteration count, and the
// StoredKey and ServerKey derived from the salted password.
type SCRAMVerifier struct {
	Salt       []byte `bson:"salt"`
	Iterations int    `bson:"iterations"`
	StoredKey  []byte `bson:"stored_key"`
	ServerKey  []byte `bson:"server_key"`
}

// ErrBadKey is wrapped by every authentication failure.
var ErrBadKey = errors.New("invalid key")

// keyCacheTTL bounds how long a verified key is trusted without reading it
// again. The cache is kept only on an exclusive store (the embedded one: no
// other process writes it, and the key commands go through the running
// server), where a change to any key (revoke, archive, a rollback) empties it
// at once. On a store other processes may write (MongoDB), every request
// reads its key by the indexed hash, so a revocation by any process is
// immediate there too.
const keyCacheTTL = 5 * time.Second

// keyCache holds the keys verified recently, by hash. gen moves on every
// change to a key, and a look-up only caches its answer if gen did not move
// while it read the store: a read that raced a revocation is never cached.
type keyCache struct {
	mu      sync.Mutex
	gen     uint64
	entries map[string]cachedKey
}

type cachedKey struct {
	key AgentKey
	at  time.Time
}

func (c *keyCache) get(hash string, t time.Time) (AgentKey, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[hash]
	if !ok || t.Sub(e.at) >= keyCacheTTL || t.Before(e.at) {
		return AgentKey{}, c.gen, false
	}
	k := e.key
	k.Scopes = slices.Clone(k.Scopes)
	return k, c.gen, true
}

func (c *keyCache) put(hash string, k AgentKey, gen uint64, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.entries == nil || len(c.entries) >= 10000 {
		c.entries = map[string]cachedKey{}
	}
	k.Scopes = slices.Clone(k.Scopes)
	c.entries[hash] = cachedKey{key: k, at: t}
}

// invalidate forgets every cached key; the write path calls it around every
// change to a key.
func (c *keyCache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.entries = nil
}

// CachedKey returns the key whose hash is hash, verified within
// keyCacheTTL, and the cache's generation to hand back to CacheKey. Only an
// exclusive store keeps the cache; on another one it never answers.
func (s *Store) CachedKey(hash string, t time.Time) (AgentKey, uint64, bool) {
	if !s.Exclusive() {
		return AgentKey{}, 0, false
	}
	return s.keys.get(hash, t)
}

// CacheKey keeps k, read from the store at t, under hash, unless a key
// changed since CachedKey gave gen (see keyCache).
func (s *Store) CacheKey(hash string, k AgentKey, gen uint64, t time.Time) {
	if s.Exclusive() {
		s.keys.put(hash, k, gen, t)
	}
}

// Unusable says why k may not be used at t (revoked, archived or
// expired), wrapping ErrBadKey, or nil.
func (k *AgentKey) Unusable(t time.Time) error {
	switch {
	case k.RevokedAt != nil:
		return errors.Join(ErrBadKey, errors.New("the key was revoked"))
	case k.ArchivedAt != nil:
		return errors.Join(ErrBadKey, errors.New("the key was archived"))
	case k.ExpiresAt != nil && !t.Before(*k.ExpiresAt):
		return errors.Join(ErrBadKey, errors.New("the key has expired"))
	}
	return nil
}

// keyUseInterval throttles last_used_at writes.
const keyUseInterval = time.Minute

// NoteKeyUse records that keyID was used at t, at most once a
// keyUseInterval per key.
func (s *Store) NoteKeyUse(ctx context.Context, keyID string, t time.Time) {
	s.keyUseMu.Lock()
	last, ok := s.keyUse[keyID]
	if ok && t.Sub(last) < keyUseInterval {
		s.keyUseMu.Unlock()
		return
	}
	if s.keyUse == nil {
		s.keyUse = map[string]time.Time{}
	}
	s.keyUse[keyID] = t
	s.keyUseMu.Unlock()
	if err := s.touchKeyUsage(ctx, keyID, t); err != nil {
		s.Log.Warn().Err(err).Str("key_id", keyID).Msg("record key use")
	}
}

// SystemActor attributes work the service does by itself or for an operator
// at the command line.
func SystemActor(tool string) audit.Actor {
	return audit.Actor{UserID: "system", AgentID: "outreach", SessionID: "system-" + uuid.NewString(), Tool: tool}
}
