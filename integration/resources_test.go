package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/integration/testenv"
)

// resourceClient connects with the admin key; updated, when not nil,
// receives the URIs of notifications/resources/updated.
func resourceClient(t *testing.T, env *testenv.Env, updated chan<- string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: toolsetTransport(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+env.AdminKey)
		return http.DefaultTransport.RoundTrip(r)
	})}
	opts := &mcp.ClientOptions{}
	if updated != nil {
		opts.ResourceUpdatedHandler = func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		}
	}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "outreach-test", Version: "1"}, opts).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: env.URL, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: testenv.ClientRevision})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestResources: every record kind is readable by URI with the JSON of its
// get_ tool; resources/list pages the records changed last; a media file is
// a binary resource with its MIME type; a subscriber hears of a change.
func TestResources(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	outlet := mk(t, c, "create_outlet", M{"name": "The Wire", "tier": 1})
	contact := mk(t, c, "create_contact", M{"first_name": "Ada", "last_name": "Lovelace", "outlet_ids": []string{outlet}})
	campaign := mk(t, c, "create_campaign", M{"name": "Launch"})
	opp := mk(t, c, "create_opportunity", M{"title": "Feature", "campaign_id": campaign, "outlet_id": outlet, "contact_ids": []string{contact}})
	coverage := mk(t, c, "create_coverage", M{"title": "Review", "published_at": "2026-03-01", "opportunity_id": opp, "reach": 1000})
	note := mk(t, c, "create_note", M{"title": "Call", "contact_ids": []string{contact}})
	media := testenv.ID(t, c.Must("upload_media", M{"coverage_id": coverage, "type": "document", "filename": "a.txt", "mime_type": "text/plain", "content_base64": "aGVsbG8="}, nil))

	updated := make(chan string, 16)
	s := resourceClient(t, env, updated)
	ctx := context.Background()

	var templates []string
	for tmpl, err := range s.ResourceTemplates(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		templates = append(templates, tmpl.URITemplate)
	}
	for _, want := range []string{"outreach://contacts/{id}", "outreach://outlets/{id}", "outreach://opportunities/{id}", "outreach://notes/{id}",
		"outreach://email-threads/{id}", "outreach://campaigns/{id}/report", "outreach://media/{id}"} {
		if !slices.Contains(templates, want) {
			t.Errorf("resource templates %v lack %s", templates, want)
		}
	}

	read := func(uri string) (*mcp.ResourceContents, error) {
		res, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			return nil, err
		}
		if len(res.Contents) != 1 {
			t.Fatalf("%s: %d contents", uri, len(res.Contents))
		}
		return res.Contents[0], nil
	}
	// The same JSON, but for the moment a figure was computed.
	same := func(a, b string) bool {
		var x, y map[string]any
		if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
			return false
		}
		for _, m := range []map[string]any{x, y} {
			delete(m, "computed_at")
			if metrics, ok := m["metrics"].(map[string]any); ok {
				delete(metrics, "computed_at")
			}
		}
		return cmp.Equal(x, y)
	}
	for _, tc := range []struct{ uri, tool, id string }{
		{"outreach://contacts/" + contact, "get_contact", contact},
		{"outreach://outlets/" + outlet, "get_outlet", outlet},
		{"outreach://opportunities/" + opp, "get_opportunity", opp},
		{"outreach://notes/" + note, "get_note", note},
		{"outreach://campaigns/" + campaign, "get_campaign", campaign},
	} {
		got, err := read(tc.uri)
		if err != nil {
			t.Errorf("%s: %v", tc.uri, err)
			continue
		}
		want := c.Must(tc.tool, M{"id": tc.id}, nil)
		if got.MIMEType != "application/json" || !same(got.Text, string(want)) {
			t.Errorf("%s (%s): %s\nwant the %s result %s", tc.uri, got.MIMEType, got.Text, tc.tool, want)
		}
	}
	report, err := read("outreach://campaigns/" + campaign + "/report")
	var rep struct {
		Scope      string `json:"scope"`
		CampaignID string `json:"campaign_id"`
	}
	if err != nil || json.Unmarshal([]byte(report.Text), &rep) != nil || rep.Scope != "campaign" || rep.CampaignID != campaign {
		t.Errorf("campaign report: %v %v", err, report)
	}
	if _, err := read("outreach://contacts/" + uuid.NewString()); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("a contact that does not exist: %v", err)
	}
	if _, err := read("outreach://contacts/not-a-uuid"); err == nil || !strings.Contains(err.Error(), "invalid_argument") {
		t.Errorf("a malformed id: %v", err)
	}

	// The media file is a binary resource with its MIME type.
	if got, err := read("outreach://media/" + media); err != nil || string(got.Blob) != "hello" || got.MIMEType != "text/plain" {
		t.Errorf("media resource: %v %+v", err, got)
	}

	// resources/list: the MCP Apps' pages first (reports_render_test.go),
	// then the records changed last, the newest first.
	var listed []string
	for r, err := range s.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(r.URI, "ui://") {
			listed = append(listed, r.URI)
		}
	}
	if len(listed) == 0 || listed[0] != "outreach://coverage/"+coverage && listed[0] != "outreach://notes/"+note {
		t.Errorf("resources/list starts %v; want the records changed last", listed[:min(3, len(listed))])
	}
	for _, want := range []string{"outreach://contacts/" + contact, "outreach://notes/" + note, "outreach://opportunities/" + opp} {
		if !slices.Contains(listed, want) {
			t.Errorf("resources/list lacks %s: %v", want, listed)
		}
	}

	// A subscriber hears of a change of its record, made by another client.
	uri := "outreach://contacts/" + contact
	if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: "outreach://contacts/" + uuid.NewString()}); err == nil {
		t.Error("a subscription to a contact that does not exist was accepted")
	}
	env.Admin().Must("update_contact", M{"id": contact, "title": "Editor"}, nil)
	select {
	case got := <-updated:
		if got != uri {
			t.Errorf("notifications/resources/updated for %s, want %s", got, uri)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/resources/updated after update_contact")
	}
	if err := s.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
}
