package pipeline

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger"
	"outreach/repo"
	"outreach/repo/directory"
	"outreach/repo/outbox"
	"outreach/repo/textlist"
)

// Coverage is a published result: an article, interview, award, segment.
// Its stored shape is fixed here so the interaction log reads it from the
// first day; the coverage tools extend this file.
type Coverage struct {
	repo.Meta          `bson:",inline"`
	Title              string    `bson:"title" json:"title"`
	URL                string    `bson:"url,omitempty" json:"url,omitempty"`
	PublishedAt        time.Time `bson:"published_at" json:"published_at"`
	OutletID           string    `bson:"outlet_id,omitempty" json:"outlet_id,omitempty"`
	ChannelID          string    `bson:"channel_id,omitempty" json:"channel_id,omitempty"`
	OpportunityID      string    `bson:"opportunity_id,omitempty" json:"opportunity_id,omitempty"`
	CampaignID         string    `bson:"campaign_id,omitempty" json:"campaign_id,omitempty"`
	ContactIDs         []string  `bson:"contact_ids" json:"contact_ids"`
	Type               string    `bson:"type" json:"type"`
	Sentiment          string    `bson:"sentiment,omitempty" json:"sentiment,omitempty"`
	Depth              string    `bson:"depth,omitempty" json:"depth,omitempty"`
	ShareOfVoice       string    `bson:"share_of_voice,omitempty" json:"share_of_voice,omitempty"`
	SpokespersonQuoted *bool     `bson:"spokesperson_quoted,omitempty" json:"spokesperson_quoted,omitempty"`
	InitiatedBy        string    `bson:"initiated_by,omitempty" json:"initiated_by,omitempty"`
	Reach              *int64    `bson:"reach,omitempty" json:"reach,omitempty"`
	Summary            string    `bson:"summary,omitempty" json:"summary,omitempty"`
	FullText           string    `bson:"full_text,omitempty" json:"full_text,omitempty"`
}

// CoverageTypes are the allowed coverage kinds.
var CoverageTypes = []string{"article", "interview", "review", "opinion", "listicle", "roundup", "segment", "appearance", "award_win", "other"}

// Sentiments are the allowed coverage sentiments.
var Sentiments = []string{"positive", "neutral", "negative", "mixed"}

// Depths are the allowed coverage depths: how much of the piece is about us.
var Depths = []string{"mention", "quote", "feature", "dedicated", "cover_story"}

// SharesOfVoice are the allowed shares of voice.
var SharesOfVoice = []string{"sole_focus", "shared", "competitor_included"}

// Initiators are the allowed values of initiated_by.
var Initiators = []string{"pitched", "organic"}

// DefaultCoverageType is the type of coverage recorded without one.
const DefaultCoverageType = "article"

// CoveragePatch is a change to coverage: nil fields are left as they are; an
// empty string clears an optional field, as does a nil reach or
// spokesperson_quoted.
type CoveragePatch struct {
	Title, URL, OutletID, ChannelID, OpportunityID    *string
	Type, Sentiment, Depth, ShareOfVoice, InitiatedBy *string
	Summary, FullText                                 *string
	PublishedAt                                       *time.Time
	ContactIDs                                        *[]string
	SpokespersonQuoted                                **bool
	Reach                                             **int64
}

func checkCoverage(c *Coverage) error {
	c.Title = strings.TrimSpace(c.Title)
	if c.Title == "" {
		return repo.Invalid("title", "must not be empty")
	}
	if c.PublishedAt.IsZero() {
		return repo.Invalid("published_at", "is required: when the piece was published")
	}
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return repo.Invalid("url", "%q is not an absolute http(s) URL", c.URL)
		}
	}
	if err := OneOf("type", c.Type, CoverageTypes); err != nil {
		return err
	}
	for _, e := range []struct {
		field, v string
		allowed  []string
	}{{"sentiment", c.Sentiment, Sentiments}, {"depth", c.Depth, Depths}, {"share_of_voice", c.ShareOfVoice, SharesOfVoice}, {"initiated_by", c.InitiatedBy, Initiators}} {
		if e.v != "" {
			if err := OneOf(e.field, e.v, e.allowed); err != nil {
				return err
			}
		}
	}
	if c.Reach != nil && *c.Reach < 0 {
		return repo.Invalid("reach", "%d is negative; use 0 or more", *c.Reach)
	}
	if c.Reach != nil && *c.Reach > repo.MaxFigure {
		return repo.Invalid("reach", "%d is too large; the maximum is %d", *c.Reach, int64(repo.MaxFigure))
	}
	return nil
}

// checkCoverageLinks checks that every id given in p names an active record.
func (s *Store) checkCoverageLinks(ctx context.Context, p CoveragePatch) error {
	return s.CheckRefs(ctx, []repo.Ref{{Coll: repo.CollOutlets, Field: "outlet_id", ID: p.OutletID}, {Coll: repo.CollChannels, Field: "channel_id", ID: p.ChannelID},
		{Coll: repo.CollOpportunities, Field: "opportunity_id", ID: p.OpportunityID}}, p.ContactIDs)
}

// opportunityPlace returns the campaign and outlet of opportunity id ("" for none).
func (s *Store) opportunityPlace(ctx context.Context, id string) (campaignID, outletID string, err error) {
	if id == "" {
		return "", "", nil
	}
	var o struct {
		CampaignID string `bson:"campaign_id"`
		OutletID   string `bson:"outlet_id"`
	}
	err = s.Collection(repo.CollOpportunities).FindOne(ctx, bson.M{"_id": id}, options.FindOne().SetProjection(bson.M{"campaign_id": 1, "outlet_id": 1})).Decode(&o)
	if err != nil {
		return "", "", ledger.DriverErr(err, "opportunity", id)
	}
	return o.CampaignID, o.OutletID, nil
}

// applyPlace sets the campaign, outlet and channel of c after a change:
// the campaign is the opportunity's; a missing outlet is the channel's, or
// else the opportunity's; the channel must belong to the outlet.
func (s *Store) applyPlace(ctx context.Context, c *Coverage, outlet, channel, opportunity *string) error {
	set(&c.OpportunityID, opportunity)
	campaignID, oppOutlet, err := s.opportunityPlace(ctx, c.OpportunityID)
	if err != nil {
		return err
	}
	c.CampaignID = campaignID
	if outlet == nil && channel == nil && c.OutletID == "" && oppOutlet != "" {
		outlet = &oppOutlet
	}
	if c.OutletID, c.ChannelID, err = s.place(ctx, c.OutletID, c.ChannelID, outlet, channel); err != nil {
		return err
	}
	g, err := coverageEmbargo(ctx, s.View(), c)
	if err != nil {
		return err
	}
	if g != nil {
		return g.ToolError()
	}
	return nil
}

// CreateCoverage records coverage. Its type defaults to article; its
// campaign follows from its opportunity.
func (s *Store) CreateCoverage(ctx context.Context, c *Coverage, outlet, channel, opportunity *string) (*Coverage, error) {
	if c.Type == "" {
		c.Type = DefaultCoverageType
	}
	c.ContactIDs = UniqueIDs(c.ContactIDs)
	if err := checkCoverage(c); err != nil {
		return nil, err
	}
	if err := s.checkCoverageLinks(ctx, CoveragePatch{OutletID: outlet, ChannelID: channel, OpportunityID: opportunity, ContactIDs: &c.ContactIDs}); err != nil {
		return nil, err
	}
	c.OutletID, c.ChannelID, c.OpportunityID = "", "", ""
	if err := s.applyPlace(ctx, c, outlet, channel, opportunity); err != nil {
		return nil, err
	}
	c.Meta = repo.Meta{}
	if err := outbox.InsertWithEvents(ctx, s.Store, repo.CollCoverage, c, func() ([]outbox.OppEvent, error) {
		if c.OpportunityID == "" {
			return nil, nil
		}
		o, err := repo.Find[*Opportunity](ctx, s.Store, repo.CollOpportunities, c.OpportunityID)
		if err != nil {
			return nil, err
		}
		return []outbox.OppEvent{{Kind: outbox.EventCoverageAdded, OppID: o.ID, Title: o.Title,
			Text: fmt.Sprintf("coverage on %q: %s", o.Title, c.Title),
			Data: map[string]any{"coverage_id": c.ID, "coverage_title": c.Title, "url": c.URL, "type": c.Type}}}, nil
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Coverage returns one coverage record.
func (s *Store) Coverage(ctx context.Context, id string) (*Coverage, error) {
	return repo.Find[*Coverage](ctx, s.Store, repo.CollCoverage, id)
}

// UpdateCoverage applies p to active coverage.
func (s *Store) UpdateCoverage(ctx context.Context, id string, p CoveragePatch) (*Coverage, error) {
	if err := s.checkCoverageLinks(ctx, p); err != nil {
		return nil, err
	}
	return repo.Modify(ctx, s.Store, repo.CollCoverage, id, audit.ActionUpdate, func(c *Coverage) error {
		if c.Archived() {
			return repo.Errorf(repo.CodeFailedPrecondition, "coverage %s is archived; restore it before changing it", id)
		}
		set(&c.Title, p.Title)
		set(&c.URL, p.URL)
		set(&c.Type, p.Type)
		set(&c.Sentiment, p.Sentiment)
		set(&c.Depth, p.Depth)
		set(&c.ShareOfVoice, p.ShareOfVoice)
		set(&c.InitiatedBy, p.InitiatedBy)
		set(&c.Summary, p.Summary)
		set(&c.FullText, p.FullText)
		set(&c.PublishedAt, p.PublishedAt)
		set(&c.SpokespersonQuoted, p.SpokespersonQuoted)
		set(&c.Reach, p.Reach)
		if p.ContactIDs != nil {
			c.ContactIDs = UniqueIDs(*p.ContactIDs)
		}
		if c.ContactIDs == nil {
			c.ContactIDs = []string{}
		}
		if err := checkCoverage(c); err != nil {
			return err
		}
		return s.applyPlace(ctx, c, p.OutletID, p.ChannelID, p.OpportunityID)
	})
}

// ArchiveCoverage archives coverage.
func (s *Store) ArchiveCoverage(ctx context.Context, id string) (*Coverage, error) {
	return repo.Archive[*Coverage](ctx, s.Store, repo.CollCoverage, id, nil)
}

// RestoreCoverage restores archived coverage.
func (s *Store) RestoreCoverage(ctx context.Context, id string) (*Coverage, error) {
	if c, err := s.Coverage(ctx, id); err == nil && c.Archived() {
		back := *c
		back.ArchivedAt = nil
		if g, err := coverageEmbargo(ctx, s.View(), &back); err != nil || g != nil {
			if err != nil {
				return nil, err
			}
			return nil, g.ToolError()
		}
	}
	return repo.Restore[*Coverage](ctx, s.Store, repo.CollCoverage, id)
}

// CoverageFilter selects coverage; empty fields do not filter.
type CoverageFilter struct {
	CampaignID, OpportunityID, OutletID, ContactID, Type, Sentiment, Search string
	// Since and Until bound published_at, both inclusive.
	Since, Until    *time.Time
	IncludeArchived bool
}

// ListCoverage lists coverage, most recently published first.
func (s *Store) ListCoverage(ctx context.Context, f CoverageFilter, limit, offset int) (repo.Page[Coverage], error) {
	filter := bson.M{}
	for k, v := range map[string]string{"campaign_id": f.CampaignID, "opportunity_id": f.OpportunityID, "outlet_id": f.OutletID,
		"contact_ids": f.ContactID, "type": f.Type, "sentiment": f.Sentiment} {
		if v != "" {
			filter[k] = v
		}
	}
	ledger.Between(filter, "published_at", f.Since, f.Until)
	sort := bson.D{{Key: "published_at", Value: -1}, {Key: "_id", Value: -1}}
	if f.Search != "" {
		return textlist.Page[Coverage](ctx, s.Store, textlist.Filter{Coll: repo.CollCoverage, Text: f.Search}, repo.Active(filter, f.IncludeArchived), sort, limit, offset)
	}
	return repo.ListPage[Coverage](ctx, s.Store, repo.CollCoverage, repo.Active(filter, f.IncludeArchived), sort, limit, offset)
}

// CoverageDetail is coverage with its related records, trimmed.
type CoverageDetail struct {
	*Coverage
	Outlet      map[string]any   `json:"outlet"`
	Channel     map[string]any   `json:"channel"`
	Opportunity map[string]any   `json:"opportunity"`
	Campaign    map[string]any   `json:"campaign"`
	Contacts    []map[string]any `json:"contacts"`
	Media       []map[string]any `json:"media"`
}

var (
	trimOpportunity = []string{"title", "stage", "priority", "campaign_id", "archived_at"}
	// trimMedia names the media fields an agent needs to pick a file; the
	// bytes are fetched with get_media.
	trimMedia = []string{"filename", "title", "description", "content_type", "size_bytes", "created_at"}
)

// CoverageDetail returns coverage with its outlet, channel, opportunity,
// campaign, contacts and active media.
func (s *Store) CoverageDetail(ctx context.Context, id string) (*CoverageDetail, error) {
	c, err := s.Coverage(ctx, id)
	if err != nil {
		return nil, err
	}
	d := &CoverageDetail{Coverage: c}
	if d.Outlet, err = s.TrimmedOne(ctx, repo.CollOutlets, c.OutletID, trimOutlet); err != nil {
		return nil, err
	}
	if d.Channel, err = s.TrimmedOne(ctx, repo.CollChannels, c.ChannelID, trimChannel); err != nil {
		return nil, err
	}
	if d.Opportunity, err = s.TrimmedOne(ctx, repo.CollOpportunities, c.OpportunityID, trimOpportunity); err != nil {
		return nil, err
	}
	if d.Campaign, err = s.TrimmedOne(ctx, repo.CollCampaigns, c.CampaignID, trimCampaign); err != nil {
		return nil, err
	}
	if d.Contacts, err = s.Trimmed(ctx, repo.CollContacts, ByIDs(c.ContactIDs), nil, repo.TrimContact); err != nil {
		return nil, err
	}
	if d.Media, err = s.Trimmed(ctx, repo.CollMedia, bson.M{"coverage_id": id, "archived_at": nil}, repo.NewestFirst, trimMedia); err != nil {
		return nil, err
	}
	return d, nil
}

func coverageCampaign(coverageID, coverageCampaign, oppID, oppCampaign string) *repo.RuleViolation {
	if oppID == "" {
		return repo.Violated("coverage_campaign", "coverage %s would be in campaign %s without an opportunity, and coverage takes its campaign from its opportunity: set its opportunity_id with update_coverage first, then retry", coverageID, coverageCampaign)
	}
	return repo.Violated("coverage_campaign", "coverage %s would be in campaign %s while its opportunity %s is in campaign %s, and coverage is always in its opportunity's campaign: move the opportunity with update_opportunity (campaign_id), which moves its coverage along, or roll back the opportunity's and the coverage's changes together (rollback_session)", coverageID, coverageCampaign, oppID, oppCampaign)
}

func coverageRule(ctx context.Context, v *repo.RuleView, id string, state bson.M) error {
	c, err := repo.DecodeState[Coverage](id, state)
	if err != nil {
		return err
	}
	if err := checkCoverage(c); err != nil {
		return repo.FieldViolation("coverage_fields", err)
	}
	for _, l := range []struct{ coll, field, id string }{{repo.CollOutlets, "outlet_id", c.OutletID}, {repo.CollOpportunities, "opportunity_id", c.OpportunityID}} {
		if err := v.Linked(ctx, l.coll, l.field, l.id); err != nil {
			return err
		}
	}
	for i, ct := range c.ContactIDs {
		if err := v.Linked(ctx, repo.CollContacts, fmt.Sprintf("contact_ids[%d]", i), ct); err != nil {
			return err
		}
	}
	if err := directory.ChannelOf(ctx, v, "coverage "+id, c.ChannelID, c.OutletID); err != nil {
		return err
	}
	campaign := ""
	if c.OpportunityID != "" {
		opp, err := v.Record(ctx, repo.CollOpportunities, c.OpportunityID)
		if err != nil {
			return err
		}
		campaign = repo.Str(opp, "campaign_id")
	}
	if c.CampaignID != campaign {
		return coverageCampaign(id, c.CampaignID, c.OpportunityID, campaign)
	}
	g, err := coverageEmbargo(ctx, v, c)
	if err != nil {
		return err
	}
	if g != nil {
		return g.AsViolation()
	}
	return nil
}

func init() { repo.RegisterRule(repo.CollCoverage, coverageRule) }
