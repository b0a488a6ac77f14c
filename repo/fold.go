package repo

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/textfold"
)

// SearchKind says where a kind of record is stored, which fields are
// searched (the title field first) and which date measures its recency:
// what the word index holds of each searched kind (package textlist,
// words.go), and what package repo/search reads and ranks.
type SearchKind struct {
	Kind, Coll string
	Fields     []string
	Date       string
	// Project lists the stored top-level fields a hit needs.
	Project []string
}

// SearchKinds are the searched kinds, in the order search breaks ties
// (repo/search's SearchTypes).
var SearchKinds = []SearchKind{
	{Kind: "outlet", Coll: CollOutlets, Fields: []string{"name", "website", "description", "topics"}, Date: "updated_at"},
	{Kind: "contact", Coll: CollContacts, Fields: []string{"name", "email", "title", "bio", "beats", "location"}, Date: "updated_at"},
	{Kind: "opportunity", Coll: CollOpportunities, Fields: []string{"title", "description", "next_action"}, Date: "updated_at"},
	{Kind: "coverage", Coll: CollCoverage, Fields: []string{"title", "summary", "url", "full_text"}, Date: "published_at"},
	{Kind: "note", Coll: CollNotes, Fields: []string{"title", "content"}, Date: "occurred_at"},
	{Kind: "email", Coll: CollEmails, Fields: []string{"subject", "messages.subject", "messages.body_text", "messages.from"}, Date: "last_message_at",
		Project: []string{"subject", "messages", "last_message_at"}},
}

// sees, and ranks so.
func UntitledLine(k SearchKind, d bson.M) (string, bool) {
	if title, _ := d["title"].(string); k.Kind != "note" || title != "" {
		return "", false
	}
	content, _ := d["content"].(string)
	line := textfold.FirstLine(content)
	return line, line != ""
}

// Values returns the strings at path in d, walking into arrays.
func Values(d any, path string) []string {
	head, rest, nested := strings.Cut(path, ".")
	switch x := d.(type) {
	case bson.M:
		if !nested {
			return strs(x[head])
		}
		return Values(x[head], rest)
	case bson.A:
		var out []string
		for _, e := range x {
			out = append(out, Values(e, path)...)
		}
		return out
	}
	return nil
}

func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case bson.A:
		var out []string
		for _, e := range x {
			out = append(out, strs(e)...)
		}
		return out
	}
	return nil
}
