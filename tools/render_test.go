package tools

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"outreach/repo"
)

// TestEncodeResultShowsSecretsOnlyToTheCaller: wherever a secret sits in a
// result (a map, a struct in a slice, behind a pointer), the shown JSON has
// its value and the kept JSON its kept form; a result without one is the
// same bytes twice, and an empty secret is left out of both.
func TestEncodeResultShowsSecretsOnlyToTheCaller(t *testing.T) {
	type view struct {
		Name string      `json:"name"`
		URL  repo.Secret `json:"url,omitzero"`
	}
	s := func(v string) repo.Secret { return repo.NewSecret(v, "[kept "+v+"]") }
	out := map[string]any{"key": s("k1"), "items": []view{{"a", s("u1")}, {"b", repo.Secret{}}}, "ptr": &view{"c", s("u2")}}
	shown, kept, err := encodeResult(out)
	if err != nil {
		t.Fatal(err)
	}
	wantShown := `{"items":[{"name":"a","url":"u1"},{"name":"b"}],"key":"k1","ptr":{"name":"c","url":"u2"}}`
	wantKept := `{"items":[{"name":"a","url":"[kept u1]"},{"name":"b"}],"key":"[kept k1]","ptr":{"name":"c","url":"[kept u2]"}}`
	if diff := cmp.Diff(wantShown, string(shown)); diff != "" {
		t.Errorf("shown (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantKept, string(kept)); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	plain := []view{{"a", repo.Secret{}}}
	shown, kept, err = encodeResult(map[string]any{"items": plain, "n": 1})
	if err != nil || string(shown) != string(kept) || strings.Contains(string(shown), "url") {
		t.Errorf("a result without secrets: %s / %s %v", shown, kept, err)
	}
}
