package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/repo/reports"
)

// data is what the seed made, for the operations to name.
type data struct {
	hot      string // the contact most notes, coverage and messages involve
	contacts []string
	outlets  []string
	notes    []string
	summary  string
	db       string
	// shareLink is a shared report of the year renderOps render, made
	// after seeding (shareYear).
	shareLink string
}

// searchWord is in every tenth note's content, coverage title, email
// thread's bodies, opportunity's and campaign's description.
const searchWord = "quarterly"

// The hot contact's share of the data: a third of the notes, coverage and
// email messages, up to these, so that from 1,000 notes on the reads that ask
// for it get the same answer at every size and the growth table shows what
// the size of the rest costs. Its messages fill threads of their own.
const (
	hotNotes    = 333
	hotCoverage = 167
	hotMessages = 1000
	perThread   = 50
)

// hotShare is the hot contact's part of n records: a third, rounded, at most limit.
func hotShare(n, limit int) int { return min((n+1)/3, limit) }

// seedDirectory creates outlets and contacts through the tools: an outlet
// per 100 notes and a contact per 25 (at least 5 and 10). The first contact
// is the hot one.
func seedDirectory(ctx context.Context, url, key string, notes int) (*data, error) {
	s, err := connect(ctx, url, bearer{key: key})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	d := &data{}
	id := func(text string) (string, error) {
		var r struct{ ID string }
		err := json.Unmarshal([]byte(text), &r)
		return r.ID, err
	}
	nOutlets, nContacts := max(5, notes/100), max(10, notes/25)
	for i := range nOutlets {
		text, err := call(ctx, s, "create_outlet", map[string]any{"name": fmt.Sprintf("Outlet %d", i)})
		if err != nil {
			return nil, err
		}
		o, err := id(text)
		if err != nil {
			return nil, err
		}
		d.outlets = append(d.outlets, o)
	}
	for i := range nContacts {
		text, err := call(ctx, s, "create_contact", map[string]any{"first_name": "Contact", "last_name": fmt.Sprint(i),
			"email": fmt.Sprintf("contact%d@example.org", i), "outlet_ids": []string{d.outlets[i%nOutlets]}})
		if err != nil {
			return nil, err
		}
		c, err := id(text)
		if err != nil {
			return nil, err
		}
		d.contacts = append(d.contacts, c)
	}
	d.hot = d.contacts[0]
	return d, nil
}

// putFunc stores one record of a collection (fields as the tools store
// them) and returns its id: the write path (repo.Fixture), or the bulk seed.
type putFunc func(ctx context.Context, coll string, fields map[string]any) (string, error)

// seedRecords makes the notes, half as many coverage records and three
// times as many email messages (in threads of 50), spread over the
// directory's contacts, with the hot contact's share (hotShare) spread
// evenly through them; put stores each.
func seedRecords(ctx context.Context, d *data, notes int, put putFunc) error {
	rng := rand.New(rand.NewPCG(18, 18))
	other := func() string { return d.contacts[1+rng.IntN(len(d.contacts)-1)] }
	// spread says whether the i-th of n records is one of the hot contact's
	// h, which fall evenly through the n.
	spread := func(i, n, h int) bool { return (i+1)*h/n > i*h/n }
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	date := func() time.Time { return base.Add(time.Duration(rng.IntN(2*365*24*60)) * time.Minute) }
	text := func(i int) string {
		t := fmt.Sprintf("Call %d: went through the launch plan, asked for an embargoed briefing next week and the spokesperson's availability.", i)
		if i%10 == 0 {
			t += " Wants the " + searchWord + " numbers first."
		}
		return t
	}
	hot := hotShare(notes, hotNotes)
	for i := range notes {
		at, c := date(), other()
		if spread(i, notes, hot) {
			c = d.hot
		}
		nid, err := put(ctx, "notes", map[string]any{"type": "phone_call", "title": fmt.Sprintf("Note %d", i), "content": text(i),
			"occurred_at": at, "links": []map[string]any{{"id": uuid.NewString(), "contact_id": c, "created_at": at}}})
		if err != nil {
			return err
		}
		d.notes = append(d.notes, nid)
	}
	nCoverage := notes / 2
	hot = hotShare(nCoverage, hotCoverage)
	for i := range nCoverage {
		title, c := fmt.Sprintf("Coverage %d", i), other()
		if i%10 == 0 {
			title += " " + searchWord
		}
		if spread(i, nCoverage, hot) {
			c = d.hot
		}
		if _, err := put(ctx, "coverage", map[string]any{"title": title, "published_at": date(), "type": "article",
			"outlet_id": d.outlets[i%len(d.outlets)], "contact_ids": []string{c}}); err != nil {
			return err
		}
	}
	// Opportunities, a tenth as many as the notes, and campaigns, one per
	// 1,000 notes (at least 5 and 10): every tenth holds the search word.
	nOpportunities, nCampaigns := max(10, notes/10), max(5, notes/1000)
	for i := range nOpportunities {
		if _, err := put(ctx, "opportunities", map[string]any{"title": fmt.Sprintf("Opportunity %d", i), "description": text(i),
			"stage": "researching", "priority": "medium", "contact_ids": []string{other()}, "outlet_id": d.outlets[i%len(d.outlets)]}); err != nil {
			return err
		}
	}
	for i := range nCampaigns {
		if _, err := put(ctx, "campaigns", map[string]any{"name": fmt.Sprintf("Campaign %d", i), "description": text(i),
			"goals": "Coverage in the trade press", "status": "active"}); err != nil {
			return err
		}
	}
	// The hot contact's messages first, in threads of their own; then the
	// others', each message from a contact drawn at random.
	messages := 3 * notes
	hot = hotShare(messages, hotMessages)
	threads := 0
	for _, part := range []struct {
		n   int
		hot bool
	}{{hot, true}, {messages - hot, false}} {
		for done := 0; done < part.n; done += perThread {
			var msgs []map[string]any
			var last time.Time
			involved := map[string]bool{}
			for range min(perThread, part.n-done) {
				at, mid, c := date(), uuid.NewString(), d.hot
				if !part.hot {
					c = other()
				}
				involved[c] = true
				if at.After(last) {
					last = at
				}
				msgs = append(msgs, map[string]any{"id": mid, "message_id": "<" + mid + "@example.org>", "subject": fmt.Sprintf("Thread %d", threads),
					"date": at, "from": "someone@example.org", "body_text": text(threads), "contact_ids": []string{c}})
			}
			var ids []string
			for c := range involved {
				ids = append(ids, c)
			}
			slices.Sort(ids)
			if _, err := put(ctx, "email_threads", map[string]any{"subject": fmt.Sprintf("Thread %d", threads), "contact_ids": ids,
				"opportunity_links": []any{}, "messages": msgs, "last_message_at": last}); err != nil {
				return err
			}
			threads++
		}
	}
	d.summary = fmt.Sprintf("%d notes, %d coverage, %d email messages in %d threads, %d contacts, %d outlets, %d opportunities, %d campaigns; the hot contact's share: %d notes, %d coverage, %d messages",
		notes, nCoverage, messages, threads, len(d.contacts), len(d.outlets), nOpportunities, nCampaigns,
		hotShare(notes, hotNotes), hotShare(nCoverage, hotCoverage), hotShare(messages, hotMessages))
	return nil
}

// callSpec is one tool call.
type callSpec struct {
	tool string
	args map[string]any
}

// operation is one row of the table: how to call the service, what the raw
// store does for the same answer (and how many store operations that is),
// and the peer's equivalent calls, when there is one.
type operation struct {
	name   string
	write  bool
	rawOps int
	call   func(w, i int) []callSpec
	raw    func(ctx context.Context, r *rawStore, w, i int) error
	peer   func(w, i int) []callSpec
	// scratch is the collection a raw write changes, copied for it.
	scratch string
	// rendering marks a report rendering: measured by the growth bench
	// only (named in its operations), held to an absolute bound alone
	// (it is CPU work past the store's read, which no ratio to the raw
	// read describes).
	rendering bool
}

var (
	byNewest   = bson.D{{Key: "occurred_at", Value: -1}, {Key: "_id", Value: -1}}
	byCreated  = bson.D{{Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}
	byPublish  = bson.D{{Key: "published_at", Value: -1}, {Key: "_id", Value: -1}}
	byLastMail = bson.D{{Key: "last_message_at", Value: -1}, {Key: "_id", Value: -1}}
	bySeq      = bson.D{{Key: "seq", Value: -1}}
)

// find is one list read: filter, sort, first 50.
type find struct {
	coll   string
	filter bson.M
	sort   bson.D
}

func (f find) raw(ctx context.Context, r *rawStore) error {
	cur, err := r.db.Collection(f.coll).Find(ctx, f.filter, options.Find().SetSort(f.sort).SetLimit(50))
	if err != nil {
		return err
	}
	var docs []bson.Raw
	return cur.All(ctx, &docs)
}

// peer is the same find through the peer's find tool (filter and sort as
// MongoDB extended JSON, which is what the peer reads).
func (f find) peer(db string) callSpec {
	args := map[string]any{"database": db, "collection": f.coll, "filter": f.filter, "limit": 50}
	if len(f.sort) > 0 {
		sort := map[string]any{}
		for _, e := range f.sort {
			sort[e.Key] = e.Value
		}
		args["sort"] = sort
	}
	return callSpec{"find", args}
}

// listOp is a read answered by one find.
func listOp(name string, args map[string]any, f find, db string) operation {
	return operation{name: name, rawOps: 1,
		call: func(int, int) []callSpec { return []callSpec{{name[:len(name)-len(suffix(name))], args}} },
		raw:  func(ctx context.Context, r *rawStore, _, _ int) error { return f.raw(ctx, r) },
		peer: func(int, int) []callSpec { return []callSpec{f.peer(db)} }}
}

// suffix is the part of an operation's name after the tool (" (by contact)").
func suffix(name string) string {
	for i, c := range name {
		if c == ' ' {
			return name[i:]
		}
	}
	return ""
}

// literalIn is the store's filter of a literal, case-insensitive text in
// any of fields, as the lists ask it.
func literalIn(text string, fields ...string) bson.M {
	var or bson.A
	for _, f := range fields {
		or = append(or, bson.M{f: bson.M{"$regex": regexp.QuoteMeta(text), "$options": "i"}})
	}
	return bson.M{"$or": or}
}

func operations(d *data) []operation {
	note := func(w, i int) string { return d.notes[(w*7919+i*31)%len(d.notes)] }
	// active is f with the archive mark: a copy, as the raw cells of 8
	// clients build their filters at once.
	active := func(f bson.M) bson.M {
		out := maps.Clone(f)
		out["archived_at"] = nil
		return out
	}
	search := bson.M{"$or": bson.A{bson.M{"title": bson.M{"$regex": searchWord, "$options": "i"}}, bson.M{"content": bson.M{"$regex": searchWord, "$options": "i"}}}}
	logFinds := []find{
		{"notes", active(bson.M{"links.contact_id": d.hot}), byNewest},
		{"coverage", active(bson.M{"contact_ids": d.hot}), byPublish},
		{"email_threads", active(bson.M{"messages.contact_ids": d.hot}), nil},
	}
	stamp := func(w, i int) string { return fmt.Sprintf("w%d-%d-%d", w, i, time.Now().UnixNano()) }
	ops := []operation{
		// The note and the record its link names (get_note shows its name).
		{name: "get_note", rawOps: 2,
			call: func(w, i int) []callSpec { return []callSpec{{"get_note", map[string]any{"id": note(w, i)}}} },
			raw: func(ctx context.Context, r *rawStore, w, i int) error {
				var n struct {
					Links []struct {
						ContactID string `bson:"contact_id"`
					} `bson:"links"`
				}
				if err := r.db.Collection("notes").FindOne(ctx, bson.M{"_id": note(w, i)}).Decode(&n); err != nil {
					return err
				}
				for _, l := range n.Links {
					if err := r.db.Collection("contacts").FindOne(ctx, bson.M{"_id": l.ContactID}).Err(); err != nil {
						return err
					}
				}
				return nil
			},
			peer: func(w, i int) []callSpec {
				return []callSpec{{"find", map[string]any{"database": d.db, "collection": "notes", "filter": map[string]any{"_id": note(w, i)}, "limit": 1}}}
			}},
		listOp("list_notes (by contact)", map[string]any{"contact_id": d.hot}, logFinds[0], d.db),
		listOp("list_notes (search)", map[string]any{"search": searchWord}, find{"notes", active(search), byNewest}, d.db),
		{name: "get_interaction_log", rawOps: 3,
			call: func(int, int) []callSpec {
				return []callSpec{{"get_interaction_log", map[string]any{"contact_id": d.hot}}}
			},
			raw: func(ctx context.Context, r *rawStore, _, _ int) error {
				for _, f := range logFinds {
					if err := f.raw(ctx, r); err != nil {
						return err
					}
				}
				return nil
			},
			peer: func(int, int) []callSpec {
				return []callSpec{logFinds[0].peer(d.db), logFinds[1].peer(d.db), logFinds[2].peer(d.db)}
			}},
		listOp("list_contacts", map[string]any{}, find{"contacts", active(bson.M{}), byCreated}, d.db),
		// The free-text filters: a phrase of the directory's names (a word
		// in every record, then the numbers that begin with 1), and the
		// search word elsewhere.
		listOp("list_contacts (search)", map[string]any{"search": "Contact 1"}, find{"contacts", active(literalIn("Contact 1", "name", "email")), byCreated}, d.db),
		listOp("list_outlets (search)", map[string]any{"search": "Outlet 1"}, find{"outlets", active(literalIn("Outlet 1", "name", "website")), byCreated}, d.db),
		listOp("list_campaigns (search)", map[string]any{"search": searchWord}, find{"campaigns", active(literalIn(searchWord, "name", "description", "goals")), byCreated}, d.db),
		listOp("list_opportunities (search)", map[string]any{"search": searchWord},
			find{"opportunities", active(literalIn(searchWord, "title", "description", "next_action")), byCreated}, d.db),
		listOp("list_coverage (search)", map[string]any{"search": searchWord}, find{"coverage", active(literalIn(searchWord, "title", "summary", "url")), byPublish}, d.db),
		listOp("search_emails", map[string]any{"query": searchWord, "limit": 20},
			find{"email_threads", active(literalIn(searchWord, "messages.subject", "messages.body_text", "messages.from")), byLastMail}, d.db),
		listOp("list_outlets", map[string]any{}, find{"outlets", active(bson.M{}), byCreated}, d.db),
		listOp("list_coverage (by contact)", map[string]any{"contact_id": d.hot}, logFinds[1], d.db),
		listOp("list_email_threads (by contact)", map[string]any{"contact_id": d.hot}, find{"email_threads", active(bson.M{"contact_ids": d.hot}), byLastMail}, d.db),
		listOp("get_change_log", map[string]any{}, find{"change_log", bson.M{"state": "applied"}, bySeq}, d.db),
		{name: "get_contact_dossier", rawOps: 4,
			call: func(int, int) []callSpec {
				return []callSpec{{"get_contact_dossier", map[string]any{"contact_id": d.hot}}}
			},
			raw: func(ctx context.Context, r *rawStore, _, _ int) error {
				if err := r.db.Collection("contacts").FindOne(ctx, bson.M{"_id": d.hot}).Err(); err != nil {
					return err
				}
				for _, f := range logFinds {
					if err := f.raw(ctx, r); err != nil {
						return err
					}
				}
				return nil
			}},
		{name: "search", rawOps: 3,
			call: func(int, int) []callSpec { return []callSpec{{"search", map[string]any{"query": searchWord}}} },
			raw: func(ctx context.Context, r *rawStore, _, _ int) error {
				for _, f := range []find{{"notes", active(search), byNewest}, {"coverage", active(bson.M{"title": bson.M{"$regex": searchWord, "$options": "i"}}), byPublish},
					{"email_threads", active(bson.M{"messages.body_text": bson.M{"$regex": searchWord, "$options": "i"}}), byLastMail}} {
					if err := f.raw(ctx, r); err != nil {
						return err
					}
				}
				return nil
			}},
		// Writes. Each worker updates records of its own, so no two clients
		// race for one record (a lost race is retried, and measured).
		{name: "create_note", write: true, scratch: "notes", rawOps: 4,
			call: func(w, i int) []callSpec {
				return []callSpec{{"create_note", map[string]any{"title": "bench " + stamp(w, i), "content": "a call", "type": "phone_call",
					"contact_ids": []string{d.contacts[(w+i)%len(d.contacts)]}}}}
			},
			raw: func(ctx context.Context, r *rawStore, w, i int) error {
				return r.create(ctx, "notes", []string{d.contacts[(w+i)%len(d.contacts)]}, bson.M{"title": "bench " + stamp(w, i), "content": "a call", "type": "phone_call",
					"occurred_at": time.Now(), "links": bson.A{bson.M{"id": uuid.NewString(), "contact_id": d.contacts[(w+i)%len(d.contacts)], "created_at": time.Now()}}})
			}},
		{name: "update_note", write: true, scratch: "notes", rawOps: 4,
			call: func(w, i int) []callSpec {
				return []callSpec{{"update_note", map[string]any{"id": d.notes[w], "title": "bench " + stamp(w, i)}}}
			},
			raw: func(ctx context.Context, r *rawStore, w, i int) error {
				return r.update(ctx, "notes", d.notes[w], bson.M{"title": "bench " + stamp(w, i)})
			}},
		{name: "create_contact", write: true, scratch: "contacts", rawOps: 3,
			call: func(w, i int) []callSpec {
				return []callSpec{{"create_contact", map[string]any{"first_name": "Bench", "last_name": stamp(w, i)}}}
			},
			raw: func(ctx context.Context, r *rawStore, w, i int) error {
				return r.create(ctx, "contacts", nil, bson.M{"first_name": "Bench", "last_name": stamp(w, i)})
			}},
		{name: "update_contact", write: true, scratch: "contacts", rawOps: 4,
			call: func(w, i int) []callSpec {
				return []callSpec{{"update_contact", map[string]any{"id": d.contacts[1+w%(len(d.contacts)-1)], "title": "Editor " + stamp(w, i)}}}
			},
			raw: func(ctx context.Context, r *rawStore, w, i int) error {
				return r.update(ctx, "contacts", d.contacts[1+w%(len(d.contacts)-1)], bson.M{"title": "Editor " + stamp(w, i)})
			}},
		{name: "create_coverage", write: true, scratch: "coverage", rawOps: 5,
			call: func(w, i int) []callSpec {
				return []callSpec{{"create_coverage", map[string]any{"title": "bench " + stamp(w, i), "published_at": "2026-01-02",
					"outlet_id": d.outlets[i%len(d.outlets)], "contact_ids": []string{d.contacts[(w+i)%len(d.contacts)]}}}}
			},
			raw: func(ctx context.Context, r *rawStore, w, i int) error {
				if err := r.db.Collection("outlets").FindOne(ctx, bson.M{"_id": d.outlets[i%len(d.outlets)]}).Err(); err != nil {
					return err
				}
				return r.create(ctx, "coverage", []string{d.contacts[(w+i)%len(d.contacts)]}, bson.M{"title": "bench " + stamp(w, i),
					"published_at": time.Now(), "outlet_id": d.outlets[i%len(d.outlets)], "contact_ids": bson.A{d.contacts[(w+i)%len(d.contacts)]}})
			}},
	}
	return append(ops, renderOps(d)...)
}

// The year the rendering rows report on: the seed spreads coverage over
// 2024 and 2025, so a year holds half of it (25,000 pieces at 100,000
// notes).
var renderYear = map[string]any{"kind": "coverage", "since": "2024-01-01", "until": "2024-12-31"}

// renderOps are the report renderings of a year's coverage report, and
// the page of a link shared of it; beside each, the raw store reads the
// year's coverage (what the report counts), or the shared record.
func renderOps(d *data) []operation {
	year := bson.M{"archived_at": nil, "published_at": bson.M{"$gte": time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), "$lt": time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}}
	readYear := func(ctx context.Context, r *rawStore, _, _ int) error {
		cur, err := r.db.Collection("coverage").Find(ctx, year, options.Find().SetProjection(bson.M{"title": 1, "url": 1, "type": 1, "sentiment": 1,
			"outlet_id": 1, "reach": 1, "published_at": 1, "contact_ids": 1, "summary": 1}))
		if err != nil {
			return err
		}
		var docs []bson.Raw
		return cur.All(ctx, &docs)
	}
	var ops []operation
	for _, f := range []struct{ format, chart string }{{"html", ""}, {"pdf", ""}, {"xlsx", ""}, {"png", "trend"}} {
		args := maps.Clone(renderYear)
		args["format"] = f.format
		if f.chart != "" {
			args["chart"] = f.chart
		}
		ops = append(ops, operation{name: "render_report (" + f.format + ", a year)", rawOps: 1, rendering: true,
			call: func(int, int) []callSpec { return []callSpec{{"render_report", maps.Clone(args)}} },
			raw:  readYear})
	}
	ops = append(ops, operation{name: "shared report page (GET)", rawOps: 1, rendering: true,
		call: func(int, int) []callSpec { return []callSpec{{httpGet, map[string]any{"url": d.shareLink}}} },
		raw: func(ctx context.Context, r *rawStore, _, _ int) error {
			id, _, _, _ := reports.ParseShareURL(d.shareLink[strings.Index(d.shareLink, "/shared/"):])
			return r.db.Collection("shared_reports").FindOne(ctx, bson.M{"_id": id}).Err()
		}})
	return ops
}

// httpGet is the pseudo tool of a call that is a plain GET of args["url"]
// (a shared report's page), made without a key.
const httpGet = "GET"
