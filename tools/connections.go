package tools

import (
	"context"
	"fmt"
	"slices"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/access"
)

// Connections lists and revokes the clients team members connected by
// OAuth (their grants): a member sees and revokes their own, an admin
// everyone's. Part of the audit toolset, so that it is always on.
func Connections(s *repo.Store) []Tool {
	type listIn struct {
		UserID string `json:"user_id,omitempty" jsonschema:"only this team member's connected clients (UUID); another member's needs the admin scope; default: the caller's own"`
		All    bool   `json:"all,omitempty" jsonschema:"every member's connected clients (admin scope); default false"`
	}
	type idIn struct {
		ID string `json:"id" jsonschema:"the connected client's grant id (UUID), as list_connected_clients shows it"`
	}
	isAdmin := func(a audit.Actor) bool { return slices.Contains(a.Scopes, repo.ScopeAdmin) }
	return []Tool{
		newTool("list_connected_clients", "List the clients (assistants) team members connected by OAuth sign-in: grant id, client id and name, the agent it acts as, scopes, resource, when it was approved, when its access token expires, revoked_at. Never a token. A member sees their own; user_id of another member or all needs the admin scope.", read,
			func(ctx context.Context, in *listIn) (any, error) {
				a, _ := audit.ActorFrom(ctx)
				userID := a.UserID
				switch {
				case in.All && in.UserID != "":
					return nil, repo.Invalid("all", "give user_id or all, not both")
				case in.All:
					userID = ""
				case in.UserID != "":
					if err := checkUUID("user_id", in.UserID); err != nil {
						return nil, err
					}
					userID = in.UserID
				}
				if userID != a.UserID && !isAdmin(a) {
					return nil, &repo.Error{Code: repo.CodePermissionDenied, Message: "another member's connected clients need the admin scope; leave user_id and all out to see your own"}
				}
				gs, err := access.Of(s).ListOAuthGrants(ctx, userID)
				if err != nil {
					return nil, err
				}
				return map[string]any{"total": len(gs), "connected_clients": gs}, nil
			}),
		newTool("revoke_connected_client", "Revoke a connected client's grant: its access and refresh tokens fail from the next request (the client must sign in again). Your own grant, or any with the admin scope.", change,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				a, _ := audit.ActorFrom(ctx)
				g, err := access.Of(s).OAuthGrant(ctx, in.ID)
				if err != nil {
					return nil, err
				}
				if g.UserID != a.UserID && !isAdmin(a) {
					return nil, &repo.Error{Code: repo.CodePermissionDenied, Message: "this grant is another member's: revoking it needs the admin scope"}
				}
				if g.RevokedAt != nil {
					return nil, repo.Errorf(repo.CodeFailedPrecondition, "grant %s was already revoked (%s)", g.ID, g.RevokedReason)
				}
				return access.Of(s).RevokeOAuthGrant(ctx, g.ID, fmt.Sprintf("revoked by user %s", a.UserID))
			}),
	}
}
