package integration

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"outreach/integration/testenv"
	"outreach/server"
)

// TestHTTPEdge checks what the HTTP edge answers before any tool runs:
// /healthz, browser origins and the body limit.
func TestHTTPEdge(t *testing.T) {
	env := testenv.New(t)
	base := strings.TrimSuffix(env.URL, "/mcp")

	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Errorf("GET /healthz: %d %q, want 200 ok", resp.StatusCode, body)
	}

	// A body of exactly the limit is read; one byte more is refused.
	padded := func(n int) string { return initialize + strings.Repeat(" ", n-len(initialize)) }
	cases := []struct {
		name    string
		key     string
		headers map[string]string
		body    string
		want    int
	}{
		{"no origin (not a browser)", env.AdminKey, nil, initialize, http.StatusOK},
		{"same origin", env.AdminKey, map[string]string{"Origin": base}, initialize, http.StatusOK},
		{"foreign origin", env.AdminKey, map[string]string{"Origin": "https://evil.example"}, initialize, http.StatusForbidden},
		{"browser cross-site fetch", env.AdminKey, map[string]string{"Sec-Fetch-Site": "cross-site"}, initialize, http.StatusForbidden},
		{"foreign origin without key", "", map[string]string{"Origin": "https://evil.example"}, initialize, http.StatusForbidden},
		{"body at the limit", env.AdminKey, nil, padded(server.MaxBody), http.StatusOK},
		{"body over the limit", env.AdminKey, nil, padded(server.MaxBody + 1), http.StatusRequestEntityTooLarge},
		{"body over the limit without key", "", nil, padded(server.MaxBody + 1), http.StatusUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", env.URL, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.key != "" {
				req.Header.Set("Authorization", "Bearer "+tc.key)
			}
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}
