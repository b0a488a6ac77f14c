package bench

import (
	"context"
	"fmt"
	"time"

	"outreach/indexes"
)

// This file is what differs when the bench runs on a server of its own
// (MONGODB_URI: MongoDB, or FerretDB 2 on DocumentDB): the store runs apart
// from this process, its own indexes serve every query (the service keeps
// no index of its own there), and the bench names the server it ran on.

// onServer reports whether the run was on a server (MONGODB_URI), not on a
// fresh embedded store.
func (r *Report) onServer() bool { return r.Config.MongoURI != "" }

// serverStore names the server the run is on, as the service found it
// (its buildInfo), for the table's "Store:" line.
func serverStore(t *target) string {
	name := t.store.Capabilities().Server
	if name == "" {
		name = "a MongoDB-compatible server"
	}
	if t.store.Health().IndexFollowing {
		return name + " at MONGODB_URI (a server of its own; the service keeps its own index too, following the change log: OUTREACH_SERVER_INDEX=on)"
	}
	return name + " at MONGODB_URI (a server of its own; its indexes serve, the service keeps none)"
}

// scratchIndexes gives the raw writes' scratch copy the store's indexes
// that the service's database has (the service's index list), so that a raw
// write keeps as many indexes up to date as the service's write does.
func scratchIndexes(ctx context.Context, t *target, raw *rawStore) error {
	if t.es != nil {
		// The embedded store: the service's _id look-up index, as on its
		// own database (its other indexes are the service's, in memory).
		return t.es.IndexIDs(ctx, raw.scratch.Name())
	}
	if err := indexes.Apply(ctx, raw.scratch, t.store.Capabilities().TextSearch); err != nil {
		return fmt.Errorf("the raw copy's indexes: %w", err)
	}
	return nil
}

// serverStartChecks are the start targets on a server: the store is up
// before the service starts and its own indexes serve, so serving is ready
// when the service has opened the store (its index list applied, recovery
// run); there is no index of the service's to build or load.
func serverStartChecks(at string, big *Report) []Check {
	var out []Check
	for _, st := range []struct {
		what string
		open time.Duration
	}{
		{"a restart (clean stop, then start on the running store)", big.RestartTime},
		{"the first start on the seeded store", big.OpenTime},
	} {
		out = append(out, Check{at, fmt.Sprintf("serving ≤ 10 s after %s (s: the service's own open; the store's indexes serve, none of the service's to build)",
			st.what), st.open.Seconds(), readyGoal.Seconds(), st.open <= readyGoal})
	}
	return out
}

// growthServerStartRows are the growth table's start rows on a server: the
// service's own open (its index list applied to the store, recovery run),
// first on the seeded store, then after a clean stop.
func growthServerStartRows(row func(string, func(*Report) string)) {
	row("open the seeded store and start the service (the store's own indexes serve: none of the service's to build)",
		func(r *Report) string { return r.OpenTime.Round(time.Millisecond).String() })
	row("restart (clean stop, then start the service on the running store)",
		func(r *Report) string { return r.RestartTime.Round(time.Millisecond).String() })
}
