package repo

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// InsertFixture is for tests only: it creates a record of a kind whose tools
// live in another group (outlet, channel or contact) with the given fields,
// through the write path, and returns its id. Service code never calls it.
func (s *Store) InsertFixture(ctx context.Context, kind string, fields map[string]any) (string, error) {
	coll := map[string]string{"outlet": collOutlets, "channel": collChannels, "contact": collContacts}[kind]
	if coll == "" {
		return "", fmt.Errorf("no fixtures of kind %q", kind)
	}
	rec := &fixture{Fields: bson.M{}}
	for k, v := range fields {
		rec.Fields[k] = v
	}
	m, err := creation(coll, rec)
	if err != nil {
		return "", err
	}
	if _, err := s.write(ctx, m); err != nil {
		return "", err
	}
	return m.id, nil
}

type fixture struct {
	Meta   `bson:",inline"`
	Fields bson.M `bson:",inline"`
}
