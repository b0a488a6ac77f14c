package integration

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// listAll calls a list tool with limit 200 and returns total and the items under noun.
func listAll(t *testing.T, c *mcpConn, tool, noun string, args map[string]any) (int, []map[string]any) {
	t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	args["limit"] = 200
	var raw map[string]json.RawMessage
	c.must(t, tool, args, &raw)
	var total int
	var items []map[string]any
	if err := json.Unmarshal(raw["total"], &total); err != nil {
		t.Fatalf("%s: total: %v (%s)", tool, err, raw["total"])
	}
	if err := json.Unmarshal(raw[noun], &items); err != nil {
		t.Fatalf("%s: %s: %v", tool, noun, err)
	}
	return total, items
}

func distinct(items []map[string]any, field string) []string {
	var out []string
	for _, it := range items {
		if v, ok := it[field]; ok && v != nil {
			s := strings.Trim(strings.TrimSpace(jsonText(v)), `"`)
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	sort.Strings(out)
	return out
}

func jsonText(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestSeedDemo runs `outreach seed --demo` on an empty store, looks at the
// result through MCP as an agent would, checks the invariants with `outreach
// verify`, and takes the whole demo back with rollback_session demo.
func TestSeedDemo(t *testing.T) {
	data := dataDir(t)
	out := seedDemoCLI(t, data)
	if !strings.Contains(out, `under session "demo"`) || !regexp.MustCompile(`contacts +40\n`).MatchString(out) {
		t.Fatalf("seed --demo printed:\n%s", out)
	}
	if _, _, err := runCLI(t, "seed", "--demo", "--data", data); err == nil {
		t.Error("a second seed --demo on the same store succeeded; want it refused (the demo is there)")
	}
	if v := mustCLI(t, "verify", "--data", data); !strings.HasPrefix(v, "ok") {
		t.Fatalf("verify after seed --demo:\n%s", v)
	}
	srv := startServer(t, data)
	c := mustDial(t, srv.URL, srv.FirstKey)

	n, outlets := listAll(t, c, "list_outlets", "outlets", nil)
	wantTypes := []string{"award_body", "blog", "broadcaster", "conference_organizer", "magazine", "newsletter", "newspaper", "online", "other", "podcast_network", "publication", "wire_service"}
	if diff := cmp.Diff(wantTypes, distinct(outlets, "type")); n != 12 || diff != "" {
		t.Errorf("outlets: %d, types (-want +got):\n%s", n, diff)
	}
	if diff := cmp.Diff([]string{"1", "2", "3"}, distinct(outlets, "tier")); diff != "" {
		t.Errorf("outlet tiers (-want +got):\n%s", diff)
	}
	for _, o := range outlets {
		if !strings.HasSuffix(jsonText(o["website"]), `.example.com"`) && !strings.HasSuffix(jsonText(o["website"]), `.example.org"`) && !strings.HasSuffix(jsonText(o["website"]), `.example.net"`) {
			t.Errorf("outlet %v has a website outside the example domains", o["website"])
		}
	}
	_, channels := listAll(t, c, "list_channels", "channels", nil)
	if diff := cmp.Diff([]string{"award", "event", "newsletter", "podcast", "print", "tv_broadcast", "website"}, distinct(channels, "type")); diff != "" {
		t.Errorf("channel types (-want +got):\n%s", diff)
	}

	n, contacts := listAll(t, c, "list_contacts", "contacts", nil)
	dnc := 0
	for _, ct := range contacts {
		if ct["do_not_contact"] == true {
			dnc++
		}
		if b, _ := ct["beats"].([]any); len(b) == 0 {
			t.Errorf("contact %v %v has no beats", ct["first_name"], ct["last_name"])
		}
		if e, _ := ct["email"].(string); !strings.Contains(e, ".example.") {
			t.Errorf("contact email %q is not on an example domain", e)
		}
	}
	if n != 40 || dnc != 1 {
		t.Errorf("contacts: %d with %d do-not-contact; want 40 with 1", n, dnc)
	}
	for _, ct := range contacts {
		if a, _ := ct["affiliations"].([]any); len(a) == 0 {
			t.Errorf("contact %v %v has no affiliation: %v", ct["first_name"], ct["last_name"], ct)
		}
	}

	n, campaigns := listAll(t, c, "list_campaigns", "campaigns", nil)
	var demoCampaigns []string
	for _, cp := range campaigns {
		if cp["name"] != "General" {
			demoCampaigns = append(demoCampaigns, cp["id"].(string))
		}
	}
	if len(demoCampaigns) != 2 {
		t.Fatalf("campaigns: %v; want General and two demo campaigns", campaigns)
	}
	// The summary's count is the demo's campaigns; it names the one more
	// that list_campaigns shows, so a newcomer is not left wondering.
	if m := regexp.MustCompile(`campaigns +(\d+)(.*)\n`).FindStringSubmatch(out); m == nil || m[1] != fmt.Sprint(len(demoCampaigns)) ||
		n != len(demoCampaigns)+1 || !strings.Contains(m[2], "General") {
		t.Errorf("seed --demo's summary says %q; list_campaigns shows %d (General and %d of the demo's)", m, n, len(demoCampaigns))
	}
	stages := []string{"drafting", "in_progress", "lost", "pitched", "placed", "published", "researching", "responded", "won"}
	for _, id := range demoCampaigns {
		_, opps := listAll(t, c, "list_opportunities", "opportunities", map[string]any{"campaign_id": id})
		if diff := cmp.Diff(stages, distinct(opps, "stage")); diff != "" {
			t.Errorf("campaign %s: stages (-want +got):\n%s", id, diff)
		}
	}
	_, opps := listAll(t, c, "list_opportunities", "opportunities", map[string]any{"stage": "won"})
	var opp struct {
		StageHistory []map[string]any `json:"stage_history"`
	}
	c.must(t, "get_opportunity", map[string]any{"id": opps[0]["id"]}, &opp)
	if len(opp.StageHistory) < 8 {
		t.Errorf("a won opportunity's stage history: %v; want every stage it went through", opp.StageHistory)
	}

	_, notes := listAll(t, c, "list_notes", "notes", nil)
	if diff := cmp.Diff([]string{"event", "general", "meeting", "other", "phone_call", "research"}, distinct(notes, "type")); diff != "" {
		t.Errorf("note types (-want +got):\n%s", diff)
	}
	n, coverage := listAll(t, c, "list_coverage", "coverage", nil)
	if diff := cmp.Diff([]string{"mixed", "negative", "neutral", "positive"}, distinct(coverage, "sentiment")); n != 10 || diff != "" {
		t.Errorf("coverage: %d, sentiments (-want +got):\n%s", n, diff)
	}
	for _, cv := range coverage {
		if cv["reach"] == nil {
			t.Errorf("coverage %v has no reach", cv["title"])
		}
	}
	if n, _ := listAll(t, c, "list_media", "media", nil); n != 3 {
		t.Errorf("media: %d, want 3", n)
	}
	n, threads := listAll(t, c, "list_email_threads", "threads", nil)
	if n != 3 {
		t.Errorf("email threads: %d %v, want 3", n, threads)
	}

	var rb struct {
		Changes int `json:"changes"`
	}
	c.must(t, "rollback_session", map[string]any{"session_id": "demo"}, &rb)
	for tool, noun := range map[string]string{"list_outlets": "outlets", "list_contacts": "contacts", "list_channels": "channels",
		"list_opportunities": "opportunities", "list_notes": "notes", "list_coverage": "coverage", "list_media": "media", "list_email_threads": "threads"} {
		if n, items := listAll(t, c, tool, noun, nil); n != 0 {
			t.Errorf("%s after rollback_session demo: %d left, e.g. %v", tool, n, items[0])
		}
	}
	if n, _ := listAll(t, c, "list_campaigns", "campaigns", nil); n != 1 {
		t.Errorf("campaigns after rollback_session demo: %d, want General alone", n)
	}
	if code := srv.term(30 * time.Second); code != 0 {
		t.Errorf("server exit code %d", code)
	}
	if v := mustCLI(t, "verify", "--data", data); !strings.HasPrefix(v, "ok") {
		t.Errorf("verify after rollback_session demo:\n%s", v)
	}
}
