package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/repo"
	"outreach/repo/directory"
	"outreach/repo/pitches"
)

// Confirmations before consequential steps: rolling back a session of more
// than ConfirmRollbackAbove changes, a Slack message or question (which no
// rollback takes back), approving and sending a pitch, an import without
// a dry run, and archiving a contact or outlet with more than
// ConfirmArchiveLinksAbove links. The server asks
// the client with an elicitation (a yes/no form): on the stateful revisions
// as an elicitation/create request during the call, on 2026-07-28 as an
// input_required result the client answers by calling again with
// inputResponses (the SDK does both from one answer, see mrtr.go in the
// SDK). A client that declares no elicitation capability gets the step done
// as before; each of these tools takes confirm: true, which says the user
// already agreed, so no question is asked. A client's answer is not proof
// that a person saw the question: a client may answer by itself.

// ConfirmRollbackAbove is the most changes rollback_session undoes without
// asking for a confirmation.
const ConfirmRollbackAbove = 10

// ConfirmArchiveLinksAbove is the most links (a contact's outlets and
// opportunities, an outlet's contacts and channels) a record may have for
// archive_contact or archive_outlet to go ahead without asking.
const ConfirmArchiveLinksAbove = 10

// confirmInput is the id of the confirmation among a call's input requests.
const confirmInput = "confirm"

// confirmations say, for a call's arguments, the question to ask before the
// step, or "" when the call needs none.
var confirmations = map[string]func(ctx context.Context, s *repo.Store, args map[string]any) (string, error){
	"rollback_session": func(ctx context.Context, s *repo.Store, args map[string]any) (string, error) {
		sid, _ := args["session_id"].(string)
		if args["dry_run"] == true || sid == "" || s == nil {
			return "", nil
		}
		p, err := s.ChangeLog(ctx, repo.ChangeFilter{SessionID: strings.TrimSpace(sid)}, 1, 0)
		if err != nil || p.Total <= ConfirmRollbackAbove {
			return "", err
		}
		return fmt.Sprintf("Roll back all %d changes of agent session %s?", p.Total, sid), nil
	},
	"send_slack_message": func(_ context.Context, _ *repo.Store, args map[string]any) (string, error) {
		text, _ := args["text"].(string)
		return fmt.Sprintf("Send this message to the team's Slack%s? It cannot be taken back.\n\n%s", channelOf(args), clip(text)), nil
	},
	"ask_slack": func(_ context.Context, _ *repo.Store, args map[string]any) (string, error) {
		q, _ := args["question"].(string)
		return fmt.Sprintf("Post this question to the team's Slack%s? It cannot be taken back.\n\n%s", channelOf(args), clip(q)), nil
	},
	"request_pitch_approval": func(_ context.Context, _ *repo.Store, args map[string]any) (string, error) {
		id, _ := args["id"].(string)
		return fmt.Sprintf("Post pitch %s to the team's Slack%s for approval? It cannot be taken back.", id, channelOf(args)), nil
	},
	"approve_pitch": func(ctx context.Context, s *repo.Store, args map[string]any) (string, error) {
		p := pitchOf(ctx, s, args)
		if p == nil || p.State != pitches.PitchDraft {
			return "", nil // the call says why it cannot be approved
		}
		return fmt.Sprintf("Approve pitch %q to %s for sending (content hash %.12s)?", p.Subject, recipientsOf(p), p.ContentHash), nil
	},
	"send_pitch": func(ctx context.Context, s *repo.Store, args map[string]any) (string, error) {
		p := pitchOf(ctx, s, args)
		if p == nil || (p.State != pitches.PitchApproved && p.State != pitches.PitchScheduled) {
			return "", nil // the call says why it cannot be sent
		}
		when := "now"
		if at, _ := args["scheduled_at"].(string); at != "" {
			when = "at " + at
		}
		return fmt.Sprintf("Send pitch %q to %s from %s %s? An email cannot be taken back.", p.Subject, recipientsOf(p), p.From, when), nil
	},
	"archive_contact": func(ctx context.Context, s *repo.Store, args map[string]any) (string, error) {
		id, _ := args["id"].(string)
		if s == nil || checkUUID("id", id) != nil {
			return "", nil
		}
		d, err := directory.Of(s).ContactDetail(ctx, strings.ToLower(id))
		if err != nil || len(d.Outlets)+len(d.Opportunities) <= ConfirmArchiveLinksAbove {
			return "", nil
		}
		return fmt.Sprintf("Archive %s, linked to %d outlets and %d opportunities? (restore_contact undoes it.)", d.Name, len(d.Outlets), len(d.Opportunities)), nil
	},
	"archive_outlet": func(ctx context.Context, s *repo.Store, args map[string]any) (string, error) {
		id, _ := args["id"].(string)
		if s == nil || checkUUID("id", id) != nil {
			return "", nil
		}
		d, err := directory.Of(s).OutletDetail(ctx, strings.ToLower(id))
		if err != nil || len(d.Contacts)+len(d.Channels) <= ConfirmArchiveLinksAbove {
			return "", nil
		}
		return fmt.Sprintf("Archive %s, with %d contacts and %d channels? (restore_outlet undoes it.)", d.Name, len(d.Contacts), len(d.Channels)), nil
	},
	"import_contacts": importQuestion("contacts"),
	"import_outlets":  importQuestion("outlets"),
}

func importQuestion(noun string) func(context.Context, *repo.Store, map[string]any) (string, error) {
	return func(_ context.Context, _ *repo.Store, args map[string]any) (string, error) {
		if args["dry_run"] == true {
			return "", nil
		}
		n := "the"
		if rows, ok := args["rows"].([]any); ok {
			n = fmt.Sprint(len(rows))
		} else if csv, ok := args["csv"].(string); ok {
			n = fmt.Sprint(max(strings.Count(strings.TrimSpace(csv), "\n"), 0))
		}
		return fmt.Sprintf("Import %s rows of %s without a dry run first? (One rollback_session undoes the import.)", n, noun), nil
	}
}

// pitchOf is the pitch a call names, or nil (the call reports why).
func pitchOf(ctx context.Context, s *repo.Store, args map[string]any) *pitches.Pitch {
	id, _ := args["id"].(string)
	if s == nil || checkUUID("id", id) != nil {
		return nil
	}
	p, err := pitches.Of(s).Pitch(ctx, strings.ToLower(id))
	if err != nil {
		return nil
	}
	return p
}

func recipientsOf(p *pitches.Pitch) string {
	if len(p.Recipients) == 1 {
		return p.Recipients[0].Email
	}
	return fmt.Sprintf("%d recipients", len(p.Recipients))
}

func channelOf(args map[string]any) string {
	if c, _ := args["channel"].(string); c != "" {
		return " (channel " + c + ")"
	}
	return ""
}

func clip(s string) string {
	if r := []rune(s); len(r) > 500 {
		return string(r[:500]) + "…"
	}
	return s
}

// confirmSchema is the form of a confirmation: one yes/no field.
var confirmSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"confirm": map[string]any{"type": "boolean", "title": "Go ahead", "description": "yes to go ahead; no to stop (nothing is done)"},
	},
	"required": []string{"confirm"},
}

// confirmFirst asks for the confirmation a call needs: nil, nil to go
// ahead; an input_required result to ask; or an error when the answer was
// no (nothing was done).
func (t Tool) confirmFirst(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ask := confirmations[t.Def.Name]
	if ask == nil || req.Params == nil {
		return nil, nil
	}
	var args map[string]any
	if json.Unmarshal(req.Params.Arguments, &args) != nil || args["confirm"] == true {
		return nil, nil // decode reports bad arguments
	}
	question, err := ask(ctx, t.store, args)
	if err != nil || question == "" {
		return nil, nil // the call itself reports what went wrong
	}
	sum := sha256.Sum256(append([]byte(t.Def.Name+"\x00"), req.Params.Arguments...))
	state := "confirm:" + hex.EncodeToString(sum[:12])
	if resp, ok := req.Params.InputResponses[confirmInput]; ok && req.Params.RequestState == state {
		er, _ := resp.(*mcp.ElicitResult)
		if er != nil && er.Action == "accept" && er.Content["confirm"] == true {
			return nil, nil
		}
		action := "no answer"
		if er != nil {
			action = er.Action
			if er.Action == "accept" {
				action = "answered no"
			}
		}
		return nil, &repo.Error{Code: repo.CodeFailedPrecondition, Message: fmt.Sprintf("not confirmed (%s): %s Nothing was done.", action, strings.SplitN(question, "\n", 2)[0])}
	}
	if caps := req.ClientCapabilities(); caps == nil || caps.Elicitation == nil {
		return nil, nil // the client cannot be asked: the step goes ahead, as before
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{confirmInput: &mcp.ElicitParams{Mode: "form", Message: question, RequestedSchema: confirmSchema}},
		RequestState:  state,
	}, nil
}
