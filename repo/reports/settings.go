package reports

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"outreach/audit"
	"outreach/ledger"
	"outreach/repo"
)

// Organisation settings: one record in settings, written through the write
// path like any other (update_settings), so its history is in the change
// log and a rollback restores it.

// OrgSettings are the organisation-level settings of the coverage report.
type OrgSettings struct {
	repo.Meta `bson:",inline"`
	Name      string `bson:"name" json:"-"`
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

// The organisation settings are a singleton (repo.RegisterSingleton): they
// exist, holding their defaults, before anyone sets them (get_settings
// answers the defaults), and they are never archived.
func init() {
	repo.RegisterSingleton("organisation", func(id string, _ bson.M) any {
		if id != orgSettingsID {
			return nil
		}
		return &OrgSettings{Name: "organisation", Competitors: []string{}}
	})
}

// MaxCompetitors bounds the competitor list.
const MaxCompetitors = 50

// Settings returns the organisation settings (empty when never set).
func (s *Store) Settings(ctx context.Context) (*OrgSettings, error) {
	st := &OrgSettings{}
	err := s.Collection(repo.CollSettings).FindOne(ctx, bson.M{"_id": orgSettingsID}).Decode(st)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return &OrgSettings{Meta: repo.Meta{ID: orgSettingsID}, Name: "organisation", Competitors: []string{}}, nil
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
			return nil, repo.Invalid("competitors", "has %d names; the most is %d", len(*p.Competitors), MaxCompetitors)
		}
		names = []string{}
		for i, n := range *p.Competitors {
			n = strings.TrimSpace(n)
			if n == "" || len(n) > 200 {
				return nil, repo.Invalid("competitors", "name %d is empty or longer than 200 characters", i)
			}
			if !slices.ContainsFunc(names, func(x string) bool { return strings.EqualFold(x, n) }) {
				names = append(names, n)
			}
		}
	}
	if p.AVERate != nil && *p.AVERate != nil {
		r := **p.AVERate
		if math.IsNaN(r) || math.IsInf(r, 0) || r < 0 || r > 1e9 {
			return nil, repo.Invalid("ave_rate_per_thousand", "must be 0 to 1e9 (currency per thousand impressions), or null to turn AVE off")
		}
	}
	if p.AVECurrency != nil && len(strings.TrimSpace(*p.AVECurrency)) > 10 {
		return nil, repo.Invalid("ave_currency", "must be a short currency code such as EUR or USD")
	}
	if p.TeamName != nil && (utf8.RuneCountInString(strings.TrimSpace(*p.TeamName)) > MaxTeamName || strings.ContainsAny(*p.TeamName, "\r\n")) {
		return nil, repo.Invalid("team_name", "must be one line of at most %d characters (\"\" clears it)", MaxTeamName)
	}
	apply := func(st *OrgSettings) error {
		if names != nil {
			st.Competitors = names
		}
		if p.AVERate != nil {
			st.AVERatePerThousand = *p.AVERate
		}
		repo.SetText(&st.AVECurrency, p.AVECurrency)
		repo.SetText(&st.TeamName, p.TeamName)
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
			cur.Meta = repo.Meta{ID: orgSettingsID}
			err = repo.Insert(ctx, s.Store, repo.CollSettings, cur)
			if ledger.IsConflict(err) {
				continue // created meanwhile
			}
			return cur, err
		}
		return repo.Modify(ctx, s.Store, repo.CollSettings, orgSettingsID, audit.ActionUpdate, apply)
	}
	return nil, repo.Errorf(repo.CodeConflict, "the settings changed while being updated; retry")
}
