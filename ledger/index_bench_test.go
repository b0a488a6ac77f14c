package ledger

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/ledger/index"
)

// BenchmarkIndexQuery: the index's own work for a list at 100,000 notes
// (no store read): by contact (a posting list of 333), and every active
// note sorted by date (no posting list: every record evaluated).
func BenchmarkIndexQuery(b *testing.B) {
	mc := index.NewColl(testSchema.Index[collNotes])
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 100_000 {
		c := fmt.Sprintf("c%d", i%4000)
		if i%300 == 0 {
			c = "hot"
		}
		raw, err := bson.Marshal(bson.M{"_id": uuid.NewString(), "type": "call", "title": "t", "occurred_at": base.Add(time.Duration(i) * time.Minute),
			"links": bson.A{bson.M{"id": uuid.NewString(), "contact_id": c, "created_at": base}}, "archived_at": nil, "version": int64(1)})
		if err != nil {
			b.Fatal(err)
		}
		mc.Put(raw)
	}
	mi := &mirror{colls: map[string]*index.Coll{collNotes: mc}}
	sort := bson.D{{Key: "occurred_at", Value: -1}, {Key: "_id", Value: -1}}
	for _, q := range []struct {
		name   string
		filter bson.M
	}{{"by contact", bson.M{"links.contact_id": "hot", "archived_at": nil}}, {"all active", bson.M{"archived_at": nil}}} {
		b.Run(q.name, func(b *testing.B) {
			for b.Loop() {
				if _, _, ok := mi.ids(mirrorQuery{coll: collNotes, filter: q.filter, sort: sort, limit: 50}); !ok {
					b.Fatal("not answered")
				}
			}
		})
	}
}
