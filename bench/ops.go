package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/repo"
)

// data is what the seed made, for the operations to name.
type data struct {
	hot      string // the contact most notes, coverage and messages involve
	contacts []string
	outlets  []string
	notes    []string
	summary  string
	db       string
}

// searchWord is in every tenth note's content and coverage title.
const searchWord = "quarterly"

// seed creates outlets and contacts through the tools, then notes, coverage
// and email threads through the write path (repo.Fixture: every record has
// its change entry). A third of the notes, coverage and messages involve
// one contact, the rest spread over the others.
func seed(ctx context.Context, store *repo.Store, url, key string, notes int) (*data, error) {
	s, err := connect(ctx, url, key)
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
	rng := rand.New(rand.NewPCG(18, 18))
	contact := func() string {
		if rng.IntN(3) == 0 {
			return d.hot
		}
		return d.contacts[1+rng.IntN(len(d.contacts)-1)]
	}
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	date := func() time.Time { return base.Add(time.Duration(rng.IntN(2*365*24*60)) * time.Minute) }
	text := func(i int) string {
		t := fmt.Sprintf("Call %d: went through the launch plan, asked for an embargoed briefing next week and the spokesperson's availability.", i)
		if i%10 == 0 {
			t += " Wants the " + searchWord + " numbers first."
		}
		return t
	}
	for i := range notes {
		at := date()
		nid, err := store.Fixture(ctx, "notes", map[string]any{"type": "phone_call", "title": fmt.Sprintf("Note %d", i), "content": text(i),
			"occurred_at": at, "links": []map[string]any{{"id": uuid.NewString(), "contact_id": contact(), "created_at": at}}})
		if err != nil {
			return nil, err
		}
		d.notes = append(d.notes, nid)
	}
	nCoverage := notes / 2
	for i := range nCoverage {
		title := fmt.Sprintf("Coverage %d", i)
		if i%10 == 0 {
			title += " " + searchWord
		}
		if _, err := store.Fixture(ctx, "coverage", map[string]any{"title": title, "published_at": date(), "type": "article",
			"outlet_id": d.outlets[i%nOutlets], "contact_ids": []string{contact()}}); err != nil {
			return nil, err
		}
	}
	messages, perThread := 3*notes, 50
	for t := 0; t*perThread < messages; t++ {
		var msgs []map[string]any
		var last time.Time
		involved := map[string]bool{}
		for range min(perThread, messages-t*perThread) {
			at, mid, c := date(), uuid.NewString(), contact()
			involved[c] = true
			if at.After(last) {
				last = at
			}
			msgs = append(msgs, map[string]any{"id": mid, "message_id": "<" + mid + "@example.org>", "subject": fmt.Sprintf("Thread %d", t),
				"date": at, "from": "someone@example.org", "body_text": text(t), "contact_ids": []string{c}})
		}
		var ids []string
		for c := range involved {
			ids = append(ids, c)
		}
		if _, err := store.Fixture(ctx, "email_threads", map[string]any{"subject": fmt.Sprintf("Thread %d", t), "contact_ids": ids,
			"opportunity_links": []any{}, "messages": msgs, "last_message_at": last}); err != nil {
			return nil, err
		}
	}
	d.summary = fmt.Sprintf("%d notes, %d coverage, %d email messages in %d threads, %d contacts, %d outlets",
		notes, nCoverage, messages, (messages+perThread-1)/perThread, nContacts, nOutlets)
	return d, nil
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

func operations(d *data) []operation {
	note := func(w, i int) string { return d.notes[(w*7919+i*31)%len(d.notes)] }
	active := func(f bson.M) bson.M { f["archived_at"] = nil; return f }
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
		{name: "create_note", write: true, rawOps: 4,
			call: func(w, i int) []callSpec {
				return []callSpec{{"create_note", map[string]any{"title": "bench " + stamp(w, i), "content": "a call", "type": "phone_call",
					"contact_ids": []string{d.contacts[(w+i)%len(d.contacts)]}}}}
			},
			raw: func(ctx context.Context, r *rawStore, w, i int) error {
				return r.create(ctx, "notes", []string{d.contacts[(w+i)%len(d.contacts)]}, bson.M{"title": "bench " + stamp(w, i), "content": "a call", "type": "phone_call",
					"occurred_at": time.Now(), "links": bson.A{bson.M{"id": uuid.NewString(), "contact_id": d.contacts[(w+i)%len(d.contacts)], "created_at": time.Now()}}})
			}},
		{name: "update_note", write: true, rawOps: 4,
			call: func(w, i int) []callSpec {
				return []callSpec{{"update_note", map[string]any{"id": d.notes[w], "title": "bench " + stamp(w, i)}}}
			},
			raw: func(ctx context.Context, r *rawStore, w, i int) error {
				return r.update(ctx, "notes", d.notes[w], bson.M{"title": "bench " + stamp(w, i)})
			}},
		{name: "create_contact", write: true, rawOps: 3,
			call: func(w, i int) []callSpec {
				return []callSpec{{"create_contact", map[string]any{"first_name": "Bench", "last_name": stamp(w, i)}}}
			},
			raw: func(ctx context.Context, r *rawStore, w, i int) error {
				return r.create(ctx, "contacts", nil, bson.M{"first_name": "Bench", "last_name": stamp(w, i)})
			}},
		{name: "update_contact", write: true, rawOps: 4,
			call: func(w, i int) []callSpec {
				return []callSpec{{"update_contact", map[string]any{"id": d.contacts[1+w%(len(d.contacts)-1)], "title": "Editor " + stamp(w, i)}}}
			},
			raw: func(ctx context.Context, r *rawStore, w, i int) error {
				return r.update(ctx, "contacts", d.contacts[1+w%(len(d.contacts)-1)], bson.M{"title": "Editor " + stamp(w, i)})
			}},
		{name: "create_coverage", write: true, rawOps: 5,
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
	return ops
}
