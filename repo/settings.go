package repo

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"outreach/audit"
	"outreach/ledger"
)

// Organisation settings: one record in settings, written through the write
// path like any other (update_settings), so its history is in the change
// log and a rollback restores it.

// OrgSettings are the organisation-level settings of the coverage report.
type OrgSettings struct {
	Meta `bson:",inline"`
	Name string `bson:"name" json:"-"`
	// Competitors are the names share of voice looks for in coverage
	// titles and summaries.
	Competitors []string `bson:"competitors" json:"competitors"`
	// AVERatePerThousand is the advertising-value rate per thousand
	// impressions; nil: no AVE in reports.
	AVERatePerThousand *float64 `bson:"ave_rate_per_thousand,omitempty" json:"ave_rate_per_thousand"`
	AVECurrency        string   `bson:"ave_currency,omitempty" json:"ave_currency,omitempty"`
	// TeamName is the team's name as rendered reports print it.
	TeamName string `bson:"team_name,omitempty" json:"team_name,omitempty"`
}

var orgSettingsID = uuid.NewSHA1(uuid.MustParse("8d3c1f4e-2b6a-4e7d-9c5b-1a2f3e4d5c6b"), []byte("organisation")).String()

// The organisation settings are a singleton: they exist, holding their
// defaults, before anyone sets them (get_settings answers the defaults), and
// they are never archived. So the change that first stored them is, to a
// rollback, an update from the defaults: rolling it back sets the fields it
// wrote back to their defaults (a conflict where one changed since), and the
// record stays active, as a rollback of any later update leaves it. A
// mailbox's sync state is a singleton of the same kind (EmailSyncState reads
// it whatever its state), with the zero mark as its default.

// singletonBefore returns the state a rollback treats as the before of c
// when c is the create of a singleton record (its defaults, with the
// record's own id and dates), or nil.
func singletonBefore(c audit.Entry) bson.M {
	if c.Collection != CollSettings || c.Before != nil || c.Action != audit.ActionCreate {
		return nil
	}
	var zero any
	switch name, _ := c.After["name"].(string); {
	case c.RecordID == orgSettingsID:
		zero = &OrgSettings{Name: "organisation", Competitors: []string{}}
	case name == "email_sync":
		// A mailbox's sync state: never synced is its zero mark, so the
		// rollback of its first sync moves the mark back to the start and
		// the next sync reads the mailbox again, as after the rollback of
		// any later sync.
		account, _ := c.After["account"].(string)
		mailbox, _ := c.After["mailbox"].(string)
		zero = &EmailSyncState{Name: name, Account: account, Mailbox: mailbox}
	default:
		return nil
	}
	def, err := ledger.ToM(zero)
	if err != nil {
		return nil
	}
	for _, k := range []string{"_id", "created_at", "updated_at", "archived_at"} {
		if v, ok := c.After[k]; ok {
			def[k] = v
		} else {
			delete(def, k)
		}
	}
	return def
}

// EmailSyncState is where the sync of one mailbox of one account stands:
// the mailbox's UIDVALIDITY and the highest UID handled under it. It is a
// settings record, written through the write path like any other; package
// repo/inbox reads and moves it, the core knows its default (singletonBefore).
type EmailSyncState struct {
	Meta        `bson:",inline"`
	Name        string    `bson:"name" json:"name"`
	Account     string    `bson:"account" json:"account"`
	Mailbox     string    `bson:"mailbox" json:"mailbox"`
	UIDValidity int64     `bson:"uid_validity" json:"uid_validity"`
	LastUID     int64     `bson:"last_uid" json:"last_uid"`
	SyncedAt    time.Time `bson:"synced_at" json:"synced_at"`
}

// MaxCompetitors bounds the competitor list.
const MaxCompetitors = 50

// Settings returns the organisation settings (empty when never set).
func (s *Store) Settings(ctx context.Context) (*OrgSettings, error) {
	st := &OrgSettings{}
	err := s.coll(CollSettings).FindOne(ctx, bson.M{"_id": orgSettingsID}).Decode(st)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return &OrgSettings{Meta: Meta{ID: orgSettingsID}, Name: "organisation", Competitors: []string{}}, nil
	}
	if err != nil {
		return nil, ledger.DriverErr(err, "setting", "organisation")
	}
	if st.Competitors == nil {
		st.Competitors = []string{}
	}
	return st, nil
}

// MaxTeamName is the longest team name, in characters.
const MaxTeamName = 200

// SettingsPatch changes the organisation settings: nil leaves a field.
type SettingsPatch struct {
	Competitors *[]string
	// AVERate: a pointer to nil clears the rate.
	AVERate     **float64
	AVECurrency *string
	TeamName    *string
}

// UpdateSettings applies p to the organisation settings.
func (s *Store) UpdateSettings(ctx context.Context, p SettingsPatch) (*OrgSettings, error) {
	var names []string
	if p.Competitors != nil {
		if len(*p.Competitors) > MaxCompetitors {
			return nil, Invalid("competitors", "has %d names; the most is %d", len(*p.Competitors), MaxCompetitors)
		}
		names = []string{}
		for i, n := range *p.Competitors {
			n = strings.TrimSpace(n)
			if n == "" || len(n) > 200 {
				return nil, Invalid("competitors", "name %d is empty or longer than 200 characters", i)
			}
			if !slices.ContainsFunc(names, func(x string) bool { return strings.EqualFold(x, n) }) {
				names = append(names, n)
			}
		}
	}
	if p.AVERate != nil && *p.AVERate != nil {
		r := **p.AVERate
		if math.IsNaN(r) || math.IsInf(r, 0) || r < 0 || r > 1e9 {
			return nil, Invalid("ave_rate_per_thousand", "must be 0 to 1e9 (currency per thousand impressions), or null to turn AVE off")
		}
	}
	if p.AVECurrency != nil && len(strings.TrimSpace(*p.AVECurrency)) > 10 {
		return nil, Invalid("ave_currency", "must be a short currency code such as EUR or USD")
	}
	if p.TeamName != nil && (utf8.RuneCountInString(strings.TrimSpace(*p.TeamName)) > MaxTeamName || strings.ContainsAny(*p.TeamName, "\r\n")) {
		return nil, Invalid("team_name", "must be one line of at most %d characters (\"\" clears it)", MaxTeamName)
	}
	apply := func(st *OrgSettings) error {
		if names != nil {
			st.Competitors = names
		}
		if p.AVERate != nil {
			st.AVERatePerThousand = *p.AVERate
		}
		SetText(&st.AVECurrency, p.AVECurrency)
		SetText(&st.TeamName, p.TeamName)
		if st.Competitors == nil {
			st.Competitors = []string{}
		}
		return nil
	}
	for attempt := 0; attempt < 5; attempt++ {
		cur, err := s.Settings(ctx)
		if err != nil {
			return nil, err
		}
		if cur.CreatedAt.IsZero() {
			_ = apply(cur)
			cur.Meta = Meta{ID: orgSettingsID}
			err = Insert(ctx, s, CollSettings, cur)
			if isConflict(err) {
				continue // created meanwhile
			}
			return cur, err
		}
		return Modify(ctx, s, CollSettings, orgSettingsID, audit.ActionUpdate, apply)
	}
	return nil, Errorf(CodeConflict, "the settings changed while being updated; retry")
}
