package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

// RollbackRun is one session rollback measured: Changes create_note calls
// by one client in an agent session of their own, then one rollback_session
// that undoes them all.
type RollbackRun struct {
	Changes int
	// Write is the time of the Changes calls together; Rollback that of the
	// one rollback_session call.
	Write, Rollback time.Duration
}

// PerChange is the rollback's time per change undone, and the write's.
func (r RollbackRun) PerChange() (rollback, write time.Duration) {
	return r.Rollback / time.Duration(r.Changes), r.Write / time.Duration(r.Changes)
}

// measureRollback writes n notes in a new agent session through the
// service, then rolls the session back, timing both.
func measureRollback(ctx context.Context, url, key string, d *data, n int) (RollbackRun, error) {
	admin, err := connect(ctx, url, bearer{key: key})
	if err != nil {
		return RollbackRun{}, err
	}
	defer admin.Close()
	text, err := call(ctx, admin, "start_session", map[string]any{"label": fmt.Sprintf("bench rollback of %d", n)})
	if err != nil {
		return RollbackRun{}, err
	}
	var sess struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal([]byte(text), &sess); err != nil || sess.SessionID == "" {
		return RollbackRun{}, fmt.Errorf("start_session answered %.200s", text)
	}
	writer, err := connect(ctx, url, bearer{key: key, session: sess.SessionID})
	if err != nil {
		return RollbackRun{}, err
	}
	defer writer.Close()
	run := RollbackRun{Changes: n}
	start := time.Now()
	for i := range n {
		if _, err := call(ctx, writer, "create_note", map[string]any{"title": fmt.Sprintf("rollback bench %d", i), "content": "a call",
			"type": "phone_call", "contact_ids": []string{d.contacts[i%len(d.contacts)]}}); err != nil {
			return run, err
		}
	}
	run.Write = time.Since(start)
	start = time.Now()
	if _, err := call(ctx, admin, "rollback_session", map[string]any{"session_id": sess.SessionID}); err != nil {
		return run, err
	}
	run.Rollback = time.Since(start)
	return run, nil
}

// writeHeapProfile writes the live heap, after a collection, to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
