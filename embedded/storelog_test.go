package embedded

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

// TestStoreLogFormatsNothing: FerretDB's logger, given every SQL statement
// and its documents as attributes, neither formats them nor enables a level.
func TestStoreLogFormatsNothing(t *testing.T) {
	l := storeLog.With(slog.String("query", "INSERT INTO t VALUES (?)"), slog.Any("args", []any{strings.Repeat("x", 4096)}))
	if l.Handler() != slog.DiscardHandler {
		t.Errorf("the store's logger with a statement's attributes has handler %T; want one that discards without formatting them", l.Handler())
	}
	for _, lv := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelError} {
		if l.Enabled(context.Background(), lv) {
			t.Errorf("the store's logger is enabled at %v; nothing of it is kept", lv)
		}
	}
}
