package repo_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"outreach/repo"
	"outreach/repo/directory"
	"outreach/repo/inbox"
	"outreach/repo/notes"
	"outreach/repo/pipeline"
)

// recordTypes are the documents of the record collections and the
// documents embedded in them, as tools return them.
var recordTypes = []any{directory.Outlet{}, directory.Channel{}, directory.Contact{}, directory.Affiliation{}, pipeline.Campaign{}, pipeline.Opportunity{}, pipeline.StageChange{},
	pipeline.Coverage{}, pipeline.Media{}, notes.Note{}, notes.NoteLink{}, inbox.EmailThread{}, inbox.EmailMessage{}, inbox.EmailOpportunityLink{}, repo.User{}, repo.AgentKey{}}

// TestEmptyValuesOneRule checks the rule for empty values (docs/data-dictionary.md):
// a field a record may lack is absent when unset, both in the stored
// document and in tool results; every other field is always present. So a
// field's bson and json tags agree on omitempty, and no optional value is
// rendered as "" or null. The dates of lifecycle events (archived_at, as the
// catalogue says, and a key's revoked_at, expires_at, last_used_at) are
// always present and null until the event.
func TestEmptyValuesOneRule(t *testing.T) {
	for _, r := range recordTypes {
		typ := reflect.TypeOf(r)
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if f.Anonymous || !f.IsExported() {
				continue
			}
			js, bs := f.Tag.Get("json"), f.Tag.Get("bson")
			if js == "-" || js == "" || bs == "" {
				continue
			}
			jOmit, bOmit := strings.Contains(js, ",omitempty"), strings.Contains(bs, ",omitempty")
			if jOmit != bOmit {
				t.Errorf("%s.%s: bson %q, json %q: an optional field must be absent when unset in both, a required one present in both", typ.Name(), f.Name, bs, js)
			}
			k := f.Type.Kind()
			lifecycle := f.Type == reflect.TypeOf(&time.Time{}) // archived_at, revoked_at…: present, null until it happens
			if !bOmit && (k == reflect.Pointer && !lifecycle || k == reflect.Map) {
				t.Errorf("%s.%s (%s) is always present, so it would be null when unset: make it optional (omitempty) or a value", typ.Name(), f.Name, f.Type)
			}
		}
	}
}
