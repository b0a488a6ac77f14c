package integration

import (
	"os"
	"testing"
)

// The test command runs this package on two stores and holds its whole time
// under 25 minutes on two cores; these helpers are how the longest tests
// keep to it without asserting less.

// parallelOnEmbedded runs a long test beside the other long ones on the
// embedded store: each has a store, a server and a port of its own, and a
// single test keeps about one core busy. With MONGODB_URI the tests stay in
// order, because TestEveryQueryUsesAnIndex (which runs only there) must run
// after every other test to explain the query shapes they issued, and
// parallel tests run after it.
func parallelOnEmbedded(t *testing.T) {
	if os.Getenv("MONGODB_URI") == "" {
		t.Parallel()
	}
}

// onceAcrossStores skips a test of what no store decides (the MCP protocol
// itself) in the test command's pass on a second store, which sets
// OUTREACH_SECOND_STORE_PASS=1: the test ran in the first pass.
func onceAcrossStores(t *testing.T) {
	if os.Getenv("OUTREACH_SECOND_STORE_PASS") != "" {
		t.Skip("checks nothing a store decides: it ran in the test command's pass on the embedded store (OUTREACH_SECOND_STORE_PASS is set)")
	}
}
