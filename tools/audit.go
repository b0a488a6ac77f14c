package tools

import (
	"context"
	"slices"
	"strings"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/access"
	"outreach/server/version"
)

// Audit is the Audit group: change history and rollback, whoami and the
// service's information (with, for an admin, the backups' state when the
// server takes them: WithBackupStatus).
func Audit(s *repo.Store, o options) []Tool {
	type noIn struct{}
	type logIn struct {
		RecordID   string `json:"record_id,omitempty" jsonschema:"only changes of this record (UUID)"`
		Collection string `json:"collection,omitempty" jsonschema:"only changes of this collection, e.g. notes, outlets, contacts"`
		Action     string `json:"action,omitempty" enum:"create,update,archive,restore,link,unlink,rollback,send" jsonschema:"only changes of this action"`
		AgentID    string `json:"agent_id,omitempty" jsonschema:"only changes made by this agent"`
		SessionID  string `json:"session_id,omitempty" max:"session_id" jsonschema:"only changes made in this agent session"`
		UserID     string `json:"user_id,omitempty" jsonschema:"only changes made for this team member"`
		Since      string `json:"since,omitempty" jsonschema:"only changes at or after this time (YYYY-MM-DD or ISO datetime)"`
		Until      string `json:"until,omitempty" jsonschema:"only changes at or before this time; a bare date includes that whole day"`
		Limit      *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum entries; default 50"`
		Offset     *int   `json:"offset,omitempty" min:"0" jsonschema:"entries to skip; default 0"`
	}
	type changeIn struct {
		ID string `json:"id" jsonschema:"the change entry's id (UUID)"`
	}
	type rollbackChangeIn struct {
		ID     string `json:"id" jsonschema:"the change to roll back (UUID), as get_change_log lists it"`
		DryRun bool   `json:"dry_run,omitempty" jsonschema:"only plan: return what would be written, any conflicts and any broken rules, and write nothing; default false"`
		Force  bool   `json:"force,omitempty" jsonschema:"write even over fields that changed since the change (conflicts); never over a rule of the record's kind; default false"`
	}
	type rollbackSessionIn struct {
		SessionID string `json:"session_id" max:"session_id" jsonschema:"the agent session whose changes to roll back, as get_change_log shows it"`
		DryRun    bool   `json:"dry_run,omitempty" jsonschema:"only plan: return every change, what would be written, the conflicts, the broken rules and what cannot be reversed, and write nothing; default false"`
		Force     bool   `json:"force,omitempty" jsonschema:"write even over fields that changed since (conflicts); never over a rule of a record's kind; default false"`
		Confirm   bool   `json:"confirm,omitempty" jsonschema:"true when the user already agreed to this step: no confirmation is asked"`
	}
	return []Tool{
		newTool("get_change_log", "The history of changes, newest first: each with the state before and after, who made it (user, agent, session), the tool, and for rollbacks the change it reverts.", read,
			func(ctx context.Context, in *logIn) (any, error) {
				limit, offset, err := page(in.Limit, in.Offset, defaultLimit)
				if err != nil {
					return nil, err
				}
				f := repo.ChangeFilter{RecordID: in.RecordID, Collection: in.Collection, Action: in.Action, AgentID: in.AgentID, SessionID: in.SessionID, UserID: in.UserID}
				if in.Action != "" {
					if err := checkEnum("action", in.Action, audit.Actions); err != nil {
						return nil, err
					}
				}
				if in.Since != "" {
					t, err := parseTime("since", in.Since, false)
					if err != nil {
						return nil, err
					}
					f.Since = &t
				}
				if in.Until != "" {
					t, err := parseTime("until", in.Until, true)
					if err != nil {
						return nil, err
					}
					f.Until = &t
				}
				p, err := s.ChangeLog(ctx, f, limit, offset)
				if err != nil {
					return nil, err
				}
				return envelope("changes", p, limit, offset), nil
			}),
		newTool("get_change", "One change entry: before, after, who, when, and for rollbacks the change it reverts.", read,
			func(ctx context.Context, in *changeIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return s.Change(ctx, in.ID)
			}),
		newTool("rollback_change", "Undo one change: a create is archived (the organisation settings, which always exist, go back to their defaults), an archive restored, a restore archived again, an update's fields set back to their values before it, a link or unlink inverted (links added by others since are kept). "+
			"If a field the change wrote has changed since, nothing is written and the conflicting fields are returned with their current and expected values (code conflict), unless force is true. "+
			"The rollback is itself a change (action rollback, reverts = the change), so it can be rolled back in turn. A change already rolled back, or one that left the system (a message sent), is refused (failed_precondition). "+
			"So is a rollback that would leave a record breaking a rule of its kind (a note without links, two active contacts with one address, the General campaign archived, a channel of another outlet, a link to a record that does not exist): the violations are listed (dry_run shows them too) with how to fix them, and force does not override them.", change,
			func(ctx context.Context, in *rollbackChangeIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return s.RollbackChange(ctx, in.ID, repo.RollbackOptions{DryRun: in.DryRun, Force: in.Force})
			}),
		newTool("rollback_session", "Undo every change of an agent session, newest first, all or nothing: if any field changed since (a conflict), nothing is written unless force is true. "+
			"dry_run returns the whole plan: each change, what would be written, the conflicts, what cannot be reversed (messages sent, always listed) and what was already rolled back. "+
			"A rollback that would leave any record breaking a rule of its kind is refused whole (failed_precondition, violations listed), forced or not. "+
			"The rollback's own changes belong to the caller's session. Sends progress notifications when the call carries a progress token.", change,
			func(ctx context.Context, in *rollbackSessionIn) (any, error) {
				id := strings.TrimSpace(in.SessionID)
				if id == "" {
					return nil, repo.Invalid("session_id", "is empty; give the session's id (1 to %d characters), as get_change_log shows it", repo.MaxSessionID)
				}
				return s.RollbackSession(ctx, id, repo.RollbackOptions{DryRun: in.DryRun, Force: in.Force,
					Progress: func(done, total int, msg string) { Progress(ctx, done, total, msg) }})
			}),
		newTool("whoami", "Who this call acts as: the user, the agent, the key (id, name, scopes) and the session every change is attributed to, and how the caller signed in (signed_in_with: key, or oauth for a client a member approved; its key_name is the client's name).", read,
			func(ctx context.Context, _ *noIn) (any, error) {
				a, _ := audit.ActorFrom(ctx)
				how := "key"
				if a.AgentType == access.AgentTypeOAuth {
					how = "oauth"
				}
				return map[string]any{"user_id": a.UserID, "agent_id": a.AgentID, "agent_type": a.AgentType,
					"key_id": a.KeyID, "key_name": a.KeyName, "scopes": a.Scopes, "session_id": a.SessionID, "signed_in_with": how}, nil
			}),
		newTool("get_service_info", "What the store can do and how writes are made durable: the write mode (transaction or ordered), transactions, $unionWith, text search, the server's version, its own index's state; for an admin key, when the server takes backups, their state (the last backup, the changes shipped since, the last failure); when the team mailbox is connected by signing in, its connection (connected or disconnected with the provider's reason, a refresh problem, paused).", read,
			func(ctx context.Context, _ *noIn) (any, error) {
				out := map[string]any{"version": version.Version, "store": s.Capabilities()}
				if a, _ := audit.ActorFrom(ctx); o.backupStatus != nil && slices.Contains(a.Scopes, repo.ScopeAdmin) {
					out["backup"] = o.backupStatus()
				}
				if o.mailbox != nil {
					st, err := o.mailbox.Status(ctx)
					if err != nil {
						return nil, err
					}
					out["mailbox"] = st
				}
				return out, nil
			}),
	}
}
