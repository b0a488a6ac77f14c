package backup

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger"
)

// Options configure Create.
type Options struct {
	// ServiceVersion is written into the manifest.
	ServiceVersion string
	// Secrets, when set, adds the data directory's key files, encrypted
	// (secrets.go); without it they are left out.
	Secrets *Secrets
}

// running serialises the backups of this process: two at once would only
// double the reads.
var running sync.Mutex

// What a backup leaves out, and what a restore needs besides it.
var (
	leftOut = []string{
		"the key files of the data directory (media-url.key, the media URL signing secret; mailbox.key, the key of the team mailbox's refresh token; the ACME account and certificates): secrets, in a copy only with --with-secrets, encrypted",
		"the write path's bookkeeping (write_intents, plans, plan_steps) and the capability probes' scratch collection: settled at the copy's counter",
		"idempotency claims of calls made after the copy's counter, and GridFS chunks of uploads that never completed",
	}
	restoreNeeds = []string{
		"a media URL signing secret (a new one is made at the first start, or set OUTREACH_MEDIA_SIGNING_KEY_FILE): URLs signed before the restore stop working, they live minutes",
		"agent keys and sign-ins created after the copy's counter and restored from shipped changes have no verifier (it never enters the change log): create them again",
	}
)

// Create copies the store into a new backup directory under to and returns
// its manifest. It runs while the store serves.
func Create(ctx context.Context, eng *ledger.Engine, to string, opts Options) (m *Manifest, err error) {
	running.Lock()
	defer running.Unlock()
	if _, err := targetFor(to); err != nil {
		return nil, err
	}
	if err := removeUnfinished(ctx, to); err != nil {
		return nil, err
	}
	if opts.Secrets != nil && len(opts.Secrets.Passphrase) < MinPassphrase {
		return nil, fmt.Errorf("--with-secrets: the passphrase (OUTREACH_BACKUP_PASSPHRASE) is %d characters; give at least %d", len(opts.Secrets.Passphrase), MinPassphrase)
	}
	started := time.Now()
	counter, fixedAt, err := eng.FixPoint(ctx)
	if err != nil {
		return nil, fmt.Errorf("fixing the copy's counter: %w", err)
	}
	paused := time.Since(started)
	db := eng.Database().Name()
	dir := join(to, backupName(fixedAt, counter))
	defer func() {
		if err != nil {
			// Nothing of a failed backup stays (a killed one is removed by the next).
			removeAllAt(context.WithoutCancel(ctx), dir)
		}
	}()
	// The copy reads whole collections: the store client's bound of one
	// operation (which bounds a cursor's whole life too) would cut a large
	// one short, so the copy's reads get a bound of their own.
	copyCtx, cancel := context.WithTimeout(ctx, ledger.WholeReadBound)
	defer cancel()
	c := &copier{ctx: copyCtx, eng: eng, dir: dir, db: db, counter: counter, fixedAt: fixedAt, lastApplied: map[string]string{}}
	m = &Manifest{Format: FormatName, FormatVersion: FormatVersion, ServiceVersion: opts.ServiceVersion, StoreFormat: eng.Format(),
		Database: db, Counter: counter, FixedAt: fixedAt, WritesPausedMS: float64(paused.Microseconds()) / 1000,
		LeftOut: leftOut, RestoreNeeds: restoreNeeds}
	names, err := eng.Database().ListCollectionNames(ctx, bson.M{})
	if err != nil {
		return nil, err
	}
	for _, coll := range copyOrder(names, eng.RecordCollections()) {
		n, err := c.collection(coll)
		if err != nil {
			return nil, fmt.Errorf("backup of %s: %w", coll, err)
		}
		m.Collections = append(m.Collections, Collection{Name: coll, Count: n})
	}
	if opts.Secrets != nil {
		f, names, err := sealSecrets(ctx, dir, *opts.Secrets)
		if err != nil {
			return nil, err
		}
		c.files = append(c.files, f)
		m.Secrets = names
		m.LeftOut = m.LeftOut[1:]
		m.RestoreNeeds = append([]string{"the passphrase of " + SecretsFile + " (restore --with-secrets) for the key files it holds"}, m.RestoreNeeds[1:]...)
	}
	m.Files = c.files
	m.FinishedAt = time.Now().UTC()
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if _, err := writeFile(ctx, join(dir, ManifestFile), func(w io.Writer) error { _, err := w.Write(raw); return err }); err != nil {
		return nil, err
	}
	syncDir(dir)
	return m, nil
}

// copyOrder is the order collections are copied and restored in: the
// change log first (the records' copies are checked against it), then the
// records, then the rest, media files before their chunks.
func copyOrder(names, records []string) []string {
	var out, rest []string
	has := map[string]bool{}
	for _, n := range names {
		has[n] = ledger.BackedUp(n)
	}
	if has[ledger.CollChangeLog] {
		out = append(out, ledger.CollChangeLog)
	}
	for _, r := range records {
		if has[r] {
			out = append(out, r)
		}
	}
	for _, n := range names {
		if has[n] && !slices.Contains(out, n) {
			rest = append(rest, n)
		}
	}
	slices.Sort(rest)
	// fs.files before fs.chunks: the chunks copied are those of the files copied.
	if i, j := slices.Index(rest, ledger.CollChunks), slices.Index(rest, ledger.CollFiles); i >= 0 && j > i {
		rest[i], rest[j] = rest[j], rest[i]
	}
	return append(out, rest...)
}

// removeUnfinished removes what a backup stopped midway left in to: backup
// directories without a manifest.
func removeUnfinished(ctx context.Context, to string) error {
	list, err := List(to)
	if err != nil {
		return err
	}
	for _, e := range list {
		if !e.Complete {
			if err := removeAllAt(ctx, e.Dir); err != nil {
				return fmt.Errorf("removing the unfinished backup %s: %w", e.Dir, err)
			}
		}
	}
	return nil
}

// copier copies the collections of one backup.
type copier struct {
	ctx     context.Context
	eng     *ledger.Engine
	dir, db string
	counter int64
	fixedAt time.Time
	files   []File
	// lastApplied: coll/id -> the last applied change entry up to the
	// counter, filled while the change log is copied.
	lastApplied map[string]string
	// fileIDs are the media files copied (fs.files), whose chunks are copied.
	fileIDs map[string]bool
}

func (c *copier) collection(coll string) (int64, error) {
	ctx := c.ctx
	var n int64
	records := slices.Contains(c.eng.RecordCollections(), coll)
	filter := bson.M{}
	var opts []options.Lister[options.FindOptions]
	var skipClaims map[string]bool
	switch {
	case coll == ledger.CollChangeLog:
		return c.changeLog()
	case coll == ledger.CollIdempotency:
		var err error
		if skipClaims, err = c.claimsAfter(); err != nil {
			return 0, err
		}
	case coll == ledger.CollFiles:
		c.fileIDs = map[string]bool{}
	}
	cur, err := c.eng.Collection(coll).Find(ctx, filter, opts...)
	if err != nil {
		return 0, err
	}
	defer cur.Close(ctx)
	seen := map[string]bool{}
	f, err := writeFile(ctx, join(c.dir, dataPath(c.db, coll)), func(w io.Writer) error {
		put := func(doc []byte) error {
			n++
			_, err := w.Write(doc)
			return err
		}
		for cur.Next(ctx) {
			raw := cur.Current
			id := raw.Lookup("_id").String()
			switch {
			case records:
				doc, err := c.recordAt(coll, raw)
				if err != nil {
					return err
				}
				seen[coll+"/"+recordID(raw)] = true
				if doc == nil {
					continue // made after the counter
				}
				raw = doc
			case coll == ledger.CollCounters && raw.Lookup("_id").StringValue() == ledger.CollChangeLog:
				raw, _ = bson.Marshal(bson.D{{Key: "_id", Value: ledger.CollChangeLog}, {Key: "seq", Value: c.counter}})
			case coll == ledger.CollIdempotency:
				var claim ledger.Idempotency
				if err := bson.Unmarshal(raw, &claim); err != nil {
					return fmt.Errorf("idempotency claim %s: %w", id, err)
				}
				if skipClaims[claim.ID] || claim.CreatedAt.After(c.fixedAt) {
					continue
				}
			case coll == ledger.CollFiles:
				c.fileIDs[id] = true
			case coll == ledger.CollChunks:
				if !c.fileIDs[raw.Lookup("files_id").String()] {
					continue // an upload that never completed (or began after the copy's files)
				}
			}
			if err := put(raw); err != nil {
				return err
			}
		}
		if err := cur.Err(); err != nil {
			return err
		}
		if records {
			// A record the change log has at the counter but the copy did not
			// see (none is ever deleted: a guard, not an expected case).
			for k, entryID := range c.lastApplied {
				if !strings.HasPrefix(k, coll+"/") || seen[k] {
					continue
				}
				doc, err := c.fromEntry(entryID, nil)
				if err != nil {
					return err
				}
				if err := put(doc); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	c.files = append(c.files, f)
	meta, err := c.metadata(coll)
	if err != nil {
		return 0, err
	}
	c.files = append(c.files, meta)
	return n, nil
}

// changeLog copies the change log up to the counter in seq order, a batch
// of entries at a time (Engine.ChangesInOrder), noting each record's last
// applied entry.
func (c *copier) changeLog() (int64, error) {
	coll := ledger.CollChangeLog
	var n int64
	f, err := writeFile(c.ctx, join(c.dir, dataPath(c.db, coll)), func(w io.Writer) error {
		return c.eng.ChangesInOrder(c.ctx, math.MinInt64, c.counter, func(raw bson.Raw) error {
			var e struct {
				ID         string `bson:"_id"`
				Collection string `bson:"collection"`
				RecordID   string `bson:"record_id"`
				State      string `bson:"state"`
			}
			if err := bson.Unmarshal(raw, &e); err != nil {
				return fmt.Errorf("change entry %s: %w", raw.Lookup("_id"), err)
			}
			if e.State == audit.StatePending {
				return fmt.Errorf("change entry %s is pending below the copy's counter", e.ID)
			}
			if e.State == audit.StateApplied {
				c.lastApplied[e.Collection+"/"+e.RecordID] = e.ID
			}
			n++
			_, err := w.Write(raw)
			return err
		})
	})
	if err != nil {
		return 0, err
	}
	c.files = append(c.files, f)
	meta, err := c.metadata(coll)
	if err != nil {
		return 0, err
	}
	c.files = append(c.files, meta)
	return n, nil
}

func recordID(raw bson.Raw) string {
	if s, ok := raw.Lookup("_id").StringValueOK(); ok {
		return s
	}
	return raw.Lookup("_id").String()
}

// recordAt is raw as it stood at the copy's counter: as stored when its last
// change is the last one up to the counter, else rebuilt from that entry;
// nil when the record was made after the counter.
func (c *copier) recordAt(coll string, raw bson.Raw) (bson.Raw, error) {
	want := c.lastApplied[coll+"/"+recordID(raw)]
	lc, _ := raw.Lookup(ledger.FieldLastChange).StringValueOK()
	_, locked := raw.Lookup(ledger.FieldLockedBy).StringValueOK()
	if want == "" {
		return nil, nil
	}
	if lc == want && !locked {
		return raw, nil
	}
	var cur bson.M
	if err := bson.Unmarshal(raw, &cur); err != nil {
		return nil, fmt.Errorf("%s/%s: %w", coll, recordID(raw), err)
	}
	return c.fromEntry(want, cur)
}

// fromEntry rebuilds the record the entry entryID left, with the redacted
// fields of cur.
func (c *copier) fromEntry(entryID string, cur bson.M) (bson.Raw, error) {
	var e audit.Entry
	if err := c.eng.Collection(ledger.CollChangeLog).FindOne(c.ctx, bson.M{"_id": entryID}).Decode(&e); err != nil {
		return nil, fmt.Errorf("change entry %s: %w", entryID, err)
	}
	return bson.Marshal(c.eng.StateAt(e, cur))
}

// claimsAfter names the idempotency claims whose calls wrote changes after
// the counter: a retry of such a call must run again on a restored store.
func (c *copier) claimsAfter() (map[string]bool, error) {
	cur, err := c.eng.Collection(ledger.CollChangeLog).Find(c.ctx, bson.M{"seq": bson.M{"$gt": c.counter}, "idempotency_key": bson.M{"$exists": true}},
		options.Find().SetProjection(bson.M{"idempotency_key": 1}))
	if err != nil {
		return nil, err
	}
	defer cur.Close(c.ctx)
	out := map[string]bool{}
	for cur.Next(c.ctx) {
		tag, _ := cur.Current.Lookup("idempotency_key").StringValueOK()
		if i := strings.LastIndex(tag, "#"); i > 0 {
			out[tag[:i]] = true
		}
	}
	return out, cur.Err()
}

// metadata writes coll's metadata file as mongodump does: its indexes and
// options, in canonical extended JSON.
func (c *copier) metadata(coll string) (File, error) {
	cur, err := c.eng.Collection(coll).Indexes().List(c.ctx)
	if err != nil {
		return File{}, err
	}
	var idx []bson.D
	if err := cur.All(c.ctx, &idx); err != nil {
		return File{}, err
	}
	doc := bson.D{{Key: "indexes", Value: idx}, {Key: "uuid", Value: ""}, {Key: "collectionName", Value: coll},
		{Key: "type", Value: "collection"}, {Key: "options", Value: bson.D{}}}
	js, err := bson.MarshalExtJSON(doc, true, false)
	if err != nil {
		return File{}, err
	}
	return writeGzip(c.ctx, join(c.dir, metaPath(c.db, coll)), c.dir, func(w io.Writer) error { _, err := w.Write(js); return err })
}

// writeFile writes path on its target (a directory: under a temporary
// name renamed once synced); fill writes the content (gzip-compressed for
// .gz paths). The file's path in the manifest is relative to the backup.
func writeFile(ctx context.Context, path string, fill func(io.Writer) error) (File, error) {
	under := parent(parent(path))
	if base(path) == ManifestFile {
		under = parent(path)
	}
	if strings.HasSuffix(path, ".gz") {
		return writeGzip(ctx, path, under, fill)
	}
	return writeRaw(ctx, path, under, fill)
}

func writeGzip(ctx context.Context, path, base string, fill func(io.Writer) error) (File, error) {
	return writeRaw(ctx, path, base, func(w io.Writer) error { return writeGzipTo(w, fill) })
}

// writeGzipTo writes what fill writes to w, gzip-compressed.
func writeGzipTo(w io.Writer, fill func(io.Writer) error) error {
	zw := gzip.NewWriter(w)
	if err := fill(zw); err != nil {
		return err
	}
	return zw.Close()
}

// writeRaw writes path on its target and returns it as a File, its path
// relative to base.
func writeRaw(ctx context.Context, path, base string, fill func(io.Writer) error) (File, error) {
	t, err := targetFor(path)
	if err != nil {
		return File{}, err
	}
	n, sum, err := t.create(ctx, path, fill)
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	return File{Path: rel(base, path), Bytes: n, SHA256: sum}, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// syncDir makes the renames in dir durable (best effort: not every
// filesystem syncs a directory; an object store has nothing to sync).
func syncDir(dir string) {
	if IsS3(dir) {
		return
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
