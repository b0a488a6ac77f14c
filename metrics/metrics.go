// Package metrics exports the service's state in Prometheus' text format:
// tool calls and their latency, rate-limit refusals, the write path, the
// service's own indexes, the inbox sync, the delivery and pitch queues, the
// backups, and the Go runtime and process. A label carries a tool's name,
// an error code or a fixed word, never a key, a token, an address or a
// record's content.
package metrics

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/backup"
	"outreach/mailsync"
	"outreach/repo"
	"outreach/repo/pitches"
)

// Path is where the metrics are served.
const Path = "/metrics"

// Sources are what a scrape reads; Mail and Backup are nil when the
// service has no inbox or no scheduled backups (their metrics are then
// left out).
type Sources struct {
	Store  *repo.Store
	Mail   *mailsync.Syncer
	Backup func() backup.Status
}

// Metrics holds the service's collectors.
type Metrics struct {
	reg     *prometheus.Registry
	calls   *prometheus.CounterVec
	latency *prometheus.HistogramVec
	refused *prometheus.CounterVec
}

// New registers every collector, the state read from src at each scrape.
func New(src Sources) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "outreach_tool_calls_total",
			Help: "Tool calls answered, by tool and outcome (an error code, or ok)."}, []string{"tool", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "outreach_tool_call_duration_seconds",
			Help:    "Time to answer a tool call, by tool.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}, []string{"tool"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "outreach_rate_limit_refusals_total",
			Help: "Requests refused for a key over its budget: layer http (429 at the edge) or tool (the error rate_limited)."}, []string{"layer"}),
	}
	m.refused.WithLabelValues("http")
	m.refused.WithLabelValues("tool")
	m.reg.MustRegister(m.calls, m.latency, m.refused, &state{src: src},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveCall counts a tool call (tools.WithCallObserver); code "" is ok.
func (m *Metrics) ObserveCall(tool, code string, d time.Duration) {
	if code == "" {
		code = "ok"
	}
	m.calls.WithLabelValues(tool, code).Inc()
	m.latency.WithLabelValues(tool).Observe(d.Seconds())
	if code == repo.CodeRateLimited {
		m.refused.WithLabelValues("tool").Inc()
	}
}

// RefusedRequest counts a request the edge refused with 429.
func (m *Metrics) RefusedRequest() { m.refused.WithLabelValues("http").Inc() }

// Handler serves the metrics at Path (404 elsewhere). With a token, a
// scrape must send it as a bearer token (401 otherwise); the comparison
// takes the same time whatever the token sent.
func (m *Metrics) Handler(token string) http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, MaxRequestsInFlight: 4, Timeout: 30 * time.Second})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != Path {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if token != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="outreach-metrics"`)
				http.Error(w, "a scrape needs the metrics token (OUTREACH_METRICS_TOKEN) as a bearer token", http.StatusUnauthorized)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// state reads the service's state at each scrape.
type state struct{ src Sources }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	descStoreUp       = desc("outreach_store_up", "1 when the store answered a ping at this scrape, else 0.")
	descRecovering    = desc("outreach_recovery_running", "1 while a recovery pass settles writes left in doubt.")
	descCommits       = desc("outreach_write_commits_total", "Writes (a mutation or a group) that landed since the process started.")
	descConflicts     = desc("outreach_write_conflicts_total", "Writes refused as a lost race or a record locked by a group in progress.")
	descRecovered     = desc("outreach_write_recovered_total", "Writes in doubt that recovery settled (applied or aborted).")
	descIntents       = desc("outreach_write_pending_intents", "Write intents not marked done (in flight or in doubt; on the embedded store the process's own last intent rests pending).")
	descIndexBuilding = desc("outreach_index_building", "Embedded store: 1 while the service's own indexes are being built (queries read the store meanwhile).")
	descIndexRecords  = desc("outreach_index_records", "Embedded store: records the service's own indexes hold.")
	descIndexBehind   = desc("outreach_index_behind", "Server with the service's own index: 1 while it has not followed the change log up to the store's counter for over two seconds (queries read the store meanwhile).")
	descIndexLag      = desc("outreach_index_lag_changes", "Server with the service's own index: the store's counter last read minus the seq the index has followed up to.")
	descIndexReads    = desc("outreach_index_reads_total", "Server with the service's own index: reads it was asked for, by what answered: index (it had followed the change log up to the store's counter) or store (it had not, within the wait).", "from")
	descDelivery      = desc("outreach_delivery_queue", "Notifications not yet delivered (or given up).")
	descPitches       = desc("outreach_pitch_queue", "Pitches waiting to be sent, by state (approved, scheduled, sending).", "state")
	descSyncLag       = desc("outreach_email_sync_lag_seconds", "Seconds since the last inbox sync that reached every mailbox ended (since the process started when none has).")
	descSyncFailing   = desc("outreach_email_sync_failing", "1 when the last inbox sync stopped on an error.")
	descSyncProblems  = desc("outreach_email_sync_problems", "Messages the last inbox sync could not store.")
	descBackupAge     = desc("outreach_backup_age_seconds", "Seconds since the last scheduled backup (since the process started when none has been taken).")
	descBackupFails   = desc("outreach_backup_consecutive_failures", "Scheduled backup or shipping attempts that failed in a row.")
)

var started = time.Now()

func (c *state) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStoreUp, descRecovering, descCommits, descConflicts, descRecovered, descIntents,
		descIndexBuilding, descIndexRecords, descIndexBehind, descIndexLag, descIndexReads, descDelivery, descPitches, descSyncLag, descSyncFailing, descSyncProblems, descBackupAge, descBackupFails} {
		ch <- d
	}
}

func (c *state) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	flag := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	s := c.src.Store
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h := s.Health()
	gauge(descRecovering, flag(h.Recovering))
	counter(descCommits, h.Commits)
	counter(descConflicts, h.Conflicts)
	counter(descRecovered, h.Recovered)
	if h.IndexKept {
		gauge(descIndexBuilding, flag(h.IndexBuilding))
		gauge(descIndexRecords, float64(h.IndexRecords))
	}
	if h.IndexFollowing {
		gauge(descIndexBehind, flag(h.IndexBehind))
		gauge(descIndexLag, float64(max(0, h.IndexCounter-h.IndexPosition)))
		ch <- prometheus.MustNewConstMetric(descIndexReads, prometheus.CounterValue, float64(h.IndexReads), "index")
		ch <- prometheus.MustNewConstMetric(descIndexReads, prometheus.CounterValue, float64(h.IndexStoreReads), "store")
	}
	up := s.Ping(ctx) == nil
	gauge(descStoreUp, flag(up))
	if up {
		// The counts read the store; a failed one is left out of the
		// scrape rather than shown as 0.
		if n, err := s.PendingIntents(ctx); err == nil {
			gauge(descIntents, float64(n))
		}
		if n, err := s.Count(ctx, repo.CollNotifications, bson.M{"delivery.done": false}); err == nil {
			gauge(descDelivery, float64(n))
		}
		for _, st := range []string{pitches.PitchApproved, pitches.PitchScheduled, pitches.PitchSending} {
			if n, err := s.Count(ctx, repo.CollPitches, bson.M{"state": st, "archived_at": nil}); err == nil {
				gauge(descPitches, float64(n), st)
			}
		}
	}
	if c.src.Mail != nil {
		since, failing, problems := started, false, 0
		if l := c.src.Mail.Last(); l != nil {
			failing, problems = l.Failed, l.Problems
			if !l.Succeeded.IsZero() {
				since = l.Succeeded
			}
		}
		gauge(descSyncLag, time.Since(since).Seconds())
		gauge(descSyncFailing, flag(failing))
		gauge(descSyncProblems, float64(problems))
	}
	if c.src.Backup != nil {
		st := c.src.Backup()
		since := started
		if !st.LastBackupAt.IsZero() {
			since = st.LastBackupAt
		}
		gauge(descBackupAge, time.Since(since).Seconds())
		gauge(descBackupFails, float64(st.Failures))
	}
}
