package ledger

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"outreach/audit"
)

// A batch's intent holds its entries packed: the entries' BSON documents
// one after the other in one binary field, instead of an array of
// documents. The intent is one document per process, replaced by each
// batch, and the embedded store decodes the document it replaces (the
// previous batch's entries, their before and after) from its JSON form
// field by field; a binary field is one string to it. Intents stored in
// the earlier forms (an array of entries, or one entry) are read as
// before.

// packEntries concatenates the marshalled entries.
func packEntries(raws []any) []byte {
	n := 0
	for _, r := range raws {
		n += len(r.(bson.Raw))
	}
	out := make([]byte, 0, n)
	for _, r := range raws {
		out = append(out, r.(bson.Raw)...)
	}
	return out
}

// unpackIntents decodes the packed entries of intents read from the store
// into their Entries. A packed field that does not decode whole is an
// error: settling part of a batch would void the rest.
func unpackIntents(intents []intent) error {
	for i := range intents {
		in := &intents[i]
		if len(in.Packed) == 0 {
			continue
		}
		rest := in.Packed
		var es []audit.Entry
		for len(rest) > 0 {
			doc, r, ok := bsoncore.ReadDocument(rest)
			if !ok {
				return fmt.Errorf("intent %s: its packed entries do not decode (%d bytes left)", in.ID, len(rest))
			}
			var e audit.Entry
			if err := bson.Unmarshal(doc, &e); err != nil {
				return fmt.Errorf("intent %s: %w", in.ID, err)
			}
			es = append(es, e)
			rest = r
		}
		in.Entries, in.Packed = es, nil
	}
	return nil
}
