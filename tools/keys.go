package tools

import (
	"context"
	"time"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/access"
)

// KeyNotShownAgain stands for a new agent key wherever create_agent_key's
// result is kept: a replay under the same idempotency key shows it instead
// of the key.
const KeyNotShownAgain = repo.KeyNotShownAgain

// Keys is the agent-key and team-member part of the Notifications group.
func Keys(s *repo.Store) []Tool {
	type createKeyIn struct {
		UserID    string   `json:"user_id,omitempty" jsonschema:"team member who owns the key (UUID); default: the caller's user"`
		Name      string   `json:"name" jsonschema:"a name for the key, e.g. the agent's purpose"`
		AgentType string   `json:"agent_type,omitempty" enum:"claude_cowork,claude_code,openclaw,other" jsonschema:"the kind of agent that will use the key; default other"`
		Scopes    []string `json:"scopes,omitempty" enum:"read,write,admin" jsonschema:"what the key may do; default read and write"`
		ExpiresAt string   `json:"expires_at,omitempty" jsonschema:"when the key stops working (ISO datetime or YYYY-MM-DD); default never"`
	}
	type listKeysIn struct {
		UserID string `json:"user_id,omitempty" jsonschema:"only keys of this team member (UUID); default all"`
	}
	type idIn struct {
		ID string `json:"id" jsonschema:"the agent key's id (UUID)"`
	}
	type createUserIn struct {
		Name        string `json:"name" jsonschema:"the team member's name"`
		Email       string `json:"email" jsonschema:"the team member's email address (unique)"`
		SlackUserID string `json:"slack_user_id,omitempty" jsonschema:"their Slack user id, for mentions"`
	}
	type noIn struct{}
	return []Tool{
		newTool("create_agent_key", "Create an API key for an agent. The key is returned once, in this result, and is kept nowhere: store it now (a retry under the same idempotency key gets the key's record, not the key). Needs the admin scope.", adminCreate,
			func(ctx context.Context, in *createKeyIn) (any, error) {
				a, _ := audit.ActorFrom(ctx)
				if in.UserID == "" {
					in.UserID = a.UserID
				}
				var exp *time.Time
				if in.ExpiresAt != "" {
					t, err := parseTime("expires_at", in.ExpiresAt, false)
					if err != nil {
						return nil, err
					}
					exp = &t
				}
				k, key, err := access.Of(s).CreateKey(ctx, access.NewKeyInput{UserID: in.UserID, Name: in.Name, AgentType: in.AgentType, Scopes: in.Scopes, ExpiresAt: exp})
				if err != nil {
					return nil, err
				}
				return map[string]any{"key": repo.NewSecret(key, KeyNotShownAgain), "agent_key": k,
					"note": "The key is shown only in the result of the call that created it and is kept nowhere (only its hash): store it now. Send it as 'Authorization: Bearer <key>'."}, nil
			}),
		newTool("list_agent_keys", "List agent keys: id, name, agent type, display prefix, scopes, created, last used, expires, revoked. Never the key itself. Needs the admin scope.", adminRead,
			func(ctx context.Context, in *listKeysIn) (any, error) {
				if in.UserID != "" {
					if err := checkUUID("user_id", in.UserID); err != nil {
						return nil, err
					}
				}
				keys, err := access.Of(s).ListKeys(ctx, in.UserID)
				if err != nil {
					return nil, err
				}
				return map[string]any{"total": len(keys), "agent_keys": keys}, nil
			}),
		newTool("revoke_agent_key", "Revoke an agent key; it fails on its very next request. Needs the admin scope.", adminChange,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return access.Of(s).RevokeKey(ctx, in.ID)
			}),
		newTool("list_users", "List the team members who own agent keys and subscriptions.", read,
			func(ctx context.Context, _ *noIn) (any, error) {
				users, err := access.Of(s).ListUsers(ctx)
				if err != nil {
					return nil, err
				}
				return map[string]any{"total": len(users), "users": users}, nil
			}),
		newTool("create_user", "Add a team member. Needs the admin scope.", adminCreate,
			func(ctx context.Context, in *createUserIn) (any, error) {
				return access.Of(s).CreateUser(ctx, in.Name, in.Email, in.SlackUserID)
			}),
	}
}
