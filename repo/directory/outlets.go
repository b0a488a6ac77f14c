package directory

import (
	"context"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/textlist"
)

// OutletTypes are the allowed outlet types; the first is the default.
var OutletTypes = []string{"publication", "newspaper", "magazine", "online", "broadcaster", "podcast_network",
	"newsletter", "blog", "wire_service", "conference_organizer", "award_body", "other"}

// Outlet is a media company, publication, podcast network or conference organizer.
type Outlet struct {
	repo.Meta    `bson:",inline"`
	Name         string         `bson:"name" json:"name"`
	Type         string         `bson:"type" json:"type"`
	Tier         *int           `bson:"tier,omitempty" json:"tier,omitempty"`
	Website      string         `bson:"website,omitempty" json:"website,omitempty"`
	Description  string         `bson:"description,omitempty" json:"description,omitempty"`
	Country      string         `bson:"country,omitempty" json:"country,omitempty"`
	Language     string         `bson:"language,omitempty" json:"language,omitempty"`
	Topics       []string       `bson:"topics" json:"topics"`
	AudienceSize *int64         `bson:"audience_size,omitempty" json:"audience_size,omitempty"`
	SocialLinks  map[string]any `bson:"social_links,omitempty" json:"social_links,omitempty"`
}

// OutletFields are the fields a create or an update sets; nil (or a nil
// slice or map) leaves a field as it is.
type OutletFields struct {
	Name, Type                              *string
	Tier                                    *int
	Website, Description, Country, Language *string
	Topics                                  []string
	AudienceSize                            *int64
	SocialLinks                             map[string]any
}

func (f OutletFields) empty() bool {
	return f.Name == nil && f.Type == nil && f.Tier == nil && f.Website == nil && f.Description == nil &&
		f.Country == nil && f.Language == nil && f.Topics == nil && f.AudienceSize == nil && f.SocialLinks == nil
}

// apply validates f and sets it on o. It does no I/O, so it may run inside
// modify's retried callback. On an update a tier of 0 removes the tier.
func (f OutletFields) apply(o *Outlet, creating bool) error {
	if f.Name != nil || creating {
		if f.Name == nil || strings.TrimSpace(*f.Name) == "" {
			return repo.Invalid("name", "must not be empty")
		}
		o.Name = strings.TrimSpace(*f.Name)
	}
	if f.Type != nil {
		if !slices.Contains(OutletTypes, *f.Type) {
			return repo.Invalid("type", "%q is not allowed; use one of: %s", *f.Type, strings.Join(OutletTypes, ", "))
		}
		o.Type = *f.Type
	} else if creating {
		o.Type = OutletTypes[0]
	}
	if f.Tier != nil {
		switch t := *f.Tier; {
		case t == 0 && !creating:
			o.Tier = nil
		case t < 1 || t > 3:
			return repo.Invalid("tier", "%d is out of range; use 1 (top tier), 2 or 3", t)
		default:
			o.Tier = &t
		}
	}
	if f.Website != nil {
		if w := strings.TrimSpace(*f.Website); w != "" {
			if err := checkWebURL("website", w); err != nil {
				return err
			}
		}
	}
	repo.SetText(&o.Website, f.Website)
	repo.SetText(&o.Description, f.Description)
	repo.SetText(&o.Country, f.Country)
	repo.SetText(&o.Language, f.Language)
	if f.Topics != nil {
		topics, err := cleanList("topics", f.Topics)
		if err != nil {
			return err
		}
		o.Topics = topics
	}
	if o.Topics == nil {
		o.Topics = []string{}
	}
	if f.AudienceSize != nil {
		if *f.AudienceSize < 0 {
			return repo.Invalid("audience_size", "%d is negative; give the monthly reach as 0 or more", *f.AudienceSize)
		}
		if *f.AudienceSize > repo.MaxFigure {
			return repo.Invalid("audience_size", "%d is too large; the maximum is %d", *f.AudienceSize, int64(repo.MaxFigure))
		}
		n := *f.AudienceSize
		o.AudienceSize = &n
	}
	if f.SocialLinks != nil {
		links, err := freeForm("social_links", f.SocialLinks)
		if err != nil {
			return err
		}
		o.SocialLinks = links
	}
	return nil
}

// CreateOutlet adds an outlet.
func (s *Store) CreateOutlet(ctx context.Context, f OutletFields) (*Outlet, error) {
	o := &Outlet{}
	if err := f.apply(o, true); err != nil {
		return nil, err
	}
	if err := repo.Insert(ctx, s.Store, repo.CollOutlets, o); err != nil {
		return nil, err
	}
	return o, nil
}

// Outlet returns one outlet, archived or not.
func (s *Store) Outlet(ctx context.Context, id string) (*Outlet, error) {
	return repo.Find[*Outlet](ctx, s.Store, repo.CollOutlets, id)
}

// UpdateOutlet changes the given fields of an active outlet.
func (s *Store) UpdateOutlet(ctx context.Context, id string, f OutletFields) (*Outlet, error) {
	if f.empty() {
		return nil, repo.Errorf(repo.CodeInvalid, "nothing to change: give at least one field besides id")
	}
	return repo.Modify(ctx, s.Store, repo.CollOutlets, id, audit.ActionUpdate, func(o *Outlet) error {
		if err := refuseArchived(repo.CollOutlets, &o.Meta); err != nil {
			return err
		}
		return f.apply(o, false)
	})
}

// ArchiveOutlet archives an outlet. Its channels, affiliated contacts and
// notes are left as they are: they still name it, and show it as archived.
func (s *Store) ArchiveOutlet(ctx context.Context, id string) (*Outlet, error) {
	return repo.Archive[*Outlet](ctx, s.Store, repo.CollOutlets, id, nil)
}

// RestoreOutlet restores an archived outlet.
func (s *Store) RestoreOutlet(ctx context.Context, id string) (*Outlet, error) {
	return repo.Restore[*Outlet](ctx, s.Store, repo.CollOutlets, id)
}

// OutletFilter selects outlets; zero fields do not filter.
type OutletFilter struct {
	Tier            *int
	Type            string
	Topic           string
	Search          string
	IncludeArchived bool
}

// ListOutlets lists outlets, newest first.
func (s *Store) ListOutlets(ctx context.Context, f OutletFilter, limit, offset int) (repo.Page[Outlet], error) {
	filter := bson.M{}
	if f.Tier != nil {
		if *f.Tier < 1 || *f.Tier > 3 {
			return repo.Page[Outlet]{}, repo.Invalid("tier", "%d is out of range; use 1 (top tier), 2 or 3", *f.Tier)
		}
		filter["tier"] = *f.Tier
	}
	if f.Type != "" {
		if !slices.Contains(OutletTypes, f.Type) {
			return repo.Page[Outlet]{}, repo.Invalid("type", "%q is not allowed; use one of: %s", f.Type, strings.Join(OutletTypes, ", "))
		}
		filter["type"] = f.Type
	}
	if t := strings.TrimSpace(f.Topic); t != "" {
		filter["topics"] = repo.Element(t)
	}
	if q := strings.TrimSpace(f.Search); q != "" {
		return textlist.Page[Outlet](ctx, s.Store, textlist.Filter{Coll: repo.CollOutlets, Text: q}, repo.Active(filter, f.IncludeArchived), repo.NewestFirst, limit, offset)
	}
	return repo.ListPage[Outlet](ctx, s.Store, repo.CollOutlets, repo.Active(filter, f.IncludeArchived), repo.NewestFirst, limit, offset)
}

// OutletSummary is an outlet as a related record shows it.
type OutletSummary struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	Tier     *int   `json:"tier,omitempty"`
	Website  string `json:"website,omitempty"`
	Archived bool   `json:"archived"`
}

func summarizeOutlet(o *Outlet) OutletSummary {
	return OutletSummary{ID: o.ID, Name: o.Name, Type: o.Type, Tier: o.Tier, Website: o.Website, Archived: o.Archived()}
}

// ChannelSummary is a channel as its outlet shows it.
type ChannelSummary struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	Type      string `json:"type"`
	URL       string `json:"url,omitempty"`
	Frequency string `json:"frequency,omitempty"`
	Archived  bool   `json:"archived"`
}

// AffiliatedContact is a contact as an outlet shows it, with the role of
// the affiliation that ties them.
type AffiliatedContact struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	Title         string `json:"title,omitempty"`
	Email         string `json:"email,omitempty"`
	Role          string `json:"role,omitempty"`
	IsPrimary     bool   `json:"is_primary"`
	AffiliationID string `json:"affiliation_id"`
	Ended         bool   `json:"ended"`
	Archived      bool   `json:"archived"`
}

// OutletDetail is an outlet with its channels and affiliated contacts,
// archived ones included and marked, active ones first.
type OutletDetail struct {
	*Outlet
	Channels []ChannelSummary    `json:"channels"`
	Contacts []AffiliatedContact `json:"contacts"`
}

// OutletDetail returns an outlet with its channels and affiliated contacts.
func (s *Store) OutletDetail(ctx context.Context, id string) (*OutletDetail, error) {
	o, err := s.Outlet(ctx, id)
	if err != nil {
		return nil, err
	}
	d := &OutletDetail{Outlet: o, Channels: []ChannelSummary{}, Contacts: []AffiliatedContact{}}
	byName := options.Find().SetSort(bson.D{{Key: "archived_at", Value: 1}, {Key: "name", Value: 1}, {Key: "_id", Value: 1}})
	var channels []Channel
	if err := s.FindAll(ctx, repo.CollChannels, bson.M{"outlet_id": id}, byName, &channels); err != nil {
		return nil, err
	}
	for _, c := range channels {
		d.Channels = append(d.Channels, ChannelSummary{ID: c.ID, Name: c.Name, Type: c.Type, URL: c.URL, Frequency: c.Frequency, Archived: c.Archived()})
	}
	var contacts []Contact
	if err := s.FindAll(ctx, repo.CollContacts, bson.M{"affiliations.outlet_id": id}, byName, &contacts); err != nil {
		return nil, err
	}
	for _, c := range contacts {
		for _, a := range c.Affiliations {
			if a.OutletID != id {
				continue
			}
			d.Contacts = append(d.Contacts, AffiliatedContact{ID: c.ID, Name: c.Name, Title: c.Title, Email: c.Email,
				Role: a.Role, IsPrimary: a.IsPrimary, AffiliationID: a.ID, Ended: a.EndedOn != nil, Archived: c.Archived()})
		}
	}
	return d, nil
}

// refuseArchived stops a change to an archived record: archived is the soft
// form of deleted, and a change nobody sees in the lists is a surprise.
func refuseArchived(coll string, m *repo.Meta) error {
	if m.ArchivedAt != nil {
		return repo.Errorf(repo.CodeFailedPrecondition, "%s %s is archived; restore it before changing it", repo.KindOf(coll), m.ID)
	}
	return nil
}

func outletRule(ctx context.Context, v *repo.RuleView, id string, state bson.M) error {
	o, err := repo.DecodeState[Outlet](id, state)
	if err != nil {
		return err
	}
	if strings.TrimSpace(o.Name) == "" {
		return repo.Violated("outlet_fields", "outlet %s would have no name; give it one with update_outlet first", id)
	}
	if !slices.Contains(OutletTypes, o.Type) {
		return repo.Violated("outlet_fields", "outlet %s would have type %q, which is not one of %s; set it with update_outlet first", id, o.Type, strings.Join(OutletTypes, ", "))
	}
	return nil
}

func init() { repo.RegisterRule(repo.CollOutlets, outletRule) }
