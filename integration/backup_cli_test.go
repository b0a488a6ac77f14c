package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/backup"
	"outreach/embedded"
	"outreach/ledger"
	"outreach/repo"
)

// TestBackupCommandsThroughServer takes a backup with the command line
// while the server runs (the server does it: its log names the command),
// kills the server in the middle of a second one, and restores the first
// into an empty store, which then serves the same admin key.
func TestBackupCommandsThroughServer(t *testing.T) {
	targetURI := os.Getenv("MONGODB_URI")
	t.Setenv("MONGODB_URI", "")
	data, to := dataDir(t), t.TempDir()
	srv := startServer(t, data)
	key := srv.FirstKey
	c := mustDial(t, srv.URL, key)
	var outlet struct{ ID string }
	c.must(t, "create_outlet", M{"name": "Daily Planet"}, &outlet)
	for i := range 40 {
		c.must(t, "create_note", M{"title": fmt.Sprint("note ", i), "content": strings.Repeat("text ", 200), "outlet_ids": []string{outlet.ID}}, nil)
	}
	out := mustCLI(t, "backup", "--data", data, "--to", to)
	if !strings.Contains(out, "backup at counter") || !strings.Contains(srv.stderr.String(), `"command":"backup"`) {
		t.Fatalf("backup: %q; the server's log: %s", out, srv.stderr)
	}
	if out := mustCLI(t, "backup", "verify", to); !strings.Contains(out, ": ok, counter") {
		t.Errorf("backup verify: %q", out)
	}
	if out := mustCLI(t, "backup", "list", to); !strings.Contains(out, "complete") {
		t.Errorf("backup list: %q", out)
	}

	// kill -9 while a backup is written: nothing that looks complete is left.
	killed := t.TempDir()
	go runCLI(t, "backup", "--data", data, "--to", killed)
	for deadline := time.Now().Add(time.Minute); ; {
		if ms, _ := filepath.Glob(filepath.Join(killed, "backup-*")); len(ms) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	srv.kill()
	list, err := backup.List(killed)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the kill: %d backup directories, %d unfinished", len(list), countUnfinished(list))
	for _, e := range list {
		if e.Complete {
			if _, err := backup.Check(e.Dir); err != nil {
				t.Errorf("a killed backup left %s with a manifest that does not verify: %v", e.Dir, err)
			}
		}
	}
	srv = startServer(t, data)
	mustCLI(t, "backup", "--data", data, "--to", killed)
	list, _ = backup.List(killed)
	if len(list) != 1 || !list[0].Complete {
		t.Errorf("after a backup following the kill: %+v, want one complete backup", list)
	}

	// Restore the first backup into an empty store.
	t.Setenv("MONGODB_URI", targetURI)
	data2 := dataDir(t)
	if out := mustCLI(t, "restore", to, "--data", data2); !strings.Contains(out, "verify: clean") {
		t.Errorf("restore: %q", out)
	}
	_, errOut, err := runCLI(t, "restore", to, "--data", data2)
	if err == nil || !strings.Contains(errOut, "not empty") || !strings.Contains(errOut, "notes (40 documents)") {
		t.Errorf("a second restore: %v %s", err, errOut)
	}
	srv2 := startServer(t, data2)
	if srv2.FirstKey != "" {
		t.Errorf("the restored store printed a first key: it was not seen as restored")
	}
	var page struct {
		Total int `json:"total"`
	}
	mustDial(t, srv2.URL, key).must(t, "list_notes", M{"outlet_id": outlet.ID}, &page)
	if page.Total != 40 {
		t.Errorf("notes after the restore: %d, want 40", page.Total)
	}
}

// TestIncompleteRestoreRefused leaves a restore unfinished in a data
// directory: serve and a second restore refuse it, saying why.
func TestIncompleteRestoreRefused(t *testing.T) {
	t.Setenv("MONGODB_URI", "")
	data := dataDir(t)
	ctx := context.Background()
	es, err := embedded.Start(ctx, embedded.Options{Dir: data})
	if err != nil {
		t.Fatal(err)
	}
	store, err := repo.Open(ctx, es.URI, strings.ReplaceAll(filepath.Base(data), "-", "_"), repo.Options{Exclusive: true, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.BeginRestore(ctx, "/backups/backup-x", 7); err != nil {
		t.Fatal(err)
	}
	store.Close(ctx)
	es.Close()
	for _, args := range [][]string{{"serve", "--data", data, "--addr", "127.0.0.1:0"}, {"restore", t.TempDir(), "--data", data}, {"keys", "list", "--data", data}} {
		_, errOut, err := runCLI(t, args...)
		if err == nil || !strings.Contains(errOut, "did not finish") && !strings.Contains(errOut, "no complete backup") {
			t.Errorf("outreach %s on a store whose restore did not finish: %v\n%s", args[0], err, errOut)
		}
		if args[0] != "restore" && !strings.Contains(errOut, "/backups/backup-x") {
			t.Errorf("outreach %s: the refusal does not name the backup: %s", args[0], errOut)
		}
	}
}

func countUnfinished(list []backup.Entry) int {
	n := 0
	for _, e := range list {
		if !e.Complete {
			n++
		}
	}
	return n
}

// TestBackupWithSecrets carries the data directory's key files in a
// backup, encrypted: no file of the backup holds them in the clear, a
// wrong passphrase is refused before the target store is touched, the
// right one puts them into the restored data directory.
func TestBackupWithSecrets(t *testing.T) {
	t.Setenv("MONGODB_URI", "")
	data, to := dataDir(t), t.TempDir()
	key := strings.TrimSpace(mustCLI(t, "keys", "create", "--data", data, "--name", "agent"))
	signing, err := os.ReadFile(filepath.Join(data, "media-url.key"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OUTREACH_BACKUP_PASSPHRASE", "short")
	if _, errOut, err := runCLI(t, "backup", "--data", data, "--to", to, "--with-secrets"); err == nil || !strings.Contains(errOut, "at least 12") {
		t.Errorf("a short passphrase: %v %s", err, errOut)
	}
	t.Setenv("OUTREACH_BACKUP_PASSPHRASE", "correct horse battery staple")
	if out := mustCLI(t, "backup", "--data", data, "--to", to, "--with-secrets"); !strings.Contains(out, "media-url.key") {
		t.Errorf("backup --with-secrets: %q", out)
	}
	filepath.Walk(to, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			b, _ := os.ReadFile(p)
			if bytes.Contains(b, signing) || strings.Contains(string(b), key) {
				t.Errorf("%s holds a secret in the clear", p)
			}
		}
		return nil
	})
	mustCLI(t, "backup", "verify", to)

	data2 := dataDir(t)
	t.Setenv("OUTREACH_BACKUP_PASSPHRASE", "not the passphrase at all")
	if _, errOut, err := runCLI(t, "restore", to, "--data", data2, "--with-secrets"); err == nil || !strings.Contains(errOut, "wrong passphrase") {
		t.Errorf("restore with a wrong passphrase: %v %s", err, errOut)
	}
	t.Setenv("OUTREACH_BACKUP_PASSPHRASE", "correct horse battery staple")
	mustCLI(t, "restore", to, "--data", data2, "--with-secrets")
	if got, err := os.ReadFile(filepath.Join(data2, "media-url.key")); err != nil || !bytes.Equal(got, signing) {
		t.Errorf("the restored signing key differs from the source's: %v", err)
	}
	if out := mustCLI(t, "keys", "list", "--data", data2); !strings.Contains(out, `"name":"agent"`) {
		t.Errorf("keys after the restore: %s", out)
	}
}

// TestNewerStoreFormatRefused: a store whose recorded format is newer than
// the binary's is refused at start and by every command, naming both.
func TestNewerStoreFormatRefused(t *testing.T) {
	t.Setenv("MONGODB_URI", "")
	data := dataDir(t)
	mustCLI(t, "keys", "list", "--data", data) // the first start records the format
	withStoreInfo(t, data, func(ctx context.Context, coll *mongo.Collection) error {
		// A later binary's store, as that binary would have recorded it.
		_, err := coll.UpdateOne(ctx, bson.M{"_id": "format"}, bson.M{"$set": bson.M{"format": ledger.StoreFormat + 1}})
		return err
	})
	for _, args := range [][]string{{"serve", "--data", data, "--addr", "127.0.0.1:0"}, {"keys", "list", "--data", data}} {
		_, errOut, err := runCLI(t, args...)
		want := fmt.Sprintf("store format %d, this binary knows formats up to %d", ledger.StoreFormat+1, ledger.StoreFormat)
		if err == nil || !strings.Contains(errOut, want) {
			t.Errorf("outreach %s on a newer store: %v\n%s", args[0], err, errOut)
		}
	}
}

// TestStoreFormatUpgradeBackup: a start on a store of an older format
// (records, no format recorded: made before formats were) takes a backup
// into DATA/backups first and says so; a backup that fails refuses the
// start and leaves the format as it was; an empty store and a store already
// upgraded take none.
func TestStoreFormatUpgradeBackup(t *testing.T) {
	t.Setenv("MONGODB_URI", "")
	data := dataDir(t)
	backups := filepath.Join(data, "backups")
	srv := startServer(t, data) // an empty store: nothing to back up
	if srv.FirstKey == "" {
		t.Fatalf("the first start printed no key:\n%s", srv.stdout)
	}
	srv.term(time.Minute)
	if _, err := os.Stat(backups); !os.IsNotExist(err) {
		t.Errorf("the first start on an empty store made %s: %v", backups, err)
	}
	if f, ok := storeFormat(t, data, false); !ok || f != ledger.StoreFormat {
		t.Fatalf("after the first start: format %d (recorded %v), want %d", f, ok, ledger.StoreFormat)
	}
	storeFormat(t, data, true) // as a binary before formats were recorded left it

	// A target that refuses the backup: the start is refused, the format stays.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := runCLI(t, "serve", "--data", data, "--addr", "127.0.0.1:0", "--backup-to", filepath.Join(file, "backups"))
	if err == nil || !strings.Contains(errOut, "upgrading the store from format 0 to 1") || !strings.Contains(errOut, "left in format 0") {
		t.Errorf("serve with a failing backup target: %v\n%s", err, errOut)
	}
	if f, ok := storeFormat(t, data, false); ok {
		t.Fatalf("a refused upgrade recorded format %d", f)
	}

	srv = startServer(t, data)
	list, err := backup.List(backups)
	if err != nil || len(list) != 1 || !list[0].Complete {
		t.Fatalf("backups after the upgrade: %+v %v, want one complete", list, err)
	}
	want := fmt.Sprintf("upgrading the store from format 0 to %d: backup taken first into %s", ledger.StoreFormat, list[0].Dir)
	if !strings.Contains(srv.stdout.String(), want) {
		t.Errorf("serve's output does not say %q:\n%s", want, srv.stdout)
	}
	if !strings.Contains(srv.stderr.String(), `"message":"store format upgrade: backup taken first"`) || !strings.Contains(srv.stderr.String(), list[0].Dir) {
		t.Errorf("serve's log has no line naming the backup:\n%s", srv.stderr)
	}
	m, err := backup.Check(list[0].Dir)
	if err != nil {
		t.Fatalf("the upgrade's backup: %v", err)
	}
	if m.StoreFormat != 0 || m.Counter == 0 {
		t.Errorf("the upgrade's backup: store format %d at counter %d, want format 0 and the store's changes", m.StoreFormat, m.Counter)
	}
	srv.term(time.Minute)
	if f, ok := storeFormat(t, data, false); !ok || f != ledger.StoreFormat {
		t.Fatalf("after the upgrade: format %d (recorded %v), want %d", f, ok, ledger.StoreFormat)
	}

	srv = startServer(t, data) // upgraded: no second backup
	srv.term(time.Minute)
	if list, _ := backup.List(backups); len(list) != 1 || strings.Contains(srv.stdout.String(), "upgrading") {
		t.Errorf("a start on an upgraded store: %d backups, output:\n%s", len(list), srv.stdout)
	}
}

// storeFormat reads the format recorded in the store on data (ok false:
// none), and with remove deletes it.
func storeFormat(t *testing.T, data string, remove bool) (format int, ok bool) {
	t.Helper()
	withStoreInfo(t, data, func(ctx context.Context, coll *mongo.Collection) error {
		if remove {
			_, err := coll.DeleteOne(ctx, bson.M{"_id": "format"})
			return err
		}
		var in struct{ Format int }
		err := coll.FindOne(ctx, bson.M{"_id": "format"}).Decode(&in)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil
		}
		format, ok = in.Format, err == nil
		return err
	})
	return format, ok
}

// withStoreInfo runs fn on the store_info collection of the stopped store
// on data.
func withStoreInfo(t *testing.T, data string, fn func(context.Context, *mongo.Collection) error) {
	t.Helper()
	ctx := context.Background()
	es, err := embedded.Start(ctx, embedded.Options{Dir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	client, err := mongo.Connect(options.Client().ApplyURI(es.URI))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(ctx)
	if err := fn(ctx, client.Database(strings.ReplaceAll(filepath.Base(data), "-", "_")).Collection(ledger.CollStoreInfo)); err != nil {
		t.Fatal(err)
	}
}
