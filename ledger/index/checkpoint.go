package index

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"slices"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// A checkpoint is the index written to a file when the service stops, so
// that the next start loads it instead of reading every record from the
// store. It is only as good as the position it names: the engine writes
// the store's change counter with it, and takes the checkpoint at start
// only when the counter has not moved since (no change was written, by
// any process, in between). The file is the magic line, then BSON
// documents: a header, per collection a document naming it and the
// number of its records followed by the records (in their order), and a
// trailer holding the CRC-32 of everything before it. A file cut short,
// altered, or written for other specs is refused whole.

// checkpointMagic starts every checkpoint; its number changes with the format.
const checkpointMagic = "outreach index checkpoint 1\n"

// Position is what a checkpoint is valid at: the database it indexes and
// the store's change counter when it was written.
type Position struct {
	Database string `bson:"database"`
	Counter  int64  `bson:"counter"`
}

// Fingerprint names the specs a checkpoint was built with: a checkpoint
// of other specs (a release that keeps other fields) is not used.
func Fingerprint(specs map[string]Spec) string {
	names := make([]string, 0, len(specs))
	for n := range specs {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s keep=%v drop=%v keys=%v%s;", n, specs[n].Keep, specs[n].Drop, specs[n].Keys, specs[n].wordsFingerprint())
	}
	return b.String()
}

// Snapshot is the records of collections at one moment, for
// WriteCheckpoint: taken under the lock that guards Put (a copy of each
// collection's list of records; Put replaces a record, it never changes
// its bytes), then written without that lock, while writes go on.
type Snapshot map[string][]bson.Raw

// Snap takes a Snapshot of colls (the caller holds off Put meanwhile).
func Snap(colls map[string]*Coll) Snapshot {
	out := make(Snapshot, len(colls))
	for n, mc := range colls {
		raws := make([]bson.Raw, len(mc.locs))
		for i := range raws {
			raws[i] = mc.raw(int32(i))
		}
		out[n] = raws
	}
	return out
}

// WriteCheckpoint writes the snapshot of collections built with specs as
// valid at pos.
func WriteCheckpoint(w io.Writer, pos Position, specs map[string]Spec, colls Snapshot) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	sum := crc32.NewIEEE()
	out := io.MultiWriter(bw, sum)
	put := func(v any) error {
		raw, err := bson.Marshal(v)
		if err == nil {
			_, err = out.Write(raw)
		}
		return err
	}
	if _, err := io.WriteString(out, checkpointMagic); err != nil {
		return err
	}
	names := make([]string, 0, len(colls))
	for n := range colls {
		names = append(names, n)
	}
	slices.Sort(names)
	if err := put(bson.M{"position": pos, "fingerprint": Fingerprint(specs), "collections": len(names)}); err != nil {
		return err
	}
	for _, n := range names {
		raws := colls[n]
		if err := put(bson.M{"collection": n, "records": int64(len(raws))}); err != nil {
			return err
		}
		for _, raw := range raws {
			if _, err := out.Write(raw); err != nil {
				return err
			}
		}
	}
	if err := put(bson.M{"crc32": int64(sum.Sum32())}); err != nil {
		return err
	}
	return bw.Flush()
}

// ReadCheckpoint reads a checkpoint written with specs; it returns the
// position it is valid at and the collections. Any fault in the file (cut
// short, a checksum that differs, other specs) is an error, and nothing of
// it is used.
func ReadCheckpoint(r io.Reader, specs map[string]Spec) (Position, map[string]*Coll, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	sum := crc32.NewIEEE()
	magic := make([]byte, len(checkpointMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != checkpointMagic {
		return Position{}, nil, errors.New("not an index checkpoint of this version")
	}
	sum.Write(magic)
	var head struct {
		Position    Position `bson:"position"`
		Fingerprint string   `bson:"fingerprint"`
		Collections int      `bson:"collections"`
	}
	if err := readDecode(br, sum, &head); err != nil {
		return Position{}, nil, fmt.Errorf("checkpoint header: %w", err)
	}
	if head.Fingerprint != Fingerprint(specs) {
		return Position{}, nil, errors.New("the checkpoint was built for other index specs")
	}
	colls := map[string]*Coll{}
	var wg sync.WaitGroup
	for range head.Collections {
		var c struct {
			Collection string `bson:"collection"`
			Records    int64  `bson:"records"`
		}
		if err := readDecode(br, sum, &c); err != nil {
			wg.Wait()
			return Position{}, nil, fmt.Errorf("checkpoint collection: %w", err)
		}
		spec, ok := specs[c.Collection]
		if !ok || colls[c.Collection] != nil || c.Records < 0 {
			wg.Wait()
			return Position{}, nil, fmt.Errorf("checkpoint collection %q unexpected", c.Collection)
		}
		hint := min(c.Records, 1<<22) // the header is checked only at the end
		mc := NewColl(spec)
		mc.locs = make([]loc, 0, hint)
		raws := make([]bson.Raw, 0, hint)
		for range c.Records {
			raw, err := readDoc(br, sum)
			if err != nil {
				wg.Wait()
				return Position{}, nil, fmt.Errorf("checkpoint of %s: %w", c.Collection, err)
			}
			raws = append(raws, raw)
		}
		// Each collection's records are indexed while the next is read.
		wg.Go(func() {
			for _, raw := range raws {
				mc.put(raw) // held as written: pruned by these specs (the fingerprint says so)
			}
		})
		colls[c.Collection] = mc
	}
	wg.Wait()
	want := sum.Sum32()
	var tail struct {
		CRC int64 `bson:"crc32"`
	}
	if err := readDecode(br, crc32.NewIEEE(), &tail); err != nil {
		return Position{}, nil, fmt.Errorf("checkpoint trailer: %w", err)
	}
	if uint32(tail.CRC) != want || tail.CRC < 0 {
		return Position{}, nil, errors.New("the checkpoint's checksum differs: the file was altered or cut short")
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return Position{}, nil, errors.New("the checkpoint has data after its trailer")
	}
	return head.Position, colls, nil
}

// maxCheckpointDoc bounds one document of a checkpoint (the store's own
// limit is 16 MiB).
const maxCheckpointDoc = 64 << 20

// readDoc reads one BSON document, adding its bytes to sum.
func readDoc(r io.Reader, sum hash.Hash32) (bson.Raw, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint32(size[:]))
	if n < 5 || n > maxCheckpointDoc {
		return nil, fmt.Errorf("a document of %d bytes", n)
	}
	doc := make([]byte, n)
	copy(doc, size[:])
	if _, err := io.ReadFull(r, doc[4:]); err != nil {
		return nil, err
	}
	if err := bson.Raw(doc).Validate(); err != nil {
		return nil, err
	}
	sum.Write(doc)
	return doc, nil
}

func readDecode(r io.Reader, sum hash.Hash32, into any) error {
	raw, err := readDoc(r, sum)
	if err != nil {
		return err
	}
	return bson.Unmarshal(raw, into)
}
