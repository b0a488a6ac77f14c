package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/notify"
	"outreach/slackmsg"
)

// Messaging is the team-messaging group: Slack through its Web API (a bot
// token), or an incoming webhook for sends only. slack is nil when neither
// is configured; the tools then say how to configure it.
func Messaging(s *repo.Store, slack *slackmsg.Client) []Tool {
	type sendIn struct {
		Text    string `json:"text" max:"slack_text" jsonschema:"the message, in Slack mrkdwn; 1 to 4000 characters"`
		Channel string `json:"channel,omitempty" jsonschema:"channel id or name; default: the configured channel (a webhook posts to its own channel)"`
		Confirm bool   `json:"confirm,omitempty" jsonschema:"true when the user already agreed to this step: no confirmation is asked"`
	}
	type askIn struct {
		Question string   `json:"question" jsonschema:"the question for the team; 1 to 1000 characters"`
		Context  string   `json:"context,omitempty" jsonschema:"background the team needs to answer (mrkdwn)"`
		Options  []string `json:"options,omitempty" max:"slack_options" jsonschema:"suggested answers, listed under the question (at most 10)"`
		Channel  string   `json:"channel,omitempty" jsonschema:"channel id or name; default: the configured channel"`
		Confirm  bool     `json:"confirm,omitempty" jsonschema:"true when the user already agreed to this step: no confirmation is asked"`
	}
	type answerIn struct {
		QuestionID string `json:"question_id" jsonschema:"the question's id (UUID), as ask_slack returned it"`
	}
	type listIn struct {
		Status string `json:"status,omitempty" enum:"open,answered" jsonschema:"only questions with this status"`
		Limit  *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum results; default 50"`
		Offset *int   `json:"offset,omitempty" min:"0" jsonschema:"results to skip; default 0"`
	}
	notConfigured := func() error {
		return &repo.Error{Code: repo.CodeFailedPrecondition, Message: slackmsg.ErrNotConfigured.Error()}
	}
	// sent records a message that left, as a send change. The message is
	// out whatever the store does next, so a failed record is logged with
	// the Slack ts, and the caller told not to send again.
	sent := func(ctx context.Context, m *notify.Message) (any, error) {
		if err := notify.Of(s).RecordSend(ctx, m); err != nil {
			return nil, &repo.Error{Code: repo.CodeUnavailable, Message: fmt.Sprintf("the message was sent to Slack (ts %s) but could not be recorded; do not send it again", m.TS)}
		}
		return m, nil
	}
	return []Tool{
		newTool("send_slack_message", "Post a message to the team's Slack channel (or another channel). Recorded in the change log as a send, attributed to you; it cannot be rolled back (a rollback lists it as not reversible).", send,
			func(ctx context.Context, in *sendIn) (any, error) {
				if strings.TrimSpace(in.Text) == "" {
					return nil, repo.Invalid("text", "is empty; send 1 to %d characters", maxSlackText)
				}
				if slack == nil {
					return nil, notConfigured()
				}
				out, err := slack.Post(ctx, in.Channel, in.Text, "")
				if err != nil {
					return nil, slackErr(err)
				}
				return sent(ctx, &notify.Message{Kind: notify.MessageKindMessage, Channel: out.Channel, Text: in.Text, TS: out.TS, Via: out.Via})
			}),
		newTool("ask_slack", "Ask the team a question in Slack, with its context and suggested options; people answer in the message's thread. Returns question_id for get_slack_answer. Needs the Web API (a bot token) to read answers. Recorded as a send; not reversible.", send,
			func(ctx context.Context, in *askIn) (any, error) {
				if strings.TrimSpace(in.Question) == "" {
					return nil, repo.Invalid("question", "is empty; ask in 1 to %d characters", MaxText)
				}
				for i, o := range in.Options {
					if strings.TrimSpace(o) == "" {
						return nil, repo.Invalid(fmt.Sprintf("options[%d]", i), "an option may not be empty")
					}
				}
				if slack == nil {
					return nil, notConfigured()
				}
				if !slack.CanRead() {
					return nil, &repo.Error{Code: repo.CodeFailedPrecondition, Message: "ask_slack " + slackmsg.ErrNeedsBotToken.Error()}
				}
				text := questionText(ctx, in.Question, in.Context, in.Options)
				out, err := slack.Post(ctx, in.Channel, text, "")
				if err != nil {
					return nil, slackErr(err)
				}
				m := &notify.Message{Kind: notify.MessageKindQuestion, Channel: out.Channel, Text: text, TS: out.TS, Via: out.Via,
					Question: in.Question, Context: in.Context, Options: in.Options}
				if _, err := sent(ctx, m); err != nil {
					return nil, err
				}
				return map[string]any{"question_id": m.ID, "question": m}, nil
			}),
		newTool("get_slack_answer", "Read the replies in a question's Slack thread so far, and whether it is answered (at least one reply). Needs the Web API (a bot token); with only an incoming webhook it fails with failed_precondition.", readOut,
			func(ctx context.Context, in *answerIn) (any, error) {
				if err := checkUUID("question_id", in.QuestionID); err != nil {
					return nil, err
				}
				if slack == nil {
					return nil, notConfigured()
				}
				if !slack.CanRead() {
					return nil, &repo.Error{Code: repo.CodeFailedPrecondition, Message: "get_slack_answer: " + slackmsg.ErrNeedsBotToken.Error()}
				}
				q, err := notify.Of(s).Question(ctx, in.QuestionID)
				if err != nil {
					return nil, err
				}
				replies, err := slack.Replies(ctx, q.Channel, q.TS)
				if err != nil {
					return nil, slackErr(err)
				}
				answers := make([]notify.Answer, 0, len(replies))
				for _, r := range replies {
					answers = append(answers, notify.Answer{User: r.User, Text: r.Text, TS: r.TS, At: tsTime(r.TS)})
				}
				// What was read is stored as the service's observation, not
				// as the caller's change (this tool only reads).
				q, err = notify.Of(s).RecordAnswers(audit.WithActor(ctx, repo.SystemActor("get_slack_answer")), q.ID, answers)
				if err != nil {
					return nil, err
				}
				return map[string]any{"question_id": q.ID, "question": q.Question, "answered": len(answers) > 0, "status": q.Status, "answers": answers}, nil
			}),
		newTool("list_questions", "List questions asked with ask_slack, newest first, with their status (open, answered, as last read by get_slack_answer) and the answers read so far.", readOut,
			func(ctx context.Context, in *listIn) (any, error) {
				if in.Status != "" {
					if err := checkEnum("status", in.Status, []string{notify.QuestionOpen, notify.QuestionAnswered}); err != nil {
						return nil, err
					}
				}
				limit, offset, err := page(in.Limit, in.Offset, defaultLimit)
				if err != nil {
					return nil, err
				}
				p, err := notify.Of(s).Questions(ctx, in.Status, limit, offset)
				if err != nil {
					return nil, err
				}
				return envelope("questions", p, limit, offset), nil
			}),
	}
}

// questionText is the question as posted: who asks, the question, its
// context and options, and how to answer.
func questionText(ctx context.Context, question, context string, options []string) string {
	a, _ := audit.ActorFrom(ctx)
	var b strings.Builder
	fmt.Fprintf(&b, ":question: *%s*", question)
	if context != "" {
		fmt.Fprintf(&b, "\n>%s", strings.ReplaceAll(context, "\n", "\n>"))
	}
	for i, o := range options {
		fmt.Fprintf(&b, "\n%d. %s", i+1, o)
	}
	fmt.Fprintf(&b, "\n_Reply in this thread. Asked by agent %s._", a.AgentID)
	return b.String()
}

// tsTime reads a Slack ts ("1700000000.000100") as a time.
func tsTime(ts string) time.Time {
	sec, frac, _ := strings.Cut(ts, ".")
	var s, us int64
	fmt.Sscan(sec, &s)
	if frac != "" {
		fmt.Sscan((frac + "000000")[:6], &us)
	}
	return time.Unix(s, us*1000).UTC().Truncate(time.Millisecond)
}

// slackErr maps the Slack client's errors to the catalogue's codes.
func slackErr(err error) error {
	var rl *slackmsg.RateLimitedError
	switch {
	case errors.As(err, &rl):
		return &repo.Error{Code: repo.CodeRateLimited, Retryable: true, Message: fmt.Sprintf("Slack is rate limiting: retry after %s", rl.RetryAfter)}
	case errors.Is(err, slackmsg.ErrNeedsBotToken), errors.Is(err, slackmsg.ErrNotConfigured):
		return &repo.Error{Code: repo.CodeFailedPrecondition, Message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &repo.Error{Code: repo.CodeUnavailable, Retryable: true, Message: "Slack did not answer in time; nothing was recorded: check the channel before retrying"}
	}
	msg := err.Error()
	if strings.Contains(msg, "http") { // never show a URL: a webhook URL is a secret
		msg = "a network error"
	}
	return &repo.Error{Code: repo.CodeUnavailable, Retryable: true, Message: "Slack refused or failed the call (" + msg + "); nothing was recorded"}
}
