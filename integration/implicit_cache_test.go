package integration

import (
	"os"
	"strings"
	"testing"

	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/server"
)

// TestImplicitSessionIsReadOncePerIdlePeriod: on the stateless revision a
// call that names no session belongs to its key's implicit session, which
// the service reads from the change log and then keeps for as long as the
// store says it stands (until the session could go idle). Ten calls of one
// key after its first change read the change log for it at most once, not
// once per call, and every change still lands in that one session. Counted
// on a server (MONGODB_URI), where the store's commands are recorded; the
// embedded store keeps the facts in the store layer as well.
func TestImplicitSessionIsReadOncePerIdlePeriod(t *testing.T) {
	if os.Getenv("MONGODB_URI") == "" {
		t.Skip("counts the store's commands, recorded on MONGODB_URI only")
	}
	env := testenv.New(t)
	key := env.Key("read", "write")
	c := env.ClientAt(env.URL, server.StatelessRevision, key, "")
	first := mk(t, c, "create_outlet", M{"name": "implicit first", "tier": 2})
	before := implicitReads()
	var ids []string
	for i := range 5 {
		ids = append(ids, mk(t, c, "create_outlet", M{"name": "implicit " + string(rune('A'+i)), "tier": 2}))
		c.Must("get_outlet", M{"id": first}, nil)
	}
	if n := implicitReads() - before; n > 1 {
		t.Errorf("10 calls of one key read its implicit session from the change log %d times; want at most once", n)
	}
	got := sessionsOf(t, env.Admin(), append([]string{first}, ids...)...)
	for _, id := range ids {
		if got[id] != got[first] || !strings.HasPrefix(got[id], repo.ImplicitPrefix) {
			t.Errorf("change of %s in session %q; want the key's implicit session %q", id, got[id], got[first])
		}
	}
}

// implicitReads counts the implicit-session look-ups recorded so far: finds
// on the change log by a session id prefix.
func implicitReads() int {
	n := 0
	for _, q := range testenv.Queries() {
		if strings.HasPrefix(q.Shape, "find change_log") && strings.Contains(q.Shape, "session_id") && strings.Contains(q.Shape, "$regex") {
			n += q.Count
		}
	}
	return n
}
