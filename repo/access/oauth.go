package access

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/repo"
)

// Prefixes of the tokens the service's OAuth authorization server issues.
// Neither can be an agent key (a key's body has no underscore), so the edge
// tells them apart by prefix alone.
const (
	AccessTokenPrefix  = "outreach_at_"
	RefreshTokenPrefix = "outreach_rt_"
)

// Lifetimes of OAuth tokens.
const (
	AccessTokenTTL  = time.Hour
	RefreshTokenTTL = 30 * 24 * time.Hour
)

// AgentTypeOAuth is the agent type of an agent acting through an OAuth
// grant: a client a team member approved.
const AgentTypeOAuth = "oauth_client"

// OAuthGrant is what one approval of a client by a team member gave: a
// family of tokens, the current access token and refresh token of which are
// kept only as hashes. A refresh replaces both (the old refresh token's hash
// moves to UsedRefreshHashes, so a second use of it is recognised and
// revokes the whole family).
type OAuthGrant struct {
	repo.Meta  `bson:",inline"`
	UserID     string   `bson:"user_id" json:"user_id"`
	AgentID    string   `bson:"agent_id" json:"agent_id"`
	ClientID   string   `bson:"client_id" json:"client_id"`
	ClientName string   `bson:"client_name" json:"client_name"`
	Scopes     []string `bson:"scopes" json:"scopes"`
	// Resource is the audience (RFC 8707): the MCP endpoint the tokens are
	// good for, and nowhere else.
	Resource          string     `bson:"resource" json:"resource"`
	AccessHash        string     `bson:"access_hash" json:"-"`
	AccessExpiresAt   time.Time  `bson:"access_expires_at" json:"access_expires_at"`
	RefreshHash       string     `bson:"refresh_hash" json:"-"`
	UsedRefreshHashes []string   `bson:"used_refresh_hashes" json:"-"`
	RefreshExpiresAt  time.Time  `bson:"refresh_expires_at" json:"refresh_expires_at"`
	RevokedAt         *time.Time `bson:"revoked_at" json:"revoked_at"`
	RevokedReason     string     `bson:"revoked_reason,omitempty" json:"revoked_reason,omitempty"`
}

// OAuthTokens are a grant's tokens as issued: shown once to the client and
// never stored.
type OAuthTokens struct {
	Access, Refresh string
}

// OAuthGrantInput is an approval to record.
type OAuthGrantInput struct {
	UserID, ClientID, ClientName, Resource string
	Scopes                                 []string
	// AccessTTL and RefreshTTL default to AccessTokenTTL and RefreshTokenTTL.
	AccessTTL, RefreshTTL time.Duration
}

// OAuthAgentID is the agent a client acts as for a member: one identity per
// client and member, the same across every approval, so the change log and
// session rollbacks see one agent.
func OAuthAgentID(clientID, userID string) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("outreach:oauth:"+clientID+"\x00"+userID)).String()
}

func newToken(prefix string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// IssueOAuthGrant records an approval and returns its first tokens.
func (s *Store) IssueOAuthGrant(ctx context.Context, in OAuthGrantInput) (*OAuthGrant, OAuthTokens, error) {
	if strings.TrimSpace(in.ClientID) == "" {
		return nil, OAuthTokens{}, repo.Invalid("client_id", "must not be empty")
	}
	if strings.TrimSpace(in.Resource) == "" {
		return nil, OAuthTokens{}, repo.Invalid("resource", "must not be empty")
	}
	for _, sc := range in.Scopes {
		if !slices.Contains([]string{repo.ScopeRead, repo.ScopeWrite, repo.ScopeAdmin}, sc) {
			return nil, OAuthTokens{}, repo.Invalid("scope", "%q is not one of read, write, admin", sc)
		}
	}
	if len(in.Scopes) == 0 {
		return nil, OAuthTokens{}, repo.Invalid("scope", "must name at least one of read, write, admin")
	}
	if err := s.MustExist(ctx, repo.CollUsers, "user_id", in.UserID); err != nil {
		return nil, OAuthTokens{}, err
	}
	if in.AccessTTL <= 0 {
		in.AccessTTL = AccessTokenTTL
	}
	if in.RefreshTTL <= 0 {
		in.RefreshTTL = RefreshTokenTTL
	}
	scopes := slices.Clone(in.Scopes)
	slices.Sort(scopes)
	t := repo.Now()
	tok := OAuthTokens{Access: newToken(AccessTokenPrefix), Refresh: newToken(RefreshTokenPrefix)}
	name := strings.TrimSpace(in.ClientName)
	if name == "" {
		name = in.ClientID
	}
	g := &OAuthGrant{UserID: in.UserID, AgentID: OAuthAgentID(in.ClientID, in.UserID), ClientID: in.ClientID, ClientName: name,
		Scopes: slices.Compact(scopes), Resource: in.Resource, AccessHash: HashKey(tok.Access), AccessExpiresAt: t.Add(in.AccessTTL),
		RefreshHash: HashKey(tok.Refresh), UsedRefreshHashes: []string{}, RefreshExpiresAt: t.Add(in.RefreshTTL)}
	if err := repo.Insert(ctx, s.Store, repo.CollOAuthGrants, g); err != nil {
		return nil, OAuthTokens{}, err
	}
	return g, tok, nil
}

// AuthenticateOAuth returns the grant whose current access token is token,
// when it may be used at resource: not revoked, not expired, and issued for
// that resource (RFC 8707: a token for another audience is refused). The
// errors wrap ErrBadKey and say why.
func (s *Store) AuthenticateOAuth(ctx context.Context, token, resource string) (*OAuthGrant, error) {
	if !strings.HasPrefix(token, AccessTokenPrefix) {
		return nil, errors.Join(repo.ErrBadKey, errors.New("not an access token of this service"))
	}
	var g OAuthGrant
	err := s.Collection(repo.CollOAuthGrants).FindOne(ctx, bson.M{"access_hash": HashKey(token)}).Decode(&g)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, errors.Join(repo.ErrBadKey, errors.New("unknown access token (a refresh replaced it, or it was never issued)"))
	}
	if err != nil {
		return nil, err
	}
	switch {
	case g.RevokedAt != nil:
		return nil, errors.Join(repo.ErrBadKey, errors.New("the grant was revoked"))
	case g.ArchivedAt != nil:
		return nil, errors.Join(repo.ErrBadKey, errors.New("the grant was archived"))
	case !repo.Now().Before(g.AccessExpiresAt):
		return nil, errors.Join(repo.ErrBadKey, errors.New("the access token has expired; refresh it"))
	case g.Resource != resource:
		return nil, errors.Join(repo.ErrBadKey, errors.New("the access token was issued for another resource ("+g.Resource+"), not "+resource))
	}
	return &g, nil
}

// ErrRefreshReused is returned when a refresh token that was already
// exchanged comes again: the grant it belongs to is revoked with it.
var ErrRefreshReused = errors.New("the refresh token was already used: the grant is revoked")

// OAuthGrantForRefresh returns the grant whose current refresh token is
// refresh, when it may still be refreshed. A refresh token that was already
// exchanged (a stolen copy, or a client that kept it) revokes its grant:
// every token of the family fails from then on.
func (s *Store) OAuthGrantForRefresh(ctx context.Context, refresh string) (*OAuthGrant, error) {
	hash := HashKey(refresh)
	var g OAuthGrant
	err := s.Collection(repo.CollOAuthGrants).FindOne(ctx, bson.M{"refresh_hash": hash}).Decode(&g)
	if errors.Is(err, mongo.ErrNoDocuments) {
		var used OAuthGrant
		if s.Collection(repo.CollOAuthGrants).FindOne(ctx, bson.M{"used_refresh_hashes": hash}).Decode(&used) == nil {
			if used.RevokedAt == nil {
				if _, err := s.RevokeOAuthGrant(ctx, used.ID, "refresh token reused"); err != nil {
					return nil, err
				}
			}
			return nil, errors.Join(repo.ErrBadKey, ErrRefreshReused)
		}
		return nil, errors.Join(repo.ErrBadKey, errors.New("unknown refresh token"))
	}
	if err != nil {
		return nil, err
	}
	switch {
	case g.RevokedAt != nil:
		return nil, errors.Join(repo.ErrBadKey, errors.New("the grant was revoked"))
	case !repo.Now().Before(g.RefreshExpiresAt):
		return nil, errors.Join(repo.ErrBadKey, errors.New("the refresh token has expired; sign in again"))
	}
	return &g, nil
}

// RefreshOAuthGrant exchanges a refresh token of clientID for new tokens:
// both are replaced, and the old refresh token is remembered so that a
// second use of it revokes the whole grant (OAuthGrantForRefresh).
func (s *Store) RefreshOAuthGrant(ctx context.Context, refresh, clientID string) (*OAuthGrant, OAuthTokens, error) {
	hash := HashKey(refresh)
	g, err := s.OAuthGrantForRefresh(ctx, refresh)
	if err != nil {
		return nil, OAuthTokens{}, err
	}
	if g.ClientID != clientID {
		return nil, OAuthTokens{}, errors.Join(repo.ErrBadKey, errors.New("the refresh token was issued to another client"))
	}
	tok := OAuthTokens{Access: newToken(AccessTokenPrefix), Refresh: newToken(RefreshTokenPrefix)}
	ttl := AccessTokenTTL
	out, err := repo.Modify(ctx, s.Store, repo.CollOAuthGrants, g.ID, audit.ActionUpdate, func(g *OAuthGrant) error {
		switch {
		case g.RefreshHash != hash:
			return errors.Join(repo.ErrBadKey, ErrRefreshReused) // another refresh won the race
		case g.RevokedAt != nil:
			return errors.Join(repo.ErrBadKey, errors.New("the grant was revoked"))
		case !repo.Now().Before(g.RefreshExpiresAt):
			return errors.Join(repo.ErrBadKey, errors.New("the refresh token has expired; sign in again"))
		}
		t := repo.Now()
		g.UsedRefreshHashes = append(g.UsedRefreshHashes, g.RefreshHash)
		g.RefreshHash, g.AccessHash, g.AccessExpiresAt = HashKey(tok.Refresh), HashKey(tok.Access), t.Add(ttl)
		return nil
	})
	if err != nil {
		return nil, OAuthTokens{}, err
	}
	return out, tok, nil
}

// RevokeOAuthGrant revokes a grant: its tokens fail from the next request.
// Revoking a revoked grant changes nothing.
func (s *Store) RevokeOAuthGrant(ctx context.Context, id, reason string) (*OAuthGrant, error) {
	return repo.Modify(ctx, s.Store, repo.CollOAuthGrants, id, audit.ActionUpdate, func(g *OAuthGrant) error {
		if g.RevokedAt != nil {
			return nil
		}
		t := repo.Now()
		g.RevokedAt, g.RevokedReason = &t, reason
		return nil
	})
}

// OAuthGrantByToken finds the grant an access or refresh token belongs to
// (current or, for a refresh token, already used), for revocation (RFC
// 7009). ErrNotFound when none.
func (s *Store) OAuthGrantByToken(ctx context.Context, token string) (*OAuthGrant, error) {
	hash := HashKey(token)
	// One look-up per field, each on its own index (an $or of the three is
	// a collection scan on some engines).
	for _, field := range []string{"access_hash", "refresh_hash", "used_refresh_hashes"} {
		var g OAuthGrant
		err := s.Collection(repo.CollOAuthGrants).FindOne(ctx, bson.M{field: hash}).Decode(&g)
		if errors.Is(err, mongo.ErrNoDocuments) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &g, nil
	}
	return nil, repo.NotFound("OAuth grant", "(by token)")
}

// OAuthGrant returns a grant by id.
func (s *Store) OAuthGrant(ctx context.Context, id string) (*OAuthGrant, error) {
	return repo.Find[*OAuthGrant](ctx, s.Store, repo.CollOAuthGrants, id)
}

// ListOAuthGrants lists the grants of userID (every member's when empty),
// newest first.
func (s *Store) ListOAuthGrants(ctx context.Context, userID string) ([]OAuthGrant, error) {
	filter := bson.M{}
	if userID != "" {
		filter["user_id"] = userID
	}
	cur, err := s.Collection(repo.CollOAuthGrants).Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}))
	if err != nil {
		return nil, err
	}
	out := []OAuthGrant{}
	return out, cur.All(ctx, &out)
}
