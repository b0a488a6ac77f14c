package repo

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"math/big"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger"
)

// KeyPrefix starts every agent key.
const KeyPrefix = "outreach_"

const (
	keySecretLen   = 32
	keyChecksumLen = 6
	base62         = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// Scopes of agent keys.
const (
	ScopeRead  = "read"
	ScopeWrite = "write"
	ScopeAdmin = "admin"
)

// AgentTypes are the agent types a key may name.
var AgentTypes = []string{"claude_cowork", "claude_code", "openclaw", "other"}

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

// scramIterations is MongoDB's default for SCRAM-SHA-256. The password is a
// random key of 190 bits, so the count guards nothing a guess could reach;
// it is the value clients expect.
const scramIterations = 15000

// newSCRAMVerifier derives the verifier of key for the user name id.
func newSCRAMVerifier(id, key string) (*SCRAMVerifier, error) {
	salt := make([]byte, 28)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	client, err := scram.SHA256.NewClient(id, key, "")
	if err != nil {
		return nil, err
	}
	c := client.GetStoredCredentials(scram.KeyFactors{Salt: string(salt), Iters: scramIterations})
	return &SCRAMVerifier{Salt: salt, Iterations: scramIterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey}, nil
}

// NewKey returns a fresh key: prefix, 32 random base62 characters and a
// 6-character checksum of them.
func NewKey() string {
	var b strings.Builder
	b.WriteString(KeyPrefix)
	secret := make([]byte, keySecretLen)
	for i := range secret {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(base62))))
		if err != nil {
			panic(err) // crypto/rand never fails on Linux
		}
		secret[i] = base62[n.Int64()]
	}
	b.Write(secret)
	b.WriteString(checksum(string(secret)))
	return b.String()
}

func checksum(secret string) string {
	n := uint64(crc32.ChecksumIEEE([]byte(secret)))
	out := make([]byte, keyChecksumLen)
	for i := keyChecksumLen - 1; i >= 0; i-- {
		out[i] = base62[n%62]
		n /= 62
	}
	return string(out)
}

// WellFormedKey reports why key cannot be a key of this service, without a
// lookup: wrong prefix, length, alphabet or checksum. Empty means well formed.
func WellFormedKey(key string) string {
	if !strings.HasPrefix(key, KeyPrefix) {
		return "the key does not start with " + KeyPrefix
	}
	body := key[len(KeyPrefix):]
	if len(body) < 30+keyChecksumLen {
		return "the key is too short"
	}
	for _, c := range body {
		if !strings.ContainsRune(base62, c) {
			return "the key has a character outside [0-9A-Za-z]"
		}
	}
	secret, sum := body[:len(body)-keyChecksumLen], body[len(body)-keyChecksumLen:]
	if checksum(secret) != sum {
		return "the key's checksum does not match (mistyped or truncated)"
	}
	return ""
}

func HashKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
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

// Authenticate returns the active key that key is, and records its use. On
// an exclusive store a key verified within keyCacheTTL is not read again
// (see keyCacheTTL); its expiry is checked on every call.
func (s *Store) Authenticate(ctx context.Context, key string) (*AgentKey, error) {
	if why := WellFormedKey(key); why != "" {
		return nil, errors.Join(ErrBadKey, errors.New(why))
	}
	hash := HashKey(key)
	t := Now()
	var (
		k   AgentKey
		gen uint64
		ok  bool
	)
	if s.Exclusive() {
		k, gen, ok = s.keys.get(hash, t)
	}
	if !ok {
		err := s.coll(CollKeys).FindOne(ctx, bson.M{"key_hash": hash}).Decode(&k)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, errors.Join(ErrBadKey, errors.New("unknown key"))
		}
		if err != nil {
			return nil, err
		}
		if s.Exclusive() {
			s.keys.put(hash, k, gen, t)
		}
	}
	if err := k.Unusable(t); err != nil {
		return nil, err
	}
	s.noteKeyUse(ctx, k.ID, t)
	return &k, nil
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

// AnalystKey returns the key whose id is the user name given to the
// analyst endpoint, when it may read there: active (not revoked, archived
// or expired), with the read scope and a SCRAM verifier. It reads the store
// on every call, so a revocation holds from the next command on. The
// errors wrap ErrBadKey and say why, for the server's log; the endpoint
// tells the client no more than that authentication failed.
func (s *Store) AnalystKey(ctx context.Context, id string) (*AgentKey, error) {
	var k AgentKey
	err := s.coll(CollKeys).FindOne(ctx, bson.M{"_id": id}).Decode(&k)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, errors.Join(ErrBadKey, errors.New("no agent key has this id"))
	}
	if err != nil {
		return nil, err
	}
	t := Now()
	if err := k.Unusable(t); err != nil {
		return nil, err
	}
	switch {
	case !slices.Contains(k.Scopes, ScopeRead):
		return nil, errors.Join(ErrBadKey, errors.New("the key has no read scope"))
	case k.SCRAM == nil:
		return nil, errors.Join(ErrBadKey, errors.New("the key was created before the analyst endpoint authenticated and has no verifier: create a new key with the read scope"))
	}
	return &k, nil
}

// keyUseInterval throttles last_used_at writes.
const keyUseInterval = time.Minute

func (s *Store) noteKeyUse(ctx context.Context, keyID string, t time.Time) {
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

// NewKeyInput describes a key to create.
type NewKeyInput struct {
	UserID    string
	Name      string
	AgentType string
	Scopes    []string
	ExpiresAt *time.Time
}

// CreateKey creates a key and returns it with the key itself, shown this once.
func (s *Store) CreateKey(ctx context.Context, in NewKeyInput) (*AgentKey, string, error) {
	if strings.TrimSpace(in.Name) == "" {
		return nil, "", Invalid("name", "must not be empty")
	}
	if in.AgentType == "" {
		in.AgentType = "other"
	}
	if !slices.Contains(AgentTypes, in.AgentType) {
		return nil, "", Invalid("agent_type", "%q is not one of %s", in.AgentType, strings.Join(AgentTypes, ", "))
	}
	if len(in.Scopes) == 0 {
		in.Scopes = []string{ScopeRead, ScopeWrite}
	}
	for _, sc := range in.Scopes {
		if !slices.Contains([]string{ScopeRead, ScopeWrite, ScopeAdmin}, sc) {
			return nil, "", Invalid("scopes", "%q is not one of read, write, admin", sc)
		}
	}
	slices.Sort(in.Scopes)
	in.Scopes = slices.Compact(in.Scopes)
	if in.ExpiresAt != nil && !in.ExpiresAt.After(time.Now()) {
		return nil, "", Invalid("expires_at", "must be in the future")
	}
	if err := s.MustExist(ctx, CollUsers, "user_id", in.UserID); err != nil {
		return nil, "", err
	}
	key := NewKey()
	id := uuid.NewString()
	verifier, err := newSCRAMVerifier(id, key)
	if err != nil {
		return nil, "", err
	}
	k := &AgentKey{Meta: Meta{ID: id}, UserID: in.UserID, Name: strings.TrimSpace(in.Name), AgentID: id, AgentType: in.AgentType,
		Scopes: in.Scopes, KeyHash: HashKey(key), SCRAM: verifier, DisplayPrefix: key[:len(KeyPrefix)+6] + "…", ExpiresAt: in.ExpiresAt}
	if err := Insert(ctx, s, CollKeys, k); err != nil {
		return nil, "", err
	}
	return k, key, nil
}

// ListKeys lists the keys of userID (all keys when empty), newest first.
func (s *Store) ListKeys(ctx context.Context, userID string) ([]AgentKey, error) {
	filter := bson.M{}
	if userID != "" {
		filter["user_id"] = userID
	}
	cur, err := s.coll(CollKeys).Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}))
	if err != nil {
		return nil, err
	}
	keys := []AgentKey{}
	if err := cur.All(ctx, &keys); err != nil {
		return nil, err
	}
	for i := range keys {
		var u struct {
			LastUsedAt time.Time `bson:"last_used_at"`
		}
		if err := s.coll(CollKeyUsage).FindOne(ctx, bson.M{"_id": keys[i].ID}).Decode(&u); err == nil {
			keys[i].LastUsedAt = &u.LastUsedAt
		}
	}
	return keys, nil
}

// RevokeKey revokes a key; it fails on its very next request.
func (s *Store) RevokeKey(ctx context.Context, id string) (*AgentKey, error) {
	return Modify(ctx, s, CollKeys, id, audit.ActionUpdate, func(k *AgentKey) error {
		if k.RevokedAt != nil {
			return Errorf(CodeFailedPrecondition, "agent key %s was already revoked at %s", id, k.RevokedAt.Format(time.RFC3339))
		}
		t := Now()
		k.RevokedAt = &t
		return nil
	})
}

// CreateUser adds a team member; emails are unique (case-insensitive).
func (s *Store) CreateUser(ctx context.Context, name, email, slackUserID string) (*User, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	if strings.TrimSpace(name) == "" {
		return nil, Invalid("name", "must not be empty")
	}
	if !strings.Contains(email, "@") {
		return nil, Invalid("email", "%q is not an email address", email)
	}
	if existing, err := s.UserByEmail(ctx, email); err == nil {
		return nil, &Error{Code: CodeConflict, Field: "email", Message: "a user with email " + email + " already exists: " + existing.ID}
	}
	u := &User{Name: strings.TrimSpace(name), Email: email, SlackUserID: slackUserID}
	if err := Insert(ctx, s, CollUsers, u); err != nil {
		return nil, err
	}
	return u, nil
}

// UserByEmail finds a team member by email.
func (s *Store) UserByEmail(ctx context.Context, email string) (*User, error) {
	var u User
	err := s.coll(CollUsers).FindOne(ctx, bson.M{"email": strings.ToLower(strings.TrimSpace(email))}).Decode(&u)
	if err != nil {
		return nil, ledger.DriverErr(err, "user", email)
	}
	return &u, nil
}

// User returns a team member.
func (s *Store) User(ctx context.Context, id string) (*User, error) {
	return Find[*User](ctx, s, CollUsers, id)
}

// ListUsers lists team members by name.
func (s *Store) ListUsers(ctx context.Context) ([]User, error) {
	cur, err := s.coll(CollUsers).Find(ctx, bson.M{}, options.Find().SetSort(bson.D{{Key: "name", Value: 1}, {Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	users := []User{}
	return users, cur.All(ctx, &users)
}

// Bootstrap creates the first admin user and key on an empty store and
// returns the key; on a store that has any key it returns "".
func (s *Store) Bootstrap(ctx context.Context) (string, error) {
	n, err := s.coll(CollKeys).CountDocuments(ctx, bson.M{})
	if err != nil || n > 0 {
		return "", err
	}
	u, err := s.UserByEmail(ctx, "admin@localhost")
	if err != nil {
		if u, err = s.CreateUser(ctx, "Admin", "admin@localhost", ""); err != nil {
			return "", err
		}
	}
	_, key, err := s.CreateKey(ctx, NewKeyInput{UserID: u.ID, Name: "first admin key", AgentType: "other", Scopes: []string{ScopeRead, ScopeWrite, ScopeAdmin}})
	return key, err
}

// SystemActor attributes work the service does by itself or for an operator
// at the command line.
func SystemActor(tool string) audit.Actor {
	return audit.Actor{UserID: "system", AgentID: "outreach", SessionID: "system-" + uuid.NewString(), Tool: tool}
}
