package tools

import (
	"context"

	"outreach/repo"
)

// Sessions is part of the Audit group: explicit agent sessions, which give
// every change a session that means one agent's run of work whatever the
// MCP revision or transport.
func Sessions(s *repo.Store) []Tool {
	type startIn struct {
		Label string `json:"label,omitempty" max:"session_label" jsonschema:"what this run of work is, to find it again in list_sessions (at most 200 characters)"`
	}
	type listIn struct {
		AgentID string `json:"agent_id,omitempty" jsonschema:"only sessions of this agent"`
		UserID  string `json:"user_id,omitempty" jsonschema:"only sessions of this team member's agents"`
		Limit   *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum sessions; default 20"`
		Offset  *int   `json:"offset,omitempty" min:"0" jsonschema:"sessions to skip; default 0"`
	}
	return []Tool{
		newTool("start_session", "Start an agent session for a run of work and return its handle (session_id). Send the handle on every later call, in the X-Agent-Session-Id header or in the request's _meta as \"outreach/session_id\": each change is attributed to it, get_change_log filters by it and rollback_session undoes it. "+
			"The session is bound to this agent: no other key can write in it. Without a handle, a call belongs to its MCP session (revisions up to 2025-11-25) or, on 2026-07-28, to the key's implicit session, which ends after 30 minutes without a change.", create,
			func(ctx context.Context, in *startIn) (any, error) {
				sess, err := s.StartSession(ctx, in.Label)
				if err != nil {
					return nil, err
				}
				return map[string]any{"session_id": sess.ID, "label": sess.Label, "agent_id": sess.AgentID, "user_id": sess.UserID,
					"started_at": sess.StartedAt, "header": SessionHeader, "meta_key": MetaSessionKey}, nil
			}),
		newTool("list_sessions", "Agent sessions, newest first, to find the one to undo: who (agent, user), its label, how it was opened (started by start_session, implicit, or named by the client or the MCP session), when it started and last changed something, how many changes it made, and whether they are rolled back.", read,
			func(ctx context.Context, in *listIn) (any, error) {
				limit, offset, err := page(in.Limit, in.Offset, 20)
				if err != nil {
					return nil, err
				}
				p, err := s.Sessions(ctx, repo.SessionFilter{AgentID: in.AgentID, UserID: in.UserID}, limit, offset)
				if err != nil {
					return nil, err
				}
				return envelope("sessions", p, limit, offset), nil
			}),
	}
}
