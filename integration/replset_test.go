package integration

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/mongodb"
)

// replicaSetImage is the MongoDB the replica-set run uses.
const replicaSetImage = "mongo:7.0"

// TestReplicaSet runs every test of this package again on a single-node
// MongoDB replica set in a container, with the write mode "transaction",
// when a Docker engine is reachable; otherwise it says so and skips. The
// run is a child process of this test binary with MONGODB_URI pointing at
// the container (where this test skips itself), so the same tests run
// unchanged against both stores.
func TestReplicaSet(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("MONGODB_URI is set: this run is already against a MongoDB")
	}
	if testing.Short() {
		t.Skip("replica-set run skipped in -short mode")
	}
	if err := dockerEngine(); err != nil {
		t.Skipf("no Docker engine: replica-set run skipped (%v)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	ctr, err := mongodb.Run(ctx, replicaSetImage, mongodb.WithReplicaSet("rs0"))
	testcontainers.CleanupContainer(t, ctr)
	if err != nil {
		t.Fatalf("start a MongoDB replica set: %v", err)
	}
	uri, err := ctr.ConnectionString(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The member is named by its address inside Docker's network, which the
	// host may not reach: talk to it directly. hello still names the set, so
	// the service still sees a replica set and uses transactions.
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	u.RawQuery = url.Values{"directConnection": {"true"}}.Encode()
	t.Logf("replica set at %s", u)

	args := []string{"-test.count=1", "-test.timeout=25m"}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "MONGODB_URI="+u.String(), "OUTREACH_WRITE_MODE=transaction")
	out, err := cmd.CombinedOutput()
	t.Logf("tests on the replica set (write mode transaction):\n%s", out)
	if err != nil {
		t.Fatalf("tests on the replica set failed: %v", err)
	}
}

// dockerEngine reports why no Docker engine can run containers, or nil.
// It answers at once when there is none (the docker CLI alone is not enough).
func dockerEngine() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("docker client: %v", r)
		}
	}()
	p, err := testcontainers.ProviderDocker.GetProvider()
	if err != nil {
		return err
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Health(ctx)
}
