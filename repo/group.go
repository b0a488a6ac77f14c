package repo

import (
	"context"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/ledger"
)

// This file builds groups of mutations that the write path applies as one
// unit (a change and the records that follow from it). modify and insert
// write one record each; Prepare and Creation build the same mutations
// without writing, and writeGroup writes them together.

// Prepare reads record id of coll, lets fn change it, and returns the record
// and the mutation that stores it; the mutation is nil when fn changed
// nothing. Like modify's fn, fn may run more than once.
func Prepare[P interface {
	*T
	record
}, T any](ctx context.Context, s *Store, coll, id, action string, fn func(P) error) (P, *mutation, error) {
	if err := ledger.CheckID(id); err != nil {
		return nil, nil, NotFound(kinds[coll], id)
	}
	var raw bson.M
	if err := s.coll(coll).FindOne(ctx, bson.M{"_id": id}).Decode(&raw); err != nil {
		return nil, nil, ledger.DriverErr(err, kinds[coll], id)
	}
	rec := P(new(T))
	if err := ledger.DecodeM(raw, rec); err != nil {
		return nil, nil, err
	}
	if err := fn(rec); err != nil {
		return nil, nil, err
	}
	before := ledger.Strip(raw)
	after, err := ledger.ToM(rec)
	if err != nil {
		return nil, nil, err
	}
	delete(after, "updated_at")
	cmp := ledger.Strip(before)
	delete(cmp, "updated_at")
	if ledger.SameState(cmp, after) {
		return rec, nil, nil
	}
	m := rec.meta()
	m.UpdatedAt = Now()
	after["updated_at"] = m.UpdatedAt
	return rec, &mutation{Coll: coll, ID: id, Action: action, Before: before, After: after, Version: m.Version}, nil
}

// Creation returns the mutation that creates rec in coll, giving it an id
// (unless it has one) and its timestamps.
func Creation[P interface {
	*T
	record
}, T any](coll string, rec P) (mutation, error) {
	m := rec.meta()
	if m.ID == "" {
		m.ID = uuid.NewString()
	}
	t := Now()
	m.CreatedAt, m.UpdatedAt, m.ArchivedAt = t, t, nil
	after, err := ledger.ToM(rec)
	if err != nil {
		return mutation{}, err
	}
	return mutation{Coll: coll, ID: m.ID, Action: audit.ActionCreate, After: after}, nil
}
