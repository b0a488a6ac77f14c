package repo_test

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/indexes"
	"outreach/ledger"
	"outreach/repo"
	"outreach/repo/access"
	"outreach/repo/directory"
	"outreach/repo/inbox"
	"outreach/repo/mailboxes"
	"outreach/repo/notes"
	"outreach/repo/notify"
	"outreach/repo/outbox"
	"outreach/repo/pipeline"
	"outreach/repo/pitches"
	"outreach/repo/reports"
)

var updateDictionary = flag.Bool("update-dictionary", false, "rewrite the generated part of docs/data-dictionary.md")

const dictionaryPath = "../docs/data-dictionary.md"

// dictionaryDocs are the collections the dictionary describes field by
// field, with the Go type of their documents.
var dictionaryDocs = []struct {
	coll string
	doc  any
}{
	{repo.CollOutlets, directory.Outlet{}}, {repo.CollChannels, directory.Channel{}}, {repo.CollContacts, directory.Contact{}}, {repo.CollCampaigns, pipeline.Campaign{}},
	{repo.CollOpportunities, pipeline.Opportunity{}}, {repo.CollCoverage, pipeline.Coverage{}}, {repo.CollMedia, pipeline.Media{}}, {repo.CollNotes, notes.Note{}},
	{repo.CollEmails, inbox.EmailThread{}}, {repo.CollUsers, repo.User{}}, {repo.CollKeys, repo.AgentKey{}}, {repo.CollOAuthGrants, access.OAuthGrant{}}, {repo.CollOAuthClients, access.OAuthClient{}}, {repo.CollOAuthRequests, access.OAuthRequest{}}, {repo.CollSignIns, access.SignIn{}}, {repo.CollSettings, inbox.EmailSyncState{}},
	{repo.CollSubscriptions, outbox.Subscription{}}, {repo.CollNotifications, outbox.Notification{}}, {repo.CollMessages, notify.Message{}},
	{repo.CollHeld, inbox.HeldEmail{}}, {repo.CollPitches, pitches.Pitch{}}, {repo.CollSuppressions, pitches.Suppression{}}, {repo.CollSharedReports, reports.SharedReport{}}, {repo.CollChangeLog, audit.Entry{}},
	{repo.CollMailboxes, mailboxes.Connection{}},
}

// dictionaryBookkeeping are the collections of the write path's and the
// transport's own bookkeeping: described in prose, not field by field.
var dictionaryBookkeeping = map[string]string{
	repo.CollKeyUsage:    "a key's `last_used_at`, at most once a minute (usage is not a change: no change entry)",
	repo.CollCounters:    "the change log's `seq` counter",
	repo.CollPlans:       "rollback plans in progress (the ordered write protocol)",
	repo.CollIntents:     "write-ahead intents of the serial protocol: per process, the entries of the batch it is writing",
	repo.CollPlanSteps:   "the steps of a rollback plan",
	repo.CollSessions:    "which agent a session id belongs to (the first that wrote in it)",
	repo.CollDeliveries:  "a notification's delivery state per target (the outbox)",
	repo.CollFiles:       "GridFS: one document per stored media file (bucket `fs`)",
	repo.CollChunks:      "GridFS: the bytes of media files",
	repo.CollProbes:      "the capability probes' scratch documents: each start of the service tests what the server can do (transactions, atomic updates, `$unionWith`, text search) on five small documents of its own; not records",
	ledger.CollStoreInfo: "the store's format version (`format`), recorded at its first start and when a start upgrades it (after a backup): a binary refuses a store of a newer format, naming it",
	ledger.CollRestore:   "the restore that filled the store (`outreach restore`): the backup, its counter, `incomplete` until the restored store is verified (then every start refuses it), `complete` after",
	repo.CollIdempotency: "idempotency keys of mutating calls: per API key, the arguments' hash and the first result, kept 24 h (a retry is answered from here)",
}

// dictionaryEnums are the allowed values of enumerated fields.
var dictionaryEnums = map[string][]string{
	"outlets.type": directory.OutletTypes, "outlets.tier": {"1", "2", "3"},
	"channels.type": directory.ChannelTypes, "channels.frequency": directory.ChannelFrequencies,
	"campaigns.status":    pipeline.CampaignStatuses,
	"opportunities.stage": pipeline.Stages, "opportunities.priority": pipeline.Priorities, "opportunities.type": pipeline.OpportunityTypes,
	"opportunities.stage_history.stage": pipeline.Stages,
	"coverage.type":                     pipeline.CoverageTypes, "coverage.sentiment": pipeline.Sentiments, "coverage.depth": pipeline.Depths,
	"coverage.share_of_voice": pipeline.SharesOfVoice, "coverage.initiated_by": pipeline.Initiators,
	"media.type": pipeline.MediaTypes, "notes.type": notes.NoteTypes, "agent_keys.agent_type": access.AgentTypes,
	"agent_keys.scopes":    {repo.ScopeRead, repo.ScopeWrite, repo.ScopeAdmin},
	"subscriptions.events": outbox.Events, "notifications.event": outbox.Events,
	"change_log.action": audit.Actions,
	"email_held.reason": inbox.HeldReasons, "email_held.outcome": {inbox.HeldStored, inbox.HeldDuplicate, inbox.HeldGone},
	"pitches.state": pitches.PitchStates, "pitches.recipients.state": pitches.RecipientStates, "suppressions.reason": pitches.SuppressionReasons,
	"mailbox_connections.status": {mailboxes.StatusConnected, mailboxes.StatusDisconnected},
}

var (
	timeType  = reflect.TypeOf(time.Time{})
	bsonMType = reflect.TypeOf(bson.M{})
)

func bsonTypeName(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return "date"
	case t == bsonMType || t.Kind() == reflect.Map:
		return "document"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int32:
		return "int"
	case reflect.Int64:
		return "long"
	case reflect.Float64:
		return "double"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "binary"
		}
		if t.Elem().Kind() == reflect.Struct && t.Elem() != timeType {
			return "array of documents"
		}
		return "array of " + bsonTypeName(t.Elem())
	case reflect.Struct:
		return "document"
	}
	return t.String()
}

// dictionaryRows lists the fields of t as stored, flattening embedded
// documents into dotted paths.
func dictionaryRows(coll, prefix string, t reflect.Type, rows *[]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("bson")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if opts == "inline" || f.Anonymous && name == "" {
			dictionaryRows(coll, prefix, f.Type, rows)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		path := prefix + name
		presence := "always"
		if strings.Contains(opts, "omitempty") {
			presence = "absent when unset"
		} else if f.Type.Kind() == reflect.Pointer {
			presence = "always; null until set"
		}
		note := ""
		if e, ok := dictionaryEnums[coll+"."+path]; ok {
			note = "one of `" + strings.Join(e, "`, `") + "`"
		}
		if f.Tag.Get("json") == "-" {
			note = strings.TrimPrefix(note+"; internal, not in tool results", "; ")
		}
		*rows = append(*rows, fmt.Sprintf("| `%s` | %s | %s | %s |", path, bsonTypeName(f.Type), presence, note))
		et := f.Type
		if et.Kind() == reflect.Slice || et.Kind() == reflect.Pointer {
			et = et.Elem()
		}
		if et.Kind() == reflect.Struct && et != timeType {
			dictionaryRows(coll, path+".", et, rows)
		}
	}
}

// collectionNames reads the collection constants (coll…, or Coll… in the
// engine, package ledger) of every file of the package and of the engine,
// so a collection added anywhere must be in the dictionary.
func collectionNames(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"*.go", "../ledger/*.go"} {
		matched, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, matched...)
	}
	// In the order of the files' names, wherever they are (the table's order).
	sort.SliceStable(files, func(i, j int) bool { return filepath.Base(files[i]) < filepath.Base(files[j]) })
	var out []string
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				for i, n := range v.Names {
					if !strings.HasPrefix(n.Name, "coll") && !strings.HasPrefix(n.Name, "Coll") || i >= len(v.Values) {
						continue
					}
					if lit, ok := v.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						name, _ := strconv.Unquote(lit.Value)
						out = append(out, name)
					}
				}
			}
		}
	}
	return out
}

func generateDictionary(t *testing.T) string {
	var b strings.Builder
	described := map[string]bool{}
	for _, d := range dictionaryDocs {
		described[d.coll] = true
		fmt.Fprintf(&b, "### `%s`\n\n| field | type | present | values |\n|---|---|---|---|\n", d.coll)
		var rows []string
		dictionaryRows(d.coll, "", reflect.TypeOf(d.doc), &rows)
		b.WriteString(strings.Join(rows, "\n") + "\n")
		var idx []string
		for _, x := range indexes.List {
			if x.Collection != d.coll {
				continue
			}
			var keys []string
			for _, k := range x.Keys {
				keys = append(keys, fmt.Sprintf("%s: %v", k.Key, k.Value))
			}
			kind := ""
			if x.Unique {
				kind = " (unique)"
			}
			if x.Text {
				kind = " (text; only where the server has text search)"
			}
			idx = append(idx, fmt.Sprintf("`%s` {%s}%s", x.Name, strings.Join(keys, ", "), kind))
		}
		if len(idx) > 0 {
			fmt.Fprintf(&b, "\nIndexes: %s.\n", strings.Join(idx, "; "))
		}
		b.WriteString("\n")
	}
	b.WriteString("### Bookkeeping collections\n\n| collection | holds |\n|---|---|\n")
	names := collectionNames(t)
	for _, n := range names {
		if described[n] {
			continue
		}
		what, ok := dictionaryBookkeeping[n]
		if !ok {
			t.Errorf("collection %q (repo/store.go) is neither described field by field nor listed as bookkeeping", n)
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", n, what)
	}
	for c := range described {
		if !slices.Contains(names, c) {
			t.Errorf("the dictionary describes %q, which no repo file names", c)
		}
	}
	return b.String()
}

// TestDataDictionary keeps docs/data-dictionary.md true to the code: its
// field tables are generated from the record types' bson tags, the enums
// and the index list (go test ./repo -run TestDataDictionary -update-dictionary
// rewrites them), and every collection of repo/store.go is in it.
func TestDataDictionary(t *testing.T) {
	const start, end = "<!-- generated from the code: do not edit by hand -->\n", "<!-- end of generated part -->\n"
	doc, err := os.ReadFile(dictionaryPath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	i, j := strings.Index(text, start), strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the generated part's markers", dictionaryPath)
	}
	want := generateDictionary(t)
	got := text[i+len(start) : j]
	if got == want {
		return
	}
	if *updateDictionary {
		if err := os.WriteFile(dictionaryPath, []byte(text[:i+len(start)]+want+text[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is out of date with the code; run go test ./repo -run TestDataDictionary -update-dictionary\n--- in the document:\n%s\n--- from the code:\n%s", dictionaryPath, got, want)
}
