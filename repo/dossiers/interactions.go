package dossiers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"outreach/repo"
	"outreach/repo/inbox"
	"outreach/repo/notes"
	"outreach/repo/pipeline"
	"outreach/repo/pitches"
	"outreach/textfold"
)

// InteractionQuery selects the interaction log of a contact, an outlet or an
// opportunity; an entry must match every id given.
type InteractionQuery struct {
	ContactID, OutletID, OpportunityID string
	Since, Until                       *time.Time
	Limit                              int
}

// Interaction is one entry of the log, in the specification's shape.
type Interaction struct {
	Type       string    `bson:"type" json:"type"`
	ID         string    `bson:"id" json:"id"`
	Date       time.Time `bson:"date" json:"date"`
	Title      string    `bson:"title" json:"title"`
	Summary    string    `bson:"summary" json:"summary"`
	DetailType string    `bson:"detail_type,omitempty" json:"detail_type,omitempty"`
}

// InteractionLog is the log's response.
type InteractionLog struct {
	TotalEntries int64         `json:"total_entries"`
	Showing      int           `json:"showing"`
	Entries      []Interaction `json:"entries"`
}

// interactionScope is the query resolved into per-source filters. Which
// emails belong to an outlet is resolved here, in Go, for both builders:
// messages that involve a contact affiliated with the outlet, and messages
// of threads linked to one of the outlet's opportunities.
type interactionScope struct {
	notes, coverage, threads bson.M
	// pitches filters pitches, recipients their unwound recipients (fields
	// under "recipients."); recipientOK is the same filter in Go.
	pitches, recipients bson.M
	recipientOK         func(p *pitches.Pitch, r *pitches.PitchRecipient) bool
	// messages filters unwound messages (fields under "messages.").
	messages bson.M
	// messageOK is the same filter as messages, evaluated in Go.
	messageOK func(t *inbox.EmailThread, m *inbox.EmailMessage) bool
}

func (s *Store) interactionScope(ctx context.Context, q InteractionQuery) (interactionScope, error) {
	notes := bson.M{"archived_at": nil}
	coverage := bson.M{"archived_at": nil}
	threads := bson.M{"archived_at": nil}
	messages := bson.M{}
	var checks []func(*inbox.EmailThread, *inbox.EmailMessage) bool
	// A pitch is an interaction per recipient it was sent to (sent_at set,
	// whatever happened after: bounced, replied).
	// pitches only narrows (any recipient matches); recipients and
	// recipientOK decide per recipient.
	pitchFilter := bson.M{"archived_at": nil, "recipients.sent_at": bson.M{"$exists": true}}
	recipients := bson.M{"recipients.sent_at": bson.M{"$ne": nil}}
	pitchChecks := []func(*pitches.Pitch, *pitches.PitchRecipient) bool{func(_ *pitches.Pitch, r *pitches.PitchRecipient) bool { return r.SentAt != nil }}
	if q.ContactID != "" {
		pitchFilter["recipients.contact_id"] = q.ContactID
		recipients["recipients.contact_id"] = q.ContactID
		pitchChecks = append(pitchChecks, func(_ *pitches.Pitch, r *pitches.PitchRecipient) bool { return r.ContactID == q.ContactID })
		notes["links.contact_id"] = q.ContactID
		coverage["contact_ids"] = q.ContactID
		threads["messages.contact_ids"] = q.ContactID
		messages["messages.contact_ids"] = q.ContactID
		checks = append(checks, func(_ *inbox.EmailThread, m *inbox.EmailMessage) bool {
			return slices.Contains(m.ContactIDs, q.ContactID)
		})
	}
	if q.OpportunityID != "" {
		notes["links.opportunity_id"] = q.OpportunityID
		coverage["opportunity_id"] = q.OpportunityID
		threads["opportunity_links.opportunity_id"] = q.OpportunityID
		pitchFilter["opportunity_id"] = q.OpportunityID
		checks = append(checks, func(t *inbox.EmailThread, _ *inbox.EmailMessage) bool {
			return slices.ContainsFunc(t.OpportunityLinks, func(l inbox.EmailOpportunityLink) bool { return l.OpportunityID == q.OpportunityID })
		})
	}
	if q.OutletID != "" {
		notes["links.outlet_id"] = q.OutletID
		coverage["outlet_id"] = q.OutletID
		contacts, err := s.DistinctIDs(ctx, repo.CollContacts, bson.M{"affiliations.outlet_id": q.OutletID, "archived_at": nil})
		if err != nil {
			return interactionScope{}, err
		}
		opps, err := s.DistinctIDs(ctx, repo.CollOpportunities, bson.M{"outlet_id": q.OutletID})
		if err != nil {
			return interactionScope{}, err
		}
		or := bson.A{bson.M{"messages.contact_ids": bson.M{"$in": contacts}}, bson.M{"opportunity_links.opportunity_id": bson.M{"$in": opps}}}
		threads = bson.M{"$and": bson.A{threads, bson.M{"$or": or}}}
		messages = bson.M{"$and": bson.A{messages, bson.M{"$or": bson.A{
			bson.M{"messages.contact_ids": bson.M{"$in": contacts}},
			bson.M{"opportunity_links.opportunity_id": bson.M{"$in": opps}},
		}}}}
		// A pitch belongs to the outlet as an email does: sent to a contact
		// of the outlet, or of one of its opportunities.
		recipients = bson.M{"$and": bson.A{recipients, bson.M{"$or": bson.A{
			bson.M{"recipients.contact_id": bson.M{"$in": contacts}},
			bson.M{"opportunity_id": bson.M{"$in": opps}},
		}}}}
		pitchChecks = append(pitchChecks, func(p *pitches.Pitch, r *pitches.PitchRecipient) bool {
			return slices.Contains(contacts, r.ContactID) || slices.Contains(opps, p.OpportunityID)
		})
		checks = append(checks, func(t *inbox.EmailThread, m *inbox.EmailMessage) bool {
			return slices.ContainsFunc(m.ContactIDs, func(id string) bool { return slices.Contains(contacts, id) }) ||
				slices.ContainsFunc(t.OpportunityLinks, func(l inbox.EmailOpportunityLink) bool { return slices.Contains(opps, l.OpportunityID) })
		})
	}
	dates := bson.M{}
	if q.Since != nil {
		dates["$gte"] = *q.Since
	}
	if q.Until != nil {
		dates["$lte"] = *q.Until
	}
	if len(dates) > 0 {
		notes["occurred_at"] = dates
		coverage["published_at"] = dates
		messages = bson.M{"$and": bson.A{messages, bson.M{"messages.date": dates}}}
		recipients = bson.M{"$and": bson.A{recipients, bson.M{"recipients.sent_at": dates}}}
		pitchChecks = append(pitchChecks, func(_ *pitches.Pitch, r *pitches.PitchRecipient) bool {
			return (q.Since == nil || !r.SentAt.Before(*q.Since)) && (q.Until == nil || !r.SentAt.After(*q.Until))
		})
		checks = append(checks, func(_ *inbox.EmailThread, m *inbox.EmailMessage) bool {
			return (q.Since == nil || !m.Date.Before(*q.Since)) && (q.Until == nil || !m.Date.After(*q.Until))
		})
	}
	return interactionScope{notes: notes, coverage: coverage, threads: threads, messages: messages,
		pitches: pitchFilter, recipients: recipients,
		recipientOK: func(p *pitches.Pitch, r *pitches.PitchRecipient) bool {
			for _, ok := range pitchChecks {
				if !ok(p, r) {
					return false
				}
			}
			return true
		},
		messageOK: func(t *inbox.EmailThread, m *inbox.EmailMessage) bool {
			for _, ok := range checks {
				if !ok(t, m) {
					return false
				}
			}
			return true
		}}, nil
}

// InteractionLog returns the merged timeline, newest first (ties: id
// descending). On a server with $unionWith it is one aggregation pipeline;
// elsewhere a merge of four sorted, limited queries gives the same entries
// in the same order.
func (s *Store) InteractionLog(ctx context.Context, q InteractionQuery) (*InteractionLog, error) {
	scope, err := s.interactionScope(ctx, q)
	if err != nil {
		return nil, err
	}
	// With the service's own index on a server the merge's four queries
	// are answered from it; the pipeline would sort every match there.
	if c := s.Capabilities(); c.UnionWith && !c.IndexFollows {
		return s.interactionsPipeline(ctx, scope, q.Limit)
	}
	return s.interactionsMerged(ctx, scope, q.Limit)
}

// InteractionLogMerged always takes the merge builder (for comparing builders).
func (s *Store) InteractionLogMerged(ctx context.Context, q InteractionQuery) (*InteractionLog, error) {
	scope, err := s.interactionScope(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.interactionsMerged(ctx, scope, q.Limit)
}

// InteractionPipeline returns the aggregation pipeline of q (for the golden test).
func (s *Store) InteractionPipeline(ctx context.Context, q InteractionQuery) (mongo.Pipeline, error) {
	scope, err := s.interactionScope(ctx, q)
	if err != nil {
		return nil, err
	}
	return interactionPipeline(scope, q.Limit), nil
}

// coverageSummary is "<type> - <sentiment> - <url>"; a missing part reads "n/a".
func coverageSummary(c *pipeline.Coverage) string {
	or := func(s string) string {
		if s == "" {
			return "n/a"
		}
		return s
	}
	return or(c.Type) + " - " + or(c.Sentiment) + " - " + or(c.URL)
}

// pitchSummary is "to <address> (<recipient state>)".
func pitchSummary(email, state string) string { return "to " + email + " (" + state + ")" }

func newest(a, b Interaction) int {
	if c := b.Date.Compare(a.Date); c != 0 {
		return c
	}
	return cmp.Compare(b.ID, a.ID)
}

// logThread is what the log reads of an email thread: the fields its
// filters (messageOK) and its entries use. Decoding each thread's messages
// whole, headers it never shows included, was most of the log's own cost.
type logThread struct {
	ID               string                       `bson:"_id"`
	OpportunityLinks []inbox.EmailOpportunityLink `bson:"opportunity_links"`
	Messages         []struct {
		ID         string    `bson:"id"`
		Subject    string    `bson:"subject"`
		Date       time.Time `bson:"date"`
		BodyText   string    `bson:"body_text"`
		ContactIDs []string  `bson:"contact_ids"`
	} `bson:"messages"`
}

func (s *Store) interactionsMerged(ctx context.Context, sc interactionScope, limit int) (*InteractionLog, error) {
	var all []Interaction
	var total int64
	// Each source's page and count in one read where a count costs a
	// second scan (see listPage).
	notes, err := repo.ListPage[notes.Note](ctx, s.Store, repo.CollNotes, sc.notes, bson.D{{Key: "occurred_at", Value: -1}, {Key: "_id", Value: -1}}, limit, 0)
	if err != nil {
		return nil, fmt.Errorf("interaction log notes: %w", err)
	}
	total += notes.Total
	// A note's and an email's Summary holds its whole text until the page is
	// cut: only the entries shown get their first line.
	for _, x := range notes.Items {
		all = append(all, Interaction{Type: "note", ID: x.ID, Date: x.OccurredAt, Title: x.Title, Summary: x.Content, DetailType: x.Type})
	}
	cov, err := repo.ListPage[pipeline.Coverage](ctx, s.Store, repo.CollCoverage, sc.coverage, bson.D{{Key: "published_at", Value: -1}, {Key: "_id", Value: -1}}, limit, 0)
	if err != nil {
		return nil, fmt.Errorf("interaction log coverage: %w", err)
	}
	total += cov.Total
	for i := range cov.Items {
		x := &cov.Items[i]
		all = append(all, Interaction{Type: "coverage", ID: x.ID, Date: x.PublishedAt, Title: x.Title, Summary: coverageSummary(x), DetailType: x.Type})
	}
	// Messages live inside threads: every matching thread is read, and its
	// messages filtered, counted and merged here.
	cur, err := s.Find(ctx, repo.CollEmails, sc.threads)
	if err != nil {
		return nil, fmt.Errorf("interaction log emails: %w", err)
	}
	var threads []logThread
	if err := cur.All(ctx, &threads); err != nil {
		return nil, err
	}
	for i := range threads {
		lt := &threads[i]
		t := &inbox.EmailThread{Meta: repo.Meta{ID: lt.ID}, OpportunityLinks: lt.OpportunityLinks}
		for j := range lt.Messages {
			lm := &lt.Messages[j]
			m := &inbox.EmailMessage{ID: lm.ID, Subject: lm.Subject, Date: lm.Date, ContactIDs: lm.ContactIDs}
			if !sc.messageOK(t, m) {
				continue
			}
			total++
			all = append(all, Interaction{Type: "email", ID: m.ID, Date: m.Date, Title: m.Subject, Summary: lm.BodyText})
		}
	}
	// Pitches hold their recipients: every matching pitch is read, and its
	// sent recipients filtered, counted and merged here.
	cur, err = s.Find(ctx, repo.CollPitches, sc.pitches)
	if err != nil {
		return nil, fmt.Errorf("interaction log pitches: %w", err)
	}
	var sent []pitches.Pitch
	if err := cur.All(ctx, &sent); err != nil {
		return nil, err
	}
	for i := range sent {
		p := &sent[i]
		for j := range p.Recipients {
			r := &p.Recipients[j]
			if !sc.recipientOK(p, r) {
				continue
			}
			total++
			all = append(all, Interaction{Type: "pitch", ID: p.ID + ":" + r.ContactID, Date: *r.SentAt, Title: p.Subject,
				Summary: pitchSummary(r.Email, r.State), DetailType: r.State})
		}
	}
	slices.SortFunc(all, newest)
	if len(all) > limit {
		all = all[:limit]
	}
	for i := range all {
		if all[i].Type == "note" || all[i].Type == "email" {
			all[i].Summary = textfold.FirstLine(all[i].Summary)
		}
	}
	if all == nil {
		all = []Interaction{}
	}
	return &InteractionLog{TotalEntries: total, Showing: len(all), Entries: all}, nil
}

// firstLineExpr is the aggregation twin of firstLine.
func firstLineExpr(field string) bson.M {
	line := bson.M{"$trim": bson.M{"input": bson.M{"$arrayElemAt": bson.A{
		bson.M{"$split": bson.A{bson.M{"$trim": bson.M{"input": bson.M{"$ifNull": bson.A{field, ""}}}}, "\n"}}, 0}}}}
	return bson.M{"$substrCP": bson.A{line, 0, textfold.SummaryLen}}
}

func orNA(field string) bson.M {
	return bson.M{"$cond": bson.A{bson.M{"$in": bson.A{bson.M{"$ifNull": bson.A{field, ""}}, bson.A{""}}}, "n/a", field}}
}

func interactionPipeline(sc interactionScope, limit int) mongo.Pipeline {
	emails := bson.A{
		bson.M{"$match": sc.threads},
		bson.M{"$unwind": "$messages"},
		bson.M{"$match": sc.messages},
		bson.M{"$project": bson.M{"_id": 0, "type": bson.M{"$literal": "email"}, "id": "$messages.id", "date": "$messages.date",
			"title": "$messages.subject", "summary": firstLineExpr("$messages.body_text")}},
	}
	coverage := bson.A{
		bson.M{"$match": sc.coverage},
		bson.M{"$project": bson.M{"_id": 0, "type": bson.M{"$literal": "coverage"}, "id": "$_id", "date": "$published_at", "title": "$title",
			"summary":     bson.M{"$concat": bson.A{orNA("$type"), " - ", orNA("$sentiment"), " - ", orNA("$url")}},
			"detail_type": "$type"}},
	}
	pitchPipeline := bson.A{
		bson.M{"$match": sc.pitches},
		bson.M{"$unwind": "$recipients"},
		bson.M{"$match": sc.recipients},
		bson.M{"$project": bson.M{"_id": 0, "type": bson.M{"$literal": "pitch"}, "id": bson.M{"$concat": bson.A{"$_id", ":", "$recipients.contact_id"}},
			"date": "$recipients.sent_at", "title": "$subject",
			"summary":     bson.M{"$concat": bson.A{"to ", "$recipients.email", " (", "$recipients.state", ")"}},
			"detail_type": "$recipients.state"}},
	}
	return mongo.Pipeline{
		{{Key: "$match", Value: sc.notes}},
		{{Key: "$project", Value: bson.M{"_id": 0, "type": bson.M{"$literal": "note"}, "id": "$_id", "date": "$occurred_at",
			"title": "$title", "summary": firstLineExpr("$content"), "detail_type": "$type"}}},
		{{Key: "$unionWith", Value: bson.M{"coll": repo.CollEmails, "pipeline": emails}}},
		{{Key: "$unionWith", Value: bson.M{"coll": repo.CollCoverage, "pipeline": coverage}}},
		{{Key: "$unionWith", Value: bson.M{"coll": repo.CollPitches, "pipeline": pitchPipeline}}},
		{{Key: "$sort", Value: bson.D{{Key: "date", Value: -1}, {Key: "id", Value: -1}}}},
		{{Key: "$facet", Value: bson.M{
			"total":   bson.A{bson.M{"$count": "n"}},
			"entries": bson.A{bson.M{"$limit": limit}},
		}}},
	}
}

func (s *Store) interactionsPipeline(ctx context.Context, sc interactionScope, limit int) (*InteractionLog, error) {
	cur, err := s.Collection(repo.CollNotes).Aggregate(ctx, interactionPipeline(sc, limit))
	if err != nil {
		return nil, fmt.Errorf("interaction log: %w", err)
	}
	var out []struct {
		Total []struct {
			N int64 `bson:"n"`
		} `bson:"total"`
		Entries []Interaction `bson:"entries"`
	}
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("interaction log: %w", err)
	}
	log := &InteractionLog{Entries: []Interaction{}}
	if len(out) == 1 {
		if len(out[0].Total) == 1 {
			log.TotalEntries = out[0].Total[0].N
		}
		if out[0].Entries != nil {
			log.Entries = out[0].Entries
		}
	}
	log.Showing = len(log.Entries)
	return log, nil
}
