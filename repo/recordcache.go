package repo

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"outreach/ledger"
)

// RecordCacheEnv sizes the record cache of the embedded store, in MiB.
const RecordCacheEnv = "OUTREACH_RECORD_CACHE_MB"

// maxRecordCacheMB caps the record cache's size.
const maxRecordCacheMB = 4096

// recordCacheBytes is the record cache's bound: mb where given, else
// OUTREACH_RECORD_CACHE_MB, else ledger.DefaultRecordCache. A value that is
// not a whole number of MiB from 0 (off) to 4096 is refused.
func recordCacheBytes(mb *int) (int64, error) {
	n := ledger.DefaultRecordCache >> 20
	switch v := strings.TrimSpace(os.Getenv(RecordCacheEnv)); {
	case mb != nil:
		n = *mb
	case v != "":
		parsed, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("%s=%q: not a whole number of MiB; give 0 (no record cache) to %d, or leave it unset for %d",
				RecordCacheEnv, v, maxRecordCacheMB, ledger.DefaultRecordCache>>20)
		}
		n = parsed
	}
	if n < 0 || n > maxRecordCacheMB {
		return 0, fmt.Errorf("%s: %d MiB is out of range; give 0 (no record cache) to %d", RecordCacheEnv, n, maxRecordCacheMB)
	}
	return int64(n) << 20, nil
}
