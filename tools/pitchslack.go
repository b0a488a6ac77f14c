package tools

import (
	"context"
	"fmt"
	"strings"
	"time"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/notify"
	"outreach/repo/pitches"
	"outreach/slackmsg"
)

// PitchApprovals is approval of pitches from Slack: a pitch posted to the
// team's channel, a team member's answer in its thread read back and, when
// it approves, recorded as approve_pitch records an approval (see
// repo.ApprovePitchFromSlack for who may answer).
func PitchApprovals(s *repo.Store, slack *slackmsg.Client) []Tool {
	type requestIn struct {
		ID      string `json:"id" jsonschema:"the draft pitch's id (UUID)"`
		Channel string `json:"channel,omitempty" jsonschema:"channel id or name; default: the configured channel"`
		Confirm bool   `json:"confirm,omitempty" jsonschema:"true when the user already agreed to this step: no confirmation is asked"`
	}
	type checkIn struct {
		RequestID string `json:"request_id" jsonschema:"the approval request's id (UUID), as request_pitch_approval returned it"`
	}
	ready := func(tool string) error {
		if slack == nil {
			return &repo.Error{Code: repo.CodeFailedPrecondition, Message: slackmsg.ErrNotConfigured.Error()}
		}
		if !slack.CanRead() {
			return &repo.Error{Code: repo.CodeFailedPrecondition, Message: tool + ": " + slackmsg.ErrNeedsBotToken.Error()}
		}
		return nil
	}
	return []Tool{
		newTool("request_pitch_approval", "Post a draft pitch to the team's Slack for approval: subject, recipients, the start of the body and its content hash. A team member answers \"approve\" or \"deny\" in the message's thread; check_pitch_approval reads the answer back. Needs the Web API (a bot token). Recorded as a send; not reversible.", send,
			func(ctx context.Context, in *requestIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				p, err := pitches.Of(s).Pitch(ctx, strings.ToLower(in.ID))
				if err != nil {
					return nil, err
				}
				if p.Archived() || p.State != pitches.PitchDraft {
					return nil, &repo.Error{Code: repo.CodeFailedPrecondition, Field: "id", Message: fmt.Sprintf("pitch %s is %s; only a draft is put up for approval", p.ID, pitchStateOf(p))}
				}
				if err := ready("request_pitch_approval"); err != nil {
					return nil, err
				}
				text := approvalText(p)
				out, err := slack.Post(ctx, in.Channel, text, "")
				if err != nil {
					return nil, slackErr(err)
				}
				m := &notify.Message{Kind: notify.MessageKindPitchApproval, Channel: out.Channel, Text: text, TS: out.TS, Via: out.Via,
					PitchID: p.ID, ContentHash: p.ContentHash}
				if err := notify.Of(s).RecordSend(ctx, m); err != nil {
					return nil, &repo.Error{Code: repo.CodeUnavailable, Message: fmt.Sprintf("the approval request was posted to Slack (ts %s) but could not be recorded; do not post it again", m.TS)}
				}
				return &pitchApprovalRequest{RequestID: m.ID, PitchID: p.ID, ContentHash: p.ContentHash, Channel: m.Channel, TS: m.TS}, nil
			}),
		newTool("check_pitch_approval", "Read the answers in a pitch's Slack approval thread. The first \"approve\" or \"deny\" from a team member mapped by their slack_user_id and holding a key with the approver scope decides: approve records the approval (who, when, the content hash posted) as approve_pitch does; answers from anyone else are listed as ignored. status: waiting, approved, denied. A pitch edited since it was posted is refused with conflict (post it again).", change,
			func(ctx context.Context, in *checkIn) (any, error) {
				if err := checkUUID("request_id", in.RequestID); err != nil {
					return nil, err
				}
				req, err := pitches.Of(s).PitchApprovalRequest(ctx, strings.ToLower(in.RequestID))
				if err != nil {
					return nil, err
				}
				if err := ready("check_pitch_approval"); err != nil {
					return nil, err
				}
				replies, err := slack.Replies(ctx, req.Channel, req.TS)
				if err != nil {
					return nil, slackErr(err)
				}
				answers := make([]notify.Answer, 0, len(replies))
				for _, r := range replies {
					answers = append(answers, notify.Answer{User: r.User, Text: r.Text, TS: r.TS, At: tsTime(r.TS)})
				}
				if _, err := notify.Of(s).RecordAnswers(audit.WithActor(ctx, repo.SystemActor("check_pitch_approval")), req.ID, answers); err != nil {
					return nil, err
				}
				out := &pitchApprovalCheck{RequestID: req.ID, PitchID: req.PitchID, ContentHash: req.ContentHash, Status: "waiting", Ignored: []ignoredAnswer{}}
				for _, a := range answers {
					verdict := pitches.SlackVerdict(a.Text)
					if verdict == "" {
						continue
					}
					u, _, err := pitches.Of(s).SlackApprover(ctx, a.User)
					if err != nil {
						if repo.ErrorCode(err) != repo.CodePermissionDenied {
							return nil, err
						}
						out.Ignored = append(out.Ignored, ignoredAnswer{User: a.User, Text: a.Text, Reason: repo.AsError(err).Message})
						continue
					}
					out.DecidedBy = &slackDecider{UserID: u.ID, Name: u.Name, SlackUserID: a.User, At: a.At}
					if verdict == "deny" {
						out.Status = "denied"
						break
					}
					p, err := pitches.Of(s).Pitch(ctx, req.PitchID)
					if err != nil {
						return nil, err
					}
					// Read again after the approval was recorded: nothing more.
					if p.Approval == nil || p.Approval.ContentHash != req.ContentHash || p.Approval.By.AgentID != pitches.SlackAgent(a.User) {
						if p, err = pitches.Of(s).ApprovePitchFromSlack(ctx, req, a.User); err != nil {
							return nil, err
						}
					}
					out.Status, out.Pitch = "approved", p
					break
				}
				return out, nil
			}),
	}
}

// pitchApprovalRequest is request_pitch_approval's result.
type pitchApprovalRequest struct {
	RequestID   string `json:"request_id"`
	PitchID     string `json:"pitch_id"`
	ContentHash string `json:"content_hash"`
	Channel     string `json:"channel"`
	TS          string `json:"ts"`
}

// pitchApprovalCheck is check_pitch_approval's result.
type pitchApprovalCheck struct {
	RequestID   string `json:"request_id"`
	PitchID     string `json:"pitch_id"`
	ContentHash string `json:"content_hash"`
	// Status is waiting, approved or denied.
	Status    string          `json:"status"`
	DecidedBy *slackDecider   `json:"decided_by,omitempty"`
	Pitch     *pitches.Pitch  `json:"pitch,omitempty"`
	Ignored   []ignoredAnswer `json:"ignored"`
}

// slackDecider is the team member whose answer decided.
type slackDecider struct {
	UserID      string    `json:"user_id"`
	Name        string    `json:"name"`
	SlackUserID string    `json:"slack_user_id"`
	At          time.Time `json:"at"`
}

// ignoredAnswer is a verdict that did not count, and why.
type ignoredAnswer struct {
	User   string `json:"user"`
	Text   string `json:"text"`
	Reason string `json:"reason"`
}

func pitchStateOf(p *pitches.Pitch) string {
	if p.Archived() {
		return "archived"
	}
	return p.State
}

// approvalText is a pitch as posted for approval: who asks, subject,
// recipients, the body's start, the content hash and how to answer.
func approvalText(p *pitches.Pitch) string {
	var b strings.Builder
	fmt.Fprintf(&b, ":envelope: *Approve this pitch?* %s\n*Subject:* %s\n*To:* ", p.ID, p.Subject)
	for i, r := range p.Recipients {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s <%s>", pitches.RecipientName(r), r.Email)
	}
	fmt.Fprintf(&b, "\n*From:* %s\n>%s", p.From, strings.ReplaceAll(clip(p.Body), "\n", "\n>"))
	fmt.Fprintf(&b, "\n*Content hash:* `%s`", p.ContentHash)
	fmt.Fprintf(&b, "\n_Reply in this thread with *approve* or *deny*. Drafted by agent %s; an edit voids any answer here._", p.DraftedBy.AgentID)
	return b.String()
}
