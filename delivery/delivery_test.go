package delivery

import (
	"strings"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	body := []byte(`{"id":"n1","event":"stage_changed"}`)
	now := time.Unix(1_800_000_000, 0)
	h := Sign("s3cret", now, body)
	tests := []struct {
		name    string
		secret  string
		header  string
		body    []byte
		at      time.Time
		wantErr string
	}{
		{"valid", "s3cret", h, body, now, ""},
		{"valid within tolerance", "s3cret", h, body, now.Add(4 * time.Minute), ""},
		{"too old", "s3cret", h, body, now.Add(6 * time.Minute), "tolerance"},
		{"from the future", "s3cret", h, body, now.Add(-6 * time.Minute), "tolerance"},
		{"wrong secret", "other", h, body, now, "does not match"},
		{"altered body", "s3cret", h, []byte(`{"id":"n2","event":"stage_changed"}`), now, "does not match"},
		{"timestamp swapped", "s3cret", strings.Replace(h, "t=1800000000", "t=1800000001", 1), body, now, "does not match"},
		{"no v1", "s3cret", "t=1800000000", body, now, "malformed"},
		{"garbage", "s3cret", "nonsense", body, now, "malformed"},
	}
	for _, tc := range tests {
		err := Verify(tc.secret, tc.header, tc.body, DefaultTolerance, tc.at)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestBackoffGrowsWithJitterAndCap(t *testing.T) {
	w := New(nil, Config{BackoffBase: 100 * time.Millisecond, BackoffMax: 2 * time.Second})
	for attempt := 1; attempt <= 12; attempt++ {
		d := 100 * time.Millisecond << (attempt - 1)
		if d > 2*time.Second {
			d = 2 * time.Second
		}
		seen := map[time.Duration]bool{}
		for range 200 {
			got := w.backoff(attempt)
			if got < d/2 || got > d {
				t.Fatalf("attempt %d: backoff %s outside [%s, %s]", attempt, got, d/2, d)
			}
			seen[got] = true
		}
		if len(seen) < 10 {
			t.Errorf("attempt %d: only %d distinct delays in 200: no jitter", attempt, len(seen))
		}
	}
}
