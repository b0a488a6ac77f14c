package repo

import (
	"strings"
	"testing"
)

// The record cache's size: the default, a given size, and a wrong value
// refused with what is allowed.
func TestRecordCacheSize(t *testing.T) {
	t.Setenv(RecordCacheEnv, "")
	if n, err := recordCacheBytes(nil); err != nil || n != 32<<20 {
		t.Fatalf("default: %d, %v", n, err)
	}
	t.Setenv(RecordCacheEnv, "0")
	if n, err := recordCacheBytes(nil); err != nil || n != 0 {
		t.Fatalf("0: %d, %v", n, err)
	}
	t.Setenv(RecordCacheEnv, "64")
	if n, err := recordCacheBytes(nil); err != nil || n != 64<<20 {
		t.Fatalf("64: %d, %v", n, err)
	}
	for _, bad := range []string{"lots", "-1", "32MB", "5000"} {
		t.Setenv(RecordCacheEnv, bad)
		if _, err := recordCacheBytes(nil); err == nil || !strings.Contains(err.Error(), RecordCacheEnv) || !strings.Contains(err.Error(), "4096") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
