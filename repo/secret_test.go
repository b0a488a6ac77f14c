package repo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
)

// TestSecretIsKeptOnlyRedacted: every way a value is kept or logged gives a
// Secret's kept form; only Reveal, and JSON of a Shown copy, give the value.
func TestSecretIsKeptOnlyRedacted(t *testing.T) {
	const value = "outreach_theSecretValue0123456789"
	s := NewSecret(value, "[kept]")
	var logged strings.Builder
	log := zerolog.New(&logged)
	log.Info().Interface("result", map[string]any{"key": s}).Stringer("key", s).Any("any", s).Msg("call")
	jsonText, _ := json.Marshal(map[string]any{"key": s})
	bsonDoc, err := bson.Marshal(bson.M{"key": s})
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{
		"JSON":       string(jsonText),
		"BSON":       string(bsonDoc),
		"fmt %v":     fmt.Sprintf("%v %s %q %+v", s, s, s, struct{ K Secret }{s}),
		"fmt %#v":    fmt.Sprintf("%#v", s),
		"a log line": logged.String(),
	} {
		if strings.Contains(text, value) {
			t.Errorf("%s holds the value: %s", what, text)
		}
		if !strings.Contains(text, "[kept]") {
			t.Errorf("%s does not hold the kept form: %s", what, text)
		}
	}
	if shown, _ := json.Marshal(s.Shown()); string(shown) != `"`+value+`"` {
		t.Errorf("JSON of the shown copy: %s", shown)
	}
	if s.Reveal() != value {
		t.Errorf("Reveal: %q", s.Reveal())
	}
	if null, _ := json.Marshal(NewSecret(value, "")); string(null) != "null" {
		t.Errorf("JSON of a secret kept as nothing: %s", null)
	}
}

// TestStoredSigningSecretIsRemoved: a store that holds the media URL
// signing secret in settings (as older versions kept it) loses it when
// opened, through the write path, and the change entry shows it redacted.
func TestStoredSigningSecretIsRemoved(t *testing.T) {
	s, ctx := openTestStore(t)
	const old = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	st := &setting{Meta: Meta{ID: signingID}, Name: "media_url_signing", Secret: old}
	if err := Insert(audit.WithActor(ctx, SystemActor("media-url-signing")), s, CollSettings, st); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second finds nothing to do
		if err := s.dropStoredSigningSecret(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var raw bson.M
	if err := s.coll(CollSettings).FindOne(ctx, bson.M{"_id": signingID}).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["secret"]; ok || raw["archived_at"] == nil {
		t.Errorf("the settings record after: %v; want no secret, archived", raw)
	}
	cur, err := s.coll(CollChangeLog).Find(ctx, bson.M{"record_id": signingID})
	if err != nil {
		t.Fatal(err)
	}
	var entries []audit.Entry
	if err := cur.All(ctx, &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[1].Action != audit.ActionArchive || entries[1].Before["secret"] != "[redacted]" || entries[1].After["secret"] != nil {
		t.Errorf("change entries of the settings record: %+v", entries)
	}
	var all []bson.M
	cur, err = s.coll(CollChangeLog).Find(context.Background(), bson.M{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, &all); err != nil {
		t.Fatal(err)
	}
	if text := fmt.Sprint(all); strings.Contains(text, old) {
		t.Errorf("the change log holds the old secret")
	}
	// Neither the old creation nor the archive that took the secret out may
	// be rolled back, alone or with its session.
	admin := audit.WithActor(ctx, audit.Actor{UserID: "u-admin", AgentID: "k-admin", SessionID: "s-undo", Scopes: []string{ScopeAdmin, "read", "write"}})
	for _, e := range entries {
		_, err := s.RollbackChange(admin, e.ID, RollbackOptions{})
		var re *Error
		if !errors.As(err, &re) || re.Code != CodeFailedPrecondition || !strings.Contains(re.Message, "signing secret") {
			t.Errorf("rollback of the %s of the signing record: %v; want failed_precondition naming the signing secret", e.Action, err)
		}
		dry, err := s.RollbackSession(admin, e.SessionID, RollbackOptions{DryRun: true})
		if err != nil || len(dry.NotReversible) == 0 {
			t.Errorf("dry run of the session of the %s: %+v, %v; want it listed as not reversible", e.Action, dry, err)
		}
	}
}

// TestStoredResultsAreScrubbed: results older versions stored with
// idempotency claims lose their raw keys and URL signatures at start, and
// keep everything else.
func TestStoredResultsAreScrubbed(t *testing.T) {
	s, ctx := openTestStore(t)
	const key = "outreach_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789xy"
	const unsigned = "http://127.0.0.1:8080/media/7c9e6679-7425-40de-944b-e07fc1f90ae7/upload?expires=1700000000"
	sig := strings.Repeat("ab", 32)
	oldKey, _ := json.Marshal(map[string]any{"key": key, "agent_key": map[string]any{"id": "k1", "prefix": "outreach_AbCdEf…"}})
	oldURL, _ := json.Marshal(map[string]any{"media_id": "m1", "upload_url": unsigned + "&signature=" + sig,
		"instructions": "curl -T 'f' '" + unsigned + "&signature=" + sig + "'"})
	plain := `{"id":"n1","content":"outreach_ is a prefix"}`
	for i, result := range []string{string(oldKey), string(oldURL), plain} {
		c := &Idempotency{ID: fmt.Sprintf("key/%d", i), Epoch: "e", Tool: "t", Hash: "h", State: IdemDone, Owner: "o", Result: result}
		if ok, err := s.Internals().PutIdempotency(ctx, nil, c); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	if err := s.scrubStoredResults(ctx); err != nil {
		t.Fatal(err)
	}
	var got []Idempotency
	cur, err := s.coll(CollIdempotency).Find(ctx, bson.M{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	results := map[string]string{}
	for _, c := range got {
		results[c.ID] = c.Result
	}
	if r := results["key/0"]; strings.Contains(r, key) || !strings.Contains(r, "not shown again") || !strings.Contains(r, "outreach_AbCdEf…") {
		t.Errorf("the create_agent_key result after: %s", r)
	}
	var url struct{ UploadURL, Instructions string }
	json.Unmarshal([]byte(results["key/1"]), &struct {
		UploadURL    *string `json:"upload_url"`
		Instructions *string `json:"instructions"`
	}{&url.UploadURL, &url.Instructions})
	if url.UploadURL != unsigned || strings.Contains(results["key/1"], sig) || !strings.Contains(url.Instructions, unsigned+"'") {
		t.Errorf("the upload_media_url result after: %s", results["key/1"])
	}
	if results["key/2"] != plain {
		t.Errorf("a result without secrets changed: %s", results["key/2"])
	}
}
