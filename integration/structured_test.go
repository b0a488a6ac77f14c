package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/integration/testenv"
)

// structured calls tools over MCP and checks each result against the
// tool's declared outputSchema: structuredContent validates, and equals the
// JSON of content[0].text; an error is an isError result without it.
type structured struct {
	t       *testing.T
	c       *testenv.Client
	schemas map[string]*jsonschema.Resolved
	called  map[string]bool
}

func newStructured(t *testing.T, c *testenv.Client) *structured {
	t.Helper()
	s := &structured{t: t, c: c, schemas: map[string]*jsonschema.Resolved{}, called: map[string]bool{}}
	for tool, err := range c.Session.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.OutputSchema == nil {
			t.Errorf("%s: no outputSchema", tool.Name)
			continue
		}
		b, _ := json.Marshal(tool.OutputSchema)
		var js jsonschema.Schema
		if err := json.Unmarshal(b, &js); err != nil {
			t.Fatalf("%s: outputSchema %s: %v", tool.Name, b, err)
		}
		if js.Type != "object" {
			t.Errorf("%s: outputSchema type %q, want object", tool.Name, js.Type)
		}
		r, err := js.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: outputSchema does not resolve: %v", tool.Name, err)
		}
		s.schemas[tool.Name] = r
	}
	return s
}

// call calls tool and checks its result; wantErr is the error code the call
// must fail with, or "" for success. It returns the result's JSON.
func (s *structured) call(tool string, args M, wantErr string) json.RawMessage {
	s.t.Helper()
	s.called[tool] = true
	res, err := s.c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		s.t.Fatalf("%s: %v", tool, err)
	}
	if len(res.Content) != 1 {
		s.t.Fatalf("%s: %d content items", tool, len(res.Content))
	}
	text := []byte(res.Content[0].(*mcp.TextContent).Text)
	if res.IsError {
		var body struct{ Error struct{ Code string } }
		if err := json.Unmarshal(text, &body); err != nil || body.Error.Code != wantErr {
			s.t.Fatalf("%s(%v): error %s; want %q", tool, args, text, wantErr)
		}
		if res.StructuredContent != nil {
			s.t.Errorf("%s: an error result with structuredContent %v", tool, res.StructuredContent)
		}
		return text
	}
	if wantErr != "" {
		s.t.Fatalf("%s(%v) succeeded; want %s", tool, args, wantErr)
	}
	if res.StructuredContent == nil {
		s.t.Fatalf("%s: no structuredContent", tool)
	}
	var fromText any
	if err := json.Unmarshal(text, &fromText); err != nil {
		s.t.Fatalf("%s: text is not JSON: %v", tool, err)
	}
	if diff := cmp.Diff(res.StructuredContent, fromText); diff != "" {
		s.t.Errorf("%s: structuredContent differs from content[0].text (-structured +text):\n%s", tool, diff)
	}
	if err := s.schemas[tool].Validate(res.StructuredContent); err != nil {
		s.t.Errorf("%s: structuredContent does not validate against its outputSchema: %v\n%s", tool, err, text)
	}
	return text
}

func (s *structured) id(tool string, args M) string {
	s.t.Helper()
	return testenv.ID(s.t, s.call(tool, args, ""))
}

// TestStructuredOutput calls tools of every group (records, lists, details,
// dossiers, audit, keys, notifications, emails, media, errors) and checks
// every result against the tool's declared outputSchema.
func TestStructuredOutput(t *testing.T) {
	env := testenv.New(t)
	s := newStructured(t, env.Admin())

	outlet := s.id("create_outlet", M{"name": "The Daily Planet", "tier": 1})
	s.call("get_outlet", M{"id": outlet}, "")
	s.call("update_outlet", M{"id": outlet, "website": "https://planet.example"}, "")
	s.call("list_outlets", M{}, "")
	contact := s.id("create_contact", M{"first_name": "Lois", "last_name": "Lane", "email": "lois@planet.example"})
	s.call("add_contact_outlet", M{"contact_id": contact, "outlet_id": outlet, "role": "reporter", "is_primary": true}, "")
	s.call("get_contact", M{"id": contact}, "")
	s.call("list_contacts", M{}, "")
	channel := s.id("create_channel", M{"outlet_id": outlet, "type": "podcast"})
	s.call("get_channel", M{"id": channel}, "")
	s.call("list_channels", M{}, "")
	campaign := s.id("create_campaign", M{"name": "Launch"})
	s.call("get_campaign", M{"id": campaign}, "")
	s.call("list_campaigns", M{}, "")
	opp := s.id("create_opportunity", M{"title": "Launch story", "outlet_id": outlet})
	s.call("add_opportunity_contact", M{"opportunity_id": opp, "contact_id": contact}, "")
	s.call("update_opportunity_stage", M{"id": opp, "stage": "pitched"}, "")
	s.call("get_opportunity", M{"id": opp}, "")
	s.call("list_opportunities", M{}, "")
	cov := s.id("create_coverage", M{"title": "Launch covered", "published_at": "2026-04-11", "sentiment": "positive", "reach": 50, "outlet_id": outlet, "contact_ids": []string{contact}})
	s.call("get_coverage", M{"id": cov}, "")
	s.call("list_coverage", M{}, "")
	s.call("get_settings", M{}, "")
	s.call("update_settings", M{"competitors": []string{"Rival Co"}, "ave_rate_per_thousand": 12.5, "ave_currency": "EUR"}, "")
	s.call("get_coverage_report", M{"since": "2026-04-01", "until": "2026-04-30"}, "")
	s.call("get_coverage_report", M{"campaign_id": campaign, "since": "2026-04-01", "until": "2026-04-30"}, "")
	s.call("import_contacts", M{"csv": "email,first_name,last_name\nnew.one@example.com,New,One\n,No,Email\n", "dry_run": true}, "")
	s.call("import_contacts", M{"rows": []M{{"email": "new.two@example.com", "first_name": "New", "last_name": "Two"}}}, "")
	s.call("import_outlets", M{"rows": []M{{"website": "https://imported.example", "name": "Imported"}, {"name": "No site"}}, "dry_run": true}, "")
	note := s.id("create_note", M{"title": "Call", "content": "Spoke about the launch", "contact_ids": []string{contact}})
	s.call("get_note", M{"id": note}, "")
	s.call("list_notes", M{}, "")
	s.call("archive_note", M{"id": note}, "")
	s.call("restore_note", M{"id": note}, "")
	s.call("get_interaction_log", M{"contact_id": contact}, "")
	s.call("search", M{"query": "launch"}, "")
	s.call("get_contact_dossier", M{"contact_id": contact}, "")
	s.call("get_outlet_dossier", M{"outlet_id": outlet}, "")
	s.call("get_opportunity_status", M{"opportunity_id": opp}, "")
	s.call("get_agenda", M{}, "")

	var log struct {
		Changes []struct {
			ID string `json:"id"`
		} `json:"changes"`
	}
	if err := json.Unmarshal(s.call("get_change_log", M{"limit": 5}, ""), &log); err != nil || len(log.Changes) == 0 {
		t.Fatalf("change log: %v %+v", err, log)
	}
	s.call("get_change", M{"id": log.Changes[0].ID}, "")
	s.call("rollback_change", M{"id": log.Changes[0].ID}, "")
	s.call("whoami", M{}, "")
	s.call("get_service_info", M{}, "")
	s.call("create_agent_key", M{"name": "structured", "scopes": []string{"read"}}, "")
	s.call("list_agent_keys", M{}, "")
	s.call("list_users", M{}, "")
	s.call("subscribe_opportunity", M{"opportunity_id": opp}, "")
	s.call("list_subscriptions", M{}, "")
	s.call("list_notifications", M{}, "")
	s.call("list_email_threads", M{}, "")
	s.call("search_emails", M{"query": "launch"}, "")
	s.call("list_media", M{}, "")
	s.call("list_questions", M{}, "")

	// Updates, links, archives and restores of every kind.
	s.call("update_contact", M{"id": contact, "title": "Reporter"}, "")
	s.call("update_channel", M{"id": channel, "name": "The Planet Podcast"}, "")
	s.call("update_campaign", M{"id": campaign, "name": "Launch 2"}, "")
	s.call("update_opportunity", M{"id": opp, "title": "Launch story, take 2"}, "")
	s.call("update_coverage", M{"id": cov, "title": "Launch covered again"}, "")
	s.call("restore_note", M{"id": note}, "") // the rollback above archived it again
	s.call("update_note", M{"id": note, "title": "Call, edited"}, "")
	var added struct {
		Added []struct {
			ID string `json:"id"`
		} `json:"added"`
	}
	if err := json.Unmarshal(s.call("add_note_link", M{"note_id": note, "outlet_id": outlet}, ""), &added); err != nil || len(added.Added) != 1 {
		t.Fatalf("add_note_link: %v %+v", err, added)
	}
	s.call("remove_note_link", M{"id": added.Added[0].ID}, "")
	s.call("remove_opportunity_contact", M{"opportunity_id": opp, "contact_id": contact}, "")
	for _, kind := range []string{"channel", "campaign", "opportunity", "coverage", "contact"} {
		id := map[string]string{"channel": channel, "campaign": campaign, "opportunity": opp, "coverage": cov, "contact": contact}[kind]
		s.call("archive_"+kind, M{"id": id}, "")
		s.call("restore_"+kind, M{"id": id}, "")
	}
	var aff struct {
		Affiliation struct {
			ID string `json:"id"`
		} `json:"affiliation"`
	}
	other := s.id("create_outlet", M{"name": "The Other Paper"})
	if err := json.Unmarshal(s.call("add_contact_outlet", M{"contact_id": contact, "outlet_id": other}, ""), &aff); err != nil || aff.Affiliation.ID == "" {
		t.Fatalf("add_contact_outlet: %v %+v", err, aff)
	}
	s.call("remove_contact_outlet", M{"id": aff.Affiliation.ID}, "")
	s.call("archive_outlet", M{"id": other}, "")
	s.call("restore_outlet", M{"id": other}, "")

	// Media, email, users and keys.
	media := s.id("upload_media", M{"coverage_id": cov, "type": "image", "filename": "logo.png", "mime_type": "image/png", "content_base64": "iVBORw0KGgo="})
	s.call("get_media", M{"id": media}, "")
	s.call("archive_media", M{"id": media}, "")
	s.call("restore_media", M{"id": media}, "")
	eml := "From: Lois Lane <lois@planet.example>\r\nTo: team@us.example\r\nSubject: The launch\r\nMessage-ID: <launch-1@planet.example>\r\nDate: Tue, 10 Mar 2026 10:00:00 +0000\r\n\r\nCan we talk about the launch?\r\n"
	var imported struct {
		ThreadID string `json:"thread_id"`
	}
	if err := json.Unmarshal(s.call("import_email", M{"raw_base64": base64.StdEncoding.EncodeToString([]byte(eml))}, ""), &imported); err != nil || imported.ThreadID == "" {
		t.Fatalf("import_email: %v %+v", err, imported)
	}
	s.call("get_email_thread", M{"id": imported.ThreadID}, "")
	var link struct {
		Link struct {
			ID string `json:"id"`
		} `json:"link"`
	}
	if err := json.Unmarshal(s.call("link_email_opportunity", M{"thread_id": imported.ThreadID, "opportunity_id": opp}, ""), &link); err != nil || link.Link.ID == "" {
		t.Fatalf("link_email_opportunity: %v %+v", err, link)
	}
	s.call("unlink_email_opportunity", M{"id": link.Link.ID}, "")
	s.call("get_contact_emails", M{"contact_id": contact}, "")
	s.call("create_user", M{"name": "Ann Author", "email": "ann@team.example"}, "")
	var key struct {
		AgentKey struct {
			ID string `json:"id"`
		} `json:"agent_key"`
	}
	if err := json.Unmarshal(s.call("create_agent_key", M{"name": "to revoke", "scopes": []string{"read"}}, ""), &key); err != nil || key.AgentKey.ID == "" {
		t.Fatalf("create_agent_key: %v %+v", err, key)
	}
	s.call("revoke_agent_key", M{"id": key.AgentKey.ID}, "")
	s.call("unsubscribe_opportunity", M{"opportunity_id": opp}, "")
	var who struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(s.call("whoami", M{}, ""), &who); err != nil {
		t.Fatal(err)
	}
	s.call("rollback_session", M{"session_id": who.SessionID, "dry_run": true}, "")

	// Errors stay isError results with the error model as text.
	s.call("get_note", M{"id": "not-a-uuid"}, "invalid_argument")
	s.call("get_outlet", M{"id": "00000000-0000-4000-8000-000000000000"}, "not_found")
	s.call("create_outlet", M{"name": "x", "tier": 9, "bogus": 1}, "invalid_argument")
}
