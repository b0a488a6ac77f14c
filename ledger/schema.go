package ledger

import "outreach/ledger/index"

// Schema is what the domain tells the engine about its collections, at
// Open: the engine itself knows no kind of record by name.
type Schema struct {
	// Kinds names each collection's records in messages ("contact").
	Kinds map[string]string
	// Redacted lists, per collection, the fields whose values never enter
	// the change log (a key's hash, a signing secret): an entry shows them
	// as "[redacted]", and a pending create seals them until it lands.
	Redacted map[string][]string
	// Records are the collections of records written through the write
	// path, which Verify checks record by record.
	Records []string
	// Index says, per collection, what the index kept for the embedded
	// store holds (see package index); a collection not named is not
	// indexed.
	Index map[string]index.Spec
	// Caches are, per collection, the domain's caches of its records (the
	// verified agent keys): a write of a record of the collection empties
	// its cache before and after it lands, and recovery empties them all.
	Caches map[string]func()
}

// dropCaches empties every cache the domain registered.
func (s Schema) dropCaches() {
	for _, drop := range s.Caches {
		drop()
	}
}

// Kind names coll's records in a message: its registered kind, or the
// collection's name followed by "record".
func (s Schema) Kind(coll string) string {
	if k, ok := s.Kinds[coll]; ok {
		return k
	}
	return coll + " record"
}
