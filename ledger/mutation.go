package ledger

import "go.mongodb.org/mongo-driver/v2/bson"

// Mutation is one record change handed to the write path; a set of them is
// applied as one unit, each recorded by its change entry.
type Mutation struct {
	Coll   string
	ID     string
	Action string
	// Before is the stored state (nil for a create), After the complete new
	// state; neither holds bookkeeping fields.
	Before bson.M
	After  bson.M
	// Version is the version of Before (0 for a create).
	Version int64
	// Reverts names the change a rollback undoes.
	Reverts string
	// Irreversible marks an action that left the system (a message sent).
	Irreversible bool
	// OnBehalfOf names the member whose own record an admin changed (see
	// audit.Entry.OnBehalfOf); the actor's OnBehalfOf when empty.
	OnBehalfOf string
}

// Key names the mutation's record: collection/id.
func (m Mutation) Key() string { return m.Coll + "/" + m.ID }
