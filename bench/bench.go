// Package bench measures the service beside what bounds it, in one run on
// one store and one set of documents: the floor (a bare go-sdk server with
// one trivial tool over the same HTTP stack), the raw store (the same reads,
// and the store operations each write needs, issued with the driver), and a
// peer (the MongoDB MCP server over its HTTP transport, running the
// equivalent find on the same documents). Machines are shared and noisy, so
// what counts are the ratios measured side by side; the absolute times and
// the load average are printed beside them.
//
// Run it with `outreach bench` (see its -h). The result is a Markdown table.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"outreach/audit"
	"outreach/embedded"
	"outreach/repo"
	"outreach/repo/access"
	"outreach/repo/pipeline"
	"outreach/server"
	"outreach/tools"
)

// Config sizes a run.
type Config struct {
	// Notes is how many notes are seeded; coverage (Notes/2) and email
	// messages (3×Notes, in threads of 50) follow in proportion, except
	// the hot contact's share, which stops growing at 1,000 notes (hotShare).
	Notes int
	// Seed is how the notes, coverage and threads are stored: SeedAuto
	// (the default), SeedWrite or SeedBulk.
	Seed string
	// Cell is how long each measurement (one operation, one target, one
	// client count) runs. A cell makes at least one call per client.
	Cell time.Duration
	// Clients are the client counts measured (default 1 and 8).
	Clients []int
	// PeerDir is the folder whose node_modules holds mongodb-mcp-server
	// (installed with npm ci from its lockfile); empty leaves the peer out.
	PeerDir string
	// MongoURI, when set, benchmarks that store instead of a fresh embedded
	// one (a database named by DB is created and left there).
	MongoURI, DB string
	// AgentSession, when set, is the agent session every measured call
	// names (X-Agent-Session-Id). Unset, the clients name none, and the
	// service finds each call's session itself (the key's implicit session
	// on the protocol revision the go-sdk client speaks), as for a client
	// that leaves it to the service.
	AgentSession string
	// Only, when set, keeps the operations whose name contains one of these.
	Only []string
	// Names, when set, keeps the operations of exactly these names.
	Names []string
	// Rollback are the session sizes whose rollback is measured: that many
	// create_note calls in a session of their own, then rollback_session.
	Rollback []int
	// Backup measures a backup and a restore of the seeded store at the end.
	Backup bool
	// NoRaw leaves the raw store's cells out (their figures stay zero), so
	// that a profile of the run is the service's alone.
	NoRaw bool
	// MemProfile, when set, is where a heap profile is written at the end
	// of the service's part of the run (before the restore into a second
	// store), while the store and the service are still up.
	MemProfile string
	// Progress receives one line per cell; nil is silent.
	Progress io.Writer
}

func (c *Config) defaults() {
	if c.Notes <= 0 {
		c.Notes = 1000
	}
	if c.Cell <= 0 {
		c.Cell = 2 * time.Second
	}
	if len(c.Clients) == 0 {
		c.Clients = []int{1, 8}
	}
	if c.Seed == "" {
		c.Seed = SeedAuto
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.DB == "" {
		c.DB = fmt.Sprintf("outreach_bench_%d", time.Now().UnixNano())
	}
}

// Stats are one cell's figures.
type Stats struct {
	Calls      int
	Errors     int
	P50, P99   time.Duration
	Throughput float64 // calls per second, all clients together
	Load       float64 // one-minute load average when the cell ended
	FirstError string
	// AllocsPerCall and BytesPerCall are the heap allocations of the whole
	// process per call during the cell: service and client together for a
	// service cell (the floor's figure is the client's and the SDK's share).
	AllocsPerCall, BytesPerCall float64
}

// Row is one operation measured on every target.
type Row struct {
	Name  string
	Write bool
	// RawOps counts the store operations the raw equivalent issues per call.
	RawOps int
	// Service, Raw and Peer are keyed by client count; Peer is empty when
	// there is no comparable peer call.
	Service, Raw, Peer map[int]Stats
}

// Report is a run's result.
type Report struct {
	Config                Config
	Machine               string
	CPUs                  int
	LoadBefore, LoadAfter string
	Store                 string
	Seeded                string
	SeedMethod            string // SeedWrite or SeedBulk
	SeedTime              time.Duration
	// OpenTime is the time to open the seeded store and start the service.
	OpenTime time.Duration
	// IndexTime is how long the service's own indexes (embedded store) took
	// to build after that, in the background: queries read the store until
	// they are ready.
	IndexTime time.Duration
	// RestartTime and RestartIndexTime are the same after a clean stop of
	// that service: the indexes load from their checkpoint (embedded store).
	RestartTime, RestartIndexTime time.Duration
	// CrashTime and CrashIndexTime are the same after a crash (crash.go):
	// CrashChanges changes written after the last checkpoint, then the
	// process stopped without a clean stop (embedded store; zero elsewhere).
	CrashTime, CrashIndexTime time.Duration
	CrashChanges              int
	Floor                     map[int]Stats
	Rows                      []Row
	Rollbacks                 []RollbackRun
	Backup                    *BackupRun
	ServerRSS, PeerRSS        int64 // bytes, at the end
	// PeakRSS is this process's peak RSS while serving (the starts, every
	// call of the service's cells, the backup while serving); RunPeakRSS
	// over the whole run, the bench's own work too: the seeding, the raw
	// store's cells, the restore into a second store (memory.go's peaks).
	// Zero where the kernel cannot say.
	PeakRSS, RunPeakRSS int64
	peaks               peaks
	// HeldRSS is this process's RSS at the end of the service's part of the
	// run (before the restore into a second store) once a collection has
	// handed the freed memory back (debug.FreeOSMemory): what it holds,
	// without the garbage the last cells (the raw scans among them) left.
	HeldRSS int64
	// Held is what HeldRSS is made of (memory.go).
	Held     HeldMemory
	PeerNote string
}

// Seeding methods (Config.Seed).
const (
	SeedAuto  = "auto"  // bulk above bulkAbove notes, the write path up to it
	SeedWrite = "write" // each record through the write path
	SeedBulk  = "bulk"  // a batch at a time, with the change entries the write path would write
)

// bulkAbove is the size above which SeedAuto seeds in bulk: the write path
// stores tens of records a second here, an hour's work at 100,000 notes.
const bulkAbove = 2000

// target is the store and the service on it. The bench opens it twice:
// to seed, then again on the seeded data, as a restart would, which is what
// opening the store costs at that size (whatever the store rebuilds at start).
type target struct {
	uri, db string
	// dir is the embedded store's folder; empty on a server (uri).
	dir   string
	opts  repo.Options
	es    *embedded.Store
	store *repo.Store
	// indexTime is how long the service's own indexes took to build after
	// the store was open (embedded store; zero elsewhere).
	indexTime time.Duration
	svc       *httptest.Server
}

func (t *target) open(ctx context.Context) error {
	if t.dir != "" {
		es, err := embedded.Start(ctx, embedded.Options{Dir: t.dir})
		if err != nil {
			return err
		}
		t.es = es
		t.opts.PrepareStore = es.IndexIDs // FerretDB's look-ups by _id on an index
		t.opts.IndexCheckpoint = es.IndexCheckpoint(t.db)
		t.opts.Lookups = es
	}
	store, err := repo.Open(ctx, t.storeURI(), t.db, t.opts)
	if err != nil {
		t.close()
		return err
	}
	t.store = store
	// The service's own indexes (embedded store) build in the background;
	// the figures are of the service once they are ready.
	started := time.Now()
	if err := store.IndexesReady(ctx); err != nil {
		t.close()
		return err
	}
	t.indexTime = time.Since(started)
	t.svc = httptest.NewServer(server.New(store, zerolog.Nop()))
	return nil
}

// storeURI is where the driver reaches the store (the embedded store's
// address changes with each start).
func (t *target) storeURI() string {
	if t.es != nil {
		return t.es.URI
	}
	return t.uri
}

// closeService stops the service and closes its store handle; the embedded
// server stays up.
func (t *target) closeService() {
	if t.svc != nil {
		t.svc.Close()
		t.svc = nil
	}
	if t.store != nil {
		t.store.Close(context.Background())
		t.store = nil
	}
}

func (t *target) close() {
	t.closeService()
	if t.es != nil {
		t.es.Close()
		t.es = nil
	}
}

// Run seeds a store, reopens it, starts the service, the floor and (when
// configured) the peer, and measures every operation on each.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	rep := &Report{Config: cfg, Machine: cpuModel(), CPUs: runtime.NumCPU(), LoadBefore: loadAvg()}
	rep.peaks.progress = cfg.Progress
	rep.peaks.begin() // the seeding
	t := &target{uri: cfg.MongoURI, db: cfg.DB, opts: repo.Options{Logger: zerolog.Nop(), WriteMode: os.Getenv("OUTREACH_WRITE_MODE")}}
	rep.Store = "MongoDB-compatible server at MONGODB_URI"
	if t.uri == "" {
		dir, err := os.MkdirTemp("", "outreach-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		t.dir, t.opts.Exclusive = dir, true
		rep.Store = "embedded FerretDB 1.24 (SQLite, on disk)"
	}
	defer t.close()
	if err := t.open(ctx); err != nil {
		return nil, err
	}
	mode := t.store.Capabilities().WriteMode
	if t.opts.Exclusive {
		mode = "serial" // the embedded store: writes serialised in this process
	} else {
		rep.Store = serverStore(t)
	}
	rep.Store += ", write protocol " + mode
	d, key, err := prepare(ctx, t, cfg, rep)
	if err != nil {
		return nil, err
	}
	svc := t.svc
	uri := t.storeURI()
	floor := httptest.NewServer(floorHandler())
	defer floor.Close()

	var ops []operation
	var copies []string
	for _, o := range operations(d) {
		if len(cfg.Only) > 0 && !slices.ContainsFunc(cfg.Only, func(s string) bool { return strings.Contains(o.name, s) }) {
			continue
		}
		if len(cfg.Names) > 0 && !slices.Contains(cfg.Names, o.name) {
			continue
		}
		if o.rendering && len(cfg.Names) == 0 && len(cfg.Only) == 0 {
			continue // the renderings are the growth table's rows, or asked for by name
		}
		ops = append(ops, o)
		if o.scratch != "" && !slices.Contains(copies, o.scratch) {
			copies = append(copies, o.scratch)
		}
	}
	raw, err := newRaw(ctx, uri, cfg.DB, d, copies)
	if err != nil {
		return nil, fmt.Errorf("raw store: %w", err)
	}
	// The raw writes' scratch copy gets the store's indexes the service's
	// database has, so that raw and service writes find their records and
	// keep their indexes alike.
	if err := scratchIndexes(ctx, t, raw); err != nil {
		return nil, err
	}
	defer raw.close(context.Background())

	var peer *peerServer
	if cfg.PeerDir != "" {
		peer, err = startPeer(ctx, cfg.PeerDir, uri)
		if err != nil {
			rep.PeerNote = "peer not run: " + err.Error()
			fmt.Fprintln(cfg.Progress, rep.PeerNote)
		} else {
			defer peer.stop()
		}
	} else {
		rep.PeerNote = "peer not run: no -peer folder given"
	}

	rep.Floor = map[int]Stats{}
	for _, n := range cfg.Clients {
		st, err := measureMCP(ctx, floor.URL, bearer{}, n, cfg.Cell, func(int, int) []callSpec {
			return []callSpec{{"ping", map[string]any{}}}
		}, nil)
		if err != nil {
			return nil, fmt.Errorf("floor: %w", err)
		}
		rep.Floor[n] = st
		fmt.Fprintf(cfg.Progress, "floor          %d clients: p50 %v, %.0f calls/s\n", n, st.P50, st.Throughput)
	}
	for _, o := range ops {
		row := Row{Name: o.name, Write: o.write, RawOps: o.rawOps, Service: map[int]Stats{}, Raw: map[int]Stats{}, Peer: map[int]Stats{}}
		for _, n := range cfg.Clients {
			rep.peaks.begin()
			st, err := measureMCP(ctx, svc.URL+"/mcp", bearer{key, cfg.AgentSession}, n, cfg.Cell, o.call, nil)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", o.name, err)
			}
			rep.peaks.end(o.name, true)
			row.Service[n] = st
			var rs Stats
			if !cfg.NoRaw {
				rep.peaks.begin()
				rs = measure(n, cfg.Cell, 1, func(w, i int) error { return o.raw(ctx, raw, w, i) })
				rep.peaks.end(o.name+" (raw)", false)
			}
			row.Raw[n] = rs
			line := fmt.Sprintf("%-34s %d clients: p50 %v (raw %v), %.1f calls/s (raw %.1f)", o.name, n, st.P50, rs.P50, st.Throughput, rs.Throughput)
			if peer != nil && o.peer != nil {
				ps, err := measureMCP(ctx, peer.url, bearer{}, n, cfg.Cell, o.peer, peerConnection)
				if err != nil {
					return nil, fmt.Errorf("%s on the peer: %w", o.name, err)
				}
				row.Peer[n] = ps
				line += fmt.Sprintf(", peer p50 %v", ps.P50)
			}
			fmt.Fprintln(cfg.Progress, line)
		}
		rep.Rows = append(rep.Rows, row)
	}
	// servingEnds ends the service's part of the run: its peak, then what
	// it holds once a collection hands freed memory back (and its heap
	// profile), before the restore into a second store in this process
	// (which a production restore runs in a process of its own).
	servingEnds := func() error {
		rep.peaks.end("the rollbacks and the backup while serving", true)
		if cfg.MemProfile != "" {
			if err := writeHeapProfile(cfg.MemProfile); err != nil {
				return err
			}
		}
		debug.FreeOSMemory()
		rep.HeldRSS = rss(os.Getpid())
		rep.Held = heldMemory()
		fmt.Fprintf(cfg.Progress, "held at the end of serving: %d MB (live heap / runtime's rest / outside Go / binary %s; the rest: %s)\n",
			rep.HeldRSS>>20, rep.Held, runtimeClasses())
		rep.peaks.begin()
		return nil
	}
	rep.peaks.begin() // the rollbacks, the backup while serving (measureBackup ends it)
	for _, n := range cfg.Rollback {
		rb, err := measureRollback(ctx, svc.URL+"/mcp", key, d, n)
		if err != nil {
			return nil, fmt.Errorf("rollback of %d changes: %w", n, err)
		}
		rep.Rollbacks = append(rep.Rollbacks, rb)
		fmt.Fprintf(cfg.Progress, "session of %d create_note calls: written in %v, rolled back in %v\n", n, rb.Write.Round(time.Millisecond), rb.Rollback.Round(time.Millisecond))
	}
	if cfg.Backup {
		b, err := measureBackup(ctx, t, servingEnds)
		if err != nil {
			return nil, err
		}
		rep.Backup = b
		fmt.Fprintf(cfg.Progress, "backup of %d documents in %v (writes paused %v), restored and verified in %v\n", b.Documents,
			b.Backup.Round(time.Millisecond), b.Paused.Round(time.Microsecond), b.Restore.Round(time.Millisecond))
		fmt.Fprintf(cfg.Progress, "a write's p50 with change shipping off %v, on %v (%+.1f %%)\n", b.WriteOff.Round(time.Microsecond),
			b.WriteOn.Round(time.Microsecond), 100*(b.WriteOn.Seconds()/max(b.WriteOff.Seconds(), 1e-9)-1))
	} else if err := servingEnds(); err != nil {
		return nil, err
	}
	rep.ServerRSS = rss(os.Getpid())
	rep.peaks.end("the restore", false)
	rep.PeakRSS, rep.RunPeakRSS = rep.peaks.serving, rep.peaks.run
	if peer != nil {
		rep.PeerRSS = rss(peer.pid())
	}
	rep.LoadAfter = loadAvg()
	return rep, nil
}

// prepare seeds the target's store (the directory through the tools, the
// notes, coverage and threads as cfg.Seed says), then closes it and opens it
// again, timing that; it returns what it seeded and the service's key.
func prepare(ctx context.Context, t *target, cfg Config, rep *Report) (*data, string, error) {
	actor := repo.SystemActor("bench")
	sctx := audit.WithActor(ctx, actor)
	if err := pipeline.Of(t.store).Seed(sctx); err != nil {
		return nil, "", err
	}
	key, err := access.Of(t.store).Bootstrap(sctx)
	if err != nil {
		return nil, "", err
	}
	if key == "" {
		return nil, "", errors.New("the bench database already has keys: give a fresh database name")
	}

	start := time.Now()
	d, err := seedDirectory(sctx, t.svc.URL+"/mcp", key, cfg.Notes)
	if err != nil {
		return nil, "", fmt.Errorf("seed: %w", err)
	}
	rep.SeedMethod = SeedWrite
	if cfg.Seed == SeedBulk || cfg.Seed == SeedAuto && cfg.Notes > bulkAbove {
		rep.SeedMethod = SeedBulk
		t.closeService()
		b, err := newBulk(t.storeURI(), cfg.DB, actor)
		if err != nil {
			return nil, "", err
		}
		err = seedRecords(sctx, d, cfg.Notes, b.put)
		if err = errors.Join(err, b.close(ctx)); err != nil {
			return nil, "", fmt.Errorf("bulk seed: %w", err)
		}
	} else if err := seedRecords(sctx, d, cfg.Notes, t.store.Fixture); err != nil {
		return nil, "", fmt.Errorf("seed: %w", err)
	}
	rep.SeedTime = time.Since(start)
	rep.Seeded = d.summary
	d.db = cfg.DB
	fmt.Fprintf(cfg.Progress, "seeded %s in %v (%s)\n", d.summary, rep.SeedTime.Round(time.Millisecond), rep.SeedMethod)

	t.close()
	rep.peaks.end("the seeding", false)
	rep.peaks.begin() // the service's starts
	start = time.Now()
	if err := t.open(ctx); err != nil {
		return nil, "", fmt.Errorf("reopen: %w", err)
	}
	rep.OpenTime = time.Since(start) - t.indexTime
	rep.IndexTime = t.indexTime
	fmt.Fprintf(cfg.Progress, "reopened the store and started the service in %v; its own indexes were built %v later\n",
		rep.OpenTime.Round(time.Millisecond), rep.IndexTime.Round(time.Millisecond))
	rep.peaks.end("the first start on the seeded store", true)
	rep.peaks.begin()
	// A restart: a clean stop, then a start on the same store.
	t.close()
	start = time.Now()
	if err := t.open(ctx); err != nil {
		return nil, "", fmt.Errorf("restart: %w", err)
	}
	rep.RestartTime = time.Since(start) - t.indexTime
	rep.RestartIndexTime = t.indexTime
	fmt.Fprintf(cfg.Progress, "restarted in %v; its own indexes were ready %v later\n",
		rep.RestartTime.Round(time.Millisecond), rep.RestartIndexTime.Round(time.Millisecond))
	if err := measureCrash(sctx, t, cfg.Notes, rep, func(f string, a ...any) { fmt.Fprintf(cfg.Progress, f, a...) }); err != nil {
		return nil, "", err
	}
	rep.peaks.end("the restart and the start after a crash", true)
	if err := shareYear(ctx, t.svc.URL+"/mcp", key, d); err != nil {
		return nil, "", err
	}
	return d, key, nil
}

// shareYear shares the year's coverage report the rendering rows render
// (share_report), for the row of its page.
func shareYear(ctx context.Context, url, key string, d *data) error {
	s, err := connect(ctx, url, bearer{key: key})
	if err != nil {
		return err
	}
	defer s.Close()
	text, err := call(ctx, s, "share_report", maps.Clone(renderYear))
	if err != nil {
		return err
	}
	var r struct {
		Link string `json:"link"`
	}
	if err := json.Unmarshal([]byte(text), &r); err != nil || r.Link == "" {
		return fmt.Errorf("share_report: no link in %.300s", text)
	}
	d.shareLink = r.Link
	return nil
}

// floorHandler is the floor: a bare go-sdk server with one trivial tool,
// served by the same Streamable HTTP handler the service uses.
func floorHandler() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "floor", Version: "1"}, nil)
	type in struct{}
	mcp.AddTool(srv, &mcp.Tool{Name: "ping", Description: "answers pong"}, func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil, nil
	})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
}

// bearer is how a client presents itself: the key, and, when set, the
// agent session it names on every call (X-Agent-Session-Id).
type bearer struct{ key, session string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.key != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	if b.session != "" {
		r = r.Clone(r.Context())
		r.Header.Set(tools.SessionHeader, b.session)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connect opens an MCP client session on url.
func connect(ctx context.Context, url string, b bearer) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "outreach-bench", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: b}}, nil)
}

// call calls a tool and turns an error result into an error.
func call(ctx context.Context, s *mcp.ClientSession, tool string, args map[string]any) (string, error) {
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", err
	}
	var text string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text += t.Text
		}
	}
	if res.IsError {
		return "", fmt.Errorf("%s: %.300s", tool, text)
	}
	return text, nil
}

// getPage GETs a page and reads it whole; anything but 200 is an error.
func getPage(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return nil
}

// measureMCP runs clients sessions, each making the calls next gives (worker
// w, its i-th operation) for d; one operation may be several calls.
func measureMCP(ctx context.Context, url string, b bearer, clients int, d time.Duration, next func(w, i int) []callSpec,
	extra func(context.Context, *mcp.ClientSession) (map[string]any, error)) (Stats, error) {
	sessions := make([]*mcp.ClientSession, clients)
	extras := make([]map[string]any, clients)
	for i := range sessions {
		s, err := connect(ctx, url, b)
		if err != nil {
			return Stats{}, err
		}
		defer s.Close()
		sessions[i] = s
		if extra != nil {
			if extras[i], err = extra(ctx, s); err != nil {
				return Stats{}, err
			}
		}
	}
	st := measure(clients, d, minServiceCalls, func(w, i int) error {
		for _, c := range next(w, i) {
			for k, v := range extras[w] {
				c.args[k] = v
			}
			if c.tool == httpGet {
				if err := getPage(ctx, c.args["url"].(string)); err != nil {
					return err
				}
				continue
			}
			if _, err := call(ctx, sessions[w], c.tool, c.args); err != nil {
				return err
			}
		}
		return nil
	})
	if st.Calls == st.Errors {
		return st, fmt.Errorf("every call failed: %s", st.FirstError)
	}
	return st, nil
}

// minServiceCalls is the fewest calls each client makes in a cell of the
// service: a call slower than the cell (the first read of records no
// cache holds yet) is then one sample of several, shown by p99, not the
// cell's p50 alone. The raw cells make at least one (a raw read at 100,000
// notes takes seconds).
const minServiceCalls = 5

// measure runs fn from clients goroutines until d has passed, each making
// at least minCalls calls, and returns the latency percentiles and the
// throughput.
func measure(clients int, d time.Duration, minCalls int, fn func(w, i int) error) Stats {
	var mu sync.Mutex
	var lat []time.Duration
	var st Stats
	var wg sync.WaitGroup
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	deadline := start.Add(d)
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			var errs int
			var first string
			for i := 0; i < minCalls || time.Now().Before(deadline); i++ {
				t := time.Now()
				err := fn(w, i)
				mine = append(mine, time.Since(t))
				if err != nil {
					errs++
					if first == "" {
						first = err.Error()
					}
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			st.Errors += errs
			if st.FirstError == "" {
				st.FirstError = first
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	slices.Sort(lat)
	st.Calls = len(lat)
	st.P50 = lat[len(lat)/2]
	st.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	st.Throughput = float64(len(lat)) / elapsed.Seconds()
	st.Load = load1()
	st.AllocsPerCall = float64(after.Mallocs-before.Mallocs) / float64(len(lat))
	st.BytesPerCall = float64(after.TotalAlloc-before.TotalAlloc) / float64(len(lat))
	return st
}

// rawStore is the driver's direct view of the same store.
type rawStore struct {
	client *mongo.Client
	db     *mongo.Database
	// scratch is where the raw equivalents of writes go: a copy of the
	// collections they touch, so the service's data and change log stay
	// exactly what the service wrote.
	scratch *mongo.Database
	data    *data
}
