package repo

import (
	"context"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/ledger"
	"outreach/ledger/index"
)

// What the areas above the core register with it. The core cannot import
// an area (the direction test), yet a rollback checks the rule of every
// kind of record and restores a singleton's defaults. So an area registers
// its kinds' rollback rules, its singletons and its reactions to the
// core's writes from its package's init (and what an area needs from an
// area above it, RegisterNeed), and Open refuses to start while one is
// missing: a store never serves with half of them. Each is registered once.

// areaRuled are the collections whose rollback rule an area above the core
// registers (RegisterRule).
var areaRuled = map[string]string{CollPitches: "outreach/repo/pitches", CollSharedReports: "outreach/repo/reports", CollMailboxes: "outreach/repo/mailboxes", CollNotes: "outreach/repo/notes",
	CollCampaigns: "outreach/repo/pipeline", CollOpportunities: "outreach/repo/pipeline", CollCoverage: "outreach/repo/pipeline", CollMedia: "outreach/repo/pipeline",
	CollOutlets: "outreach/repo/directory", CollContacts: "outreach/repo/directory", CollChannels: "outreach/repo/directory"}

// areaSingletons are the kinds of singleton settings record whose defaults
// an area above the core registers (RegisterSingleton), by the package
// that registers each.
var areaSingletons = map[string]string{"organisation": "outreach/repo/reports", "email_sync": "outreach/repo/inbox"}

// singletons are the registered kinds of singleton settings record, in
// the order of their registration.
var singletons []singleton

type singleton struct {
	name     string
	defaults func(id string, after bson.M) any
}

// needs are the areas' checks of their own registries (RegisterNeed).
var needs []func() error

var reactions struct {
	stageNote      func(oppID, stage, content string) (Mutation, error)
	rollbackEvents func(ctx context.Context, s *Store, muts []Mutation) ([]Mutation, error)
	words          func(map[string]index.Spec) map[string]index.Spec
}

// Mutation is one record change handed to the write path (ledger.Mutation),
// as an area hands one to the core.
type Mutation = mutation

// RegisterRule registers the rollback rule of the records of coll (see
// stateRules).
func RegisterRule(coll string, rule StateRule) {
	if _, ok := stateRules[coll]; ok {
		panic("repo: a second rollback rule for " + coll)
	}
	stateRules[coll] = rule
}

// RegisterNeed registers a check of what an area needs registered with
// it by an area above (package inbox: a reaction to a stored email); Open
// refuses to start while one fails.
func RegisterNeed(check func() error) { needs = append(needs, check) }

// RegisterSingleton registers a kind of singleton settings record (package
// reports: the organisation settings; package inbox: a mailbox's sync
// state): a record that exists, holding its defaults, before anyone sets
// it, and is never archived. So the change that first stored one is, to a
// rollback, an update from the defaults: rolling it back sets the fields it
// wrote back to their defaults (a conflict where one changed since), and
// the record stays active, as a rollback of any later update leaves it.
// defaults returns the defaults of the record of id whose first stored
// state is after, or nil when that record is not of this kind.
func RegisterSingleton(name string, defaults func(id string, after bson.M) any) {
	for _, x := range singletons {
		if x.name == name {
			panic("repo: the singleton " + name + " is registered twice")
		}
	}
	singletons = append(singletons, singleton{name, defaults})
}

// singletonBefore returns the state a rollback treats as the before of c
// when c is the create of a singleton record (its defaults, with the
// record's own id and dates), or nil.
func singletonBefore(c audit.Entry) bson.M {
	if c.Collection != CollSettings || c.Before != nil || c.Action != audit.ActionCreate {
		return nil
	}
	var zero any
	for _, x := range singletons {
		if zero = x.defaults(c.RecordID, c.After); zero != nil {
			break
		}
	}
	if zero == nil {
		return nil
	}
	def, err := ledger.ToM(zero)
	if err != nil {
		return nil
	}
	for _, k := range []string{"_id", "created_at", "updated_at", "archived_at"} {
		if v, ok := c.After[k]; ok {
			def[k] = v
		} else {
			delete(def, k)
		}
	}
	return def
}

// RegisterStageNote registers what makes the note that records a stage
// change of an opportunity, written in the unit of the change (package
// notes: a general note titled "Stage changed to <stage>", linked to the
// opportunity). It returns the note's creation; its ID is the note's id.
func RegisterStageNote(fn func(oppID, stage, content string) (Mutation, error)) {
	if reactions.stageNote != nil {
		panic("repo: the note of a stage change is registered twice")
	}
	reactions.stageNote = fn
}

// RegisterRollbackEvents registers what a rollback's mutations notify,
// written in the rollback's unit (package outbox: an opportunity whose
// stage moves back notifies its subscribers).
func RegisterRollbackEvents(fn func(ctx context.Context, s *Store, muts []Mutation) ([]Mutation, error)) {
	if reactions.rollbackEvents != nil {
		panic("repo: the events of a rollback are registered twice")
	}
	reactions.rollbackEvents = fn
}

// RegisterWords registers what gives the index specs of the searched
// collections and of the lists with a free-text filter their word index
// (package textlist: the words of each record the searches and filters
// read), for the schema the core hands the engine at Open.
func RegisterWords(fn func(map[string]index.Spec) map[string]index.Spec) {
	if reactions.words != nil {
		panic("repo: the word index's extraction is registered twice")
	}
	reactions.words = fn
}

// checkRegistry fails when an area's rule or reaction is missing: the
// program does not link the area that registers it.
func checkRegistry() error {
	for c, pkg := range areaRuled {
		if stateRules[c] == nil {
			return fmt.Errorf("the store cannot start: no rollback rule for %s (link package %s)", KindOf(c), pkg)
		}
	}
	for name, pkg := range areaSingletons {
		if !slices.ContainsFunc(singletons, func(x singleton) bool { return x.name == name }) {
			return fmt.Errorf("the store cannot start: no defaults of the singleton %s (link package %s)", name, pkg)
		}
	}
	for _, check := range needs {
		if err := check(); err != nil {
			return fmt.Errorf("the store cannot start: %w", err)
		}
	}
	if reactions.words == nil {
		return fmt.Errorf("the store cannot start: nothing extracts the word index (link package outreach/repo/textlist)")
	}
	if reactions.stageNote == nil {
		return fmt.Errorf("the store cannot start: nothing makes the note of a stage change (link package outreach/repo/notes)")
	}
	if reactions.rollbackEvents == nil {
		return fmt.Errorf("the store cannot start: nothing notifies a rollback's events (link package outreach/repo/outbox)")
	}
	return nil
}

// StageNote makes the note that records a stage change of an opportunity
// (see RegisterStageNote), for the pipeline's stage moves.
func StageNote(oppID, stage, content string) (Mutation, error) {
	return reactions.stageNote(oppID, stage, content)
}

// AreaState returns the state an area keeps in this store under key (a
// type of the area's own), made by fresh the first time it is asked for:
// what the area is given at start (the outbox's delivery targets, the
// pipeline's media options, signing secret and pitch window, the pitches'
// policy), which the core holds without reading.
func (s *Store) AreaState(key any, fresh func() any) any {
	if v, ok := s.areas.Load(key); ok {
		return v
	}
	v, _ := s.areas.LoadOrStore(key, fresh())
	return v
}
