package tools

import (
	"context"
	"fmt"
	"strings"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/notify"
	"outreach/repo/outbox"
)

// Notifications is the subscriptions-and-outbox part of the Notifications
// group (keys and users are in keys.go).
func Notifications(s *repo.Store) []Tool {
	events := strings.Join(outbox.Events, ", ")
	type subscribeIn struct {
		OpportunityID string   `json:"opportunity_id" jsonschema:"the opportunity to follow (UUID)"`
		UserID        string   `json:"user_id,omitempty" jsonschema:"the team member who subscribes (UUID); default: the caller's user; another member needs the admin scope"`
		Events        []string `json:"events,omitempty" enum:"stage_changed,coverage_added,note_added,email_received,next_action_due" jsonschema:"event kinds to be notified of; default all"`
	}
	type unsubscribeIn struct {
		OpportunityID string `json:"opportunity_id" jsonschema:"the opportunity to stop following (UUID)"`
		UserID        string `json:"user_id,omitempty" jsonschema:"the team member (UUID); default: the caller's user; another member needs the admin scope"`
	}
	type listSubsIn struct {
		UserID string `json:"user_id,omitempty" jsonschema:"whose subscriptions (UUID); default: the caller's user; another member's need the admin scope"`
		Limit  *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum results; default 50"`
		Offset *int   `json:"offset,omitempty" min:"0" jsonschema:"results to skip; default 0"`
	}
	type listIn struct {
		UserID     string `json:"user_id,omitempty" jsonschema:"whose notifications (UUID); default: the caller's user; another member's need the admin scope"`
		UnreadOnly bool   `json:"unread_only,omitempty" jsonschema:"only notifications not yet marked read; default false"`
		Limit      *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum results; default 50"`
		Offset     *int   `json:"offset,omitempty" min:"0" jsonschema:"results to skip; default 0"`
	}
	type markIn struct {
		IDs []string `json:"ids" jsonschema:"ids of the notifications to mark read (UUIDs), 1 to 200; the caller's own (another member's need the admin scope)"`
	}
	// userOr is whose notifications or subscriptions a call is about: the
	// caller's user, or the member user_id names, which needs the admin
	// scope (repo.ActFor); the change entries of an admin acting for
	// another member name them in on_behalf_of.
	userOr := func(ctx context.Context, id string) (context.Context, string, error) {
		a, _ := audit.ActorFrom(ctx)
		if id == "" || id == a.UserID {
			return ctx, a.UserID, nil
		}
		if err := checkUUID("user_id", id); err != nil {
			return ctx, "", err
		}
		if err := notify.ActFor(ctx, "user_id", id); err != nil {
			return ctx, "", err
		}
		a.OnBehalfOf = id
		return audit.WithActor(ctx, a), id, nil
	}
	return []Tool{
		newTool("subscribe_opportunity", "Subscribe a team member to an opportunity's events ("+events+"). Each event then becomes a notification for them, delivered to the team's Slack channel and the webhook when configured, and listed by list_notifications. Subscribing again replaces the event kinds.", create,
			func(ctx context.Context, in *subscribeIn) (any, error) {
				if err := checkUUID("opportunity_id", in.OpportunityID); err != nil {
					return nil, err
				}
				ctx, uid, err := userOr(ctx, in.UserID)
				if err != nil {
					return nil, err
				}
				for i, e := range in.Events {
					if err := checkEnum(fmt.Sprintf("events[%d]", i), e, outbox.Events); err != nil {
						return nil, err
					}
				}
				return notify.Of(s).Subscribe(ctx, in.OpportunityID, uid, in.Events)
			}),
		newTool("unsubscribe_opportunity", "End a team member's subscription to an opportunity: no more notifications of its events. The subscription is archived, not deleted.", change,
			func(ctx context.Context, in *unsubscribeIn) (any, error) {
				if err := checkUUID("opportunity_id", in.OpportunityID); err != nil {
					return nil, err
				}
				ctx, uid, err := userOr(ctx, in.UserID)
				if err != nil {
					return nil, err
				}
				return notify.Of(s).Unsubscribe(ctx, in.OpportunityID, uid)
			}),
		newTool("list_subscriptions", "List a team member's active subscriptions, each with the opportunity's current title and stage; newest first.", read,
			func(ctx context.Context, in *listSubsIn) (any, error) {
				ctx, uid, err := userOr(ctx, in.UserID)
				if err != nil {
					return nil, err
				}
				limit, offset, err := page(in.Limit, in.Offset, defaultLimit)
				if err != nil {
					return nil, err
				}
				p, err := notify.Of(s).Subscriptions(ctx, uid, limit, offset)
				if err != nil {
					return nil, err
				}
				return envelope("subscriptions", p, limit, offset), nil
			}),
		newTool("list_notifications", "List a team member's notifications, newest first: event, opportunity, text, when, whether read, and the delivery state per target (slack, webhook). Poll it with unread_only and mark what was handled with mark_notifications_read.", read,
			func(ctx context.Context, in *listIn) (any, error) {
				ctx, uid, err := userOr(ctx, in.UserID)
				if err != nil {
					return nil, err
				}
				limit, offset, err := page(in.Limit, in.Offset, defaultLimit)
				if err != nil {
					return nil, err
				}
				p, err := notify.Of(s).Notifications(ctx, uid, in.UnreadOnly, limit, offset)
				if err != nil {
					return nil, err
				}
				return envelope("notifications", p, limit, offset), nil
			}),
		newTool("mark_notifications_read", "Mark notifications read (all given ids as one unit; one already read stays as it is). Returns the ids it marked.", change,
			func(ctx context.Context, in *markIn) (any, error) {
				if len(in.IDs) == 0 || len(in.IDs) > maxLimit {
					return nil, repo.Invalid("ids", "give 1 to %d notification ids (got %d)", maxLimit, len(in.IDs))
				}
				if err := checkUUIDs("ids", in.IDs); err != nil {
					return nil, err
				}
				marked, err := notify.Of(s).MarkRead(ctx, in.IDs)
				if err != nil {
					return nil, err
				}
				return map[string]any{"marked": marked, "count": len(marked)}, nil
			}),
	}
}
