package access

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"golang.org/x/crypto/argon2"

	"outreach/audit"
	"outreach/repo"
)

// The authorization server's records: clients registered dynamically (RFC
// 7591), authorization requests in progress, and team members' sign-in
// credentials. Each is written through the write path; secrets in them
// (codes, consent nonces, invites, passwords) are kept only as hashes.

// OAuthClient is a client registered by Dynamic Client Registration: a
// public client (no secret; PKCE proves it) with its exact redirect URIs.
type OAuthClient struct {
	repo.Meta    `bson:",inline"`
	ClientName   string   `bson:"client_name" json:"client_name"`
	RedirectURIs []string `bson:"redirect_uris" json:"redirect_uris"`
	ClientURI    string   `bson:"client_uri,omitempty" json:"client_uri,omitempty"`
}

// RegisterOAuthClient records a dynamically registered client; its id is
// the client_id.
func (s *Store) RegisterOAuthClient(ctx context.Context, c *OAuthClient) error {
	c.ClientName = strings.TrimSpace(c.ClientName)
	if len(c.RedirectURIs) == 0 {
		return repo.Invalid("redirect_uris", "must name at least one redirect URI")
	}
	return repo.Insert(ctx, s.Store, repo.CollOAuthClients, c)
}

// OAuthClientByID returns a registered client.
func (s *Store) OAuthClientByID(ctx context.Context, id string) (*OAuthClient, error) {
	return repo.Find[*OAuthClient](ctx, s.Store, repo.CollOAuthClients, id)
}

// OAuthRequest is an authorization request between the client's redirect to
// /authorize and the exchange of its code: who signed in, what they
// approved, and the code's hash once issued.
type OAuthRequest struct {
	repo.Meta           `bson:",inline"`
	ClientID            string    `bson:"client_id" json:"client_id"`
	ClientName          string    `bson:"client_name" json:"client_name"`
	RedirectURI         string    `bson:"redirect_uri" json:"redirect_uri"`
	State               string    `bson:"state,omitempty" json:"-"`
	Nonce               string    `bson:"nonce,omitempty" json:"-"`
	ResponseMode        string    `bson:"response_mode,omitempty" json:"response_mode,omitempty"`
	Scopes              []string  `bson:"scopes" json:"scopes"`
	CodeChallenge       string    `bson:"code_challenge" json:"-"`
	CodeChallengeMethod string    `bson:"code_challenge_method" json:"code_challenge_method"`
	Resource            string    `bson:"resource" json:"resource"`
	ExpiresAt           time.Time `bson:"expires_at" json:"expires_at"`
	// UserID is the member who signed in; ConsentHash the hash of the nonce
	// their browser holds, which the consent form must present.
	UserID      string `bson:"user_id,omitempty" json:"user_id,omitempty"`
	ConsentHash string `bson:"consent_hash,omitempty" json:"-"`
	// Allowed are the scopes the member's role allows, read at sign-in.
	Allowed []string `bson:"allowed,omitempty" json:"allowed,omitempty"`
	// UpstreamHash is the hash of the state of a sign-in at an upstream
	// OpenID Connect provider in progress.
	UpstreamHash string     `bson:"upstream_hash,omitempty" json:"-"`
	ApprovedAt   *time.Time `bson:"approved_at" json:"approved_at"`
	CodeHash     string     `bson:"code_hash,omitempty" json:"-"`
}

// OAuthRequestTTL bounds an authorization request, from /authorize to the
// code's exchange.
const OAuthRequestTTL = 10 * time.Minute

// CreateOAuthRequest records an authorization request.
func (s *Store) CreateOAuthRequest(ctx context.Context, r *OAuthRequest) error {
	r.ExpiresAt = repo.Now().Add(OAuthRequestTTL)
	return repo.Insert(ctx, s.Store, repo.CollOAuthRequests, r)
}

// OAuthRequestByID returns a live authorization request (not expired, not
// used).
func (s *Store) OAuthRequestByID(ctx context.Context, id string) (*OAuthRequest, error) {
	r, err := repo.Find[*OAuthRequest](ctx, s.Store, repo.CollOAuthRequests, id)
	if err != nil {
		return nil, err
	}
	if r.ArchivedAt != nil || !repo.Now().Before(r.ExpiresAt) {
		return nil, repo.NotFound("authorization request", id)
	}
	return r, nil
}

// OAuthRequestByCode returns the authorization request a code was issued
// for, while it is live: a code is good once and for OAuthRequestTTL.
func (s *Store) OAuthRequestByCode(ctx context.Context, code string) (*OAuthRequest, error) {
	var r OAuthRequest
	err := s.Collection(repo.CollOAuthRequests).FindOne(ctx, bson.M{"code_hash": HashKey(code)}).Decode(&r)
	if errors.Is(err, mongo.ErrNoDocuments) || (err == nil && (r.ArchivedAt != nil || !repo.Now().Before(r.ExpiresAt))) {
		return nil, repo.NotFound("authorization code", "(given)")
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// UpdateOAuthRequest changes a live authorization request.
func (s *Store) UpdateOAuthRequest(ctx context.Context, id string, fn func(*OAuthRequest) error) (*OAuthRequest, error) {
	return repo.Modify(ctx, s.Store, repo.CollOAuthRequests, id, audit.ActionUpdate, func(r *OAuthRequest) error {
		if r.ArchivedAt != nil || !repo.Now().Before(r.ExpiresAt) {
			return repo.Errorf(repo.CodeFailedPrecondition, "the authorization request %s has expired or was used; start again from the client", id)
		}
		return fn(r)
	})
}

// SetOAuthCode records the hash of the code issued for a request.
func (s *Store) SetOAuthCode(ctx context.Context, id, code string) error {
	_, err := s.UpdateOAuthRequest(ctx, id, func(r *OAuthRequest) error {
		if r.CodeHash != "" {
			return repo.Errorf(repo.CodeFailedPrecondition, "a code was already issued for authorization request %s", id)
		}
		r.CodeHash = HashKey(code)
		return nil
	})
	return err
}

// EndOAuthRequest archives a request: its code cannot be exchanged again.
func (s *Store) EndOAuthRequest(ctx context.Context, id string) error {
	_, err := repo.Modify(ctx, s.Store, repo.CollOAuthRequests, id, audit.ActionArchive, func(r *OAuthRequest) error {
		if r.ArchivedAt == nil {
			t := repo.Now()
			r.ArchivedAt = &t
		}
		return nil
	})
	return err
}

// HashSecret is how the authorization server keeps a one-time secret (a
// consent nonce): SHA-256, hex.
func HashSecret(v string) string { return HashKey(v) }

// SignIn is a team member's local sign-in: the argon2id hash of the password
// they set through an invite, the invite's hash while it is open, and the
// scopes their role allows (what a client may be given, at most).
type SignIn struct {
	repo.Meta       `bson:",inline"` // _id is the user's id
	Email           string           `bson:"email" json:"email"`
	PasswordHash    string           `bson:"password_hash,omitempty" json:"-"`
	InviteHash      string           `bson:"invite_hash,omitempty" json:"-"`
	InviteExpiresAt *time.Time       `bson:"invite_expires_at" json:"invite_expires_at"`
	Scopes          []string         `bson:"scopes" json:"scopes"`
}

// InviteTTL is how long an invite link works.
const InviteTTL = 72 * time.Hour

// InvitePrefix starts every invite token.
const InvitePrefix = "outreach_inv_"

// MinPassword is the shortest password accepted, in characters.
const MinPassword = 12

// InviteMember opens an invite for the member of email (created if new,
// named name): the returned token, shown once, lets them set a password.
// scopes is the most a client they approve may get.
func (s *Store) InviteMember(ctx context.Context, email, name string, scopes []string) (*repo.User, string, error) {
	if len(scopes) == 0 {
		scopes = []string{repo.ScopeRead, repo.ScopeWrite}
	}
	for _, sc := range scopes {
		if !slices.Contains([]string{repo.ScopeRead, repo.ScopeWrite, repo.ScopeAdmin}, sc) {
			return nil, "", repo.Invalid("scopes", "%q is not one of read, write, admin", sc)
		}
	}
	scopes = slices.Clone(scopes)
	slices.Sort(scopes)
	scopes = slices.Compact(scopes)
	u, err := s.UserByEmail(ctx, email)
	if repo.ErrorCode(err) == repo.CodeNotFound {
		if name == "" {
			name = strings.Split(email, "@")[0]
		}
		u, err = s.CreateUser(ctx, name, email, "")
	}
	if err != nil {
		return nil, "", err
	}
	token := newToken(InvitePrefix)
	exp := repo.Now().Add(InviteTTL)
	_, err = repo.Find[*SignIn](ctx, s.Store, repo.CollSignIns, u.ID)
	switch {
	case repo.ErrorCode(err) == repo.CodeNotFound:
		err = repo.Insert(ctx, s.Store, repo.CollSignIns, &SignIn{Meta: repo.Meta{ID: u.ID}, Email: u.Email, InviteHash: HashKey(token), InviteExpiresAt: &exp, Scopes: scopes})
	case err == nil:
		_, err = repo.Modify(ctx, s.Store, repo.CollSignIns, u.ID, audit.ActionUpdate, func(si *SignIn) error {
			si.InviteHash, si.InviteExpiresAt, si.Scopes, si.Email = HashKey(token), &exp, scopes, u.Email
			return nil
		})
	}
	if err != nil {
		return nil, "", err
	}
	return u, token, nil
}

// InviteFor returns the sign-in an open invite token belongs to.
func (s *Store) InviteFor(ctx context.Context, token string) (*SignIn, error) {
	var si SignIn
	err := s.Collection(repo.CollSignIns).FindOne(ctx, bson.M{"invite_hash": HashKey(token)}).Decode(&si)
	if errors.Is(err, mongo.ErrNoDocuments) || (err == nil && (si.InviteExpiresAt == nil || !repo.Now().Before(*si.InviteExpiresAt))) {
		return nil, repo.Errorf(repo.CodeNotFound, "this invite link is unknown, used or expired; ask an admin for a new one (outreach users invite)")
	}
	if err != nil {
		return nil, err
	}
	return &si, nil
}

// AcceptInvite sets the password of the invite's member and closes the
// invite.
func (s *Store) AcceptInvite(ctx context.Context, token, password string) (*SignIn, error) {
	si, err := s.InviteFor(ctx, token)
	if err != nil {
		return nil, err
	}
	if n := len([]rune(password)); n < MinPassword || n > 256 {
		return nil, repo.Invalid("password", "must be %d to 256 characters; it has %d", MinPassword, n)
	}
	hash, err := hashPassword(password)
	if err != nil {
		return nil, err
	}
	return repo.Modify(ctx, s.Store, repo.CollSignIns, si.ID, audit.ActionUpdate, func(x *SignIn) error {
		if x.InviteHash != HashKey(token) {
			return repo.Errorf(repo.CodeFailedPrecondition, "this invite link was used already")
		}
		x.PasswordHash, x.InviteHash, x.InviteExpiresAt = hash, "", nil
		return nil
	})
}

// ErrBadPassword is the one answer to a failed sign-in, whatever failed.
var ErrBadPassword = errors.New("the email or the password is wrong")

// CheckPassword returns the sign-in of email when password is its password.
func (s *Store) CheckPassword(ctx context.Context, email, password string) (*SignIn, error) {
	var si SignIn
	err := s.Collection(repo.CollSignIns).FindOne(ctx, bson.M{"email": strings.ToLower(strings.TrimSpace(email))}).Decode(&si)
	if errors.Is(err, mongo.ErrNoDocuments) || (err == nil && si.PasswordHash == "") {
		_, _ = hashPassword(password) // as slow as a wrong password
		return nil, ErrBadPassword
	}
	if err != nil {
		return nil, err
	}
	if !checkPassword(si.PasswordHash, password) {
		return nil, ErrBadPassword
	}
	if u, err := s.User(ctx, si.ID); err != nil || u.ArchivedAt != nil {
		return nil, ErrBadPassword
	}
	return &si, nil
}

// SignInOf returns a member's sign-in (ErrNotFound when never invited).
func (s *Store) SignInOf(ctx context.Context, userID string) (*SignIn, error) {
	return repo.Find[*SignIn](ctx, s.Store, repo.CollSignIns, userID)
}

// argon2id parameters (RFC 9106's second recommendation, lighter in memory:
// 19 MiB, 2 passes, as OWASP's minimum).
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
)

func hashPassword(password string) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

func checkPassword(encoded, password string) bool {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil {
		return false
	}
	b64 := base64.RawStdEncoding
	salt, err1 := b64.DecodeString(parts[4])
	want, err2 := b64.DecodeString(parts[5])
	if err1 != nil || err2 != nil {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}
