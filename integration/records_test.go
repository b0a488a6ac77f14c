package integration

import (
	"testing"

	"outreach/integration/testenv"
)

// mk creates a record through its create tool (create_outlet, create_contact,
// create_coverage, …) over MCP and returns its id, so tests set up related
// records the way a client would, checks and change entries included.
func mk(t testing.TB, c *testenv.Client, tool string, args M) string {
	t.Helper()
	return testenv.ID(t, c.Must(tool, args, nil))
}

// mkArchived creates a record through its create tool and archives it
// through its archive tool (kind is the noun: "contact", "outlet", …).
func mkArchived(t testing.TB, c *testenv.Client, kind string, args M) string {
	t.Helper()
	id := mk(t, c, "create_"+kind, args)
	c.Must("archive_"+kind, M{"id": id}, nil)
	return id
}
