package directory

import (
	"context"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // timezones are checked against the IANA database, whatever the host has

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger"
	"outreach/repo"
	"outreach/repo/textlist"
)

// Contact is a journalist, editor or producer.
type Contact struct {
	repo.Meta `bson:",inline"`
	FirstName string `bson:"first_name" json:"first_name"`
	LastName  string `bson:"last_name" json:"last_name"`
	// Name is "first last", kept in step with them so a search for a full
	// name finds the contact.
	Name  string `bson:"name" json:"name"`
	Email string `bson:"email,omitempty" json:"email,omitempty"`
	// EmailLower is the address lower-cased: uniqueness among active
	// contacts is case-insensitive.
	EmailLower         string         `bson:"email_lower,omitempty" json:"-"`
	Phone              string         `bson:"phone,omitempty" json:"phone,omitempty"`
	Title              string         `bson:"title,omitempty" json:"title,omitempty"`
	Bio                string         `bson:"bio,omitempty" json:"bio,omitempty"`
	IsFreelance        bool           `bson:"is_freelance" json:"is_freelance"`
	SocialLinks        map[string]any `bson:"social_links,omitempty" json:"social_links,omitempty"`
	Preferences        map[string]any `bson:"preferences,omitempty" json:"preferences,omitempty"`
	Beats              []string       `bson:"beats" json:"beats"`
	Location           string         `bson:"location,omitempty" json:"location,omitempty"`
	Timezone           string         `bson:"timezone,omitempty" json:"timezone,omitempty"`
	DoNotContact       bool           `bson:"do_not_contact" json:"do_not_contact"`
	DoNotContactReason string         `bson:"do_not_contact_reason,omitempty" json:"do_not_contact_reason,omitempty"`
	Affiliations       []Affiliation  `bson:"affiliations" json:"affiliations"`
	// OwnerID is the team member (a user id) who owns the relationship.
	OwnerID string `bson:"owner_id,omitempty" json:"owner_id,omitempty"`
}

// Affiliation ties a contact to an outlet. It lives inside the contact and
// has its own id, which remove_contact_outlet takes.
type Affiliation struct {
	ID        string     `bson:"id" json:"id"`
	OutletID  string     `bson:"outlet_id" json:"outlet_id"`
	Role      string     `bson:"role,omitempty" json:"role,omitempty"`
	IsPrimary bool       `bson:"is_primary" json:"is_primary"`
	StartedOn *time.Time `bson:"started_on,omitempty" json:"started_on,omitempty"`
	EndedOn   *time.Time `bson:"ended_on,omitempty" json:"ended_on,omitempty"`
}

// ContactFields are the fields a create or an update sets; nil (or a nil
// slice or map) leaves a field as it is.
type ContactFields struct {
	FirstName, LastName, Email, Phone, Title, Bio *string
	IsFreelance                                   *bool
	SocialLinks, Preferences                      map[string]any
	Beats                                         []string
	Location, Timezone                            *string
	DoNotContact                                  *bool
	DoNotContactReason                            *string
	// OwnerID is the team member who owns the relationship ("" clears).
	OwnerID *string
}

func (f ContactFields) empty() bool {
	return f.FirstName == nil && f.LastName == nil && f.Email == nil && f.Phone == nil && f.Title == nil &&
		f.Bio == nil && f.IsFreelance == nil && f.SocialLinks == nil && f.Preferences == nil && f.Beats == nil &&
		f.Location == nil && f.Timezone == nil && f.DoNotContact == nil && f.DoNotContactReason == nil && f.OwnerID == nil
}

// apply validates f and sets it on c. It does no I/O (email uniqueness is
// checked by the caller), so it may run inside modify's retried callback.
func (f ContactFields) apply(c *Contact, creating bool) error {
	for _, n := range []struct {
		field string
		v     *string
		dst   *string
	}{{"first_name", f.FirstName, &c.FirstName}, {"last_name", f.LastName, &c.LastName}} {
		if n.v != nil || creating {
			if n.v == nil || strings.TrimSpace(*n.v) == "" {
				return repo.Invalid(n.field, "must not be empty")
			}
			*n.dst = strings.TrimSpace(*n.v)
		}
	}
	c.Name = c.FirstName + " " + c.LastName
	if f.Email != nil {
		email, err := checkEmail(*f.Email)
		if err != nil {
			return err
		}
		c.Email, c.EmailLower = email, strings.ToLower(email)
	}
	repo.SetText(&c.Phone, f.Phone)
	repo.SetText(&c.Title, f.Title)
	repo.SetText(&c.Bio, f.Bio)
	if f.IsFreelance != nil {
		c.IsFreelance = *f.IsFreelance
	}
	if f.SocialLinks != nil {
		links, err := freeForm("social_links", f.SocialLinks)
		if err != nil {
			return err
		}
		c.SocialLinks = links
	}
	if f.Preferences != nil {
		prefs, err := freeForm("preferences", f.Preferences)
		if err != nil {
			return err
		}
		c.Preferences = prefs
	}
	if f.Beats != nil {
		beats, err := cleanList("beats", f.Beats)
		if err != nil {
			return err
		}
		c.Beats = beats
	}
	if c.Beats == nil {
		c.Beats = []string{}
	}
	if c.Affiliations == nil {
		c.Affiliations = []Affiliation{}
	}
	repo.SetText(&c.Location, f.Location)
	if f.Timezone != nil {
		tz := strings.TrimSpace(*f.Timezone)
		if tz != "" {
			if _, err := time.LoadLocation(tz); err != nil || tz == "Local" {
				return repo.Invalid("timezone", "%q is not an IANA time zone; use a name such as Europe/London or America/New_York", tz)
			}
		}
		c.Timezone = tz
	}
	repo.SetText(&c.OwnerID, f.OwnerID)
	// do_not_contact needs a reason when it is on; turning it off clears the
	// reason (the change log keeps it).
	if f.DoNotContact != nil {
		c.DoNotContact = *f.DoNotContact
	}
	if f.DoNotContactReason != nil {
		if !c.DoNotContact {
			return repo.Invalid("do_not_contact_reason", "is only kept while do_not_contact is true; set do_not_contact: true with it")
		}
		c.DoNotContactReason = strings.TrimSpace(*f.DoNotContactReason)
	}
	if !c.DoNotContact {
		c.DoNotContactReason = ""
	} else if c.DoNotContactReason == "" {
		return repo.Invalid("do_not_contact_reason", "is required when do_not_contact is true: say why, e.g. \"asked not to be pitched\"")
	}
	return nil
}

// checkEmail accepts a bare address and returns it trimmed; "" clears.
func checkEmail(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || a.Name != "" {
		return "", repo.Invalid("email", "%q is not an email address; give a bare address such as jane@example.com", s)
	}
	return s, nil
}

// checkEmailFree refuses an address another active contact already has.
func (s *Store) checkEmailFree(ctx context.Context, emailLower, self string) error {
	if emailLower == "" {
		return nil
	}
	other, err := emailHolder(ctx, s.View(), emailLower, self)
	if err != nil {
		return err
	}
	if other != nil {
		return &repo.Error{Code: repo.CodeConflict, Field: "email", Message: fmt.Sprintf("email: contact %s (%s) already has the address %s; update that contact instead, or archive it first", other.ID, other.Name, other.Email)}
	}
	return nil
}

// CreateContact adds a contact, affiliated at once with outletIDs (the
// first of them primary).
func (s *Store) CreateContact(ctx context.Context, f ContactFields, outletIDs []string) (*Contact, error) {
	c := &Contact{}
	if err := f.apply(c, true); err != nil {
		return nil, err
	}
	if err := s.MustExist(ctx, repo.CollUsers, "owner_id", repo.NonEmpty(c.OwnerID)...); err != nil {
		return nil, err
	}
	for i, id := range outletIDs {
		if slices.Contains(outletIDs[:i], id) {
			return nil, repo.Invalid("outlet_ids", "outlet %s is listed twice", id)
		}
	}
	if err := s.MustExist(ctx, repo.CollOutlets, "outlet_ids", outletIDs...); err != nil {
		return nil, err
	}
	if err := s.checkEmailFree(ctx, c.EmailLower, ""); err != nil {
		return nil, err
	}
	for i, id := range outletIDs {
		c.Affiliations = append(c.Affiliations, Affiliation{ID: uuid.NewString(), OutletID: id, IsPrimary: i == 0})
	}
	if err := repo.Insert(ctx, s.Store, repo.CollContacts, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Contact returns one contact, archived or not.
func (s *Store) Contact(ctx context.Context, id string) (*Contact, error) {
	return repo.Find[*Contact](ctx, s.Store, repo.CollContacts, id)
}

// UpdateContact changes the given fields of an active contact.
func (s *Store) UpdateContact(ctx context.Context, id string, f ContactFields) (*Contact, error) {
	if f.empty() {
		return nil, repo.Errorf(repo.CodeInvalid, "nothing to change: give at least one field besides id")
	}
	if f.OwnerID != nil {
		if err := s.MustExist(ctx, repo.CollUsers, "owner_id", repo.NonEmpty(strings.TrimSpace(*f.OwnerID))...); err != nil {
			return nil, err
		}
	}
	if f.Email != nil {
		email, err := checkEmail(*f.Email)
		if err != nil {
			return nil, err
		}
		if err := s.checkEmailFree(ctx, strings.ToLower(email), id); err != nil {
			return nil, err
		}
	}
	return repo.Modify(ctx, s.Store, repo.CollContacts, id, audit.ActionUpdate, func(c *Contact) error {
		if err := refuseArchived(repo.CollContacts, &c.Meta); err != nil {
			return err
		}
		was := *c
		if err := f.apply(c, false); err != nil {
			return err
		}
		if g := contactFlagGuard(ctx, &was, c); g != nil {
			return &repo.Error{Code: repo.CodePermissionDenied, Field: g.Field, Message: g.Message}
		}
		return nil
	})
}

// ArchiveContact archives a contact; its address becomes free for another.
func (s *Store) ArchiveContact(ctx context.Context, id string) (*Contact, error) {
	return repo.Archive[*Contact](ctx, s.Store, repo.CollContacts, id, nil)
}

// RestoreContact restores an archived contact, unless an active contact
// has taken its address meanwhile.
func (s *Store) RestoreContact(ctx context.Context, id string) (*Contact, error) {
	c, err := s.Contact(ctx, id)
	if err != nil {
		return nil, err
	}
	if c.Archived() {
		if err := s.checkEmailFree(ctx, c.EmailLower, id); err != nil {
			return nil, err
		}
	}
	return repo.Restore[*Contact](ctx, s.Store, repo.CollContacts, id)
}

// AffiliationInput is what add_contact_outlet takes.
type AffiliationInput struct {
	ContactID, OutletID, Role string
	IsPrimary                 bool
	StartedOn, EndedOn        *time.Time
}

// AddContactOutlet affiliates a contact with an outlet. The same outlet
// twice is a conflict naming the existing affiliation; a new primary
// affiliation makes the others not primary.
func (s *Store) AddContactOutlet(ctx context.Context, in AffiliationInput) (*Contact, *Affiliation, error) {
	if in.StartedOn != nil && in.EndedOn != nil && in.EndedOn.Before(*in.StartedOn) {
		return nil, nil, repo.Invalid("ended_on", "is before started_on")
	}
	if err := s.MustExist(ctx, repo.CollOutlets, "outlet_id", in.OutletID); err != nil {
		return nil, nil, err
	}
	a := Affiliation{ID: uuid.NewString(), OutletID: in.OutletID, Role: strings.TrimSpace(in.Role),
		IsPrimary: in.IsPrimary, StartedOn: in.StartedOn, EndedOn: in.EndedOn}
	c, err := repo.Modify(ctx, s.Store, repo.CollContacts, in.ContactID, audit.ActionLink, func(c *Contact) error {
		if err := refuseArchived(repo.CollContacts, &c.Meta); err != nil {
			return err
		}
		for _, x := range c.Affiliations {
			if x.OutletID == in.OutletID {
				return &repo.Error{Code: repo.CodeConflict, Field: "outlet_id", Message: fmt.Sprintf("outlet_id: contact %s is already affiliated with outlet %s (affiliation %s); remove that affiliation first to change its role or primary flag", c.ID, in.OutletID, x.ID)}
			}
		}
		affs := make([]Affiliation, 0, len(c.Affiliations)+1)
		for _, x := range c.Affiliations {
			if a.IsPrimary {
				x.IsPrimary = false
			}
			affs = append(affs, x)
		}
		c.Affiliations = append(affs, a)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return c, &a, nil
}

// RemoveContactOutlet removes an affiliation from its contact. The element
// leaves the array; the change log keeps it (action unlink), so a rollback
// brings it back with its id.
func (s *Store) RemoveContactOutlet(ctx context.Context, affiliationID string) (*Contact, *Affiliation, error) {
	var owner Contact
	if err := s.FindOne(ctx, repo.CollContacts, bson.M{"affiliations.id": affiliationID}).Decode(&owner); err != nil {
		return nil, nil, ledger.DriverErr(err, "affiliation", affiliationID)
	}
	var removed Affiliation
	c, err := repo.Modify(ctx, s.Store, repo.CollContacts, owner.ID, audit.ActionUnlink, func(c *Contact) error {
		if err := refuseArchived(repo.CollContacts, &c.Meta); err != nil {
			return err
		}
		i := slices.IndexFunc(c.Affiliations, func(a Affiliation) bool { return a.ID == affiliationID })
		if i < 0 {
			return repo.NotFound("affiliation", affiliationID)
		}
		removed = c.Affiliations[i]
		c.Affiliations = slices.Delete(slices.Clone(c.Affiliations), i, i+1)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return c, &removed, nil
}

// ContactFilter selects contacts; zero fields do not filter.
type ContactFilter struct {
	Search          string
	OutletID        string
	Beat            string
	IsFreelance     *bool
	IncludeArchived bool
}

// ListContacts lists contacts, newest first. outlet_id matches any
// affiliation with the outlet, ended ones included.
func (s *Store) ListContacts(ctx context.Context, f ContactFilter, limit, offset int) (repo.Page[Contact], error) {
	filter := bson.M{}
	if f.OutletID != "" {
		if _, err := s.Outlet(ctx, f.OutletID); err != nil {
			return repo.Page[Contact]{}, repo.WithField(err, "outlet_id")
		}
		filter["affiliations.outlet_id"] = f.OutletID
	}
	if b := strings.TrimSpace(f.Beat); b != "" {
		filter["beats"] = repo.Element(b)
	}
	if f.IsFreelance != nil {
		filter["is_freelance"] = *f.IsFreelance
	}
	if q := strings.TrimSpace(f.Search); q != "" {
		return textlist.Page[Contact](ctx, s.Store, textlist.Filter{Coll: repo.CollContacts, Text: q}, repo.Active(filter, f.IncludeArchived), repo.NewestFirst, limit, offset)
	}
	return repo.ListPage[Contact](ctx, s.Store, repo.CollContacts, repo.Active(filter, f.IncludeArchived), repo.NewestFirst, limit, offset)
}

// ContactOutlet is an affiliation joined with its outlet, as get_contact shows it.
type ContactOutlet struct {
	AffiliationID  string     `json:"affiliation_id"`
	OutletID       string     `json:"outlet_id"`
	Name           string     `json:"name"`
	Type           string     `json:"type"`
	Tier           *int       `json:"tier,omitempty"`
	OutletArchived bool       `json:"outlet_archived"`
	Role           string     `json:"role,omitempty"`
	IsPrimary      bool       `json:"is_primary"`
	StartedOn      *time.Time `json:"started_on,omitempty"`
	EndedOn        *time.Time `json:"ended_on,omitempty"`
}

// OpportunitySummary is an opportunity as a related record shows it.
type OpportunitySummary struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Stage    string `json:"stage"`
	Archived bool   `json:"archived"`
}

// ContactDetail is a contact with its outlets and opportunities.
type ContactDetail struct {
	*Contact
	// Affiliations is always empty: it hides the contact's own list, which
	// Outlets shows joined with each outlet.
	Affiliations  []Affiliation        `json:"affiliations,omitempty"`
	Outlets       []ContactOutlet      `json:"outlets"`
	Opportunities []OpportunitySummary `json:"opportunities"`
}

// ContactDetail returns a contact with its affiliations (joined with each
// outlet, archived outlets marked) and the opportunities that name it.
func (s *Store) ContactDetail(ctx context.Context, id string) (*ContactDetail, error) {
	c, err := s.Contact(ctx, id)
	if err != nil {
		return nil, err
	}
	d := &ContactDetail{Contact: c, Outlets: []ContactOutlet{}, Opportunities: []OpportunitySummary{}}
	ids := make([]string, 0, len(c.Affiliations))
	for _, a := range c.Affiliations {
		ids = append(ids, a.OutletID)
	}
	var outlets []Outlet
	if err := s.FindAll(ctx, repo.CollOutlets, bson.M{"_id": bson.M{"$in": ids}}, nil, &outlets); err != nil {
		return nil, err
	}
	byID := map[string]*Outlet{}
	for i := range outlets {
		byID[outlets[i].ID] = &outlets[i]
	}
	for _, a := range c.Affiliations {
		co := ContactOutlet{AffiliationID: a.ID, OutletID: a.OutletID, Role: a.Role, IsPrimary: a.IsPrimary, StartedOn: a.StartedOn, EndedOn: a.EndedOn}
		if o := byID[a.OutletID]; o != nil {
			co.Name, co.Type, co.Tier, co.OutletArchived = o.Name, o.Type, o.Tier, o.Archived()
		}
		d.Outlets = append(d.Outlets, co)
	}
	// Opportunities are another group's records: read only the fields shown.
	var opps []bson.M
	err = s.FindAll(ctx, repo.CollOpportunities, bson.M{"contact_ids": id},
		options.Find().SetSort(repo.NewestFirst).SetProjection(bson.M{"title": 1, "stage": 1, "archived_at": 1}), &opps)
	if err != nil {
		return nil, err
	}
	for _, o := range opps {
		title, _ := o["title"].(string)
		stage, _ := o["stage"].(string)
		d.Opportunities = append(d.Opportunities, OpportunitySummary{ID: fmt.Sprint(o["_id"]), Title: title, Stage: stage, Archived: o["archived_at"] != nil})
	}
	return d, nil
}

// emailHolder returns the active contact other than self whose address is
// emailLower (lower-cased), as v shows the contacts, or nil.
func emailHolder(ctx context.Context, v *repo.RuleView, emailLower, self string) (*Contact, error) {
	if emailLower == "" {
		return nil, nil
	}
	holders, err := v.Matching(ctx, repo.CollContacts, bson.M{"email_lower": emailLower}, func(st bson.M) bool {
		return repo.Str(st, "_id") != self && st["archived_at"] == nil && repo.Str(st, "email_lower") == emailLower
	})
	if err != nil || len(holders) == 0 {
		return nil, err
	}
	return repo.DecodeState[Contact](repo.Str(holders[0], "_id"), holders[0])
}

func contactRule(ctx context.Context, v *repo.RuleView, id string, state bson.M) error {
	c, err := repo.DecodeState[Contact](id, state)
	if err != nil {
		return err
	}
	if !c.Archived() {
		other, err := emailHolder(ctx, v, c.EmailLower, id)
		if err != nil {
			return err
		}
		if other != nil {
			return repo.Violated("contact_email_unique", "contact %s would be active with the address %s, which active contact %s (%s) has, and an address belongs to one active contact: change the address of one of them (update_contact) or archive the other first, then retry", id, c.Email, other.ID, other.Name)
		}
	}
	stored, err := v.Stored(ctx, repo.CollContacts, id)
	if err != nil {
		return err
	}
	if stored != nil {
		was, err := repo.DecodeState[Contact](id, stored)
		if err != nil {
			return err
		}
		if g := contactFlagGuard(ctx, was, c); g != nil {
			return g.AsViolation()
		}
	}
	if err := v.Linked(ctx, repo.CollUsers, "owner_id", c.OwnerID); err != nil {
		return err
	}
	primary := ""
	for i, a := range c.Affiliations {
		if slices.ContainsFunc(c.Affiliations[:i], func(x Affiliation) bool { return x.OutletID == a.OutletID }) {
			return repo.Violated("affiliation_once", "contact %s would be affiliated twice with outlet %s; remove one of the two affiliations first (remove_contact_outlet), then retry", id, a.OutletID)
		}
		if a.IsPrimary {
			if primary != "" {
				return repo.Violated("one_primary_affiliation", "contact %s would have two primary affiliations (%s and %s); remove one of them (remove_contact_outlet) or add it again without is_primary first, then retry", id, primary, a.ID)
			}
			primary = a.ID
		}
		if err := v.Linked(ctx, repo.CollOutlets, fmt.Sprintf("affiliation %s", a.ID), a.OutletID); err != nil {
			return err
		}
	}
	return nil
}

func init() { repo.RegisterRule(repo.CollContacts, contactRule) }

// contactFlagGuard checks that do_not_contact is cleared only by a key with
// the admin scope (the actor in ctx).
func contactFlagGuard(ctx context.Context, was, c *Contact) *repo.GuardError {
	if was == nil || !was.DoNotContact || c.DoNotContact {
		return nil
	}
	a, _ := audit.ActorFrom(ctx)
	if slices.Contains(a.Scopes, repo.ScopeAdmin) || a.UserID == repo.SystemActor("").UserID {
		return nil
	}
	return &repo.GuardError{Rule: "do_not_contact_admin", Field: "do_not_contact", Message: fmt.Sprintf(
		"contact %s is marked do-not-contact (reason on record: %q); only a key with the admin scope can clear the flag",
		ContactLabel(was), was.DoNotContactReason)}
}

// ContactLabel names a contact in messages: its id and its name.
func ContactLabel(c *Contact) string {
	name := strings.TrimSpace(c.Name)
	if name == "" {
		name = strings.TrimSpace(c.FirstName + " " + c.LastName)
	}
	return fmt.Sprintf("%s (%s)", c.ID, name)
}
