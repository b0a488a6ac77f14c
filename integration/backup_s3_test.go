package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"outreach/backup"
	"outreach/integration/testenv"
	"outreach/ledger"
)

const (
	s3TestKeyID  = "outreach-test"
	s3TestSecret = "outreach-test-secret-never-written"
)

// startS3 runs an S3-compatible server for the test (gofakes3 over memory,
// in a process of its own built from backup/testdata/s3server, a module
// of its own), points the backup package at it through the environment,
// and returns a client of its bucket "backups" for the test's own looks.
func startS3(t *testing.T) *minio.Client {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "s3server")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "backup", "testdata", "s3server")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the S3 server: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-bucket", "backups")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close() // the server ends when its input closes
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the S3 server said nothing: %v", err)
	}
	endpoint := strings.TrimSpace(line)
	t.Setenv("OUTREACH_BACKUP_S3_ENDPOINT", endpoint)
	t.Setenv("OUTREACH_BACKUP_S3_ACCESS_KEY_ID", s3TestKeyID)
	t.Setenv("OUTREACH_BACKUP_S3_SECRET_ACCESS_KEY", s3TestSecret)
	t.Setenv("OUTREACH_BACKUP_S3_REGION", "us-east-1")
	u, _ := url.Parse(endpoint)
	c, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(s3TestKeyID, s3TestSecret, ""), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestBackupS3RoundTrip takes a backup to an S3 bucket while 8 clients
// write, ships the changes after it there, verifies it and restores it
// into an empty store: every record, change entry and media byte equal.
// A backup stopped before its manifest is ignored and removed by the
// next; a truncated or altered object is refused, naming it; the key is in
// no object written.
func TestBackupS3RoundTrip(t *testing.T) {
	t.Setenv("MONGODB_URI", "")
	s3c := startS3(t)
	ctx := context.Background()
	to := "s3://backups/team/outreach"
	src := testenv.New(t)

	// What a backup killed before its manifest leaves: objects, no manifest.
	stale := "team/outreach/backup-20260101T000000.000Z-000000000001/outreach/notes.bson.gz"
	if _, err := s3c.PutObject(ctx, "backups", stale, strings.NewReader("partial"), 7, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if list, err := backup.List(to); err != nil || len(list) != 1 || list[0].Complete {
		t.Fatalf("list with a stopped backup: %+v %v", list, err)
	}
	if _, err := backup.Restore(ctx, testenv.OpenStore(t, testenv.Options{}).Engine, to, backup.Target{}); err == nil || !strings.Contains(err.Error(), "no complete backup") {
		t.Errorf("restore from a stopped backup only: %v", err)
	}

	var base *backup.Manifest
	workload(t, src, 6, func() {
		m, err := backup.Create(ctx, src.Store.Engine, to, backup.Options{ServiceVersion: "test"})
		if err != nil {
			t.Error(err)
			return
		}
		base = m
	})
	if base == nil {
		t.Fatal("no backup")
	}
	upto, seg, err := backup.Ship(ctx, src.Store.Engine, to, base.Counter)
	if err != nil || seg == nil {
		t.Fatalf("ship after %d: %+v %v", base.Counter, seg, err)
	}
	list, err := backup.List(to)
	if err != nil || len(list) != 1 || !list[0].Complete || !strings.HasPrefix(list[0].Dir, to+"/backup-") {
		t.Fatalf("list after the backup (the stopped one removed): %+v %v", list, err)
	}
	lines, err := backup.CheckAll(to)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 {
		t.Errorf("verify: %q, want the backup and the segment", lines)
	}

	// The key is in no object.
	for o := range s3c.ListObjects(ctx, "backups", minio.ListObjectsOptions{Recursive: true}) {
		if !strings.HasSuffix(o.Key, ".json") {
			continue
		}
		r, err := s3c.GetObject(ctx, "backups", o.Key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r)
		if bytes.Contains(b, []byte(s3TestSecret)) || bytes.Contains(b, []byte(s3TestKeyID)) {
			t.Errorf("%s holds the S3 key", o.Key)
		}
	}

	dst := testenv.OpenStore(t, testenv.Options{})
	res, err := backup.Restore(ctx, dst.Engine, to, backup.Target{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Counter != upto || res.Replayed != int(seg.Count) {
		t.Errorf("restored to %d with %d changes replayed, want %d and %d", res.Counter, res.Replayed, upto, seg.Count)
	}
	skip := []string{ledger.CollSessions, ledger.CollKeyUsage, ledger.CollIdempotency}
	if diff := cmp.Diff(dump(t, dst.Engine, skip...), dump(t, src.Store.Engine, skip...)); diff != "" {
		t.Errorf("restored store differs from the source (-got +want):\n%s", diff)
	}

	// Damage, object by object: verify and restore refuse it, naming it.
	notes := strings.TrimPrefix(list[0].Dir, "s3://backups/") + "/" + base.Database + "/notes.bson.gz"
	orig := getObject(t, s3c, notes)
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"truncated", orig[:len(orig)-10], "bytes, the manifest says"},
		{"altered", append(append([]byte{}, orig[:len(orig)-1]...), orig[len(orig)-1]^0xff), "SHA-256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			putObject(t, s3c, notes, tc.body)
			defer putObject(t, s3c, notes, orig)
			_, err := backup.CheckAll(to)
			if err == nil || !strings.Contains(err.Error(), "s3://backups/"+notes) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("verify: %v; want an error naming %s and %q", err, notes, tc.want)
			}
			_, err = backup.Restore(ctx, testenv.OpenStore(t, testenv.Options{}).Engine, to, backup.Target{})
			if err == nil || !strings.Contains(err.Error(), "notes.bson.gz") {
				t.Errorf("restore: %v; want an error naming notes.bson.gz", err)
			}
		})
	}
}

func getObject(t *testing.T, c *minio.Client, key string) []byte {
	t.Helper()
	r, err := c.GetObject(context.Background(), "backups", key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(fmt.Errorf("%s: %w", key, err))
	}
	return b
}

func putObject(t *testing.T, c *minio.Client, key string, b []byte) {
	t.Helper()
	if _, err := c.PutObject(context.Background(), "backups", key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}
