package tools

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"outreach/repo"
)

// FuzzParseTime: any text given as a date either is refused with an
// invalid_argument naming the field, or is a time in years 0000–9999 (UTC),
// truncated to the millisecond, that every answer can write and that reads
// back as itself.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"2026-03-01", "2026-03-01T14:30:00Z", "2026-03-01T14:30:00+02:00", "2026-03-01T14:30",
		"9999-12-31T23:59:59-23:00", "0000-01-01T00:00:00+01:00", "9999-12-31", "0000-01-01", "2026-02-30", "10000-01-01",
		"-0001-01-01", "2026-03-01T14:30:00.123456789Z", " 2026-03-01 ", "", "\x00"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, endOfDay bool) {
		got, err := parseTime("when", s, endOfDay)
		if err != nil {
			var e *repo.Error
			if !errors.As(err, &e) || e.Code != repo.CodeInvalid || e.Field != "when" || !strings.Contains(e.Message, "0000-01-01") {
				t.Fatalf("parseTime(%q) = %v; want invalid_argument on when, naming the range", s, err)
			}
			return
		}
		if got.Before(minTime) || got.After(maxTime) || got.Location() != time.UTC || got.Nanosecond()%1e6 != 0 {
			t.Fatalf("parseTime(%q) = %v: outside the range, not UTC or finer than a millisecond", s, got)
		}
		b, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("parseTime(%q) = %v, which JSON cannot write: %v", s, got, err)
		}
		var back time.Time
		if err := json.Unmarshal(b, &back); err != nil || !back.Equal(got) {
			t.Fatalf("%v written as %s reads back as %v (%v)", got, b, back, err)
		}
	})
}

// FuzzRender: a result holding any instant, in range or not, is written.
func FuzzRender(f *testing.F) {
	f.Add(int64(0), int64(0))
	f.Add(int64(253402300800), int64(0)) // 10000-01-01
	f.Add(int64(-62167219201), int64(999))
	f.Fuzz(func(t *testing.T, sec, nsec int64) {
		at := time.Unix(sec, nsec%1e9).UTC()
		out := map[string]any{"at": at, "list": []any{map[string]any{"at": &at}}, "s": struct {
			At time.Time `json:"at"`
		}{at}}
		if _, _, err := encodeResult(out); err != nil {
			t.Fatalf("a result holding %v cannot be written: %v", at, err)
		}
	})
}

// checkLimits restates the limits decode must have enforced on fuzzIn.
func checkLimits(t *testing.T, raw []byte, in *fuzzIn) {
	t.Helper()
	if !utf8.Valid(raw) {
		t.Fatalf("accepted invalid UTF-8: %q", raw)
	}
	texts := append([]string{in.ID}, in.IDs...)
	if in.Type != nil {
		texts = append(texts, *in.Type)
	}
	for _, s := range texts {
		if utf8.RuneCountInString(s) > MaxText {
			t.Fatalf("accepted a string of %d characters", utf8.RuneCountInString(s))
		}
		if strings.ContainsRune(s, utf8.RuneError) && !strings.Contains(string(raw), "\uFFFD") && !strings.Contains(strings.ToLower(string(raw)), `\ufffd`) {
			t.Fatalf("a replacement character appeared that the caller did not send: %q", raw)
		}
	}
	if len(in.IDs) > MaxItems {
		t.Fatalf("accepted %d ids", len(in.IDs))
	}
	for _, id := range append([]string{in.ID}, in.IDs...) {
		if normalID(id) != id {
			t.Fatalf("id %q left in upper case", id)
		}
	}
	if in.Fields != nil {
		if err := repo.CheckFreeForm("fields", in.Fields); err != nil {
			t.Fatalf("accepted a free-form object the repo refuses: %v", err)
		}
	}
	if in.Limit != nil && *in.Limit > 500 {
		t.Fatalf("accepted limit %d over its max tag", *in.Limit)
	}
}
