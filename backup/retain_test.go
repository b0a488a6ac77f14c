package backup

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRetained holds the thinning rule to a fake clock and fake backups:
// the newest Keep, plus the newest of each of the last KeepDaily days and
// KeepWeekly weeks; the newest always.
func TestRetained(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC) // a Saturday
	at := func(days float64) time.Time { return now.Add(-time.Duration(days * 24 * float64(time.Hour))) }
	// Two backups a day for 40 days: at 11:00 and 01:00 (before noon now).
	var list []Entry
	for d := 39; d >= 0; d-- {
		list = append(list, Entry{Dir: at(float64(d) + 11.0/24).Format(time.RFC3339), FixedAt: at(float64(d) + 11.0/24), Complete: true},
			Entry{Dir: at(float64(d) + 1.0/24).Format(time.RFC3339), FixedAt: at(float64(d) + 1.0/24), Complete: true})
	}
	kept := func(r Retention) []string {
		var out []string
		for i, k := range retained(list, now, r) {
			if k {
				out = append(out, list[i].FixedAt.Format("01-02T15"))
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		r    Retention
		want []string
	}{
		{"keep 3", Retention{Keep: 3}, []string{"11-27T11", "11-28T01", "11-28T11"}},
		{"daily 3", Retention{KeepDaily: 3}, []string{"11-26T11", "11-27T11", "11-28T11"}},
		// Weeks begin on Monday: this week (from 11-23), and the three before
		// it, each kept by its newest backup (a Sunday's evening).
		{"weekly 4", Retention{KeepWeekly: 4}, []string{"11-08T11", "11-15T11", "11-22T11", "11-28T11"}},
		{"keep 1, daily 2, weekly 2", Retention{Keep: 1, KeepDaily: 2, KeepWeekly: 2}, []string{"11-22T11", "11-27T11", "11-28T11"}},
		{"a rule longer than the history keeps what there is", Retention{KeepWeekly: 52}, []string{
			"10-25T11", "11-01T11", "11-08T11", "11-15T11", "11-22T11", "11-28T11"}},
		{"nothing asked: everything kept", Retention{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := kept(tc.r)
			if tc.want == nil {
				if len(got) != len(list) {
					t.Errorf("kept %d of %d", len(got), len(list))
				}
				return
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("kept (-got +want):\n%s", diff)
			}
		})
	}
}
