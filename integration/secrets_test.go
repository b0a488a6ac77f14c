package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/embedded"
	"outreach/tools"
)

// secretCall calls tool on c, with an idempotency key in the call's _meta
// (how "meta"), in the Idempotency-Key header (how "header"), or none, and
// returns its result's text; a tool error fails the test.
func secretCall(t *testing.T, c *mcpConn, tool string, args M, how, key string) string {
	t.Helper()
	params := map[string]any{"name": tool, "arguments": args}
	saved := c.hc
	switch how {
	case "meta":
		params["_meta"] = map[string]any{tools.IdempotencyMeta: key}
	case "header":
		c.hc = &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set(tools.IdempotencyHeader, key)
			return http.DefaultTransport.RoundTrip(r)
		})}
	}
	defer func() { c.hc = saved }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := c.rpc(ctx, "tools/call", params, &res); err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if len(res.Content) != 1 || res.IsError {
		t.Fatalf("%s(%v) %s %s: %+v", tool, args, how, key, res)
	}
	return res.Content[0].Text
}

// TestNoSecretAtRest makes every kind of secret the service hands out, with
// and without idempotency keys (in _meta and in the header), replays the
// keyed calls, and then looks for each secret, and for the media URL signing
// secret, in every document of every collection (read through the driver,
// as extended JSON), in every file of the data directory but the signing
// secret's own (the SQLite files and their WAL), and in the server's log.
// None may be there. A replay of create_agent_key says the key is not shown
// again; a replay of upload_media_url gives the same URL, which still works.
func TestNoSecretAtRest(t *testing.T) {
	data := dataDir(t)
	var env []string
	var signingKey string
	if os.Getenv("MONGODB_URI") != "" {
		// Several instances on one database share the operator's secret.
		signingKey = "an operator's media URL signing secret, 0123456789abcdef"
		path := filepath.Join(t.TempDir(), "signing.key")
		if err := os.WriteFile(path, []byte(signingKey+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		env = append(env, "OUTREACH_MEDIA_SIGNING_KEY_FILE="+path)
	}
	srv := startServer(t, data, env...)
	if srv.FirstKey == "" {
		t.Fatalf("no first admin key printed:\n%s", srv.stdout)
	}
	if signingKey == "" {
		path := filepath.Join(data, "media-url.key")
		if info, err := os.Stat(path); err != nil {
			t.Errorf("the embedded store's signing secret: %v", err)
		} else if info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %04o; want 0600", path, info.Mode().Perm())
		}
		b, _ := os.ReadFile(path)
		signingKey = strings.TrimSpace(string(b))
	}
	secrets := map[string]string{"the first admin key": srv.FirstKey}
	if signingKey != "" {
		secrets["the media URL signing secret"] = signingKey
	}
	c := mustDial(t, srv.URL, srv.FirstKey)

	// Agent keys: plain, keyed in _meta, keyed in the header; each keyed
	// call replayed.
	type created struct {
		Key      string `json:"key"`
		AgentKey struct {
			ID string `json:"id"`
		} `json:"agent_key"`
	}
	for i, how := range []string{"", "meta", "header"} {
		args := M{"name": fmt.Sprintf("agent %d", i), "scopes": []string{"read", "write"}}
		idem := fmt.Sprintf("key-call-%d", i)
		var first created
		if err := json.Unmarshal([]byte(secretCall(t, c, "create_agent_key", args, how, idem)), &first); err != nil || !strings.HasPrefix(first.Key, "outreach_") {
			t.Fatalf("create_agent_key (%s): %+v %v", how, first, err)
		}
		secrets[fmt.Sprintf("agent key %d (%s)", i, how)] = first.Key
		if how == "" {
			continue
		}
		text := secretCall(t, c, "create_agent_key", args, how, idem)
		var again created
		if err := json.Unmarshal([]byte(text), &again); err != nil {
			t.Fatal(err)
		}
		if again.AgentKey.ID != first.AgentKey.ID || again.Key != tools.KeyNotShownAgain {
			t.Errorf("replay of create_agent_key (%s): %s; want key %s with %q", how, text, first.AgentKey.ID, tools.KeyNotShownAgain)
		}
	}
	// A key made at the command line while the server runs (through it).
	secrets["a key of outreach keys create"] = strings.TrimSpace(mustCLI(t, "keys", "create", "--data", data, "--name", "cli agent"))

	// Signed URLs: upload URLs plain and keyed (a replay signs the same URL
	// again, and it still works), and a download URL.
	var cov struct{ ID string }
	c.must(t, "create_coverage", M{"title": "secret scan", "url": "https://example.com/scan",
		"published_at": time.Now().UTC().Format(time.RFC3339), "type": "article"}, &cov)
	type upload struct {
		MediaID      string `json:"media_id"`
		UploadURL    string `json:"upload_url"`
		Instructions string `json:"instructions"`
	}
	signature := func(raw string) string {
		u, err := url.Parse(raw)
		if err != nil || u.Query().Get("signature") == "" {
			t.Fatalf("not a signed URL: %q", raw)
		}
		return u.Query().Get("signature")
	}
	var uploaded []string
	for i, how := range []string{"", "meta", "header"} {
		args := M{"coverage_id": cov.ID, "filename": fmt.Sprintf("file-%d.txt", i), "mime_type": "text/plain"}
		idem := fmt.Sprintf("upload-call-%d", i)
		var first upload
		firstText := secretCall(t, c, "upload_media_url", args, how, idem)
		if err := json.Unmarshal([]byte(firstText), &first); err != nil {
			t.Fatal(err)
		}
		secrets[fmt.Sprintf("upload URL signature %d (%s)", i, how)] = signature(first.UploadURL)
		if !strings.Contains(first.Instructions, first.UploadURL) {
			t.Errorf("the instructions do not give the URL: %q", first.Instructions)
		}
		if how != "" {
			if again := secretCall(t, c, "upload_media_url", args, how, idem); again != firstText {
				t.Errorf("replay of upload_media_url (%s):\n%s\nwant the first result:\n%s", how, again, firstText)
			}
		}
		resp, body := send(t, http.MethodPut, first.UploadURL, strings.NewReader("secret scan "+how), int64(len("secret scan "+how)))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT to the upload URL (%s): %d %s", how, resp.StatusCode, body)
		}
		uploaded = append(uploaded, first.MediaID)
	}
	var got struct {
		DownloadURL string `json:"download_url"`
	}
	c.must(t, "get_media", M{"id": uploaded[0]}, &got)
	secrets["download URL signature"] = signature(got.DownloadURL)
	resp, body := send(t, http.MethodGet, got.DownloadURL, nil, 0)
	if resp.StatusCode != http.StatusOK || string(body) != "secret scan " {
		t.Fatalf("GET the download URL: %d %q", resp.StatusCode, body)
	}
	c.must(t, "update_settings", M{"competitors": []string{"Globex"}}, nil)
	secretCall(t, c, "update_settings", M{"competitors": []string{"Initech"}}, "meta", "settings-call")

	// A shared report's link (made under an idempotency key, so its result
	// is stored; opened, so its view is logged) and a rendering's download
	// URL: their signatures are secrets too.
	var share struct {
		Link string `json:"link"`
	}
	if err := json.Unmarshal([]byte(secretCall(t, c, "share_report", M{"kind": "coverage"}, "meta", "share-call")), &share); err != nil {
		t.Fatal(err)
	}
	su, err := url.Parse(share.Link)
	if err != nil || su.Query().Get("s") == "" {
		t.Fatalf("not a share link: %q", share.Link)
	}
	secrets["share link signature"] = su.Query().Get("s")
	if resp, body := send(t, http.MethodGet, share.Link, nil, 0); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET the share link: %d %s", resp.StatusCode, body)
	}
	var rendered struct {
		StructuredContent struct {
			DownloadURL string `json:"download_url"`
		} `json:"structuredContent"`
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	if err := c.rpc(rctx, "tools/call", map[string]any{"name": "render_report", "arguments": M{"kind": "coverage", "format": "pdf"}}, &rendered); err != nil {
		t.Fatal(err)
	}
	rcancel()
	ru, err := url.Parse(rendered.StructuredContent.DownloadURL)
	if err != nil || ru.Query().Get("s") == "" {
		t.Fatalf("not a signed download URL: %q", rendered.StructuredContent.DownloadURL)
	}
	secrets["report download URL signature"] = ru.Query().Get("s")
	if resp, _ := send(t, http.MethodGet, rendered.StructuredContent.DownloadURL, nil, 0); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET the report download URL: %d", resp.StatusCode)
	}

	// The data directory's files while the server runs (the WAL holds the
	// latest writes) and after it stopped.
	look := func(where string, text []byte) {
		t.Helper()
		for what, s := range secrets {
			if bytes.Contains(text, []byte(s)) {
				t.Errorf("%s is in %s", what, where)
			}
		}
	}
	running := scanFiles(t, data, look)
	if code := srv.term(30 * time.Second); code != 0 {
		t.Fatalf("server exit code %d\nstderr:\n%s", code, srv.stderr)
	}
	look("the server's log (stderr)", []byte(srv.stderr.String()))
	out := srv.stdout.String()
	look("the server's stdout after the first-start banner", []byte(out[strings.LastIndex(out, srv.FirstKey)+len(srv.FirstKey):]))

	files := scanFiles(t, data, look)
	if os.Getenv("MONGODB_URI") == "" && (files == 0 || running == 0) {
		t.Fatalf("no store files in %s", data)
	}

	docs, names, db := scanCollections(t, data, look)
	ctx := context.Background()
	if n, err := db.Collection("settings").CountDocuments(ctx, bson.M{"secret": bson.M{"$exists": true}}); err != nil || n != 0 {
		t.Errorf("settings documents holding a secret: %d %v; want none", n, err)
	}
	if docs < 20 {
		t.Fatalf("only %d documents in %v: the scan read the wrong database", docs, names)
	}
	t.Logf("looked for %d secrets in %d documents of %d collections, %d files (%d while serving) and the log", len(secrets), docs, len(names), files, running)
}

// scanCollections hands look every document of every collection of the
// store on data (through the driver, as extended JSON) and returns how many
// it read, the collections' names and the database (open until the test
// ends).
func scanCollections(t *testing.T, data string, look func(string, []byte)) (int, []string, *mongo.Database) {
	t.Helper()
	ctx := context.Background()
	uri := os.Getenv("MONGODB_URI")
	if uri == "" {
		es, err := embedded.Start(ctx, embedded.Options{Dir: data})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(es.Close)
		uri = es.URI
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Disconnect(context.Background()) })
	db := client.Database(strings.TrimPrefix(storeEnv(data)[0], "OUTREACH_DB="))
	names, err := db.ListCollectionNames(ctx, bson.M{})
	if err != nil {
		t.Fatal(err)
	}
	docs := 0
	for _, name := range names {
		cur, err := db.Collection(name).Find(ctx, bson.M{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for cur.Next(ctx) {
			text, err := bson.MarshalExtJSON(cur.Current, false, false)
			if err != nil {
				t.Fatal(err)
			}
			docs++
			look("collection "+name, text)
		}
		if err := cur.Err(); err != nil {
			t.Fatal(err)
		}
		cur.Close(ctx)
	}
	return docs, names, db
}

// scanFiles hands look every file of the data directory but the signing
// secret's own and the command socket, and returns how many it read.
func scanFiles(t *testing.T, data string, look func(string, []byte)) int {
	t.Helper()
	files := 0
	err := filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "media-url.key" || d.Type()&fs.ModeSocket != 0 {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		look(path, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
