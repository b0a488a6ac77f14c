package integration

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// The service is killed (SIGKILL) after the change that made a notification
// and before it could be delivered (Slack and the receiver were failing);
// restarted, it delivers the notification, once, with the same id.
func TestNotifyDeliveredAfterKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary twice")
	}
	fs := newFakeSlack(t)
	recv := newReceiver(t, hookSecret)
	fs.mu.Lock()
	fs.failing = true
	fs.mu.Unlock()
	recv.down.Store(true)
	env := []string{"OUTREACH_SLACK_BOT_TOKEN=" + fs.Token, "OUTREACH_SLACK_CHANNEL=C0TEAM", "OUTREACH_SLACK_API_URL=" + fs.APIURL(),
		"OUTREACH_WEBHOOK_URL=" + recv.srv.URL, "OUTREACH_WEBHOOK_SECRET=" + hookSecret,
		"OUTREACH_DELIVERY_INTERVAL=50ms", "OUTREACH_DELIVERY_BACKOFF=50ms", "OUTREACH_DELIVERY_BACKOFF_MAX=200ms", "OUTREACH_DELIVERY_LEASE=2s"}
	data := dataDir(t)
	srv := startServer(t, data, env...)
	key := srv.FirstKey
	if strings.Contains(srv.stderr.String(), hookSecret) || strings.Contains(srv.stderr.String(), fs.Token) {
		t.Fatal("a secret is in the log")
	}
	c := mustDial(t, srv.URL, key)
	var opp struct{ ID string }
	c.must(t, "create_opportunity", M{"title": "Survives a crash"}, &opp)
	c.must(t, "subscribe_opportunity", M{"opportunity_id": opp.ID}, nil)
	c.must(t, "update_opportunity_stage", M{"id": opp.ID, "stage": "pitched"}, nil)
	var list struct {
		Notifications []struct {
			ID string `json:"id"`
		} `json:"notifications"`
	}
	c.must(t, "list_notifications", M{}, &list)
	if len(list.Notifications) != 1 {
		t.Fatalf("notifications: %+v", list)
	}
	id := list.Notifications[0].ID
	eventually(t, 20*time.Second, "failed attempts on both targets", func() bool {
		_, refused, _ := recv.stats()
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return refused >= 1 && fs.failures >= 1
	})
	srv.kill()
	fs.mu.Lock()
	fs.failing = false
	fs.mu.Unlock()
	recv.down.Store(false)
	if n := recv.count(id); n != 0 {
		t.Fatalf("delivered before the restart: %d", n)
	}

	srv = startServer(t, data, env...)
	// On a shared server (MONGODB_URI) a write the kill cut short is settled
	// by recovery once its 30 s lease has passed; the embedded store settles
	// it at start.
	eventually(t, 90*time.Second, "delivery after the restart", func() bool {
		return recv.count(id) == 1 && len(fs.postsContaining(id)) == 1
	})
	time.Sleep(500 * time.Millisecond) // more scans: nothing more is sent
	acc, _, bad := recv.stats()
	if acc[id] != 1 || len(acc) != 1 || bad != 0 || len(fs.postsContaining(id)) != 1 {
		t.Errorf("after the restart: webhook %v (bad signatures %d), Slack posts %d", acc, bad, len(fs.postsContaining(id)))
	}
	if logs := srv.stderr.String(); strings.Contains(logs, hookSecret) || strings.Contains(logs, fs.Token) {
		t.Error("a secret is in the log")
	}
	if code := srv.term(30 * time.Second); code != 0 {
		t.Errorf("exit %d", code)
	}
	if out := mustCLI(t, "verify", "--data", data); !strings.HasPrefix(out, "ok") {
		t.Errorf("outreach verify: %s", out)
	}
}

// Two service processes on one MongoDB-compatible server (MONGODB_URI):
// both run delivery workers; each notification reaches the receiver and
// Slack once. The embedded store admits one process, so without
// MONGODB_URI this test skips (TestNotifySeveralWorkersAndAClaimThatDies
// runs several workers on one store in one process instead).
func TestNotifyTwoInstancesOneStore(t *testing.T) {
	if os.Getenv("MONGODB_URI") == "" {
		t.Skip("needs MONGODB_URI: the embedded store admits one process")
	}
	fs := newFakeSlack(t)
	recv := newReceiver(t, hookSecret)
	recv.down.Store(true)
	db := "OUTREACH_DB=notify_two_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	env := []string{db, "OUTREACH_SLACK_BOT_TOKEN=" + fs.Token, "OUTREACH_SLACK_CHANNEL=C0TEAM", "OUTREACH_SLACK_API_URL=" + fs.APIURL(),
		"OUTREACH_WEBHOOK_URL=" + recv.srv.URL, "OUTREACH_WEBHOOK_SECRET=" + hookSecret,
		"OUTREACH_DELIVERY_INTERVAL=20ms", "OUTREACH_DELIVERY_BACKOFF=20ms", "OUTREACH_DELIVERY_BACKOFF_MAX=100ms", "OUTREACH_DELIVERY_LEASE=5s"}
	a := startServer(t, dataDir(t), env...)
	b := startServer(t, dataDir(t), env...)
	if a.FirstKey == "" || b.FirstKey != "" {
		t.Fatalf("first keys: %q %q (want one, from the first instance)", a.FirstKey, b.FirstKey)
	}
	ca, cb := mustDial(t, a.URL, a.FirstKey), mustDial(t, b.URL, a.FirstKey)
	var ids []string
	for i := range 8 {
		c := ca
		if i%2 == 1 {
			c = cb
		}
		var opp struct{ ID string }
		c.must(t, "create_opportunity", M{"title": fmt.Sprintf("Two instances %d", i)}, &opp)
		c.must(t, "subscribe_opportunity", M{"opportunity_id": opp.ID, "events": []string{"stage_changed"}}, nil)
		c.must(t, "update_opportunity_stage", M{"id": opp.ID, "stage": "pitched"}, nil)
	}
	var list struct {
		Notifications []struct {
			ID string `json:"id"`
		} `json:"notifications"`
	}
	ca.must(t, "list_notifications", M{}, &list)
	for _, n := range list.Notifications {
		ids = append(ids, n.ID)
	}
	if len(ids) != 8 {
		t.Fatalf("%d notifications, want 8", len(ids))
	}
	recv.down.Store(false)
	eventually(t, 60*time.Second, "8 deliveries", func() bool {
		acc, _, _ := recv.stats()
		return len(acc) == 8
	})
	time.Sleep(time.Second)
	acc, _, bad := recv.stats()
	for _, id := range ids {
		if acc[id] != 1 || len(fs.postsContaining(id)) != 1 {
			t.Errorf("notification %s: webhook %d, Slack %d; want once each", id, acc[id], len(fs.postsContaining(id)))
		}
	}
	if bad != 0 {
		t.Errorf("%d bad signatures", bad)
	}
}
