package directory

import (
	"net/url"
	"strings"

	"outreach/repo"
)

// Helpers shared by the directory (outlets, contacts, channels).

// cleanList trims each entry of a tag list (topics, beats) and drops later
// duplicates that differ only in case, keeping the first spelling. An empty
// entry is refused rather than dropped, so a caller's mistake is visible.
// The result is never nil, so the stored field is always an array.
func cleanList(field string, in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	seen := map[string]bool{}
	for i, v := range in {
		v = strings.TrimSpace(v)
		if v == "" {
			return nil, repo.Invalid(field, "entry %d is empty; remove it", i)
		}
		if seen[strings.ToLower(v)] {
			continue
		}
		seen[strings.ToLower(v)] = true
		out = append(out, v)
	}
	return out, nil
}

// checkWebURL accepts an absolute http or https URL with a host.
func checkWebURL(field, s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return repo.Invalid(field, "%q is not a web address; give a full http or https URL such as https://www.example.com", s)
	}
	return nil
}

// freeForm checks a free-form object (social_links, preferences, attributes)
// when given, and returns what to store: nil for an empty object, so that
// `{}` clears the field.
func freeForm(field string, obj map[string]any) (map[string]any, error) {
	if err := repo.CheckFreeForm(field, obj); err != nil {
		return nil, err
	}
	if len(obj) == 0 {
		return nil, nil
	}
	return obj, nil
}
