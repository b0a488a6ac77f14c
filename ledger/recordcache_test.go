package ledger

import (
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// A read that began before a write is never kept (the write's drop moves
// the generation), and the cache never holds more than its bound.
func TestRecordCacheKeepsNoRacedReadAndStaysBounded(t *testing.T) {
	raw := func(id, v string) bson.Raw {
		b, err := bson.Marshal(bson.D{{Key: "_id", Value: id}, {Key: "v", Value: v}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	c := newRecordCache(64 << 10)
	_, gen, hit := c.get("notes", "a")
	if hit {
		t.Fatal("an empty cache hit")
	}
	c.drop("notes", "a") // a write lands between the miss and the fill
	c.fill("notes", "a", raw("a", "old"), gen)
	if _, _, hit := c.get("notes", "a"); hit {
		t.Fatal("a read begun before a write was kept")
	}
	_, gen, _ = c.get("notes", "a")
	c.fill("notes", "a", raw("a", "new"), gen)
	if got, _, hit := c.get("notes", "a"); !hit || got.Lookup("v").StringValue() != "new" {
		t.Fatalf("a read with no write since was not kept: %v %v", got, hit)
	}
	_, gen, _ = c.get("notes", "b")
	c.clear() // a write's outcome lost
	c.fill("notes", "b", raw("b", "old"), gen)
	if n, _ := c.stats(); n != 0 {
		t.Fatalf("after a clear and a raced fill the cache holds %d records", n)
	}
	for i := range 2000 {
		id := fmt.Sprint(i)
		_, gen, _ := c.get("notes", id)
		c.fill("notes", id, raw(id, "some value of a record"), gen)
		if _, size := c.stats(); size > c.max {
			t.Fatalf("the cache holds %d bytes, over its bound of %d", size, c.max)
		}
	}
	if _, _, hit := c.get("notes", "1999"); !hit {
		t.Fatal("the newest record was evicted")
	}
	if _, _, hit := c.get("notes", "0"); hit {
		t.Fatal("the oldest record was kept past the bound")
	}
	if newRecordCache(0) != nil {
		t.Fatal("a cache of size 0 exists")
	}
}
