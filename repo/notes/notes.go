package notes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/ledger"
	"outreach/repo"
	"outreach/repo/outbox"
	"outreach/repo/textlist"
)

// NoteTypes are the allowed note types; the first is the default.
var NoteTypes = []string{"general", "meeting", "phone_call", "event", "research", "other"}

// Note records a meeting recap, phone call, research finding or observation.
// Its links are embedded: a note is read and written whole.
type Note struct {
	repo.Meta  `bson:",inline"`
	Type       string     `bson:"type" json:"type"`
	Title      string     `bson:"title" json:"title"`
	Content    string     `bson:"content" json:"content"`
	OccurredAt time.Time  `bson:"occurred_at" json:"occurred_at"`
	Links      []NoteLink `bson:"links" json:"links"`
}

// NoteLink joins a note to one entity; exactly one of the four ids is set.
type NoteLink struct {
	ID            string    `bson:"id" json:"id"`
	ContactID     string    `bson:"contact_id,omitempty" json:"contact_id,omitempty"`
	OutletID      string    `bson:"outlet_id,omitempty" json:"outlet_id,omitempty"`
	OpportunityID string    `bson:"opportunity_id,omitempty" json:"opportunity_id,omitempty"`
	ChannelID     string    `bson:"channel_id,omitempty" json:"channel_id,omitempty"`
	CreatedAt     time.Time `bson:"created_at" json:"created_at"`
}

// LinkTargets are entity ids to link, by kind.
type LinkTargets struct {
	ContactIDs, OutletIDs, OpportunityIDs, ChannelIDs []string
}

func (t LinkTargets) empty() bool {
	return len(t.ContactIDs)+len(t.OutletIDs)+len(t.OpportunityIDs)+len(t.ChannelIDs) == 0
}

// linkKinds maps each kind of link to its argument name, collection and field.
var linkKinds = []struct {
	arg, coll string
	ids       func(LinkTargets) []string
	get       func(NoteLink) string
	set       func(*NoteLink, string)
}{
	{"contact_ids", repo.CollContacts, func(t LinkTargets) []string { return t.ContactIDs }, func(l NoteLink) string { return l.ContactID }, func(l *NoteLink, id string) { l.ContactID = id }},
	{"outlet_ids", repo.CollOutlets, func(t LinkTargets) []string { return t.OutletIDs }, func(l NoteLink) string { return l.OutletID }, func(l *NoteLink, id string) { l.OutletID = id }},
	{"opportunity_ids", repo.CollOpportunities, func(t LinkTargets) []string { return t.OpportunityIDs }, func(l NoteLink) string { return l.OpportunityID }, func(l *NoteLink, id string) { l.OpportunityID = id }},
	{"channel_ids", repo.CollChannels, func(t LinkTargets) []string { return t.ChannelIDs }, func(l NoteLink) string { return l.ChannelID }, func(l *NoteLink, id string) { l.ChannelID = id }},
}

// newLinks checks that every target exists and is active, and returns the
// links that note does not have yet (each entity once). field names the
// argument family for errors: "ids" for create_note's arrays, "id" for
// add_note_link's single ids.
func (s *Store) newLinks(ctx context.Context, have []NoteLink, t LinkTargets, singular bool) ([]NoteLink, error) {
	var out []NoteLink
	at := repo.Now()
	for _, k := range linkKinds {
		field := k.arg
		if singular {
			field = strings.TrimSuffix(k.arg, "s")
		}
		for _, id := range k.ids(t) {
			// A repeated id was looked up the first time: one look-up per
			// distinct id, however often a caller repeats it.
			if slices.ContainsFunc(out, func(l NoteLink) bool { return k.get(l) == id }) {
				continue
			}
			if err := s.MustExist(ctx, k.coll, field, id); err != nil {
				return nil, err
			}
			if slices.ContainsFunc(have, func(l NoteLink) bool { return k.get(l) == id }) {
				continue
			}
			l := NoteLink{ID: uuid.NewString(), CreatedAt: at}
			k.set(&l, id)
			out = append(out, l)
		}
	}
	return out, nil
}

// NewNote is what create_note takes, already parsed.
type NewNote struct {
	Type, Title, Content string
	OccurredAt           *time.Time
	Links                LinkTargets
}

// CreateNote creates a note with its links; at least one link is required.
func (s *Store) CreateNote(ctx context.Context, in NewNote) (*Note, error) {
	if in.Links.empty() {
		return nil, repo.Invalid("contact_ids", "a note must be linked to at least one entity: give at least one id in contact_ids, outlet_ids, opportunity_ids or channel_ids")
	}
	if in.Type == "" {
		in.Type = NoteTypes[0]
	}
	if !slices.Contains(NoteTypes, in.Type) {
		return nil, repo.Invalid("type", "%q is not a note type; use one of: %s", in.Type, strings.Join(NoteTypes, ", "))
	}
	links, err := s.newLinks(ctx, nil, in.Links, false)
	if err != nil {
		return nil, err
	}
	n := &Note{Type: in.Type, Title: in.Title, Content: in.Content, Links: links}
	if in.OccurredAt != nil {
		n.OccurredAt = *in.OccurredAt
	} else {
		n.OccurredAt = repo.Now()
	}
	if err := outbox.InsertWithEvents(ctx, s.Store, repo.CollNotes, n, func() ([]outbox.OppEvent, error) {
		var evs []outbox.OppEvent
		for _, l := range n.Links {
			if l.OpportunityID == "" {
				continue
			}
			o, err := repo.Find[*opportunityTitle](ctx, s.Store, repo.CollOpportunities, l.OpportunityID)
			if err != nil {
				return nil, err
			}
			evs = append(evs, outbox.OppEvent{Kind: outbox.EventNoteAdded, OppID: o.ID, Title: o.Title,
				Text: fmt.Sprintf("note added to %q: %s", o.Title, noteGist(n.Title, n.Content)),
				Data: map[string]any{"note_id": n.ID, "note_type": n.Type, "note_title": n.Title}})
		}
		return evs, nil
	}); err != nil {
		return nil, err
	}
	return n, nil
}

// noteGist is a short text for a note: its title, else its content's first line.
func noteGist(title, content string) string {
	if t := strings.TrimSpace(title); t != "" {
		return t
	}
	l, _, _ := strings.Cut(strings.TrimSpace(content), "\n")
	if len(l) > 200 {
		l = l[:200]
	}
	return l
}

// opportunityTitle is what a note's event reads of an opportunity it
// links: the notes area reads the core's record, not the pipeline's type.
type opportunityTitle struct {
	repo.Meta `bson:",inline"`
	Title     string `bson:"title"`
}

// Note returns one note.
func (s *Store) Note(ctx context.Context, id string) (*Note, error) {
	return repo.Find[*Note](ctx, s.Store, repo.CollNotes, id)
}

// NoteChanges are update_note's fields; nil leaves a field as it is.
type NoteChanges struct {
	Type, Title, Content *string
	OccurredAt           *time.Time
}

// UpdateNote changes a note's fields. An archived note must be restored first.
func (s *Store) UpdateNote(ctx context.Context, id string, c NoteChanges) (*Note, error) {
	if c.Type != nil && !slices.Contains(NoteTypes, *c.Type) {
		return nil, repo.Invalid("type", "%q is not a note type; use one of: %s", *c.Type, strings.Join(NoteTypes, ", "))
	}
	return repo.Modify(ctx, s.Store, repo.CollNotes, id, audit.ActionUpdate, func(n *Note) error {
		if err := activeNote(n); err != nil {
			return err
		}
		if c.Type != nil {
			n.Type = *c.Type
		}
		if c.Title != nil {
			n.Title = *c.Title
		}
		if c.Content != nil {
			n.Content = *c.Content
		}
		if c.OccurredAt != nil {
			n.OccurredAt = *c.OccurredAt
		}
		return nil
	})
}

func activeNote(n *Note) error {
	if n.ArchivedAt != nil {
		return repo.Errorf(repo.CodeFailedPrecondition, "note %s is archived; restore_note it first", n.ID)
	}
	return nil
}

// AddNoteLinks links a note to more entities; an entity already linked is
// not linked twice. It returns the note and the links it added.
func (s *Store) AddNoteLinks(ctx context.Context, noteID string, t LinkTargets) (*Note, []NoteLink, error) {
	if t.empty() {
		return nil, nil, repo.Invalid("contact_id", "give at least one of contact_id, outlet_id, opportunity_id or channel_id")
	}
	if _, err := s.Note(ctx, noteID); err != nil {
		return nil, nil, err
	}
	var added []NoteLink
	n, err := repo.Modify(ctx, s.Store, repo.CollNotes, noteID, audit.ActionLink, func(n *Note) error {
		if err := activeNote(n); err != nil {
			return err
		}
		links, err := s.newLinks(ctx, n.Links, t, true)
		if err != nil {
			return err
		}
		added = links
		n.Links = append(n.Links, links...)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if added == nil {
		added = []NoteLink{}
	}
	return n, added, nil
}

// RemoveNoteLink removes one link by its id. A note's last link cannot be
// removed: a note is always linked to at least one entity.
func (s *Store) RemoveNoteLink(ctx context.Context, linkID string) (*Note, error) {
	if ledger.CheckID(linkID) != nil {
		return nil, repo.NotFound("note link", linkID)
	}
	var owner repo.Meta
	if err := s.FindOne(ctx, repo.CollNotes, bson.M{"links.id": linkID}).Decode(&owner); err != nil {
		return nil, ledger.DriverErr(err, "note link", linkID)
	}
	return repo.Modify(ctx, s.Store, repo.CollNotes, owner.ID, audit.ActionUnlink, func(n *Note) error {
		if err := activeNote(n); err != nil {
			return err
		}
		i := slices.IndexFunc(n.Links, func(l NoteLink) bool { return l.ID == linkID })
		if i < 0 {
			return repo.NotFound("note link", linkID)
		}
		if vi := noteLinksRule(n.ID, len(n.Links)-1); vi != nil {
			return &repo.Error{Code: repo.CodeFailedPrecondition, Field: "id", Message: fmt.Sprintf("link %s is the only link: %s", linkID, vi.Message)}
		}
		n.Links = slices.Delete(n.Links, i, i+1)
		return nil
	})
}

// ArchiveNote soft-deletes a note.
func (s *Store) ArchiveNote(ctx context.Context, id string) (*Note, error) {
	return repo.Archive[*Note](ctx, s.Store, repo.CollNotes, id, nil)
}

// RestoreNote restores an archived note.
func (s *Store) RestoreNote(ctx context.Context, id string) (*Note, error) {
	return repo.Restore[*Note](ctx, s.Store, repo.CollNotes, id)
}

// NoteFilter selects notes for ListNotes.
type NoteFilter struct {
	Type, ContactID, OutletID, OpportunityID, Search string
	IncludeArchived                                  bool
}

// ListNotes lists notes, newest occurred_at first, _id descending on ties.
// Search matches title and content literally and case-insensitively
// (package textlist: the word index, or the store's pattern).
func (s *Store) ListNotes(ctx context.Context, f NoteFilter, limit, offset int) (repo.Page[Note], error) {
	filter := repo.Active(bson.M{}, f.IncludeArchived)
	if f.Type != "" {
		filter["type"] = f.Type
	}
	if f.ContactID != "" {
		filter["links.contact_id"] = f.ContactID
	}
	if f.OutletID != "" {
		filter["links.outlet_id"] = f.OutletID
	}
	if f.OpportunityID != "" {
		filter["links.opportunity_id"] = f.OpportunityID
	}
	sort := bson.D{{Key: "occurred_at", Value: -1}, {Key: "_id", Value: -1}}
	if f.Search != "" {
		return textlist.Page[Note](ctx, s.Store, textlist.Filter{Coll: repo.CollNotes, Text: f.Search, TextIndex: true}, filter, sort, limit, offset)
	}
	return repo.ListPage[Note](ctx, s.Store, repo.CollNotes, filter, sort, limit, offset)
}

// LinkedEntity is a linked record trimmed to what an agent needs.
type LinkedEntity struct {
	Kind     string `json:"kind"`
	ID       string `json:"id"`
	Name     string `json:"name"`
	Archived bool   `json:"archived"`
}

// Entity returns a short description of a linked record, whatever its state.
func (s *Store) Entity(ctx context.Context, coll, id string) LinkedEntity {
	e := LinkedEntity{Kind: repo.KindOf(coll), ID: id}
	var doc bson.M
	if err := s.ByID(ctx, coll, id, &doc); err != nil {
		e.Name = "(missing)"
		return e
	}
	e.Archived = doc["archived_at"] != nil
	str := func(k string) string { v, _ := doc[k].(string); return v }
	switch coll {
	case repo.CollContacts:
		e.Name = strings.TrimSpace(str("first_name") + " " + str("last_name"))
	case repo.CollOpportunities, repo.CollCoverage:
		e.Name = str("title")
	default:
		e.Name = str("name")
	}
	return e
}

// LinkEntity returns the kind's collection and entity id of a link.
func LinkEntity(l NoteLink) (coll, id string) {
	switch {
	case l.ContactID != "":
		return repo.CollContacts, l.ContactID
	case l.OutletID != "":
		return repo.CollOutlets, l.OutletID
	case l.OpportunityID != "":
		return repo.CollOpportunities, l.OpportunityID
	default:
		return repo.CollChannels, l.ChannelID
	}
}

// noteLinksRule is the rule that a note is linked to at least one entity,
// whatever its state (archiving keeps the links). remove_note_link keeps it
// too.
func noteLinksRule(noteID string, links int) *repo.RuleViolation {
	if links > 0 {
		return nil
	}
	return repo.Violated("note_has_link", "note %s would have no links, and a note must be linked to at least one entity: link it to another entity first (add_note_link, after restore_note if it is archived), then retry; or archive the note instead", noteID)
}

func noteRule(ctx context.Context, v *repo.RuleView, id string, state bson.M) error {
	n, err := repo.DecodeState[Note](id, state)
	if err != nil {
		return err
	}
	if vi := noteLinksRule(id, len(n.Links)); vi != nil {
		return vi
	}
	for _, l := range n.Links {
		coll, target := LinkEntity(l)
		if err := v.Linked(ctx, coll, fmt.Sprintf("link %s", l.ID), target); err != nil {
			return err
		}
	}
	return nil
}

// stageNote returns the mutation creating the note that records a stage
// change of opportunity oppID: a general note titled "Stage changed to
// <stage>", linked to the opportunity. It is the only place a stage change
// writes a note; it is written in a group with the stage change, so it goes
// through creation rather than CreateNote (the opportunity is known to
// exist: it is changed in the same group).
func stageNote(oppID, stage, content string) (repo.Mutation, error) {
	t := repo.Now()
	n := &Note{Type: NoteTypes[0], Title: "Stage changed to " + stage, Content: content, OccurredAt: t,
		Links: []NoteLink{{ID: uuid.NewString(), OpportunityID: oppID, CreatedAt: t}}}
	return repo.Creation(repo.CollNotes, n)
}

func init() {
	repo.RegisterRule(repo.CollNotes, noteRule)
	repo.RegisterStageNote(stageNote)
}
