package repo

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// InsertFixture is for tests only: it creates a record of a kind whose tools
// live in another group (outlet, channel or contact) with the given fields,
// through the write path, and returns its id. An "archived_at" time
// creates it archived. Service code never calls it.
func (s *Store) InsertFixture(ctx context.Context, kind string, fields map[string]any) (string, error) {
	coll := map[string]string{"outlet": collOutlets, "channel": collChannels, "contact": collContacts}[kind]
	if coll == "" {
		return "", fmt.Errorf("no fixtures of kind %q", kind)
	}
	rec := &fixture{Fields: bson.M{}}
	for k, v := range fields {
		if k != "archived_at" {
			rec.Fields[k] = v
		}
	}
	m, err := creation(coll, rec)
	if err != nil {
		return "", err
	}
	// An archived fixture is created archived, to stand for one archived later.
	if at, ok := fields["archived_at"].(time.Time); ok {
		m.after["archived_at"] = at.UTC().Truncate(time.Millisecond)
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
