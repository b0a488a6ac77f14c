package access

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
	"time"

	"github.com/google/uuid"
	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger"
	"outreach/repo"
)

// Agent keys and users: creating, listing and revoking keys, team members,
// and the authentication look-up. The records (repo.AgentKey, repo.User)
// and the cache of verified keys are the core's (see repo/keys.go).

// KeyPrefix starts every agent key.
const KeyPrefix = "outreach_"

const (
	keySecretLen   = 32
	keyChecksumLen = 6
	base62         = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// AgentTypes are the agent types a key may name.
var AgentTypes = []string{"claude_cowork", "claude_code", "openclaw", "other"}

// scramIterations is MongoDB's default for SCRAM-SHA-256. The password is a
// random key of 190 bits, so the count guards nothing a guess could reach;
// it is the value clients expect.
const scramIterations = 15000

// newSCRAMVerifier derives the verifier of key for the user name id.
func newSCRAMVerifier(id, key string) (*repo.SCRAMVerifier, error) {
	salt := make([]byte, 28)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	client, err := scram.SHA256.NewClient(id, key, "")
	if err != nil {
		return nil, err
	}
	c := client.GetStoredCredentials(scram.KeyFactors{Salt: string(salt), Iters: scramIterations})
	return &repo.SCRAMVerifier{Salt: salt, Iterations: scramIterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey}, nil
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

// Authenticate returns the active key that key is, and records its use. On
// an exclusive store a key verified within the core's keyCacheTTL is not
// read again (repo/keys.go); its expiry is checked on every call.
func (s *Store) Authenticate(ctx context.Context, key string) (*repo.AgentKey, error) {
	if why := WellFormedKey(key); why != "" {
		return nil, errors.Join(repo.ErrBadKey, errors.New(why))
	}
	hash := HashKey(key)
	t := repo.Now()
	k, gen, ok := s.CachedKey(hash, t)
	if !ok {
		err := s.Collection(repo.CollKeys).FindOne(ctx, bson.M{"key_hash": hash}).Decode(&k)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, errors.Join(repo.ErrBadKey, errors.New("unknown key"))
		}
		if err != nil {
			return nil, err
		}
		s.CacheKey(hash, k, gen, t)
	}
	if err := k.Unusable(t); err != nil {
		return nil, err
	}
	s.NoteKeyUse(ctx, k.ID, t)
	return &k, nil
}

// AnalystKey returns the key whose id is the user name given to the
// analyst endpoint, when it may read there: active (not revoked, archived
// or expired), with the read scope and a SCRAM verifier. It reads the store
// on every call, so a revocation holds from the next command on. The
// errors wrap repo.ErrBadKey and say why, for the server's log; the endpoint
// tells the client no more than that authentication failed.
func (s *Store) AnalystKey(ctx context.Context, id string) (*repo.AgentKey, error) {
	var k repo.AgentKey
	err := s.Collection(repo.CollKeys).FindOne(ctx, bson.M{"_id": id}).Decode(&k)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, errors.Join(repo.ErrBadKey, errors.New("no agent key has this id"))
	}
	if err != nil {
		return nil, err
	}
	t := repo.Now()
	if err := k.Unusable(t); err != nil {
		return nil, err
	}
	switch {
	case !slices.Contains(k.Scopes, repo.ScopeRead):
		return nil, errors.Join(repo.ErrBadKey, errors.New("the key has no read scope"))
	case k.SCRAM == nil:
		return nil, errors.Join(repo.ErrBadKey, errors.New("the key was created before the analyst endpoint authenticated and has no verifier: create a new key with the read scope"))
	}
	return &k, nil
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
func (s *Store) CreateKey(ctx context.Context, in NewKeyInput) (*repo.AgentKey, string, error) {
	if strings.TrimSpace(in.Name) == "" {
		return nil, "", repo.Invalid("name", "must not be empty")
	}
	if in.AgentType == "" {
		in.AgentType = "other"
	}
	if !slices.Contains(AgentTypes, in.AgentType) {
		return nil, "", repo.Invalid("agent_type", "%q is not one of %s", in.AgentType, strings.Join(AgentTypes, ", "))
	}
	if len(in.Scopes) == 0 {
		in.Scopes = []string{repo.ScopeRead, repo.ScopeWrite}
	}
	for _, sc := range in.Scopes {
		if !slices.Contains([]string{repo.ScopeRead, repo.ScopeWrite, repo.ScopeAdmin}, sc) {
			return nil, "", repo.Invalid("scopes", "%q is not one of read, write, admin", sc)
		}
	}
	slices.Sort(in.Scopes)
	in.Scopes = slices.Compact(in.Scopes)
	if in.ExpiresAt != nil && !in.ExpiresAt.After(time.Now()) {
		return nil, "", repo.Invalid("expires_at", "must be in the future")
	}
	if err := s.MustExist(ctx, repo.CollUsers, "user_id", in.UserID); err != nil {
		return nil, "", err
	}
	key := NewKey()
	id := uuid.NewString()
	verifier, err := newSCRAMVerifier(id, key)
	if err != nil {
		return nil, "", err
	}
	k := &repo.AgentKey{Meta: repo.Meta{ID: id}, UserID: in.UserID, Name: strings.TrimSpace(in.Name), AgentID: id, AgentType: in.AgentType,
		Scopes: in.Scopes, KeyHash: HashKey(key), SCRAM: verifier, DisplayPrefix: key[:len(KeyPrefix)+6] + "…", ExpiresAt: in.ExpiresAt}
	if err := repo.Insert(ctx, s.Store, repo.CollKeys, k); err != nil {
		return nil, "", err
	}
	return k, key, nil
}

// ListKeys lists the keys of userID (all keys when empty), newest first.
func (s *Store) ListKeys(ctx context.Context, userID string) ([]repo.AgentKey, error) {
	filter := bson.M{}
	if userID != "" {
		filter["user_id"] = userID
	}
	cur, err := s.Collection(repo.CollKeys).Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}))
	if err != nil {
		return nil, err
	}
	keys := []repo.AgentKey{}
	if err := cur.All(ctx, &keys); err != nil {
		return nil, err
	}
	for i := range keys {
		var u struct {
			LastUsedAt time.Time `bson:"last_used_at"`
		}
		if err := s.Collection(repo.CollKeyUsage).FindOne(ctx, bson.M{"_id": keys[i].ID}).Decode(&u); err == nil {
			keys[i].LastUsedAt = &u.LastUsedAt
		}
	}
	return keys, nil
}

// RevokeKey revokes a key; it fails on its very next request.
func (s *Store) RevokeKey(ctx context.Context, id string) (*repo.AgentKey, error) {
	return repo.Modify(ctx, s.Store, repo.CollKeys, id, audit.ActionUpdate, func(k *repo.AgentKey) error {
		if k.RevokedAt != nil {
			return repo.Errorf(repo.CodeFailedPrecondition, "agent key %s was already revoked at %s", id, k.RevokedAt.Format(time.RFC3339))
		}
		t := repo.Now()
		k.RevokedAt = &t
		return nil
	})
}

// CreateUser adds a team member; emails are unique (case-insensitive).
func (s *Store) CreateUser(ctx context.Context, name, email, slackUserID string) (*repo.User, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	if strings.TrimSpace(name) == "" {
		return nil, repo.Invalid("name", "must not be empty")
	}
	if !strings.Contains(email, "@") {
		return nil, repo.Invalid("email", "%q is not an email address", email)
	}
	if existing, err := s.UserByEmail(ctx, email); err == nil {
		return nil, &repo.Error{Code: repo.CodeConflict, Field: "email", Message: "a user with email " + email + " already exists: " + existing.ID}
	}
	u := &repo.User{Name: strings.TrimSpace(name), Email: email, SlackUserID: slackUserID}
	if err := repo.Insert(ctx, s.Store, repo.CollUsers, u); err != nil {
		return nil, err
	}
	return u, nil
}

// UserByEmail finds a team member by email.
func (s *Store) UserByEmail(ctx context.Context, email string) (*repo.User, error) {
	var u repo.User
	err := s.Collection(repo.CollUsers).FindOne(ctx, bson.M{"email": strings.ToLower(strings.TrimSpace(email))}).Decode(&u)
	if err != nil {
		return nil, ledger.DriverErr(err, "user", email)
	}
	return &u, nil
}

// User returns a team member.
func (s *Store) User(ctx context.Context, id string) (*repo.User, error) {
	return repo.Find[*repo.User](ctx, s.Store, repo.CollUsers, id)
}

// ListUsers lists team members by name.
func (s *Store) ListUsers(ctx context.Context) ([]repo.User, error) {
	cur, err := s.Collection(repo.CollUsers).Find(ctx, bson.M{}, options.Find().SetSort(bson.D{{Key: "name", Value: 1}, {Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	users := []repo.User{}
	return users, cur.All(ctx, &users)
}

// Bootstrap creates the first admin user and key on an empty store and
// returns the key; on a store that has any key it returns "".
func (s *Store) Bootstrap(ctx context.Context) (string, error) {
	n, err := s.Collection(repo.CollKeys).CountDocuments(ctx, bson.M{})
	if err != nil || n > 0 {
		return "", err
	}
	u, err := s.UserByEmail(ctx, "admin@localhost")
	if err != nil {
		if u, err = s.CreateUser(ctx, "Admin", "admin@localhost", ""); err != nil {
			return "", err
		}
	}
	_, key, err := s.CreateKey(ctx, NewKeyInput{UserID: u.ID, Name: "first admin key", AgentType: "other", Scopes: []string{repo.ScopeRead, repo.ScopeWrite, repo.ScopeAdmin}})
	return key, err
}
