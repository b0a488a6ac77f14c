package tools

import (
	"context"
	"strings"
	"time"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/dossiers"
	"outreach/repo/search"
)

// Search is the Search group: one query across every kind of record, the
// dossiers of a contact and an outlet, where an opportunity stands, and the
// team's agenda. Every figure is computed at the call from the stored records.
func Search(s *repo.Store) []Tool {
	type searchIn struct {
		Query           string   `json:"query" max:"search_query" jsonschema:"text to find, matched literally (never as a pattern), ignoring case and accents"`
		Types           []string `json:"types,omitempty" enum:"outlet,contact,opportunity,coverage,note,email" jsonschema:"only these kinds of record; default all"`
		IncludeArchived bool     `json:"include_archived,omitempty" jsonschema:"include archived records; default false"`
		Limit           *int     `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum hits; default 20"`
		Offset          *int     `json:"offset,omitempty" min:"0" jsonschema:"hits to skip; default 0"`
	}
	type contactIn struct {
		ContactID    string `json:"contact_id" jsonschema:"the contact's id (UUID)"`
		Interactions *int   `json:"interactions,omitempty" min:"1" max:"interactions" jsonschema:"how many of the latest interactions to show; default 10"`
	}
	type outletIn struct {
		OutletID     string `json:"outlet_id" jsonschema:"the outlet's id (UUID)"`
		Interactions *int   `json:"interactions,omitempty" min:"1" max:"interactions" jsonschema:"how many of the latest interactions to show; default 10"`
	}
	type statusIn struct {
		OpportunityID string `json:"opportunity_id" jsonschema:"the opportunity's id (UUID)"`
		AsOf          string `json:"as_of,omitempty" jsonschema:"compute ages and due dates as of this time (YYYY-MM-DD or ISO datetime); default now"`
		Interactions  *int   `json:"interactions,omitempty" min:"1" max:"interactions" jsonschema:"how many of the latest interactions to show; default 10"`
	}
	type agendaIn struct {
		Mine          bool   `json:"mine,omitempty" jsonschema:"only the items of the caller's own user; default false (the whole team)"`
		UserID        string `json:"user_id,omitempty" jsonschema:"only the items of this team member (UUID); default the whole team"`
		DueDays       *int   `json:"due_days,omitempty" min:"0" max:"agenda_days" jsonschema:"list next actions due within this many days; default 7"`
		NoReplyDays   *int   `json:"no_reply_days,omitempty" min:"0" max:"agenda_days" jsonschema:"list pitches with no reply after this many days; default 5"`
		UntouchedDays *int   `json:"untouched_days,omitempty" min:"1" max:"agenda_days" jsonschema:"list open opportunities with nothing new for this many days; default 14"`
		ReplyDays     *int   `json:"reply_days,omitempty" min:"1" max:"agenda_days" jsonschema:"list replies not linked to an opportunity from the last this many days; default 14"`
		EmbargoDays   *int   `json:"embargo_days,omitempty" min:"0" max:"agenda_days" jsonschema:"list embargoes (of open opportunities, and of campaigns for the team) lifting within this many days; default 7"`
		AsOf          string `json:"as_of,omitempty" jsonschema:"compute the agenda as of this time (YYYY-MM-DD or ISO datetime); default now"`
		Limit         *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum items; default 50"`
		Offset        *int   `json:"offset,omitempty" min:"0" jsonschema:"items to skip; default 0"`
	}
	return []Tool{
		newTool("search", "Search outlets, contacts, opportunities, coverage, notes and emails at once. The query is matched literally (a '.' or '*' is just that character), ignoring case and accents. Hits are ranked: a match in the name or title first, then a match of whole words, then the most recent; each has its type, id, title, a snippet around the match and its score. Archived records are left out unless include_archived is true.", read,
			func(ctx context.Context, in *searchIn) (any, error) {
				limit, offset, err := page(in.Limit, in.Offset, 20)
				if err != nil {
					return nil, err
				}
				q := strings.TrimSpace(in.Query)
				if q == "" {
					return nil, repo.Invalid("query", "must not be empty")
				}
				for _, t := range in.Types {
					if err := checkEnum("types", t, search.SearchTypes); err != nil {
						return nil, err
					}
				}
				r, err := search.Of(s).Search(ctx, search.SearchQuery{Query: q, Types: in.Types, IncludeArchived: in.IncludeArchived, Limit: limit, Offset: offset})
				if err != nil {
					return nil, err
				}
				return map[string]any{"total": r.Total, "showing": len(r.Hits), "limit": limit, "offset": offset, "search_path": r.Path, "hits": r.Hits}, nil
			}),
		newTool("get_contact_dossier", "Everything known about a contact: the record, affiliations, do-not-contact status and reason, open and closed opportunities, coverage they wrote, when they were last contacted (latest note, email sent to them or stage move of their opportunity) and last heard from (latest email from them), pitch and response counts with the response rate, and the latest interactions.", read,
			func(ctx context.Context, in *contactIn) (any, error) {
				if err := checkUUID("contact_id", in.ContactID); err != nil {
					return nil, err
				}
				n, err := interactions(in.Interactions)
				if err != nil {
					return nil, err
				}
				return dossiers.Of(s).ContactDossier(ctx, in.ContactID, n)
			}),
		newTool("get_outlet_dossier", "Everything known about an outlet: the record, its channels, contacts (current and past), opportunities by stage, coverage counts by sentiment and by type with total reach, and the latest interactions.", read,
			func(ctx context.Context, in *outletIn) (any, error) {
				if err := checkUUID("outlet_id", in.OutletID); err != nil {
					return nil, err
				}
				n, err := interactions(in.Interactions)
				if err != nil {
					return nil, err
				}
				return dossiers.Of(s).OutletDossier(ctx, in.OutletID, n)
			}),
		newTool("get_opportunity_status", "Where an opportunity stands: its stage and days in it, the stage history with how long each stage lasted, the next action and whether it is overdue, its contacts and coverage, whether a contact replied by email since the latest pitch, and the latest interactions.", read,
			func(ctx context.Context, in *statusIn) (any, error) {
				if err := checkUUID("opportunity_id", in.OpportunityID); err != nil {
					return nil, err
				}
				n, err := interactions(in.Interactions)
				if err != nil {
					return nil, err
				}
				asOf, err := optAsOf(in.AsOf)
				if err != nil {
					return nil, err
				}
				return dossiers.Of(s).OpportunityStatus(ctx, in.OpportunityID, asOf, n)
			}),
		newTool("get_agenda", "What needs doing, for the whole team or one member, most urgent first: next actions overdue, pitches with no reply after no_reply_days, replies in email threads not linked to any opportunity (team only), next actions due within due_days, embargoes lifting within embargo_days (opportunities; campaigns for the team), and open opportunities untouched for untouched_days. Each item gives its reason, a message, and the record's type and id.", read,
			func(ctx context.Context, in *agendaIn) (any, error) {
				limit, offset, err := page(in.Limit, in.Offset, defaultLimit)
				if err != nil {
					return nil, err
				}
				q := dossiers.AgendaQuery{UserID: in.UserID, Limit: limit, Offset: offset}
				for _, p := range []struct {
					v    *int
					def  int
					into *int
				}{
					{in.DueDays, 7, &q.DueDays}, {in.NoReplyDays, 5, &q.NoReplyDays},
					{in.UntouchedDays, 14, &q.UntouchedDays}, {in.ReplyDays, 14, &q.ReplyDays},
					{in.EmbargoDays, 7, &q.EmbargoDays},
				} {
					*p.into = p.def
					if p.v != nil {
						*p.into = *p.v
					}
				}
				if in.UserID != "" {
					if err := checkUUID("user_id", in.UserID); err != nil {
						return nil, err
					}
				}
				if in.Mine {
					a, _ := audit.ActorFrom(ctx)
					if in.UserID != "" && in.UserID != a.UserID {
						return nil, repo.Invalid("mine", "asks for the caller's items, but user_id names another member; give one of them")
					}
					q.UserID = a.UserID
				}
				if q.AsOf, err = optAsOf(in.AsOf); err != nil {
					return nil, err
				}
				return dossiers.Of(s).Agenda(ctx, q)
			}),
	}
}

// interactions is how many interactions a dossier shows (the range is the
// field's tags, checked on decoding).
func interactions(n *int) (int, error) {
	if n == nil {
		return dossiers.DefaultInteractions, nil
	}
	return *n, nil
}

// optAsOf reads an optional as_of time.
func optAsOf(s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := parseTime("as_of", s, false)
	if err != nil {
		return nil, err
	}
	return &t, nil
}
