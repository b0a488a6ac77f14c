package embedded

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestStoreLogFormatsNothing: FerretDB's logger, given every SQL statement
// and its documents as attributes, neither formats them nor enables a level.
func TestStoreLogFormatsNothing(t *testing.T) {
	l := storeLog.With(slog.String("query", "INSERT INTO t VALUES (?)"), slog.Any("args", []any{strings.Repeat("x", 4096)}))
	if l.Handler() != slog.DiscardHandler {
		t.Errorf("the store's logger with a statement's attributes has handler %T; want one that discards without formatting them", l.Handler())
	}
	for _, lv := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelError} {
		if l.Enabled(context.Background(), lv) {
			t.Errorf("the store's logger is enabled at %v; nothing of it is kept", lv)
		}
	}
}

// BenchmarkStoreLog: inserts and updates of a 2 KB document into two stores
// side by side, one whose FerretDB logger is a text handler writing nowhere
// (as before), the other the store's (storeLog): go test ./embedded -run
// '^$' -bench StoreLog.
func BenchmarkStoreLog(b *testing.B) {
	ctx := context.Background()
	open := func(l *slog.Logger) *mongo.Collection {
		defer func(was *slog.Logger) { storeLog = was }(storeLog)
		storeLog = l
		es, err := Start(ctx, Options{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(es.Close)
		c, err := mongo.Connect(options.Client().ApplyURI(es.URI))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Disconnect(ctx) })
		return c.Database("bench").Collection("docs")
	}
	text, discard := open(slog.New(slog.NewTextHandler(io.Discard, nil))), open(storeLog)
	body := strings.Repeat("a note's text, ", 140)
	write := func(c *mongo.Collection, i int) {
		id := fmt.Sprint(i)
		if _, err := c.InsertOne(ctx, bson.M{"_id": id, "body": body, "n": i}); err != nil {
			b.Fatal(err)
		}
		if _, err := c.ReplaceOne(ctx, bson.M{"_id": id}, bson.M{"body": body + "!", "n": i + 1}); err != nil {
			b.Fatal(err)
		}
	}
	var took [2]time.Duration
	for i := 0; b.Loop(); i++ {
		for k, c := range []*mongo.Collection{text, discard} {
			t0 := time.Now()
			write(c, i)
			took[k] += time.Since(t0)
		}
	}
	b.ReportMetric(float64(took[0].Microseconds())/float64(b.N), "µs/write-text-handler")
	b.ReportMetric(float64(took[1].Microseconds())/float64(b.N), "µs/write-discard")
	b.ReportMetric(float64(took[0])/float64(took[1]), "ratio")
}
