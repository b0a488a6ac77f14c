package tools

import (
	"slices"
	"time"

	"outreach/backup"
	"outreach/repo"
	"outreach/slackmsg"
)

// WithBackupStatus shows an admin the scheduled backups' state in
// get_service_info.
func WithBackupStatus(f func() backup.Status) Option { return func(o *options) { o.backupStatus = f } }

// WithCallObserver has f told of every tool call once it is answered: the
// tool's name, its outcome's error code ("" on success) and how long it
// took (metrics).
func WithCallObserver(f func(tool, code string, d time.Duration)) Option {
	return func(o *options) { o.observe = f }
}

// WithSlack gives the Messaging tools their Slack client.
func WithSlack(c *slackmsg.Client) Option { return func(o *options) { o.slack = c } }

// All is every tool of the service in the chosen toolsets (every toolset
// without WithToolsets), in the order tools/list shows them.
func All(s *repo.Store, opts ...Option) []Tool {
	var o options
	for _, f := range opts {
		f(&o)
	}
	limits := RateLimitsOf(opts...)
	calls := NewLimiter(limits.Calls, limits.CallBurst)
	var all []Tool
	for _, ts := range toolsets {
		if o.toolsets != nil && !slices.Contains(o.toolsets, ts.name) {
			continue
		}
		for _, t := range ts.tools(s, o, opts) {
			t.Toolset = ts.name
			t.store = s
			t.calls = calls
			t.observe = o.observe
			all = append(all, t)
		}
	}
	return withOutputs(briefed(all))
}
