package repo

import "time"

// Coverage is a published result: an article, interview, award, segment.
// Its stored shape is fixed here so the interaction log reads it from the
// first day; the coverage tools extend this file.
type Coverage struct {
	Meta               `bson:",inline"`
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
