package tools

import (
	"context"

	"outreach/audit"
	"outreach/repo"
	"outreach/server/version"
)

// Audit is the Audit group: change history and rollback, and whoami.
func Audit(s *repo.Store) []Tool {
	type noIn struct{}
	return []Tool{
		newTool("whoami", "Who this call acts as: the user, the agent, the key (id, name, scopes) and the session every change is attributed to.", read,
			func(ctx context.Context, _ *noIn) (any, error) {
				a, _ := audit.ActorFrom(ctx)
				return map[string]any{"user_id": a.UserID, "agent_id": a.AgentID, "agent_type": a.AgentType,
					"key_id": a.KeyID, "key_name": a.KeyName, "scopes": a.Scopes, "session_id": a.SessionID}, nil
			}),
		newTool("get_service_info", "What the store can do and how writes are made durable: the write mode (transaction or ordered), transactions, $unionWith, text search, the server's version.", read,
			func(ctx context.Context, _ *noIn) (any, error) {
				return map[string]any{"version": version.Version, "store": s.Capabilities()}, nil
			}),
	}
}
