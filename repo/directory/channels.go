package directory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/repo"
)

// ChannelTypes are the allowed channel types.
var ChannelTypes = []string{"website", "newsletter", "podcast", "tv_broadcast", "print", "event", "award"}

// ChannelFrequencies are the allowed publishing frequencies.
var ChannelFrequencies = []string{"daily", "weekly", "monthly", "quarterly", "annual"}

// Channel is one channel of an outlet: its website, a newsletter, a podcast.
// It belongs to one outlet for good.
type Channel struct {
	repo.Meta   `bson:",inline"`
	OutletID    string         `bson:"outlet_id" json:"outlet_id"`
	Type        string         `bson:"type" json:"type"`
	Name        string         `bson:"name,omitempty" json:"name,omitempty"`
	Description string         `bson:"description,omitempty" json:"description,omitempty"`
	URL         string         `bson:"url,omitempty" json:"url,omitempty"`
	Frequency   string         `bson:"frequency,omitempty" json:"frequency,omitempty"`
	Attributes  map[string]any `bson:"attributes,omitempty" json:"attributes,omitempty"`
}

// ChannelFields are the fields a create or an update sets; nil leaves a
// field as it is.
type ChannelFields struct {
	Type, Name, Description, URL, Frequency *string
	Attributes                              map[string]any
}

func (f ChannelFields) empty() bool {
	return f.Type == nil && f.Name == nil && f.Description == nil && f.URL == nil && f.Frequency == nil && f.Attributes == nil
}

// apply validates f and sets it on c; it does no I/O. An empty frequency
// clears it.
func (f ChannelFields) apply(c *Channel, creating bool) error {
	if f.Type != nil || creating {
		if f.Type == nil || !slices.Contains(ChannelTypes, *f.Type) {
			got := ""
			if f.Type != nil {
				got = *f.Type
			}
			return repo.Invalid("type", "%q is not allowed; use one of: %s", got, strings.Join(ChannelTypes, ", "))
		}
		c.Type = *f.Type
	}
	if f.Frequency != nil && *f.Frequency != "" && !slices.Contains(ChannelFrequencies, *f.Frequency) {
		return repo.Invalid("frequency", "%q is not allowed; use one of: %s (or \"\" to clear it)", *f.Frequency, strings.Join(ChannelFrequencies, ", "))
	}
	if f.URL != nil {
		if u := strings.TrimSpace(*f.URL); u != "" {
			if err := checkWebURL("url", u); err != nil {
				return err
			}
		}
	}
	repo.SetText(&c.Name, f.Name)
	repo.SetText(&c.Description, f.Description)
	repo.SetText(&c.URL, f.URL)
	repo.SetText(&c.Frequency, f.Frequency)
	if f.Attributes != nil {
		attrs, err := freeForm("attributes", f.Attributes)
		if err != nil {
			return err
		}
		c.Attributes = attrs
	}
	return nil
}

// CreateChannel adds a channel to an active outlet.
func (s *Store) CreateChannel(ctx context.Context, outletID string, f ChannelFields) (*Channel, error) {
	c := &Channel{OutletID: outletID}
	if err := f.apply(c, true); err != nil {
		return nil, err
	}
	if err := s.MustExist(ctx, repo.CollOutlets, "outlet_id", outletID); err != nil {
		return nil, err
	}
	if err := repo.Insert(ctx, s.Store, repo.CollChannels, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Channel returns one channel, archived or not.
func (s *Store) Channel(ctx context.Context, id string) (*Channel, error) {
	return repo.Find[*Channel](ctx, s.Store, repo.CollChannels, id)
}

// UpdateChannel changes the given fields of an active channel; its outlet
// never changes.
func (s *Store) UpdateChannel(ctx context.Context, id string, f ChannelFields) (*Channel, error) {
	if f.empty() {
		return nil, repo.Errorf(repo.CodeInvalid, "nothing to change: give at least one field besides id")
	}
	return repo.Modify(ctx, s.Store, repo.CollChannels, id, audit.ActionUpdate, func(c *Channel) error {
		if err := refuseArchived(repo.CollChannels, &c.Meta); err != nil {
			return err
		}
		return f.apply(c, false)
	})
}

// ArchiveChannel archives a channel.
func (s *Store) ArchiveChannel(ctx context.Context, id string) (*Channel, error) {
	return repo.Archive[*Channel](ctx, s.Store, repo.CollChannels, id, nil)
}

// RestoreChannel restores an archived channel, whether or not its outlet is
// archived (archiving an outlet never touched its channels either).
func (s *Store) RestoreChannel(ctx context.Context, id string) (*Channel, error) {
	return repo.Restore[*Channel](ctx, s.Store, repo.CollChannels, id)
}

// ChannelFilter selects channels; zero fields do not filter.
type ChannelFilter struct {
	OutletID        string
	Type            string
	IncludeArchived bool
}

// ListChannels lists channels, newest first.
func (s *Store) ListChannels(ctx context.Context, f ChannelFilter, limit, offset int) (repo.Page[Channel], error) {
	filter := bson.M{}
	if f.OutletID != "" {
		if _, err := s.Outlet(ctx, f.OutletID); err != nil {
			return repo.Page[Channel]{}, repo.WithField(err, "outlet_id")
		}
		filter["outlet_id"] = f.OutletID
	}
	if f.Type != "" {
		if !slices.Contains(ChannelTypes, f.Type) {
			return repo.Page[Channel]{}, repo.Invalid("type", "%q is not allowed; use one of: %s", f.Type, strings.Join(ChannelTypes, ", "))
		}
		filter["type"] = f.Type
	}
	return repo.ListPage[Channel](ctx, s.Store, repo.CollChannels, repo.Active(filter, f.IncludeArchived), repo.NewestFirst, limit, offset)
}

// ChannelDetail is a channel with its parent outlet (archived or not).
type ChannelDetail struct {
	*Channel
	Outlet OutletSummary `json:"outlet"`
}

// ChannelDetail returns a channel with its parent outlet.
func (s *Store) ChannelDetail(ctx context.Context, id string) (*ChannelDetail, error) {
	c, err := s.Channel(ctx, id)
	if err != nil {
		return nil, err
	}
	o, err := s.Outlet(ctx, c.OutletID)
	if err != nil {
		return nil, err
	}
	return &ChannelDetail{Channel: c, Outlet: summarizeOutlet(o)}, nil
}

// ChannelOutletError is the rule that a record's channel belongs to the
// record's outlet: the message of both the tools' error and the violation.
func ChannelOutletError(channelID, channelOutlet, outlet string) string {
	if outlet == "" {
		return fmt.Sprintf("channel %s belongs to outlet %s; a record with a channel must have that outlet (clear channel_id with \"\" to remove the outlet)", channelID, channelOutlet)
	}
	return fmt.Sprintf("channel %s belongs to outlet %s, not to outlet %s; give a channel of outlet %s, or clear channel_id with \"\"", channelID, channelOutlet, outlet, outlet)
}

func channelRule(ctx context.Context, v *repo.RuleView, id string, state bson.M) error {
	outlet := repo.Str(state, "outlet_id")
	if outlet == "" {
		return repo.Violated("channel_outlet", "channel %s would belong to no outlet, and every channel belongs to one outlet for good; leave this change as it is", id)
	}
	stored, err := v.Stored(ctx, repo.CollChannels, id)
	if err != nil {
		return err
	}
	if was := repo.Str(stored, "outlet_id"); was != "" && was != outlet {
		return repo.Violated("channel_outlet", "channel %s would move from outlet %s to outlet %s, and a channel belongs to one outlet for good; create a channel of outlet %s instead", id, was, outlet, outlet)
	}
	return v.Linked(ctx, repo.CollOutlets, "outlet_id", outlet)
}

// ChannelOf checks, as v shows the records, that channel (if any) exists
// and belongs to outlet.
func ChannelOf(ctx context.Context, v *repo.RuleView, what, channel, outlet string) error {
	if channel == "" {
		return nil
	}
	ch, err := v.Record(ctx, repo.CollChannels, channel)
	if err != nil {
		return err
	}
	if ch == nil {
		return v.Linked(ctx, repo.CollChannels, "channel_id", channel)
	}
	if co := repo.Str(ch, "outlet_id"); co != outlet {
		return repo.Violated("channel_of_outlet", "%s would have %s; change its outlet_id or channel_id with its update tool first, then retry", what, ChannelOutletError(channel, co, outlet))
	}
	return nil
}

func init() { repo.RegisterRule(repo.CollChannels, channelRule) }
