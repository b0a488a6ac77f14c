package repo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/ledger"
)

// Rules of each record kind, checked on a proposed state of a record as a
// whole. The tools keep them by construction (each call validates its own
// arguments); a rollback writes stored states back generically, field by
// field, and so can combine values no call would have written. Before it
// writes anything, a rollback checks the state it would leave each record
// in against the rule of the record's kind (stateRules), and refuses the
// whole rollback on a violation. force never overrides a rule: it only
// writes over fields changed since.
//
// Links to archived records are allowed: archiving never removed links
// (an archived outlet's contacts still name it, and get_X shows the linked
// record as archived), so a rollback that restores history may restore such
// a link. A link to a record that does not exist is refused.

// StateRule checks state, the proposed state of record id of one kind,
// against the records around it as v shows them. It returns a *RuleViolation
// for a broken rule, and any other error when it could not check.
type StateRule func(ctx context.Context, v *RuleView, id string, state bson.M) error

// stateRules holds the rule of each kind of record a rollback may write.
// Users, agent keys and settings are changed by admin tools only and have no
// rule across fields or records.
var stateRules = map[string]StateRule{
	CollOutlets:       outletRule,
	CollContacts:      contactRule,
	CollChannels:      channelRule,
	CollCampaigns:     campaignRule,
	CollOpportunities: opportunityRule,
	CollCoverage:      coverageRule,
	CollMedia:         mediaRule,
	CollNotes:         noteRule,
	CollEmails:        emailThreadRule,
}

// RuleViolation is a broken rule of a record kind: the rule's name and a
// message that says how to fix it.
type RuleViolation struct {
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

func (v *RuleViolation) Error() string { return v.Rule + ": " + v.Message }

func Violated(rule, format string, args ...any) *RuleViolation {
	return &RuleViolation{Rule: rule, Message: fmt.Sprintf(format, args...)}
}

// fieldViolation turns a field validation error of a kind's own check into
// a violation of rule.
func fieldViolation(rule string, err error) error {
	if e, ok := err.(*Error); ok && (e.Code == CodeInvalid || e.Code == CodeFailedPrecondition) {
		return Violated(rule, "%s; change the record with its update tool first, or roll back the later change of that field too", e.Message)
	}
	return err
}

// RuleView shows the records as a set of pending writes would leave them:
// pending states (by audit.RecordKey) win over the stored ones. With no
// pending states it is the store as it is, which is what the tools check
// against.
type RuleView struct {
	s       *Store
	pending map[string]bson.M
	// read, when set (a plan's check: every step against the same view),
	// keeps each stored record read, so that a record many steps link to
	// (the contact of a thousand notes) is read once per check.
	read map[string]bson.M
}

func (s *Store) View() *RuleView { return &RuleView{s: s} }

// record returns the state of record id of coll, or nil when it does not
// exist.
func (v *RuleView) record(ctx context.Context, coll, id string) (bson.M, error) {
	if st, ok := v.pending[audit.RecordKey(coll, id)]; ok {
		return st, nil
	}
	if ledger.CheckID(id) != nil {
		return nil, nil
	}
	k := audit.RecordKey(coll, id)
	if st, ok := v.read[k]; ok {
		return st, nil
	}
	var doc bson.M
	err := v.s.coll(coll).FindOne(ctx, bson.M{"_id": id}).Decode(&doc)
	if err := ledger.DriverErr(err, kinds[coll], id); err != nil {
		if ErrorCode(err) == CodeNotFound {
			if v.read != nil {
				v.read[k] = nil
			}
			return nil, nil
		}
		return nil, err
	}
	st := ledger.Strip(doc)
	if v.read != nil {
		v.read[k] = st
	}
	return st, nil
}

// matching returns the records of coll for which match holds, as the view
// shows them. filter narrows the stored records read and must hold for
// every record match accepts.
func (v *RuleView) matching(ctx context.Context, coll string, filter bson.M, match func(bson.M) bool) ([]bson.M, error) {
	var docs []bson.M
	if err := v.s.findAll(ctx, coll, filter, nil, &docs); err != nil {
		return nil, err
	}
	var out []bson.M
	seen := map[string]bool{}
	for _, d := range docs {
		id := fmt.Sprint(d["_id"])
		seen[id] = true
		st := ledger.Strip(d)
		if p, ok := v.pending[audit.RecordKey(coll, id)]; ok {
			st = p
		}
		if match(st) {
			out = append(out, st)
		}
	}
	for k, st := range v.pending {
		id, ok := strings.CutPrefix(k, audit.RecordKey(coll, ""))
		if ok && !seen[id] && match(st) {
			out = append(out, st)
		}
	}
	return out, nil
}

// linked checks that id, named by what (e.g. "outlet_id"), is a record of
// coll. An archived record counts: see the package rules above.
func (v *RuleView) linked(ctx context.Context, coll, what, id string) error {
	if id == "" {
		return nil
	}
	st, err := v.record(ctx, coll, id)
	if err != nil {
		return err
	}
	if st == nil {
		return Violated("link_target_exists", "%s names %s %s, which does not exist; a link must name an existing record: remove that link from the record first (its update or unlink tool), or leave this change as it is", what, kinds[coll], id)
	}
	return nil
}

func Str(st bson.M, k string) string { s, _ := st[k].(string); return s }

// decodeState decodes a proposed state into a record of its kind.
func decodeState[T any](id string, state bson.M) (*T, error) {
	rec := new(T)
	if err := ledger.DecodeM(state, rec); err != nil {
		return nil, fmt.Errorf("decode state of %s: %w", id, err)
	}
	return rec, nil
}

// noteLinksRule is the rule that a note is linked to at least one entity,
// whatever its state (archiving keeps the links). remove_note_link keeps it
// too.
func noteLinksRule(noteID string, links int) *RuleViolation {
	if links > 0 {
		return nil
	}
	return Violated("note_has_link", "note %s would have no links, and a note must be linked to at least one entity: link it to another entity first (add_note_link, after restore_note if it is archived), then retry; or archive the note instead", noteID)
}

func noteRule(ctx context.Context, v *RuleView, id string, state bson.M) error {
	n, err := decodeState[Note](id, state)
	if err != nil {
		return err
	}
	if vi := noteLinksRule(id, len(n.Links)); vi != nil {
		return vi
	}
	for _, l := range n.Links {
		coll, target := LinkEntity(l)
		if err := v.linked(ctx, coll, fmt.Sprintf("link %s", l.ID), target); err != nil {
			return err
		}
	}
	return nil
}

// emailHolder returns the active contact other than self whose address is
// emailLower (lower-cased), as v shows the contacts, or nil.
func (v *RuleView) emailHolder(ctx context.Context, emailLower, self string) (*Contact, error) {
	if emailLower == "" {
		return nil, nil
	}
	holders, err := v.matching(ctx, CollContacts, bson.M{"email_lower": emailLower}, func(st bson.M) bool {
		return Str(st, "_id") != self && st["archived_at"] == nil && Str(st, "email_lower") == emailLower
	})
	if err != nil || len(holders) == 0 {
		return nil, err
	}
	return decodeState[Contact](Str(holders[0], "_id"), holders[0])
}

func contactRule(ctx context.Context, v *RuleView, id string, state bson.M) error {
	c, err := decodeState[Contact](id, state)
	if err != nil {
		return err
	}
	if !c.Archived() {
		other, err := v.emailHolder(ctx, c.EmailLower, id)
		if err != nil {
			return err
		}
		if other != nil {
			return Violated("contact_email_unique", "contact %s would be active with the address %s, which active contact %s (%s) has, and an address belongs to one active contact: change the address of one of them (update_contact) or archive the other first, then retry", id, c.Email, other.ID, other.Name)
		}
	}
	stored, err := v.s.View().record(ctx, CollContacts, id)
	if err != nil {
		return err
	}
	if stored != nil {
		was, err := decodeState[Contact](id, stored)
		if err != nil {
			return err
		}
		if g := contactFlagGuard(ctx, was, c); g != nil {
			return g.asViolation()
		}
	}
	if err := v.linked(ctx, CollUsers, "owner_id", c.OwnerID); err != nil {
		return err
	}
	primary := ""
	for i, a := range c.Affiliations {
		if slices.ContainsFunc(c.Affiliations[:i], func(x Affiliation) bool { return x.OutletID == a.OutletID }) {
			return Violated("affiliation_once", "contact %s would be affiliated twice with outlet %s; remove one of the two affiliations first (remove_contact_outlet), then retry", id, a.OutletID)
		}
		if a.IsPrimary {
			if primary != "" {
				return Violated("one_primary_affiliation", "contact %s would have two primary affiliations (%s and %s); remove one of them (remove_contact_outlet) or add it again without is_primary first, then retry", id, primary, a.ID)
			}
			primary = a.ID
		}
		if err := v.linked(ctx, CollOutlets, fmt.Sprintf("affiliation %s", a.ID), a.OutletID); err != nil {
			return err
		}
	}
	return nil
}

func outletRule(ctx context.Context, v *RuleView, id string, state bson.M) error {
	o, err := decodeState[Outlet](id, state)
	if err != nil {
		return err
	}
	if strings.TrimSpace(o.Name) == "" {
		return Violated("outlet_fields", "outlet %s would have no name; give it one with update_outlet first", id)
	}
	if !slices.Contains(OutletTypes, o.Type) {
		return Violated("outlet_fields", "outlet %s would have type %q, which is not one of %s; set it with update_outlet first", id, o.Type, strings.Join(OutletTypes, ", "))
	}
	return nil
}

// channelOutletError is the rule that a record's channel belongs to the
// record's outlet: the message of both the tools' error and the violation.
func channelOutletError(channelID, channelOutlet, outlet string) string {
	if outlet == "" {
		return fmt.Sprintf("channel %s belongs to outlet %s; a record with a channel must have that outlet (clear channel_id with \"\" to remove the outlet)", channelID, channelOutlet)
	}
	return fmt.Sprintf("channel %s belongs to outlet %s, not to outlet %s; give a channel of outlet %s, or clear channel_id with \"\"", channelID, channelOutlet, outlet, outlet)
}

func channelRule(ctx context.Context, v *RuleView, id string, state bson.M) error {
	outlet := Str(state, "outlet_id")
	if outlet == "" {
		return Violated("channel_outlet", "channel %s would belong to no outlet, and every channel belongs to one outlet for good; leave this change as it is", id)
	}
	stored, err := v.s.View().record(ctx, CollChannels, id)
	if err != nil {
		return err
	}
	if was := Str(stored, "outlet_id"); was != "" && was != outlet {
		return Violated("channel_outlet", "channel %s would move from outlet %s to outlet %s, and a channel belongs to one outlet for good; create a channel of outlet %s instead", id, was, outlet, outlet)
	}
	return v.linked(ctx, CollOutlets, "outlet_id", outlet)
}

// generalArchived is the rule that the General campaign is never archived.
func generalArchived() string {
	return fmt.Sprintf("the %s campaign cannot be archived: opportunities created without a campaign join it", GeneralCampaign)
}

func campaignRule(ctx context.Context, v *RuleView, id string, state bson.M) error {
	c, err := decodeState[Campaign](id, state)
	if err != nil {
		return err
	}
	if err := checkCampaign(c); err != nil {
		return fieldViolation("campaign_fields", err)
	}
	stored, err := v.s.View().record(ctx, CollCampaigns, id)
	if err != nil {
		return err
	}
	if Str(stored, "name") == GeneralCampaign || c.General() {
		if c.Archived() {
			return Violated("general_campaign", "%s; leave this change as it is", generalArchived())
		}
		if !c.General() {
			return Violated("general_campaign", "the %s campaign cannot be renamed (to %q): it collects opportunities created without a campaign; leave this change as it is", GeneralCampaign, c.Name)
		}
	}
	if g, err := v.embargoCoverage(ctx, "campaign_id", id, c.EmbargoUntil); err != nil || g != nil {
		if err != nil {
			return err
		}
		return g.asViolation()
	}
	if strings.EqualFold(c.Name, GeneralCampaign) {
		others, err := v.matching(ctx, CollCampaigns, bson.M{"name": GeneralCampaign}, func(st bson.M) bool {
			return Str(st, "_id") != id && Str(st, "name") == GeneralCampaign
		})
		if err != nil {
			return err
		}
		if len(others) > 0 {
			return Violated("general_campaign", "campaign %s would be named %q, which is reserved for the %s campaign (%s); rename it with update_campaign first", id, c.Name, GeneralCampaign, Str(others[0], "_id"))
		}
	}
	return nil
}

// channelOf checks that channel (if any) exists and belongs to outlet.
func (v *RuleView) channelOf(ctx context.Context, what, channel, outlet string) error {
	if channel == "" {
		return nil
	}
	ch, err := v.record(ctx, CollChannels, channel)
	if err != nil {
		return err
	}
	if ch == nil {
		return v.linked(ctx, CollChannels, "channel_id", channel)
	}
	if co := Str(ch, "outlet_id"); co != outlet {
		return Violated("channel_of_outlet", "%s would have %s; change its outlet_id or channel_id with its update tool first, then retry", what, channelOutletError(channel, co, outlet))
	}
	return nil
}

func opportunityRule(ctx context.Context, v *RuleView, id string, state bson.M) error {
	o, err := decodeState[Opportunity](id, state)
	if err != nil {
		return err
	}
	if err := checkOpportunity(o); err != nil {
		return fieldViolation("opportunity_fields", err)
	}
	if o.CampaignID == "" {
		return Violated("opportunity_campaign", "opportunity %s would be in no campaign, and every opportunity is in one; leave this change as it is", id)
	}
	for _, l := range []struct{ coll, field, id string }{{CollCampaigns, "campaign_id", o.CampaignID}, {CollOutlets, "outlet_id", o.OutletID}} {
		if err := v.linked(ctx, l.coll, l.field, l.id); err != nil {
			return err
		}
	}
	for i, c := range o.ContactIDs {
		if err := v.linked(ctx, CollContacts, fmt.Sprintf("contact_ids[%d]", i), c); err != nil {
			return err
		}
	}
	if err := v.channelOf(ctx, "opportunity "+id, o.ChannelID, o.OutletID); err != nil {
		return err
	}
	if err := v.linked(ctx, CollUsers, "owner_id", o.OwnerID); err != nil {
		return err
	}
	stored, err := v.s.View().record(ctx, CollOpportunities, id)
	if err != nil {
		return err
	}
	var was *Opportunity
	if stored != nil {
		if was, err = decodeState[Opportunity](id, stored); err != nil {
			return err
		}
	}
	g, err := v.opportunityGuards(ctx, id, was, o)
	if err == nil && g == nil {
		g, err = v.embargoCoverage(ctx, "opportunity_id", id, o.EmbargoUntil)
	}
	if err != nil {
		return err
	}
	if g != nil {
		return g.asViolation()
	}
	// Coverage follows its opportunity's campaign.
	off, err := v.matching(ctx, CollCoverage, bson.M{"opportunity_id": id}, func(st bson.M) bool {
		return Str(st, "opportunity_id") == id && Str(st, "campaign_id") != o.CampaignID
	})
	if err != nil {
		return err
	}
	if len(off) > 0 {
		return coverageCampaign(Str(off[0], "_id"), Str(off[0], "campaign_id"), id, o.CampaignID)
	}
	return nil
}

func coverageCampaign(coverageID, coverageCampaign, oppID, oppCampaign string) *RuleViolation {
	if oppID == "" {
		return Violated("coverage_campaign", "coverage %s would be in campaign %s without an opportunity, and coverage takes its campaign from its opportunity: set its opportunity_id with update_coverage first, then retry", coverageID, coverageCampaign)
	}
	return Violated("coverage_campaign", "coverage %s would be in campaign %s while its opportunity %s is in campaign %s, and coverage is always in its opportunity's campaign: move the opportunity with update_opportunity (campaign_id), which moves its coverage along, or roll back the opportunity's and the coverage's changes together (rollback_session)", coverageID, coverageCampaign, oppID, oppCampaign)
}

func coverageRule(ctx context.Context, v *RuleView, id string, state bson.M) error {
	c, err := decodeState[Coverage](id, state)
	if err != nil {
		return err
	}
	if err := checkCoverage(c); err != nil {
		return fieldViolation("coverage_fields", err)
	}
	for _, l := range []struct{ coll, field, id string }{{CollOutlets, "outlet_id", c.OutletID}, {CollOpportunities, "opportunity_id", c.OpportunityID}} {
		if err := v.linked(ctx, l.coll, l.field, l.id); err != nil {
			return err
		}
	}
	for i, ct := range c.ContactIDs {
		if err := v.linked(ctx, CollContacts, fmt.Sprintf("contact_ids[%d]", i), ct); err != nil {
			return err
		}
	}
	if err := v.channelOf(ctx, "coverage "+id, c.ChannelID, c.OutletID); err != nil {
		return err
	}
	campaign := ""
	if c.OpportunityID != "" {
		opp, err := v.record(ctx, CollOpportunities, c.OpportunityID)
		if err != nil {
			return err
		}
		campaign = Str(opp, "campaign_id")
	}
	if c.CampaignID != campaign {
		return coverageCampaign(id, c.CampaignID, c.OpportunityID, campaign)
	}
	g, err := v.coverageEmbargo(ctx, c)
	if err != nil {
		return err
	}
	if g != nil {
		return g.asViolation()
	}
	return nil
}

func mediaRule(ctx context.Context, v *RuleView, id string, state bson.M) error {
	return v.linked(ctx, CollCoverage, "coverage_id", Str(state, "coverage_id"))
}

func emailThreadRule(ctx context.Context, v *RuleView, id string, state bson.M) error {
	t, err := decodeState[EmailThread](id, state)
	if err != nil {
		return err
	}
	for i, c := range t.ContactIDs {
		if err := v.linked(ctx, CollContacts, fmt.Sprintf("contact_ids[%d]", i), c); err != nil {
			return err
		}
	}
	for _, l := range t.OpportunityLinks {
		if err := v.linked(ctx, CollOpportunities, fmt.Sprintf("opportunity link %s", l.ID), l.OpportunityID); err != nil {
			return err
		}
	}
	return nil
}

// checkRules checks the state a plan leaves each record in against the rule
// of the record's kind, with every record as the whole plan leaves it: a
// plan is written as one unit, so no call ever sees the states in between
// (a session rollback may, say, set coverage back to an older campaign one
// step before its opportunity). It returns the violations by the index of
// the step that writes the record's final state.
func (s *Store) checkRules(ctx context.Context, p audit.Plan) (map[int][]RuleViolation, error) {
	v := &RuleView{s: s, pending: map[string]bson.M{}, read: map[string]bson.M{}}
	last := map[string]int{}
	for i, st := range p.Steps {
		if st.To == nil {
			continue
		}
		k := audit.RecordKey(st.Change.Collection, st.Change.RecordID)
		v.pending[k] = st.To
		last[k] = i
	}
	out := map[int][]RuleViolation{}
	for i, st := range p.Steps {
		k := audit.RecordKey(st.Change.Collection, st.Change.RecordID)
		rule := stateRules[st.Change.Collection]
		if st.To == nil || last[k] != i || rule == nil {
			continue
		}
		err := rule(ctx, v, st.Change.RecordID, st.To)
		var vi *RuleViolation
		switch {
		case errors.As(err, &vi):
			out[i] = append(out[i], *vi)
		case err != nil:
			return nil, fmt.Errorf("check the rules of %s %s: %w", kindOf(st.Change.Collection), st.Change.RecordID, err)
		}
	}
	return out, nil
}
