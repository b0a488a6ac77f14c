// Package ledger is the service's write-path engine: the one door to the
// store. Its promise: no change is visible without its change entry, no
// change entry stands for a change that did not happen, no concurrent write
// is lost, and a group of changes is applied whole or not at all, on every
// write mode and through a crash at any instant.
//
// The engine's vocabulary, which the domain above it speaks:
//
//   - a Mutation is one record change (collection, id, action, the state
//     before and the complete state after, the version it was read at); a
//     set of them is applied as one unit, each with its change entry;
//   - records are documents with a canonical UUID string _id (CheckID),
//     carrying bookkeeping fields the engine owns (FieldVersion,
//     FieldLastChange, FieldLockedBy) that are never part of a change's
//     before/after (Strip, ToM, DecodeM, SameState);
//   - errors carry a code, a message safe to show, the field at fault and
//     whether a retry may succeed (Error, the Code* constants, NotFound,
//     ErrConflict for a lost race, DriverErr at the driver's edge);
//   - lists come back a Page at a time, with the total;
//   - what the server can do is probed, never read from its name (Probe);
//   - the domain registers its collections at Open (Schema).
//
// The index the engine keeps for the embedded store is package
// ledger/index. Neither imports anything of the domain (repo, tools,
// server, ...); a test holds that direction, and another holds that no
// file outside the write path calls a driver write.
//
// The protocol itself (apply a set of mutations as one unit with its actor,
// session, idempotency key and events; read records and change entries;
// roll back a change or a plan; recover; verify) is still implemented in
// package repo (write.go, group.go, recover.go, verify.go, changelog.go,
// idempotency.go, rollback.go, mirror*.go) and moves here next, behind that
// surface.
package ledger
