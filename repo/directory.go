package repo

import (
	"net/url"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Helpers shared by the directory (outlets, contacts, channels).

// element matches an array field one of whose elements is text, whole,
// literally and case-insensitively: "ai" matches a topic "AI" but not "AI policy".
func element(text string) bson.M {
	return bson.M{"$regex": "^" + quote(text) + "$", "$options": "i"}
}

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
			return nil, Invalid(field, "entry %d is empty; remove it", i)
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
		return Invalid(field, "%q is not a web address; give a full http or https URL such as https://www.example.com", s)
	}
	return nil
}

// setText sets *dst to the trimmed *v when v is given.
func setText(dst *string, v *string) {
	if v != nil {
		*dst = strings.TrimSpace(*v)
	}
}

// freeForm checks a free-form object (social_links, preferences, attributes)
// when given, and returns what to store: nil for an empty object, so that
// `{}` clears the field.
func freeForm(field string, obj map[string]any) (map[string]any, error) {
	if err := CheckFreeForm(field, obj); err != nil {
		return nil, err
	}
	if len(obj) == 0 {
		return nil, nil
	}
	return obj, nil
}

// NewestFirst is the order of every directory list: newest first, with _id
// breaking ties between records created in the same millisecond.
var NewestFirst = bson.D{{Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}
