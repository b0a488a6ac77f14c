package pitches

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/ledger"
	"outreach/repo"
	"outreach/repo/access"
	"outreach/repo/notify"
)

// Approval of a pitch from Slack: the pitch is posted to the team's channel
// (request_pitch_approval) and a team member answers "approve" or "deny" in
// the message's thread. The Slack user who answered is the team member
// whose slack_user_id it is (create_user); that member must hold a live
// agent key with the approver scope of the operator's policy, the same test
// approve_pitch applies to a key. The approval is recorded as approve_pitch
// records it, attributed to that member (agent "slack:<Slack user id>").

// PitchApprovalRequest returns a pitch's approval request posted to Slack.
func (s *Store) PitchApprovalRequest(ctx context.Context, id string) (*notify.Message, error) {
	m, err := repo.Find[*notify.Message](ctx, s.Store, repo.CollMessages, id)
	if err != nil {
		return nil, err
	}
	if m.Kind != notify.MessageKindPitchApproval {
		return nil, repo.NotFound("pitch approval request", id)
	}
	return m, nil
}

// UserBySlackID finds the team member with this Slack user id.
func (s *Store) UserBySlackID(ctx context.Context, slackUserID string) (*repo.User, error) {
	var u repo.User
	err := s.Collection(repo.CollUsers).FindOne(ctx, bson.M{"slack_user_id": slackUserID, "archived_at": nil}).Decode(&u)
	if err != nil {
		return nil, ledger.DriverErr(err, "user", slackUserID)
	}
	return &u, nil
}

// SlackApprover is the team member a Slack user is, with the scopes of
// their live keys, or why they may not approve a pitch.
func (s *Store) SlackApprover(ctx context.Context, slackUserID string) (*repo.User, []string, error) {
	u, err := s.UserBySlackID(ctx, slackUserID)
	if err != nil {
		if repo.ErrorCode(err) == repo.CodeNotFound {
			return nil, nil, repo.Errorf(repo.CodePermissionDenied, "Slack user %s is no team member (create_user with slack_user_id maps them)", slackUserID)
		}
		return nil, nil, err
	}
	keys, err := access.Of(s.Store).ListKeys(ctx, u.ID)
	if err != nil {
		return nil, nil, err
	}
	pol := s.PitchPolicy()
	t := time.Now()
	for _, k := range keys {
		if k.Unusable(t) != nil {
			continue
		}
		if slices.Contains(k.Scopes, pol.ApproverScope) || slices.Contains(k.Scopes, repo.ScopeAdmin) {
			return u, k.Scopes, nil
		}
	}
	return nil, nil, repo.Errorf(repo.CodePermissionDenied, "team member %s (Slack user %s) holds no live key with the %s scope (the operator's pitch approver policy)", u.Name, slackUserID, pol.ApproverScope)
}

// ApprovePitchFromSlack records the approval a Slack user gave in the
// thread of request req: the Slack user must be an approver
// (SlackApprover), and the pitch must still hold the content posted.
func (s *Store) ApprovePitchFromSlack(ctx context.Context, req *notify.Message, slackUserID string) (*Pitch, error) {
	u, scopes, err := s.SlackApprover(ctx, slackUserID)
	if err != nil {
		return nil, err
	}
	p, err := s.Pitch(ctx, req.PitchID)
	if err != nil {
		return nil, err
	}
	if p.ContentHash != req.ContentHash {
		return nil, &repo.Error{Code: repo.CodeConflict, Field: "request_id", Message: fmt.Sprintf("request_id: pitch %s changed since it was posted to Slack (posted %s, now %s); its answers there are void: request_pitch_approval again", p.ID, short(req.ContentHash), short(p.ContentHash))}
	}
	caller, _ := audit.ActorFrom(ctx)
	// The approval is the member's own change, in a session of its own (a
	// session belongs to the agent that first wrote in it).
	a := audit.Actor{UserID: u.ID, AgentID: SlackAgent(slackUserID), SessionID: "slack-approval-" + req.ID, KeyName: "slack", Scopes: scopes, Tool: caller.Tool}
	return s.ApprovePitch(audit.WithActor(ctx, a), p.ID, req.ContentHash, "")
}

// SlackAgent is the agent id of an approval given in Slack.
func SlackAgent(slackUserID string) string { return "slack:" + slackUserID }

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// SlackVerdict reads a reply in an approval thread: "approve" or "deny"
// (its first word, in either form), or "" for anything else.
func SlackVerdict(text string) string {
	f := strings.Fields(strings.ToLower(text))
	if len(f) == 0 {
		return ""
	}
	switch strings.Trim(f[0], ".!:,*_") {
	case "approve", "approved":
		return "approve"
	case "deny", "denied":
		return "deny"
	}
	return ""
}
