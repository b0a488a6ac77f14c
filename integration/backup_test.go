package integration

import (
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"outreach/audit"
	"outreach/backup"
	"outreach/integration/testenv"
	"outreach/ledger"
	"outreach/repo"
	"outreach/repo/outbox"
	"outreach/server"
	"outreach/tools"
)

// workload runs ops random tool calls on each of 8 concurrent clients of
// env (creates, updates, media uploads); at half-way it calls during (a
// backup taken while the clients write).
func workload(t *testing.T, env *testenv.Env, ops int, during func()) {
	t.Helper()
	admin := env.Admin()
	var outlets []string
	for i := range 3 {
		outlets = append(outlets, mk(t, admin, "create_outlet", M{"name": fmt.Sprint("Outlet ", i)}))
	}
	cov := newCoverage(t, admin, "backed up")
	var done atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	errs := make(chan string, 8*ops)
	for w := range 8 {
		c := env.Client(env.AdminKey, fmt.Sprint("worker-", w))
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 35))
			var mine []string
			for i := range ops {
				if done.Add(1) == int64(8*ops/2) {
					once.Do(during)
				}
				var tool string
				var args M
				switch k := r.IntN(10); {
				case k < 3 || len(mine) == 0:
					tool, args = "create_note", M{"title": fmt.Sprint("note ", w, "-", i), "content": strings.Repeat("word ", r.IntN(40)), "outlet_ids": []string{outlets[r.IntN(3)]}}
				case k < 5:
					tool, args = "create_contact", M{"first_name": fmt.Sprint("C", w), "last_name": fmt.Sprint("L", i)}
				case k < 8:
					tool, args = "update_note", M{"id": mine[r.IntN(len(mine))], "title": fmt.Sprint("edited ", w, "-", i)}
				default:
					data := make([]byte, 1+r.IntN(3000))
					for j := range data {
						data[j] = byte(r.Uint32())
					}
					tool, args = "upload_media", M{"coverage_id": cov, "type": "document", "filename": fmt.Sprint("f", w, "-", i, ".bin"),
						"mime_type": "application/octet-stream", "content_base64": base64.StdEncoding.EncodeToString(data)}
				}
				raw, e := c.Call(tool, args)
				switch {
				case e != nil && e.Code == repo.CodeConflict:
				case e != nil:
					errs <- fmt.Sprintf("%s: %s: %s", tool, e.Code, e.Message)
				case tool == "create_note":
					mine = append(mine, testenv.ID(t, raw))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// dump reads every document of the collections a backup copies, by
// collection, sorted by _id (compared as extended JSON).
func dump(t *testing.T, eng *ledger.Engine, skip ...string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	names, err := eng.Database().ListCollectionNames(ctx, bson.M{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, n := range names {
		if !ledger.BackedUp(n) || slices.Contains(skip, n) {
			continue
		}
		cur, err := eng.Collection(n).Find(ctx, bson.M{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		for cur.Next(ctx) {
			var m bson.M
			if err := bson.Unmarshal(cur.Current, &m); err != nil {
				t.Fatal(err)
			}
			js, _ := bson.MarshalExtJSON(m, true, false)
			out[n] = append(out[n], canonical(t, js))
		}
		if len(out[n]) == 0 {
			delete(out, n)
		}
	}
	return out
}

// canonical orders a document's fields, so that a copy rebuilt as a map
// compares equal to the stored one.
func canonical(t *testing.T, js []byte) string {
	var d any
	if err := bson.UnmarshalExtJSON(js, true, &d); err != nil {
		t.Fatal(err)
	}
	out, err := bson.MarshalExtJSON(sortDoc(d), true, false)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func sortDoc(v any) any {
	switch x := v.(type) {
	case bson.D:
		m := bson.M{}
		for _, e := range x {
			m[e.Key] = e.Value
		}
		return sortDoc(m)
	case bson.M:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		d := bson.D{}
		for _, k := range keys {
			d = append(d, bson.E{Key: k, Value: sortDoc(x[k])})
		}
		return d
	case bson.A:
		for i := range x {
			x[i] = sortDoc(x[i])
		}
		return x
	}
	return v
}

// restoredServer serves store over MCP HTTP; the client speaks with key.
func restoredServer(t *testing.T, store *repo.Store, key string) *testenv.Client {
	t.Helper()
	ts := httptest.NewServer(server.NewWithConfig(store, zerolog.Nop(), server.Config{}))
	t.Cleanup(ts.Close)
	hc := &http.Client{Transport: bearer(key)}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "restore-test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return testenv.WrapClient(t, s)
}

// TestBackupRoundTrip writes under 8 concurrent clients over MCP, takes a
// backup while they write and ships the changes after it, then restores
// into an empty store (embedded, or the MongoDB of MONGODB_URI): every
// record, change entry and media byte equal, verify clean, the admin key
// working, and a change made before the backup rolled back after it.
func TestBackupRoundTrip(t *testing.T) {
	targetURI := os.Getenv("MONGODB_URI")
	t.Setenv("MONGODB_URI", "") // the source: the embedded store
	src := testenv.New(t)
	to := t.TempDir()
	outlet := mk(t, src.Admin(), "create_outlet", M{"name": "Early"})
	early := mk(t, src.Admin(), "create_note", M{"title": "before the backup", "outlet_ids": []string{outlet}})
	src.Admin().Must("update_note", M{"id": early, "title": "changed before the backup"}, nil)
	var base *backup.Manifest
	workload(t, src, 12, func() {
		m, err := backup.Create(context.Background(), src.Store.Engine, to, backup.Options{ServiceVersion: "test"})
		if err != nil {
			t.Error(err)
			return
		}
		base = m
	})
	if base == nil {
		t.Fatal("no backup")
	}
	upto, seg, err := backup.Ship(context.Background(), src.Store.Engine, to, base.Counter)
	if err != nil || seg == nil || upto <= base.Counter {
		t.Fatalf("ship after %d: %d %+v %v", base.Counter, upto, seg, err)
	}
	if _, err := backup.CheckAll(to); err != nil {
		t.Fatal(err)
	}

	readLayout(t, to, base)

	t.Setenv("MONGODB_URI", targetURI)
	dst := testenv.OpenStore(t, testenv.Options{})
	res, err := backup.Restore(context.Background(), dst.Engine, to, backup.Target{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restored from %s into %s: %d changes replayed", src.Store.Capabilities().Server, dst.Capabilities().Server, res.Replayed)
	if res.Counter != upto || res.Replayed != int(seg.Count) {
		t.Errorf("restored to %d with %d changes replayed, want %d and %d", res.Counter, res.Replayed, upto, seg.Count)
	}
	// Not shipped: sessions, key usage and idempotency claims are the
	// backup's (taken while they changed).
	skip := []string{ledger.CollSessions, ledger.CollKeyUsage, ledger.CollIdempotency}
	want, got := dump(t, src.Store.Engine, skip...), dump(t, dst.Engine, skip...)
	for _, n := range []string{ledger.CollChangeLog, "notes", ledger.CollFiles, ledger.CollChunks, "agent_keys"} {
		if len(want[n]) == 0 {
			t.Errorf("the source has no %s", n)
		}
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("restored store differs from the source (-got +want):\n%s", diff)
	}
	if m, err := dst.RestoredFrom(context.Background()); err != nil || m == nil || m.State != ledger.RestoreComplete {
		t.Errorf("restore marker %+v %v", m, err)
	}

	c := restoredServer(t, dst, src.AdminKey)
	var entries struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"changes"`
	}
	c.Must("get_change_log", M{"record_id": early}, &entries)
	if len(entries.Items) != 2 {
		t.Fatalf("change log of %s after the restore: %+v", early, entries)
	}
	c.Must("rollback_change", M{"id": entries.Items[0].ID}, nil)
	var note struct{ Title string }
	c.Must("get_note", M{"id": early}, &note)
	if note.Title != "before the backup" {
		t.Errorf("after rolling back a change made before the backup: title %q", note.Title)
	}

	// A second restore into the restored store is refused, naming what is there.
	ctx := audit.WithActor(context.Background(), repo.SystemActor("test"))
	_, err = backup.Restore(ctx, dst.Engine, to, backup.Target{})
	if err == nil || !strings.Contains(err.Error(), "not empty") || !strings.Contains(err.Error(), "notes (") {
		t.Errorf("restore into a store holding data: %v", err)
	}
}

// TestRestoreToCounter restores to counters after the backup, picked at
// random, and holds each restored record to the state the source's change
// log gives at that counter.
func TestRestoreToCounter(t *testing.T) {
	t.Setenv("MONGODB_URI", "")
	src := testenv.New(t)
	to := t.TempDir()
	c := src.Admin()
	outlet := mk(t, c, "create_outlet", M{"name": "O"})
	for i := range 5 {
		mk(t, c, "create_note", M{"title": fmt.Sprint("base ", i), "outlet_ids": []string{outlet}})
	}
	m, err := backup.Create(context.Background(), src.Store.Engine, to, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for i := range 6 {
		ids = append(ids, mk(t, c, "create_note", M{"title": fmt.Sprint("after ", i), "outlet_ids": []string{outlet}}))
		c.Must("update_note", M{"id": ids[rand.IntN(len(ids))], "title": fmt.Sprint("edit ", i)}, nil)
		if i == 2 {
			if _, _, err := backup.Ship(context.Background(), src.Store.Engine, to, m.Counter); err != nil {
				t.Fatal(err)
			}
		}
	}
	segs, _ := backup.Segments(to)
	if _, _, err := backup.Ship(context.Background(), src.Store.Engine, to, segs[len(segs)-1].Upto); err != nil {
		t.Fatal(err)
	}
	var log []audit.Entry
	cur, err := src.Store.Collection(ledger.CollChangeLog).Find(context.Background(), bson.M{"seq": bson.M{"$gt": m.Counter}}, options.Find().SetSort(bson.D{{Key: "seq", Value: 1}}))
	if err != nil || cur.All(context.Background(), &log) != nil || len(log) < 12 {
		t.Fatalf("change log after the backup: %d entries, %v", len(log), err)
	}
	type moment struct {
		t      backup.Target
		filter bson.M
	}
	k := rand.IntN(len(log))
	for _, mo := range []moment{
		{backup.Target{Counter: log[k].Seq}, bson.M{"seq": bson.M{"$lte": log[k].Seq}}},
		{backup.Target{Counter: log[len(log)-1].Seq}, bson.M{"seq": bson.M{"$lte": log[len(log)-1].Seq}}},
		{backup.Target{Until: log[len(log)/2].At}, bson.M{"at": bson.M{"$lte": log[len(log)/2].At}}},
	} {
		dst := testenv.OpenStore(t, testenv.Options{})
		if _, err := backup.Restore(context.Background(), dst.Engine, to, mo.t); err != nil {
			t.Fatalf("restore to %+v: %v", mo.t, err)
		}
		want := map[string]string{} // note id -> title at the moment
		var all []audit.Entry
		mo.filter["collection"], mo.filter["state"] = "notes", audit.StateApplied
		cur, _ := src.Store.Collection(ledger.CollChangeLog).Find(context.Background(), mo.filter, options.Find().SetSort(bson.D{{Key: "seq", Value: 1}}))
		if err := cur.All(context.Background(), &all); err != nil {
			t.Fatal(err)
		}
		for _, e := range all {
			want[e.RecordID] = fmt.Sprint(e.After["title"])
		}
		got := map[string]string{}
		cur, _ = dst.Collection("notes").Find(context.Background(), bson.M{})
		var notes []bson.M
		if err := cur.All(context.Background(), &notes); err != nil {
			t.Fatal(err)
		}
		for _, n := range notes {
			got[fmt.Sprint(n["_id"])] = fmt.Sprint(n["title"])
		}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Errorf("notes restored to %+v (-got +want):\n%s", mo.t, diff)
		}
	}
	dst := testenv.OpenStore(t, testenv.Options{})
	if _, err := backup.Restore(context.Background(), dst.Engine, to, backup.Target{Counter: log[len(log)-1].Seq + 1000}); err == nil || !strings.Contains(err.Error(), "reach counter") {
		t.Errorf("restore past the changes shipped: %v", err)
	}
	if _, err := backup.Restore(context.Background(), dst.Engine, to, backup.Target{Counter: m.Counter - 1}); err == nil || !strings.Contains(err.Error(), "no complete backup") {
		t.Errorf("restore before the backup: %v", err)
	}
}

// TestBackupRefusesDamage alters a backup's and a segment's files in each
// way a copy can be damaged; verify and restore refuse each, naming the
// file.
func TestBackupRefusesDamage(t *testing.T) {
	t.Setenv("MONGODB_URI", "")
	src := testenv.New(t)
	c := src.Admin()
	outlet := mk(t, c, "create_outlet", M{"name": "O"})
	for i := range 4 {
		mk(t, c, "create_note", M{"title": fmt.Sprint("n", i), "outlet_ids": []string{outlet}})
	}
	to := t.TempDir()
	m, err := backup.Create(context.Background(), src.Store.Engine, to, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mk(t, c, "create_note", M{"title": "shipped", "outlet_ids": []string{outlet}})
	if _, _, err := backup.Ship(context.Background(), src.Store.Engine, to, m.Counter); err != nil {
		t.Fatal(err)
	}
	mk(t, c, "create_note", M{"title": "shipped too", "outlet_ids": []string{outlet}})
	segs, _ := backup.Segments(to)
	if _, _, err := backup.Ship(context.Background(), src.Store.Engine, to, segs[0].Upto); err != nil {
		t.Fatal(err)
	}
	list, _ := backup.List(to)
	dir := list[0].Dir
	notes := filepath.Join(dir, m.Database, "notes.bson.gz")
	users := filepath.Join(dir, m.Database, "users.bson.gz")
	segs, _ = backup.Segments(to)
	for _, tc := range []struct {
		name, file string
		damage     func(t *testing.T)
		want       string
	}{
		{"truncated", notes, func(t *testing.T) { truncate(t, notes, 10) }, "bytes, the manifest says"},
		{"altered", notes, func(t *testing.T) { flip(t, notes) }, "SHA-256"},
		{"swapped", notes, func(t *testing.T) { swap(t, notes, users) }, "notes.bson.gz"},
		{"no manifest", filepath.Join(dir, backup.ManifestFile), func(t *testing.T) { os.Remove(filepath.Join(dir, backup.ManifestFile)) }, "did not finish"},
		{"segment altered", segs[1].Path, func(t *testing.T) { flip(t, segs[1].Path) }, "SHA-256"},
		{"segment missing", segs[1].Path, func(t *testing.T) {
			os.Remove(segs[0].Path)
			os.Remove(strings.TrimSuffix(segs[0].Path, ".bson.gz") + ".json")
		}, "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saved := snapshotDir(t, to)
			defer restoreDir(t, to, saved)
			tc.damage(t)
			source := to
			if tc.name == "no manifest" {
				source = dir
			}
			_, err := backup.CheckAll(source)
			if err == nil || !strings.Contains(err.Error(), filepath.Base(tc.file)) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("verify: %v; want an error naming %s and %q", err, filepath.Base(tc.file), tc.want)
			}
			dst := testenv.OpenStore(t, testenv.Options{})
			_, err = backup.Restore(context.Background(), dst.Engine, source, backup.Target{})
			if err == nil || !strings.Contains(err.Error(), filepath.Base(tc.file)) && tc.name != "no manifest" {
				t.Errorf("restore: %v; want an error naming %s", err, filepath.Base(tc.file))
			}
			if n, _ := dst.Collection("notes").CountDocuments(context.Background(), bson.M{}); n != 0 {
				t.Errorf("a refused restore wrote %d notes", n)
			}
		})
	}
}

func truncate(t *testing.T, path string, by int64) {
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()-by); err != nil {
		t.Fatal(err)
	}
}

func flip(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func swap(t *testing.T, a, b string) {
	tmp := a + ".swap"
	for _, r := range [][2]string{{a, tmp}, {b, a}, {tmp, b}} {
		if err := os.Rename(r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
}

// snapshotDir and restoreDir keep a directory tree's files, to undo a
// damage between cases.
func snapshotDir(t *testing.T, dir string) map[string][]byte {
	out := map[string][]byte{}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			out[p], _ = os.ReadFile(p)
		}
		return nil
	})
	return out
}

func restoreDir(t *testing.T, dir string, files map[string][]byte) {
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			if _, ok := files[p]; !ok {
				os.Remove(p)
			}
		}
		return nil
	})
	for p, b := range files {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBackupSchedule runs the scheduler of serve --backup-to: a target that
// refuses writes is retried and shown to an admin in get_service_info
// while writes go on; once it accepts them, a backup is taken and the
// changes after it shipped. A key without admin does not see the state.
// The admins are notified once when the target starts failing (whatever
// the length of the streak) and once when it works again.
func TestBackupSchedule(t *testing.T) {
	t.Setenv("MONGODB_URI", "")
	parent := t.TempDir()
	to := filepath.Join(parent, "target")
	if err := os.WriteFile(to, []byte("a file where the target should be"), 0o600); err != nil {
		t.Fatal(err)
	}
	var sched *backup.Scheduler
	env := testenv.NewWith(t, testenv.Options{Tools: []tools.Option{tools.WithBackupStatus(func() backup.Status { return sched.Status() })}})
	var alertsMu sync.Mutex
	var alerts []backup.Alert
	notify := func(ctx context.Context, a backup.Alert) {
		alertsMu.Lock()
		alerts = append(alerts, a)
		alertsMu.Unlock()
		kind := outbox.EventBackupRecovered
		if a.Failing {
			kind = outbox.EventBackupFailing
		}
		ctx = audit.WithActor(ctx, repo.SystemActor("backup"))
		if _, err := outbox.Of(env.Store).NotifyAdmins(ctx, kind, "backups", a.Error, nil, a.Target+"/"+a.Since.String()); err != nil {
			t.Error(err)
		}
	}
	sched = backup.NewScheduler(env.Store.Engine, backup.Schedule{To: to, Every: time.Hour, Retention: backup.Retention{Keep: 2},
		ShipEvery: 20 * time.Millisecond, RetryMin: 10 * time.Millisecond, Notify: notify}, zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go sched.Run(ctx)
	admin := env.Admin()
	outlet := mk(t, admin, "create_outlet", M{"name": "O"})
	var info struct {
		Backup *backup.Status `json:"backup"`
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		mk(t, admin, "create_note", M{"title": "written while the target fails", "outlet_ids": []string{outlet}})
		admin.Must("get_service_info", nil, &info)
		if info.Backup != nil && info.Backup.Failures > 6 || time.Now().After(deadline) {
			break
		}
	}
	if info.Backup == nil || info.Backup.Failures == 0 || !strings.Contains(info.Backup.LastError, to) || info.Backup.NextAttempt.IsZero() {
		t.Fatalf("get_service_info's backup state with a failing target: %+v", info.Backup)
	}
	var readOnly struct {
		Backup *backup.Status `json:"backup"`
	}
	env.Client(env.Key("read"), "").Must("get_service_info", nil, &readOnly)
	if readOnly.Backup != nil {
		t.Errorf("a read key sees the backup state: %+v", readOnly.Backup)
	}

	alertsMu.Lock()
	if len(alerts) != 1 || !alerts[0].Failing || alerts[0].Failures != 3 || !strings.Contains(alerts[0].Error, to) {
		t.Errorf("alerts after %d failures: %+v, want one, at the third", info.Backup.Failures, alerts)
	}
	alertsMu.Unlock()

	if err := os.Remove(to); err != nil {
		t.Fatal(err)
	}
	mk(t, admin, "create_note", M{"title": "after the target is back", "outlet_ids": []string{outlet}})
	var counter int64
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		st := sched.Status()
		if st.LastBackup != "" && st.ShippedThrough > st.BackupCounter {
			counter = st.ShippedThrough
			break
		}
		if st.LastBackup != "" && counter == 0 {
			mk(t, admin, "create_note", M{"title": "after the backup", "outlet_ids": []string{outlet}})
			counter = -1
		}
	}
	if counter <= 0 {
		t.Fatalf("no backup and shipped changes: %+v", sched.Status())
	}
	if _, err := backup.CheckAll(to); err != nil {
		t.Fatal(err)
	}
	alertsMu.Lock()
	if len(alerts) != 2 || alerts[1].Failing || alerts[1].Since != alerts[0].Since {
		t.Errorf("alerts after the target works again: %+v, want the failure then the recovery", alerts)
	}
	alertsMu.Unlock()
	var notes struct {
		Items []struct {
			Event string `json:"event"`
		} `json:"notifications"`
	}
	admin.Must("list_notifications", M{}, &notes)
	var events []string
	for _, n := range notes.Items {
		events = append(events, n.Event)
	}
	slices.Sort(events)
	if diff := cmp.Diff(events, []string{outbox.EventBackupFailing, outbox.EventBackupRecovered}); diff != "" {
		t.Errorf("the admin's notifications (-got +want):\n%s", diff)
	}
	dst := testenv.OpenStore(t, testenv.Options{})
	res, err := backup.Restore(context.Background(), dst.Engine, to, backup.Target{})
	if err != nil || res.Replayed == 0 {
		t.Fatalf("restore: %+v %v", res, err)
	}
}

// readLayout reads a backup as a tool of the field would: each
// <db>/<collection>.bson.gz with gzip and the driver's BSON reader (as many
// documents as the manifest says), each .metadata.json.gz as extended JSON
// naming the collection and its _id index.
func readLayout(t *testing.T, to string, m *backup.Manifest) {
	t.Helper()
	list, _ := backup.List(to)
	dir := list[len(list)-1].Dir
	for _, c := range m.Collections {
		f, err := os.Open(filepath.Join(dir, m.Database, c.Name+".bson.gz"))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		all, err := io.ReadAll(zr)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		n := int64(0)
		for len(all) > 0 {
			raw, rest, ok := bsoncore.ReadDocument(all)
			if !ok || bson.Raw(raw).Validate() != nil {
				t.Fatalf("%s.bson.gz: document %d does not read as BSON", c.Name, n+1)
			}
			all, n = rest, n+1
		}
		if n != c.Count {
			t.Errorf("%s.bson.gz: %d documents, the manifest says %d", c.Name, n, c.Count)
		}
		f, err = os.Open(filepath.Join(dir, m.Database, c.Name+".metadata.json.gz"))
		if err != nil {
			t.Fatal(err)
		}
		zr, _ = gzip.NewReader(f)
		js, _ := io.ReadAll(zr)
		f.Close()
		var meta struct {
			CollectionName string   `bson:"collectionName"`
			Indexes        []bson.M `bson:"indexes"`
		}
		if err := bson.UnmarshalExtJSON(js, true, &meta); err != nil || meta.CollectionName != c.Name || len(meta.Indexes) == 0 || meta.Indexes[0]["name"] != "_id_" {
			t.Errorf("%s.metadata.json.gz: %v %s", c.Name, err, js)
		}
	}
}
