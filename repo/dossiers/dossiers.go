package dossiers

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/repo"
	"outreach/repo/access"
	"outreach/repo/directory"
	"outreach/repo/inbox"
	"outreach/repo/notes"
	"outreach/repo/pipeline"
	"outreach/repo/pitches"
	"outreach/textfold"
)

// Dossiers, opportunity status and the agenda are computed at the call from
// the stored records, never stored. Archived opportunities, coverage, notes
// and email threads are left out of every figure.

// DefaultInteractions is how many of the latest interactions a dossier or a
// status shows unless asked otherwise.
const DefaultInteractions = 10

// day is the unit of every "days" figure: whole days of 24 hours, rounded down.
const day = 24 * time.Hour

func days(d time.Duration) int { return int(max(d, 0) / day) }

// OpportunityBrief is an opportunity as dossiers list it.
type OpportunityBrief struct {
	ID             string     `json:"id"`
	Title          string     `json:"title"`
	Stage          string     `json:"stage"`
	Priority       string     `json:"priority"`
	CampaignID     string     `json:"campaign_id"`
	OutletID       string     `json:"outlet_id,omitempty"`
	NextAction     string     `json:"next_action,omitempty"`
	NextActionDate *time.Time `json:"next_action_date,omitempty"`
	UpdatedAt      time.Time  `json:"updated_at"`
	OwnerID        string     `json:"owner_id,omitempty"`
	EmbargoUntil   *time.Time `json:"embargo_until,omitempty"`
	// EmbargoLocal is embargo_until in the zone it was given in.
	EmbargoLocal string `json:"embargo_until_local,omitempty"`
}

func brief(o *pipeline.Opportunity) OpportunityBrief {
	return OpportunityBrief{ID: o.ID, Title: o.Title, Stage: o.Stage, Priority: o.Priority, CampaignID: o.CampaignID,
		OutletID: o.OutletID, NextAction: o.NextAction, NextActionDate: o.NextActionDate, UpdatedAt: o.UpdatedAt,
		OwnerID: o.OwnerID, EmbargoUntil: o.EmbargoUntil, EmbargoLocal: pipeline.EmbargoLocal(o.EmbargoUntil, o.EmbargoZone)}
}

// Owner is the team member who owns an opportunity or a contact
// relationship; Name is empty when the user record is missing.
type Owner struct {
	UserID string `json:"user_id"`
	Name   string `json:"name,omitempty"`
	Email  string `json:"email,omitempty"`
}

// owner returns the owner of user id, or nil when id is empty.
func (s *Store) owner(ctx context.Context, id string) (*Owner, error) {
	if id == "" {
		return nil, nil
	}
	u, err := access.Of(s.Store).User(ctx, id)
	if repo.ErrorCode(err) == repo.CodeNotFound {
		return &Owner{UserID: id}, nil
	}
	if err != nil {
		return nil, err
	}
	return &Owner{UserID: id, Name: u.Name, Email: u.Email}, nil
}

// Touch is one dated interaction a figure points at: what it was (via), its
// id and title.
type Touch struct {
	At    time.Time `json:"at"`
	Via   string    `json:"via"` // note, email, stage_change or pitch
	ID    string    `json:"id"`
	Title string    `json:"title"`
	// ThreadID is the email thread of an email touch.
	ThreadID string `json:"thread_id,omitempty"`
}

func later(cur *Touch, t Touch) *Touch {
	if cur == nil || t.At.After(cur.At) {
		return &t
	}
	return cur
}

// mailbox is a set of email threads with the sender of each message
// resolved: a message is from a contact when its From address is a
// contact's address, and otherwise it was sent by the team.
type mailbox struct {
	// threads hold their headers only (mailThread's fields).
	threads []inbox.EmailThread
	senders map[string]string // lower-case address → contact id
}

// mailThread is what a mailbox reads of a thread: its subject, links and
// the messages' headers. Decoding the messages whole (bodies, recipients,
// references) was most of a dossier's own cost.
type mailThread struct {
	ID               string                       `bson:"_id"`
	Subject          string                       `bson:"subject"`
	OpportunityLinks []inbox.EmailOpportunityLink `bson:"opportunity_links"`
	Messages         []struct {
		ID         string    `bson:"id"`
		From       string    `bson:"from"`
		Subject    string    `bson:"subject"`
		Date       time.Time `bson:"date"`
		ContactIDs []string  `bson:"contact_ids"`
	} `bson:"messages"`
}

// readMail reads the active threads matching filter and resolves their senders.
func (s *Store) readMail(ctx context.Context, filter bson.M) (*mailbox, error) {
	filter["archived_at"] = nil
	mb := &mailbox{senders: map[string]string{}}
	var read []mailThread
	if err := s.FindAll(ctx, repo.CollEmails, filter, nil, &read); err != nil {
		return nil, err
	}
	mb.threads = make([]inbox.EmailThread, len(read))
	for i, r := range read {
		t := inbox.EmailThread{Meta: repo.Meta{ID: r.ID}, Subject: r.Subject, OpportunityLinks: r.OpportunityLinks, Messages: make([]inbox.EmailMessage, len(r.Messages))}
		for j, m := range r.Messages {
			t.Messages[j] = inbox.EmailMessage{ID: m.ID, From: m.From, Subject: m.Subject, Date: m.Date, ContactIDs: m.ContactIDs}
		}
		mb.threads[i] = t
	}
	var addrs []string
	for _, t := range mb.threads {
		for _, m := range t.Messages {
			if a := inbox.BareAddress(m.From); a != "" && !slices.Contains(addrs, a) {
				addrs = append(addrs, a)
			}
		}
	}
	if len(addrs) == 0 {
		return mb, nil
	}
	var cs []struct {
		ID         string     `bson:"_id"`
		EmailLower string     `bson:"email_lower"`
		ArchivedAt *time.Time `bson:"archived_at"`
	}
	if err := s.FindProjected(ctx, repo.CollContacts, bson.M{"email_lower": bson.M{"$in": addrs}}, bson.M{"email_lower": 1, "archived_at": 1}, &cs); err != nil {
		return nil, err
	}
	for _, c := range cs {
		// An archived contact's address may since belong to an active one: the active one wins.
		if _, taken := mb.senders[c.EmailLower]; !taken || c.ArchivedAt == nil {
			mb.senders[c.EmailLower] = c.ID
		}
	}
	return mb, nil
}

// sender is the contact who sent m, or "" when the team sent it.
func (mb *mailbox) sender(m *inbox.EmailMessage) string { return mb.senders[inbox.BareAddress(m.From)] }

// firstReply is the earliest message from a contact, on or after since, in
// a thread linked to opportunity oppID.
func (mb *mailbox) firstReply(oppID string, since time.Time) (*inbox.EmailThread, *inbox.EmailMessage) {
	var bt *inbox.EmailThread
	var bm *inbox.EmailMessage
	for i := range mb.threads {
		t := &mb.threads[i]
		if !linkedTo(t, oppID) {
			continue
		}
		for j := range t.Messages {
			m := &t.Messages[j]
			if mb.sender(m) != "" && !m.Date.Before(since) && (bm == nil || m.Date.Before(bm.Date)) {
				bt, bm = t, m
			}
		}
	}
	return bt, bm
}

func linkedTo(t *inbox.EmailThread, oppID string) bool {
	return slices.ContainsFunc(t.OpportunityLinks, func(l inbox.EmailOpportunityLink) bool { return l.OpportunityID == oppID })
}

// PitchCounts count a contact's pitches and responses. An opportunity naming
// the contact counts as pitched once it has entered the pitched stage; it
// counts as responded when, after that, it entered a later stage
// (responded … won, not lost) or the contact wrote in a thread linked to it.
type PitchCounts struct {
	Pitched   int `json:"pitched"`
	Responded int `json:"responded"`
	// ResponseRate is responded / pitched; null while nothing was pitched.
	ResponseRate *float64 `json:"response_rate"`
}

// responseStages are the stages that show a pitch was answered.
var responseStages = []string{"responded", "in_progress", "placed", "published", pipeline.StageWon}

// pitchResponse reports whether o was pitched, when it first was, and
// whether it was answered by a stage move.
func pitchResponse(o *pipeline.Opportunity) (pitched bool, at time.Time, answered bool) {
	for _, h := range o.StageHistory {
		switch {
		case !pitched && h.Stage == "pitched":
			pitched, at = true, h.At
		case pitched && slices.Contains(responseStages, h.Stage):
			answered = true
		}
	}
	return pitched, at, answered
}

// DoNotContact is a contact's do-not-contact status.
type DoNotContact struct {
	DoNotContact bool   `json:"do_not_contact"`
	Reason       string `json:"reason,omitempty"`
}

// ContactDossier is everything known about a contact.
type ContactDossier struct {
	Contact      *directory.Contact        `json:"contact"`
	Affiliations []directory.ContactOutlet `json:"affiliations"`
	DoNotContact DoNotContact              `json:"do_not_contact"`
	// Owner is the team member who owns the relationship, if set.
	Owner         *Owner `json:"owner"`
	Opportunities struct {
		Open   []OpportunityBrief `json:"open"`
		Closed []OpportunityBrief `json:"closed"`
	} `json:"opportunities"`
	// Coverage is what the contact wrote (or hosted), latest first.
	Coverage           []map[string]any `json:"coverage"`
	LastContacted      *Touch           `json:"last_contacted"`
	LastHeardFrom      *Touch           `json:"last_heard_from"`
	Pitches            PitchCounts      `json:"pitches"`
	LatestInteractions *InteractionLog  `json:"latest_interactions"`
	ComputedAt         time.Time        `json:"computed_at"`
	// EmailPitches are the pitches to the contact, newest first (repo/pitches).
	EmailPitches []pitches.PitchBrief `json:"email_pitches"`
}

// ContactDossier gathers a contact's record, affiliations, opportunities,
// coverage, contact history and latest interactions. Last contacted is the
// latest of: a note linked to the contact, an email the team sent with the
// contact among its recipients, a stage move of an opportunity naming the
// contact. Last heard from is the latest email from the contact. Only what
// happened up to now counts (a note dated in the future does not).
func (s *Store) ContactDossier(ctx context.Context, id string, interactions int) (*ContactDossier, error) {
	t := repo.Now()
	cd, err := directory.Of(s.Store).ContactDetail(ctx, id)
	if err != nil {
		return nil, err
	}
	c := cd.Contact
	d := &ContactDossier{Contact: c, Affiliations: cd.Outlets, ComputedAt: t,
		DoNotContact: DoNotContact{DoNotContact: c.DoNotContact, Reason: c.DoNotContactReason}}
	if d.Owner, err = s.owner(ctx, c.OwnerID); err != nil {
		return nil, err
	}
	d.Opportunities.Open, d.Opportunities.Closed = []OpportunityBrief{}, []OpportunityBrief{}
	var opps []pipeline.Opportunity
	if err := s.FindAll(ctx, repo.CollOpportunities, bson.M{"contact_ids": id, "archived_at": nil}, options.Find().SetSort(repo.NewestFirst), &opps); err != nil {
		return nil, err
	}
	mb, err := s.readMail(ctx, bson.M{"$or": bson.A{bson.M{"messages.contact_ids": id}, bson.M{"contact_ids": id}}})
	if err != nil {
		return nil, err
	}
	for i := range opps {
		o := &opps[i]
		if pipeline.Terminal(o.Stage) {
			d.Opportunities.Closed = append(d.Opportunities.Closed, brief(o))
		} else {
			d.Opportunities.Open = append(d.Opportunities.Open, brief(o))
		}
		for _, h := range o.StageHistory[min(1, len(o.StageHistory)):] { // the first entry is the creation, not a move
			if !h.At.After(t) {
				d.LastContacted = later(d.LastContacted, Touch{At: h.At, Via: "stage_change", ID: o.ID, Title: o.Title + ": " + h.Stage})
			}
		}
		pitched, at, answered := pitchResponse(o)
		if !pitched {
			continue
		}
		d.Pitches.Pitched++
		if !answered {
			for _, th := range mb.threads {
				if !linkedTo(&th, o.ID) {
					continue
				}
				answered = answered || slices.ContainsFunc(th.Messages, func(m inbox.EmailMessage) bool {
					return mb.sender(&m) == id && !m.Date.Before(at)
				})
			}
		}
		if answered {
			d.Pitches.Responded++
		}
	}
	if d.Pitches.Pitched > 0 {
		r := float64(d.Pitches.Responded) / float64(d.Pitches.Pitched)
		d.Pitches.ResponseRate = &r
	}
	for _, th := range mb.threads {
		for _, m := range th.Messages {
			if m.Date.After(t) {
				continue
			}
			touch := Touch{At: m.Date, Via: "email", ID: m.ID, Title: m.Subject, ThreadID: th.ID}
			switch from := mb.sender(&m); {
			case from == id:
				d.LastHeardFrom = later(d.LastHeardFrom, touch)
			case from == "" && slices.Contains(m.ContactIDs, id):
				d.LastContacted = later(d.LastContacted, touch)
			}
		}
	}
	var notes []notes.Note
	if err := s.FindAll(ctx, repo.CollNotes, bson.M{"links.contact_id": id, "archived_at": nil, "occurred_at": bson.M{"$lte": t}},
		options.Find().SetSort(bson.D{{Key: "occurred_at", Value: -1}, {Key: "_id", Value: -1}}).SetLimit(1).SetProjection(bson.M{"title": 1, "occurred_at": 1, "content": 1}), &notes); err != nil {
		return nil, err
	}
	for _, n := range notes {
		d.LastContacted = later(d.LastContacted, Touch{At: n.OccurredAt, Via: "note", ID: n.ID, Title: noteTitle(&n)})
	}
	if d.Coverage, err = s.Trimmed(ctx, repo.CollCoverage, bson.M{"contact_ids": id, "archived_at": nil},
		bson.D{{Key: "published_at", Value: -1}, {Key: "_id", Value: -1}}, repo.TrimCoverage); err != nil {
		return nil, err
	}
	if d.LatestInteractions, err = s.InteractionLog(ctx, InteractionQuery{ContactID: id, Limit: interactions}); err != nil {
		return nil, err
	}
	if d.EmailPitches, err = pitches.Of(s.Store).ContactPitches(ctx, id); err != nil {
		return nil, err
	}
	for _, p := range d.EmailPitches {
		if p.SentAt != nil && !p.SentAt.After(t) {
			d.LastContacted = later(d.LastContacted, Touch{At: *p.SentAt, Via: "pitch", ID: p.ID, Title: p.Subject})
		}
	}
	return d, nil
}

func noteTitle(n *notes.Note) string {
	if n.Title != "" {
		return n.Title
	}
	return textfold.FirstLine(n.Content)
}

// DossierContact is a contact affiliated with an outlet, as its dossier shows it.
type DossierContact struct {
	ID            string     `json:"id"`
	Name          string     `json:"name"`
	Title         string     `json:"title,omitempty"`
	Email         string     `json:"email,omitempty"`
	Role          string     `json:"role,omitempty"`
	IsPrimary     bool       `json:"is_primary"`
	AffiliationID string     `json:"affiliation_id"`
	StartedOn     *time.Time `json:"started_on"`
	EndedOn       *time.Time `json:"ended_on"`
	DoNotContact  bool       `json:"do_not_contact"`
	Archived      bool       `json:"archived"`
}

// OutletDossier is everything known about an outlet.
type OutletDossier struct {
	Outlet   *directory.Outlet `json:"outlet"`
	Channels []map[string]any  `json:"channels"`
	// Contacts are current (the affiliation has not ended and the contact is
	// active) or past (ended, or the contact archived).
	Contacts struct {
		Current []DossierContact `json:"current"`
		Past    []DossierContact `json:"past"`
	} `json:"contacts"`
	Opportunities struct {
		pipeline.OpportunityCounts
		Items []OpportunityBrief `json:"items"`
	} `json:"opportunities"`
	// Coverage: its total_reach is the sum of the coverage's reach; the
	// outlet's own monthly reach is outlet.audience_size.
	Coverage           pipeline.CoverageTally `json:"coverage"`
	LatestInteractions *InteractionLog        `json:"latest_interactions"`
	ComputedAt         time.Time              `json:"computed_at"`
}

// OutletDossier gathers an outlet's record, channels, contacts, opportunities
// by stage, coverage counts and latest interactions.
func (s *Store) OutletDossier(ctx context.Context, id string, interactions int) (*OutletDossier, error) {
	t := repo.Now()
	o, err := directory.Of(s.Store).Outlet(ctx, id)
	if err != nil {
		return nil, err
	}
	d := &OutletDossier{Outlet: o, ComputedAt: t}
	if d.Channels, err = s.Trimmed(ctx, repo.CollChannels, bson.M{"outlet_id": id},
		bson.D{{Key: "name", Value: 1}, {Key: "_id", Value: 1}}, []string{"name", "type", "url", "frequency", "archived_at"}); err != nil {
		return nil, err
	}
	var contacts []directory.Contact
	if err := s.FindAll(ctx, repo.CollContacts, bson.M{"affiliations.outlet_id": id}, options.Find().SetSort(bson.D{{Key: "name", Value: 1}, {Key: "_id", Value: 1}}), &contacts); err != nil {
		return nil, err
	}
	d.Contacts.Current, d.Contacts.Past = []DossierContact{}, []DossierContact{}
	for _, c := range contacts {
		for _, a := range c.Affiliations {
			if a.OutletID != id {
				continue
			}
			dc := DossierContact{ID: c.ID, Name: c.Name, Title: c.Title, Email: c.Email, Role: a.Role, IsPrimary: a.IsPrimary,
				AffiliationID: a.ID, StartedOn: a.StartedOn, EndedOn: a.EndedOn, DoNotContact: c.DoNotContact, Archived: c.Archived()}
			if c.Archived() || (a.EndedOn != nil && !a.EndedOn.After(t)) {
				d.Contacts.Past = append(d.Contacts.Past, dc)
			} else {
				d.Contacts.Current = append(d.Contacts.Current, dc)
			}
		}
	}
	var opps []pipeline.Opportunity
	if err := s.FindAll(ctx, repo.CollOpportunities, bson.M{"outlet_id": id, "archived_at": nil}, options.Find().SetSort(repo.NewestFirst), &opps); err != nil {
		return nil, err
	}
	oc := &d.Opportunities
	oc.ByStage, oc.Items = map[string]int{}, []OpportunityBrief{}
	for _, st := range pipeline.Stages {
		oc.ByStage[st] = 0
	}
	for i := range opps {
		x := &opps[i]
		oc.Total++
		oc.ByStage[x.Stage]++
		switch x.Stage {
		case pipeline.StageWon:
			oc.Won++
		case pipeline.StageLost:
			oc.Lost++
		default:
			oc.Open++
		}
		oc.Items = append(oc.Items, brief(x))
	}
	d.Coverage = pipeline.NewCoverageTally()
	var cov []struct {
		Type      string `bson:"type"`
		Sentiment string `bson:"sentiment"`
		Reach     *int64 `bson:"reach"`
	}
	if err := s.FindProjected(ctx, repo.CollCoverage, bson.M{"outlet_id": id, "archived_at": nil}, bson.M{"type": 1, "sentiment": 1, "reach": 1}, &cov); err != nil {
		return nil, err
	}
	for _, x := range cov {
		d.Coverage.Add(x.Type, x.Sentiment, x.Reach)
	}
	if d.LatestInteractions, err = s.InteractionLog(ctx, InteractionQuery{OutletID: id, Limit: interactions}); err != nil {
		return nil, err
	}
	return d, nil
}

// StageSpan is a stage history entry with how long the opportunity stayed.
type StageSpan struct {
	pipeline.StageChange
	// LeftAt is when the next stage began; null for the current stage.
	LeftAt          *time.Time `json:"left_at"`
	DurationSeconds int64      `json:"duration_seconds"`
	Days            int        `json:"days"`
}

// NextActionStatus is an opportunity's next action and whether it is late.
type NextActionStatus struct {
	Action string     `json:"action"`
	Date   *time.Time `json:"date"`
	Owner  string     `json:"owner,omitempty"`
	// Overdue: the due date has passed and the opportunity is still open.
	Overdue     bool `json:"overdue"`
	DaysOverdue int  `json:"days_overdue"`
	// DueInDays is whole days until the due date (while not overdue).
	DueInDays *int `json:"due_in_days"`
}

// ReplyStatus says whether a contact wrote after the latest pitch.
type ReplyStatus struct {
	PitchedAt *time.Time `json:"pitched_at"`
	Replied   bool       `json:"replied"`
	Reply     *Touch     `json:"reply"`
	// ContactID is who replied.
	ContactID string `json:"contact_id,omitempty"`
}

// OpportunityStatus is where an opportunity stands.
type OpportunityStatus struct {
	Opportunity        OpportunityBrief `json:"opportunity"`
	Archived           bool             `json:"archived"`
	Stage              string           `json:"stage"`
	Owner              *Owner           `json:"owner"`
	EnteredStageAt     time.Time        `json:"entered_stage_at"`
	DaysInStage        int              `json:"days_in_stage"`
	StageHistory       []StageSpan      `json:"stage_history"`
	NextAction         NextActionStatus `json:"next_action"`
	Contacts           []map[string]any `json:"contacts"`
	Coverage           []map[string]any `json:"coverage"`
	ReplySincePitch    ReplyStatus      `json:"reply_since_pitch"`
	LatestInteractions *InteractionLog  `json:"latest_interactions"`
	AsOf               time.Time        `json:"as_of"`
}

// OpportunityStatus computes where opportunity id stands as of asOf (nil:
// now). asOf moves the clock of every age and due date; it does not hide
// records made after it.
func (s *Store) OpportunityStatus(ctx context.Context, id string, asOf *time.Time, interactions int) (*OpportunityStatus, error) {
	t := repo.Now()
	if asOf != nil {
		t = *asOf
	}
	o, err := pipeline.Of(s.Store).Opportunity(ctx, id)
	if err != nil {
		return nil, err
	}
	st := &OpportunityStatus{Opportunity: brief(o), Archived: o.Archived(), Stage: o.Stage, AsOf: t, StageHistory: []StageSpan{}}
	if st.Owner, err = s.owner(ctx, o.OwnerID); err != nil {
		return nil, err
	}
	for i, h := range o.StageHistory {
		sp := StageSpan{StageChange: h}
		end := t
		if i+1 < len(o.StageHistory) {
			left := o.StageHistory[i+1].At
			sp.LeftAt, end = &left, left
		}
		dur := max(end.Sub(h.At), 0)
		sp.DurationSeconds, sp.Days = int64(dur/time.Second), days(dur)
		st.StageHistory = append(st.StageHistory, sp)
	}
	if n := len(o.StageHistory); n > 0 {
		st.EnteredStageAt = o.StageHistory[n-1].At
		st.DaysInStage = days(t.Sub(st.EnteredStageAt))
	}
	na := &st.NextAction
	na.Action, na.Date, na.Owner = o.NextAction, o.NextActionDate, o.NextActionOwner
	if o.NextActionDate != nil {
		if o.NextActionDate.Before(t) && !pipeline.Terminal(o.Stage) {
			na.Overdue, na.DaysOverdue = true, days(t.Sub(*o.NextActionDate))
		} else if !o.NextActionDate.Before(t) {
			n := days(o.NextActionDate.Sub(t))
			na.DueInDays = &n
		}
	}
	if st.Contacts, err = s.Trimmed(ctx, repo.CollContacts, pipeline.ByIDs(o.ContactIDs), bson.D{{Key: "name", Value: 1}, {Key: "_id", Value: 1}}, repo.TrimContact); err != nil {
		return nil, err
	}
	if st.Coverage, err = s.Trimmed(ctx, repo.CollCoverage, bson.M{"opportunity_id": id, "archived_at": nil},
		bson.D{{Key: "published_at", Value: -1}, {Key: "_id", Value: -1}}, repo.TrimCoverage); err != nil {
		return nil, err
	}
	if at := lastPitch(o); at != nil {
		st.ReplySincePitch.PitchedAt = at
		mb, err := s.readMail(ctx, bson.M{"opportunity_links.opportunity_id": id})
		if err != nil {
			return nil, err
		}
		if th, m := mb.firstReply(id, *at); m != nil {
			st.ReplySincePitch.Replied, st.ReplySincePitch.ContactID = true, mb.sender(m)
			st.ReplySincePitch.Reply = &Touch{At: m.Date, Via: "email", ID: m.ID, Title: m.Subject, ThreadID: th.ID}
		}
	}
	if st.LatestInteractions, err = s.InteractionLog(ctx, InteractionQuery{OpportunityID: id, Limit: interactions}); err != nil {
		return nil, err
	}
	return st, nil
}

// lastPitch is when the opportunity last entered the pitched stage, or nil.
func lastPitch(o *pipeline.Opportunity) *time.Time {
	for i := len(o.StageHistory) - 1; i >= 0; i-- {
		if o.StageHistory[i].Stage == "pitched" {
			at := o.StageHistory[i].At
			return &at
		}
	}
	return nil
}

// Agenda reasons, in the order the agenda lists them.
const (
	ReasonOverdue       = "next_action_overdue"
	ReasonNoReply       = "no_reply"
	ReasonUnlinkedReply = "unlinked_reply"
	ReasonDue           = "next_action_due"
	ReasonUntouched     = "untouched"
	ReasonEmbargo       = "embargo_lifting"
)

// AgendaReasons are the reasons an item is on the agenda, in listing order.
var AgendaReasons = []string{ReasonOverdue, ReasonNoReply, ReasonUnlinkedReply, ReasonDue, ReasonEmbargo, ReasonUntouched}

// AgendaQuery selects what the agenda looks at.
type AgendaQuery struct {
	// UserID narrows the agenda to one team member's opportunities; empty is
	// the whole team.
	UserID string
	AsOf   *time.Time
	// DueDays: next actions due within this many days. NoReplyDays: pitches
	// this old without a reply. UntouchedDays: open opportunities with
	// nothing new for this long. ReplyDays: unlinked replies this recent.
	DueDays, NoReplyDays, UntouchedDays, ReplyDays int
	// EmbargoDays: embargoes (of opportunities, and of campaigns for the
	// team) lifting within this many days.
	EmbargoDays   int
	Limit, Offset int
}

// AgendaItem is one thing to do.
type AgendaItem struct {
	Reason     string    `json:"reason"`
	Message    string    `json:"message"`
	RecordType string    `json:"record_type"` // opportunity, email_thread or campaign
	RecordID   string    `json:"record_id"`
	Title      string    `json:"title"`
	Date       time.Time `json:"date"`
	// Days: overdue by, due in, waiting for a reply, since the reply, or untouched for.
	Days int `json:"days"`
	// EmbargoLocal is, on an embargo_lifting item, the embargo in the zone
	// it was given in (as briefs show it).
	EmbargoLocal string `json:"embargo_until_local,omitempty"`
}

// Agenda is what needs doing, most urgent first.
type Agenda struct {
	AsOf   time.Time      `json:"as_of"`
	Scope  string         `json:"scope"` // team or user
	UserID string         `json:"user_id,omitempty"`
	Total  int            `json:"total"`
	Counts map[string]int `json:"counts"`
	Items  []AgendaItem   `json:"items"`
}

// owns reports whether user is responsible for o: its next_action_owner
// names the user (id, email or name, ignoring case), or, with no owner set,
// the user created it.
func owns(u *repo.User, o *pipeline.Opportunity) bool {
	if o.OwnerID != "" && o.OwnerID == u.ID {
		return true
	}
	owner := strings.ToLower(strings.TrimSpace(o.NextActionOwner))
	if owner == "" {
		return len(o.StageHistory) > 0 && o.StageHistory[0].By.UserID == u.ID
	}
	return owner == strings.ToLower(u.ID) || owner == strings.ToLower(u.Email) || owner == strings.ToLower(strings.TrimSpace(u.Name))
}

// Agenda lists, as of q.AsOf (nil: now), for one user or the team: next
// actions overdue or due within q.DueDays; opportunities in the pitched
// stage for q.NoReplyDays or more with no reply from a contact since the
// pitch; email threads linked to no opportunity with a message from a
// contact in the last q.ReplyDays (team only: threads have no owner); open
// opportunities with nothing new (an edit, a stage move, a note, an email,
// coverage) for q.UntouchedDays or more.
func (s *Store) Agenda(ctx context.Context, q AgendaQuery) (*Agenda, error) {
	t := repo.Now()
	if q.AsOf != nil {
		t = *q.AsOf
	}
	a := &Agenda{AsOf: t, Scope: "team", UserID: q.UserID, Counts: map[string]int{}}
	for _, r := range AgendaReasons {
		a.Counts[r] = 0
	}
	var user *repo.User
	if q.UserID != "" {
		u, err := access.Of(s.Store).User(ctx, q.UserID)
		if err != nil {
			return nil, repo.WithField(err, "user_id")
		}
		user, a.Scope = u, "user"
	}
	var all []pipeline.Opportunity
	if err := s.FindAll(ctx, repo.CollOpportunities, bson.M{"archived_at": nil, "stage": bson.M{"$nin": bson.A{pipeline.StageWon, pipeline.StageLost}}}, nil, &all); err != nil {
		return nil, err
	}
	opps := all[:0]
	ids := []string{}
	for _, o := range all {
		if user == nil || owns(user, &o) {
			opps = append(opps, o)
			ids = append(ids, o.ID)
		}
	}
	// The last touch of each opportunity: its last edit or stage move
	// (updated_at), and its latest note, email and coverage up to t.
	touched := map[string]time.Time{}
	touch := func(id string, at time.Time) {
		if !at.After(t) && at.After(touched[id]) {
			touched[id] = at
		}
	}
	for _, o := range opps {
		touched[o.ID] = o.UpdatedAt // an edit after t (as_of in the past) counts too: never "untouched"
	}
	var notes []notes.Note
	if err := s.FindProjected(ctx, repo.CollNotes, bson.M{"archived_at": nil, "links.opportunity_id": bson.M{"$in": ids}}, bson.M{"occurred_at": 1, "links": 1}, &notes); err != nil {
		return nil, err
	}
	for _, n := range notes {
		for _, l := range n.Links {
			if l.OpportunityID != "" {
				touch(l.OpportunityID, n.OccurredAt)
			}
		}
	}
	var cov []pipeline.Coverage
	if err := s.FindProjected(ctx, repo.CollCoverage, bson.M{"archived_at": nil, "opportunity_id": bson.M{"$in": ids}}, bson.M{"published_at": 1, "opportunity_id": 1}, &cov); err != nil {
		return nil, err
	}
	for _, c := range cov {
		touch(c.OpportunityID, c.PublishedAt)
	}
	replySince := t.Add(-time.Duration(q.ReplyDays) * day)
	threads := bson.A{bson.M{"opportunity_links.opportunity_id": bson.M{"$in": ids}}}
	if user == nil {
		threads = append(threads, bson.M{"last_message_at": bson.M{"$gte": replySince}})
	}
	mb, err := s.readMail(ctx, bson.M{"$or": threads})
	if err != nil {
		return nil, err
	}
	for _, th := range mb.threads {
		for _, l := range th.OpportunityLinks {
			for _, m := range th.Messages {
				touch(l.OpportunityID, m.Date)
			}
		}
	}
	add := func(reason, msg, typ, id, title string, at time.Time, n int) {
		a.Items = append(a.Items, AgendaItem{Reason: reason, Message: msg, RecordType: typ, RecordID: id, Title: title, Date: at, Days: n})
	}
	for i := range opps {
		o := &opps[i]
		if d := o.NextActionDate; d != nil {
			switch {
			case d.Before(t):
				add(ReasonOverdue, "next action overdue: "+o.NextAction, "opportunity", o.ID, o.Title, *d, days(t.Sub(*d)))
			case !d.After(t.Add(time.Duration(q.DueDays) * day)):
				add(ReasonDue, "next action due: "+o.NextAction, "opportunity", o.ID, o.Title, *d, days(d.Sub(t)))
			}
		}
		if at := lastPitch(o); o.Stage == "pitched" && at != nil && !at.After(t.Add(-time.Duration(q.NoReplyDays)*day)) {
			if _, m := mb.firstReply(o.ID, *at); m == nil {
				add(ReasonNoReply, "pitched with no reply from a contact since", "opportunity", o.ID, o.Title, *at, days(t.Sub(*at)))
			}
		}
		if e := o.EmbargoUntil; e != nil && e.After(t) && !e.After(t.Add(time.Duration(q.EmbargoDays)*day)) {
			local := pipeline.EmbargoLocal(e, o.EmbargoZone)
			add(ReasonEmbargo, "embargo lifts at "+local, "opportunity", o.ID, o.Title, *e, days(e.Sub(t)))
			a.Items[len(a.Items)-1].EmbargoLocal = local
		}
		if last := touched[o.ID]; !last.After(t.Add(-time.Duration(q.UntouchedDays) * day)) {
			add(ReasonUntouched, "nothing new on this opportunity", "opportunity", o.ID, o.Title, last, days(t.Sub(last)))
		}
	}
	if user == nil {
		var camps []pipeline.Campaign
		if err := s.FindAll(ctx, repo.CollCampaigns, bson.M{"archived_at": nil, "embargo_until": bson.M{"$gt": t, "$lte": t.Add(time.Duration(q.EmbargoDays) * day)}}, nil, &camps); err != nil {
			return nil, err
		}
		for _, c := range camps {
			local := pipeline.EmbargoLocal(c.EmbargoUntil, c.EmbargoZone)
			add(ReasonEmbargo, "campaign embargo lifts at "+local, "campaign", c.ID, c.Name, *c.EmbargoUntil, days(c.EmbargoUntil.Sub(t)))
			a.Items[len(a.Items)-1].EmbargoLocal = local
		}
		for _, th := range mb.threads {
			if len(th.OpportunityLinks) > 0 {
				continue
			}
			var latest *inbox.EmailMessage
			for j := range th.Messages {
				m := &th.Messages[j]
				if mb.sender(m) != "" && !m.Date.Before(replySince) && !m.Date.After(t) && (latest == nil || m.Date.After(latest.Date)) {
					latest = m
				}
			}
			if latest != nil {
				add(ReasonUnlinkedReply, "a contact wrote in a thread linked to no opportunity; link it with link_email_opportunity", "email_thread", th.ID, th.Subject, latest.Date, days(t.Sub(latest.Date)))
			}
		}
	}
	slices.SortFunc(a.Items, func(x, y AgendaItem) int {
		if c := cmp.Compare(slices.Index(AgendaReasons, x.Reason), slices.Index(AgendaReasons, y.Reason)); c != 0 {
			return c
		}
		if c := x.Date.Compare(y.Date); c != 0 {
			return c
		}
		return cmp.Compare(x.RecordID, y.RecordID)
	})
	for _, it := range a.Items {
		a.Counts[it.Reason]++
	}
	a.Total = len(a.Items)
	lo, hi := min(q.Offset, len(a.Items)), min(q.Offset+q.Limit, len(a.Items))
	a.Items = a.Items[lo:hi]
	if a.Items == nil {
		a.Items = []AgendaItem{}
	}
	return a, nil
}
