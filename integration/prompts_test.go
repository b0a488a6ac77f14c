package integration

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/integration/testenv"
)

// TestPromptsAndCompletions: the prompts read the tools' data for the
// record an argument names by id or name, refuse what they cannot resolve,
// and completion/complete offers names, ids, stages and types.
func TestPromptsAndCompletions(t *testing.T) {
	env := testenv.New(t)
	c := env.Client(env.AdminKey, "prompt-run")
	outlet := mk(t, c, "create_outlet", M{"name": "The Wire", "tier": 1})
	contact := mk(t, c, "create_contact", M{"first_name": "Ada", "last_name": "Lovelace", "outlet_ids": []string{outlet}})
	campaign := mk(t, c, "create_campaign", M{"name": "Launch"})
	mk(t, c, "create_opportunity", M{"title": "Feature story", "campaign_id": campaign, "outlet_id": outlet, "contact_ids": []string{contact}})
	s := c.Session
	ctx := context.Background()

	var names []string
	for p, err := range s.Prompts(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"campaign_coverage_report", "inbox_triage", "prepare_pitch", "session_changes", "weekly_pipeline_review"}, names); diff != "" {
		t.Errorf("prompts (-want +got):\n%s", diff)
	}

	get := func(name string, args map[string]string) (string, error) {
		res, err := s.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args})
		if err != nil {
			return "", err
		}
		return res.Messages[0].Content.(*mcp.TextContent).Text, nil
	}
	for _, tc := range []struct {
		name string
		args map[string]string
		want []string
	}{
		{"prepare_pitch", map[string]string{"contact": "ada lovelace"}, []string{contact, "do_not_contact", "The Wire"}},
		{"prepare_pitch", map[string]string{"contact": contact}, []string{"Lovelace"}},
		{"weekly_pipeline_review", map[string]string{"campaign": "Launch", "stage": "researching"}, []string{"Feature story", "get_agenda"}},
		{"campaign_coverage_report", map[string]string{"campaign": campaign}, []string{`"scope":"campaign"`, "Launch"}},
		{"inbox_triage", nil, []string{"list_email_threads"}},
		{"session_changes", map[string]string{"session_id": "prompt-run"}, []string{"create_contact", "create_campaign", `"dry_run":true`}},
	} {
		text, err := get(tc.name, tc.args)
		if err != nil {
			t.Errorf("%s %v: %v", tc.name, tc.args, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s %v: the prompt lacks %q:\n%.2000s", tc.name, tc.args, w, text)
			}
		}
	}
	for _, tc := range []struct {
		name string
		args map[string]string
		want string
	}{
		{"prepare_pitch", map[string]string{"contact": "Nobody Here"}, "no contact is named"},
		{"prepare_pitch", nil, "contact: is required"},
		{"weekly_pipeline_review", map[string]string{"stage": "bogus"}, "must be one of"},
		{"inbox_triage", map[string]string{"bogus": "1"}, "unknown"},
	} {
		if _, err := get(tc.name, tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: %v; want an error saying %q", tc.name, tc.args, err, tc.want)
		}
	}

	complete := func(ref *mcp.CompleteReference, arg, value string) []string {
		res, err := s.Complete(ctx, &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: arg, Value: value}})
		if err != nil {
			t.Fatalf("complete %s %s=%q: %v", ref.Name+ref.URI, arg, value, err)
		}
		return res.Completion.Values
	}
	prompt := func(name string) *mcp.CompleteReference {
		return &mcp.CompleteReference{Type: "ref/prompt", Name: name}
	}
	for _, tc := range []struct {
		ref        *mcp.CompleteReference
		arg, value string
		want       []string
	}{
		{prompt("prepare_pitch"), "contact", "ad", []string{"Ada Lovelace"}},
		{prompt("prepare_pitch"), "contact", "zz", []string{}},
		{prompt("prepare_pitch"), "opportunity", "Feat", []string{"Feature story"}},
		{prompt("weekly_pipeline_review"), "campaign", "La", []string{"Launch"}},
		{prompt("weekly_pipeline_review"), "stage", "p", []string{"pitched", "placed", "published"}},
		{&mcp.CompleteReference{Type: "ref/resource", URI: "outreach://contacts/{id}"}, "id", "Ada", []string{contact}},
		{&mcp.CompleteReference{Type: "ref/resource", URI: "outreach://outlets/{id}"}, "id", "the w", []string{outlet}},
		{&mcp.CompleteReference{Type: "ref/resource", URI: "outreach://campaigns/{id}/report"}, "id", "laun", []string{campaign}},
	} {
		if got := complete(tc.ref, tc.arg, tc.value); !cmp.Equal(got, tc.want) {
			t.Errorf("complete %s%s %s=%q: %v, want %v", tc.ref.Name, tc.ref.URI, tc.arg, tc.value, got, tc.want)
		}
	}
}
