package repo_test

// The core's tests run with every area registered with the core, as the
// service does: Open refuses to start a store while a rollback rule or a
// reaction of an area is missing (registry.go). The areas cannot be
// imported by the core's own package, even in its tests; this external
// test package links them into the same test binary.
import (
	_ "outreach/repo/access"
	_ "outreach/repo/directory"
	_ "outreach/repo/dossiers"
	_ "outreach/repo/inbox"
	_ "outreach/repo/mailboxes"
	_ "outreach/repo/notes"
	_ "outreach/repo/notify"
	_ "outreach/repo/outbox"
	_ "outreach/repo/pipeline"
	_ "outreach/repo/pitches"
	_ "outreach/repo/reports"
	_ "outreach/repo/textlist"
)
