package tools

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"outreach/repo"
	"outreach/repo/pipeline"
)

// checkUUID refuses anything but a canonical UUID in field.
func checkUUID(field, id string) error {
	u, err := uuid.Parse(id)
	if err != nil || u.String() != strings.ToLower(id) || len(id) != 36 {
		return repo.Invalid(field, "%q is not a UUID (expected the form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", id)
	}
	return nil
}

// checkUUIDs checks every element of a UUID array.
func checkUUIDs(field string, ids []string) error {
	for i, id := range ids {
		if err := checkUUID(fmt.Sprintf("%s[%d]", field, i), id); err != nil {
			return err
		}
	}
	return nil
}

// checkOptionalUUIDs checks the id filters that were given, in order:
// field, value, field, value…
func checkOptionalUUIDs(fieldValues ...string) error {
	for i := 0; i+1 < len(fieldValues); i += 2 {
		if fieldValues[i+1] == "" {
			continue
		}
		if err := checkUUID(fieldValues[i], fieldValues[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// optionalTime parses a date argument that may be absent (nil then).
func optionalTime(field, s string, endOfDay bool) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := parseTime(field, s, endOfDay)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// checkEnum refuses a value outside allowed, listing them.
func checkEnum(field, v string, allowed []string) error {
	if !slices.Contains(allowed, v) {
		return repo.Invalid(field, "%q is not allowed; use one of: %s", v, strings.Join(allowed, ", "))
	}
	return nil
}

// The dates the service keeps: years 0000 to 9999 in UTC, what RFC 3339
// (and so every answer) can write. A time that leaves them once converted to
// UTC (9999-12-31T23:59:59-23:00) is refused, never stored.
var (
	minTime = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC)
)

// dateRange names the range in messages.
const dateRange = "between 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z (in UTC)"

// parseTime reads an ISO-8601 datetime or a bare YYYY-MM-DD date (midnight
// UTC). With endOfDay, a bare date means the last instant of that day, so an
// `until` date includes the whole day. Dates outside minTime–maxTime, in
// UTC, are refused.
func parseTime(field, s string, endOfDay bool) (time.Time, error) {
	s = strings.TrimSpace(s)
	t, ok := readTime(s, endOfDay)
	if !ok {
		return time.Time{}, repo.Invalid(field, "%q is not a date; use YYYY-MM-DD or an ISO datetime such as 2026-03-01T14:30:00Z, %s", s, dateRange)
	}
	if t.Before(minTime) || t.After(maxTime) {
		return time.Time{}, repo.Invalid(field, "%q is %s in UTC, outside the dates this service keeps: use a date %s", s, t.Format("2006-01-02T15:04:05Z07:00"), dateRange)
	}
	return t, nil
}

func readTime(s string, endOfDay bool) (time.Time, bool) {
	if d, err := time.Parse(time.DateOnly, s); err == nil {
		if endOfDay {
			return d.Add(24*time.Hour - time.Millisecond), true
		}
		return d, true
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC().Truncate(time.Millisecond), true
		}
	}
	return time.Time{}, false
}

// Paging defaults and limits shared by every list.
const (
	defaultLimit = 50
	maxLimit     = 200
)

// page applies the defaults of limit and offset (their ranges are the
// fields' min and max tags, checked on decoding).
func page(limit, offset *int, def int) (int, int, error) {
	l, o := def, 0
	if limit != nil {
		l = *limit
	}
	if offset != nil {
		o = *offset
	}
	return l, o, nil
}

// envelope is the shape of every list result.
func envelope[T any](noun string, p repo.Page[T], limit, offset int) map[string]any {
	return map[string]any{"total": p.Total, "showing": len(p.Items), "limit": limit, "offset": offset, noun: p.Items}
}

// patchEmbargo reads an update's embargo_until: absent (nil) leaves the
// embargo as it is; "" clears it; otherwise an RFC 3339 time with its offset.
func patchEmbargo(v *string) (**pipeline.Embargo, error) {
	if v == nil {
		return nil, nil
	}
	e, err := pipeline.ParseEmbargo("embargo_until", *v)
	if err != nil {
		return nil, err
	}
	return &e, nil
}
