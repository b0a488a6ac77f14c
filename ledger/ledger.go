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
// The engine's surface (surface.go, engine.go), which the domain (package
// repo) holds as its Store's *Engine:
//
//   - Open starts it on a connected client: it probes the server, picks the
//     write mode, applies the domain's indexes and recovers what a crash
//     left half-done; Close settles this process's last intent;
//   - Write and WriteChecked apply a set of mutations as one unit, with the
//     actor, session and idempotency tag taken from the context
//     (audit.WithActor); the outbox's events are mutations of the same set,
//     computed by the domain, so they land with the change or not at all;
//     WriteGroup builds the set again after a lost race;
//   - List, Find, FindOne, FindAll and Count read records, from the index
//     the engine keeps for the embedded store where it answers exactly, from
//     the store otherwise (the caller cannot tell which); ChangeLog and
//     Change read change entries;
//   - a rollback of a change or of a session: RollbackRecords reads the
//     records it plans from (audit.PlanRollback plans it), RevertGraph the
//     rollbacks already made, and ApplyRollback writes the plan as one unit
//     with the events the domain computed for it, refused if a change was
//     rolled back meanwhile (the domain's rules on what may be rolled back,
//     and the report the caller sees, stay with the domain);
//   - Recover and RunRecovery finish or void interrupted writes; Verify and
//     VerifyReport check every record against its change entries;
//   - Capabilities reports what the probes found and the write mode;
//   - ClaimIdempotency, FinishIdempotency and IdempotentChanges keep the
//     idempotency claims; OpenSession, TouchKeyUsage and PutBlob write the
//     operational documents that have no change entry.
//
// Files: write.go (the protocols: transaction, ordered, serial with group
// commit, plans), recover.go, verify.go, changelog.go, idempotency.go,
// rollback.go, mirror.go and mirror_read.go (the glue between the store and
// the index), list.go, probe.go. The engine's crash, fault, group-commit,
// recovery and probe tests are here, on a schema of their own
// (harness_test.go); the domain's tests reach the protocol's points through
// Engine.Internals (internals.go), which the service never calls.
//
// The index the engine keeps for the embedded store is package
// ledger/index. Neither imports anything of the domain (repo, tools,
// server, ...); a test holds that direction (direction_test.go), and another
// holds that no file outside write.go calls a driver write
// (writepath_test.go).
package ledger
