package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestStoreFormatUpgradeOnMongoDB: on MongoDB without a backup target, a
// start that would upgrade the store's format is refused, naming both ways
// on; --no-upgrade-backup goes on without a backup and says so. (The backup
// itself is tested through the binary, in the integration tests.)
func TestStoreFormatUpgradeOnMongoDB(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      config
		wantErr  []string
		wantLine string
	}{
		{"no target", config{uri: "mongodb://db.invalid"}, []string{"format 0", "format 1", "--backup-to", "--no-upgrade-backup"}, ""},
		{"opted out", config{uri: "mongodb://db.invalid", noUpgradeBackup: true}, nil, "from format 0 to 1 without a backup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := upgradeBackup(tc.cfg, &out, zerolog.Nop())(context.Background(), nil, 0, 1)
			if (err != nil) != (tc.wantErr != nil) {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr != nil)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal %q does not name %s", err, w)
				}
			}
			if got := out.String(); !strings.Contains(got, tc.wantLine) || (tc.wantLine == "") != (got == "") {
				t.Errorf("printed %q, want a line with %q", got, tc.wantLine)
			}
		})
	}
}
