package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger"
)

// Change shipping: the change entries written after the last backup go to
// the same target as segments, files under changes/ each holding the
// entries after one counter up to another, in seq order. A segment is
// written under a temporary name and renamed, then its description (a
// JSON file beside it: the counters it spans, its count, its SHA-256) is
// written the same way; a segment without its description is not one.
// Each segment starts where the one before it ended, so a missing, added
// or reordered segment breaks the chain and is named.

// ChangesDir is the segments' directory in a backup target.
const ChangesDir = "changes"

// Segment describes one segment.
type Segment struct {
	// Path is the segment's file; After and Upto the counters it spans:
	// every entry with a seq above After and up to Upto.
	Path   string `json:"-"`
	File   string `json:"file"`
	After  int64  `json:"after"`
	Upto   int64  `json:"upto"`
	Count  int64  `json:"count"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	// FirstAt and LastAt are when its first and last entries were written.
	FirstAt time.Time `json:"first_at"`
	LastAt  time.Time `json:"last_at"`
	// Files holds the media bytes uploaded since the previous segment
	// (their fs.files and fs.chunks documents: bytes have no change entry),
	// FilesThrough the latest upload it holds.
	Files        *File     `json:"files,omitempty"`
	FilesPath    string    `json:"-"`
	FilesThrough time.Time `json:"files_through"`
}

// blobMargin is how far before the previous segment's latest upload the
// next looks again: an upload is dated before its file document lands.
const blobMargin = time.Minute

var segmentRE = regexp.MustCompile(`^changes-(\d{12,})-(\d{12,})\.json$`)

func segmentName(after, upto int64) string { return fmt.Sprintf("changes-%012d-%012d", after, upto) }

// Segments reads and checks the chain of segments in the target to, in
// order; an error names the segment at fault.
func Segments(to string) ([]Segment, error) {
	dir := join(to, ChangesDir)
	names, err := listAt(context.Background(), dir, false)
	if err != nil {
		return nil, err
	}
	var out []Segment
	for _, name := range names {
		if !segmentRE.MatchString(name) {
			continue
		}
		desc := join(dir, name)
		raw, err := readAll(context.Background(), desc)
		if err != nil {
			return nil, err
		}
		var s Segment
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("%s: %w", desc, err)
		}
		if want := segmentName(s.After, s.Upto) + ".bson.gz"; s.File != want || name != segmentName(s.After, s.Upto)+".json" {
			return nil, fmt.Errorf("%s: describes %s after %d up to %d: renamed or altered", desc, s.File, s.After, s.Upto)
		}
		s.Path = join(dir, s.File)
		if err := checkFile(s.Path, File{Bytes: s.Bytes, SHA256: s.SHA256}); err != nil {
			return nil, err
		}
		if err := checkSegmentEntries(s, nil); err != nil {
			return nil, err
		}
		if s.Files != nil {
			if s.Files.Path != segmentName(s.After, s.Upto)+".files.bson.gz" {
				return nil, fmt.Errorf("%s: names media file %s: renamed or altered", desc, s.Files.Path)
			}
			s.FilesPath = join(dir, s.Files.Path)
			if err := checkFile(s.FilesPath, *s.Files); err != nil {
				return nil, err
			}
			if err := readDocs(s.FilesPath, func(bson.Raw) error { return nil }); err != nil {
				return nil, err
			}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Segment) int { return int(max(-1, min(1, a.After-b.After))) })
	for i := 1; i < len(out); i++ {
		switch prev := out[i-1]; {
		case out[i].After > prev.Upto:
			return nil, fmt.Errorf("%s: follows changes up to %d, but starts after %d: the changes between are missing", out[i].Path, prev.Upto, out[i].After)
		case out[i].After < prev.Upto:
			return nil, fmt.Errorf("%s: starts after %d, inside %s (up to %d): overlapping or reordered segments", out[i].Path, out[i].After, prev.Path, prev.Upto)
		}
	}
	return out, nil
}

// checkSegmentEntries reads a segment's entries: each a change entry, in
// increasing seq order within the segment's span, as many as it says; fn,
// when set, is given each.
func checkSegmentEntries(s Segment, fn func(audit.Entry) error) error {
	var n int64
	last := s.After
	err := readDocs(s.Path, func(raw bson.Raw) error {
		var e audit.Entry
		if err := bson.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("entry %d: %w", n+1, err)
		}
		n++
		if e.Seq <= last || e.Seq > s.Upto {
			return fmt.Errorf("entry %d has seq %d after %d: out of order or outside the segment's span (after %d up to %d)", n, e.Seq, last, s.After, s.Upto)
		}
		last = e.Seq
		if fn != nil {
			return fn(e)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", s.Path, err)
	}
	if n != s.Count {
		return fmt.Errorf("%s: %d entries, its description says %d", s.Path, n, s.Count)
	}
	return nil
}

// ErrPending: a change entry below the segment's counter was still being
// written when the segment was read; shipping again later ships it.
var ErrPending = errors.New("a change entry is still pending")

// Ship writes the change entries after the counter after, up to a counter
// fixed now, as one segment of the target to; it returns that counter
// (after itself when nothing was written since) and the segment, if any.
func Ship(ctx context.Context, eng *ledger.Engine, to string, after int64) (int64, *Segment, error) {
	since, err := filesSince(to, after)
	if err != nil {
		return after, nil, err
	}
	upto, _, err := eng.FixPoint(ctx)
	if err != nil {
		return after, nil, err
	}
	// A change still being written (pending) below the counter ends the
	// segment before it: the next one starts there once it has landed.
	pending, found, err := eng.FirstPending(ctx, after, upto)
	if err != nil {
		return after, nil, err
	}
	if found {
		upto = pending - 1
	}
	if upto <= after {
		return after, nil, nil
	}
	dir := join(to, ChangesDir)
	s := Segment{After: after, Upto: upto, File: segmentName(after, upto) + ".bson.gz"}
	s.Path = join(dir, s.File)
	f, err := writeRaw(ctx, s.Path, dir, func(w io.Writer) error {
		return writeGzipTo(w, func(zw io.Writer) error {
			// In seq order, a batch of entries at a time (the embedded
			// store would sort the whole log in memory).
			return eng.ChangesInOrder(ctx, after, upto, func(raw bson.Raw) error {
				var e audit.Entry
				if err := bson.Unmarshal(raw, &e); err != nil {
					return err
				}
				if e.State == audit.StatePending {
					return fmt.Errorf("%w: change entry %s below counter %d", ErrPending, e.ID, upto)
				}
				if s.Count == 0 {
					s.FirstAt = e.At
				}
				s.Count++
				s.LastAt = e.At
				_, err := zw.Write(raw)
				return err
			})
		})
	})
	if err != nil {
		return after, nil, err
	}
	if s.Count == 0 {
		// Only gaps in the seq numbers: the next segment spans them.
		removeAt(ctx, s.Path)
		return after, nil, nil
	}
	s.Bytes, s.SHA256 = f.Bytes, f.SHA256
	if err := shipFiles(ctx, eng, dir, &s, since); err != nil {
		removeAt(ctx, s.Path)
		return after, nil, err
	}
	desc, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return after, nil, err
	}
	if _, err := writeRaw(ctx, join(dir, segmentName(after, upto)+".json"), dir, func(w io.Writer) error { _, err := w.Write(desc); return err }); err != nil {
		removeAt(ctx, s.Path)
		return after, nil, err
	}
	syncDir(dir)
	return upto, &s, nil
}

// filesSince is the latest upload the chain before the segment after the
// counter after holds: the previous segment's, else the backup's time at
// that counter; zero (every file) when neither is found.
func filesSince(to string, after int64) (time.Time, error) {
	segs, err := Segments(to)
	if err != nil {
		return time.Time{}, err
	}
	if n := len(segs); n > 0 && segs[n-1].Upto == after {
		return segs[n-1].FilesThrough, nil
	}
	list, err := List(to)
	if err != nil {
		return time.Time{}, err
	}
	for _, e := range list {
		if e.Complete && e.Counter == after {
			return e.FixedAt, nil
		}
	}
	return time.Time{}, nil
}

// shipFiles writes beside segment s the media files uploaded since (less
// the margin) and their chunks.
func shipFiles(ctx context.Context, eng *ledger.Engine, dir string, s *Segment, since time.Time) error {
	filter := bson.M{}
	if !since.IsZero() {
		filter = bson.M{"uploadDate": bson.M{"$gt": since.Add(-blobMargin)}}
	}
	var files []bson.Raw
	cur, err := eng.Collection(ledger.CollFiles).Find(ctx, filter)
	if err != nil {
		return err
	}
	if err := cur.All(ctx, &files); err != nil {
		return err
	}
	s.FilesThrough = since
	if len(files) == 0 {
		return nil
	}
	name := segmentName(s.After, s.Upto) + ".files.bson.gz"
	s.FilesPath = join(dir, name)
	f, err := writeRaw(ctx, s.FilesPath, dir, func(w io.Writer) error {
		return writeGzipTo(w, func(zw io.Writer) error {
			for _, file := range files {
				if at, ok := file.Lookup("uploadDate").TimeOK(); ok && at.After(s.FilesThrough) {
					s.FilesThrough = at.UTC()
				}
				if _, err := zw.Write(file); err != nil {
					return err
				}
				chunks, err := eng.Collection(ledger.CollChunks).Find(ctx, bson.M{"files_id": file.Lookup("_id")}, options.Find().SetSort(bson.D{{Key: "n", Value: 1}}))
				if err != nil {
					return err
				}
				for chunks.Next(ctx) {
					if _, err := zw.Write(chunks.Current); err != nil {
						chunks.Close(ctx)
						return err
					}
				}
				if err := chunks.Err(); err != nil {
					return err
				}
				chunks.Close(ctx)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	s.Files = &f
	return nil
}

// removeUnfinishedSegments removes segment files without a description and
// temporary files a stopped shipping left.
func removeUnfinishedSegments(ctx context.Context, to string) error {
	dir := join(to, ChangesDir)
	names, err := listAt(ctx, dir, false)
	if err != nil {
		return err
	}
	for _, name := range names {
		if strings.HasSuffix(name, ".tmp") {
			removeAt(ctx, join(dir, name))
			continue
		}
		if stem, ok := strings.CutSuffix(name, ".bson.gz"); ok {
			stem = strings.TrimSuffix(stem, ".files")
			if !slices.Contains(names, stem+".json") {
				if err := removeAt(ctx, join(dir, name)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
