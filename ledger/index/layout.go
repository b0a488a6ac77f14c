package index

import (
	"bytes"
	"hash/maphash"
	"slices"
	"strings"
	"unsafe"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// How a collection's records are held. At 100,000 notes the index's
// records were most of the process's heap: every record as stored (less
// its large text) in an allocation of its own, its id twice more (a string,
// and a map key). Now a record holds only the paths a query filters,
// sorts or is covered by (Spec.Keep), its bytes are copied into chunks
// of an arena shared by the collection, and its id is found through an
// open-addressing table of record numbers that reads the id from the
// record itself.

// keeps reports whether path is held whole: under a kept path (when Keep
// is given) and with no dropped field at or under it.
func (s Spec) keeps(path string) bool {
	if len(s.Keep) > 0 && path != "_id" {
		kept := false
		for _, k := range s.Keep {
			if k == path || strings.HasPrefix(path, k+".") {
				kept = true
				break
			}
		}
		if !kept {
			return false
		}
	}
	for _, d := range s.Drop {
		if d == path || strings.HasPrefix(d, path+".") || strings.HasPrefix(path, d+".") {
			return false
		}
	}
	return true
}

// pathTree is a set of dotted paths as a tree: a node with no children is
// a path's end (everything under it).
type pathTree map[string]pathTree

func treeOf(paths []string) pathTree {
	if len(paths) == 0 {
		return nil
	}
	root := pathTree{}
	for _, p := range paths {
		node := root
		parts := strings.Split(p, ".")
		for i, part := range parts {
			child, seen := node[part]
			if seen && len(child) == 0 {
				break // a shorter path holds this one already
			}
			if i == len(parts)-1 {
				node[part] = pathTree{}
				break
			}
			if child == nil {
				child = pathTree{}
				node[part] = child
			}
			node = child
		}
	}
	return root
}

// pruner cuts a record down to what a spec holds.
type pruner struct {
	keep, drop pathTree
}

func newPruner(s Spec) pruner {
	keep := s.Keep
	if len(keep) > 0 && s.Words != nil {
		keep = append(slices.Clip(keep), wordsField) // the record's words, derived by Held
	}
	return pruner{keep: treeOf(keep), drop: treeOf(s.Drop)}
}

// prune returns what raw holds of the spec's paths: with Keep, only the
// kept paths (and _id); never a dropped one. A path through an array of
// documents applies to every element; an array's other elements and a
// scalar where a document was expected are held as they are (a query on
// such a path is decided on them, see decideOn), so that every kept path
// reaches in the held record exactly what it reaches in the stored one.
func (p pruner) prune(raw bson.Raw) (bson.Raw, error) {
	if p.keep == nil && p.drop == nil {
		return raw, nil
	}
	if err := raw.Validate(); err != nil {
		return nil, err
	}
	return p.doc(make([]byte, 0, len(raw)), bsoncore.Document(raw), p.keep, p.drop, true), nil
}

// doc appends doc pruned by keep (nil: everything) and drop (nil: nothing).
func (p pruner) doc(dst []byte, doc bsoncore.Document, keep, drop pathTree, top bool) []byte {
	at, dst := bsoncore.AppendDocumentStart(dst)
	elems, _ := doc.Elements()
	for _, e := range elems {
		k := e.Key()
		var ksub, dsub pathTree
		if !(top && k == "_id") {
			if keep != nil {
				c, ok := keep[k]
				if !ok {
					continue
				}
				if len(c) > 0 {
					ksub = c
				}
			}
			if drop != nil {
				if c, ok := drop[k]; ok {
					if len(c) == 0 {
						continue
					}
					dsub = c
				}
			}
		}
		v := e.Value()
		if (ksub == nil && dsub == nil) || (v.Type != bsoncore.TypeEmbeddedDocument && v.Type != bsoncore.TypeArray) {
			dst = append(dst, e...)
			continue
		}
		if v.Type == bsoncore.TypeEmbeddedDocument {
			dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, k)
			dst = p.doc(dst, v.Document(), ksub, dsub, false)
			continue
		}
		var aat int32
		aat, dst = bsoncore.AppendArrayElementStart(dst, k)
		items, _ := bsoncore.Document(v.Array()).Elements()
		for _, item := range items {
			iv := item.Value()
			if iv.Type != bsoncore.TypeEmbeddedDocument {
				dst = append(dst, item...)
				continue
			}
			dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, item.Key())
			dst = p.doc(dst, iv.Document(), ksub, dsub, false)
		}
		dst, _ = bsoncore.AppendArrayEnd(dst, aat)
	}
	dst, _ = bsoncore.AppendDocumentEnd(dst, at)
	return dst
}

// Prune returns raw cut down to what spec holds (Put does it).
func Prune(raw bson.Raw, spec Spec) (bson.Raw, error) { return newPruner(spec).prune(raw) }

// ---------------------------------------------------------------------------
// The arena: records' bytes in shared chunks.

// chunkSize is an arena chunk's size; a record larger than a quarter of
// it gets an allocation of its own.
const chunkSize = 256 << 10

// arena holds records' bytes. Bytes once written are never changed: a
// replaced record's old bytes stay where a reader may still hold them,
// and are reclaimed by compact, which copies the live records into new
// chunks (the old ones go when no reader holds a slice of them).
type arena struct {
	// chunks: the chunks written; a large record has a chunk of its own
	// (nil once it is replaced).
	chunks [][]byte
	fill   int // 1 + the chunk being filled (0: none)
	used   int // bytes written since the last compaction
	live   int // bytes of the records held
}

// loc is where a record's bytes are in its collection's arena: three
// numbers, no pointer. At 100,000 notes a slice per record (24 bytes, a
// pointer the collector follows on every cycle) was 7.7 MB of the heap.
type loc struct {
	chunk, off, n uint32
}

// store copies raw into the arena.
func (a *arena) store(raw bson.Raw) loc {
	n := len(raw)
	a.used += n
	a.live += n
	if n > chunkSize/4 {
		a.chunks = append(a.chunks, bytes.Clone(raw))
		return loc{chunk: uint32(len(a.chunks) - 1), n: uint32(n)}
	}
	if a.fill == 0 || cap(a.chunks[a.fill-1])-len(a.chunks[a.fill-1]) < n {
		a.chunks = append(a.chunks, make([]byte, 0, chunkSize))
		a.fill = len(a.chunks)
	}
	c := a.chunks[a.fill-1]
	a.chunks[a.fill-1] = append(c, raw...)
	return loc{chunk: uint32(a.fill - 1), off: uint32(len(c)), n: uint32(n)}
}

// at is the record at l.
func (a *arena) at(l loc) bson.Raw {
	c := a.chunks[l.chunk]
	return bson.Raw(c[l.off : l.off+l.n : l.off+l.n])
}

// replaced accounts for a record's bytes no longer held (a large record's
// own chunk is let go: a reader holding it keeps it).
func (a *arena) replaced(l loc) {
	a.live -= int(l.n)
	if l.n > chunkSize/4 {
		a.chunks[l.chunk] = nil
	}
}

// wasteful reports whether more than half the bytes written are no
// longer held (and enough to matter).
func (a *arena) wasteful() bool { return a.used-a.live > max(a.live, 4<<20) }

// compact copies every record into new chunks, and builds the posting
// lists again over them (their keys are the held records' bytes).
func (mc *Coll) compact() {
	old := mc.arena
	mc.arena = arena{}
	for n, l := range mc.locs {
		mc.locs[n] = mc.arena.store(old.at(l))
	}
	clear(mc.keys)
	for n := range mc.locs {
		mc.key(int32(n), mc.raw(int32(n)))
	}
}

// raw is record n as held.
func (mc *Coll) raw(n int32) bson.Raw { return mc.arena.at(mc.locs[n]) }

// heldString is a string value of a held record without a copy: the
// posting lists' keys are the record's own bytes, which an arena never
// changes (compact builds the lists again over the new chunks, so a key
// never keeps an old chunk alive for long).
func heldString(v bson.RawValue) (string, bool) {
	if v.Type != bson.TypeString || len(v.Value) < 5 {
		return "", false
	}
	b := v.Value[4 : len(v.Value)-1]
	if len(b) == 0 {
		return "", true
	}
	return unsafe.String(&b[0], len(b)), true
}

// ---------------------------------------------------------------------------
// Ids: an open-addressing table of record numbers.

// idTable finds a record's number by its id: slots hold number+1 (0:
// empty), at most half of them full; the id is read from the record.
type idTable struct {
	seed  maphash.Seed
	slots []int32
	n     int
}

// idOf is the record's _id as bytes (nil if it has none as a string).
func idOf(raw bson.Raw) []byte {
	v, err := raw.LookupErr("_id")
	if err != nil || v.Type != bson.TypeString || len(v.Value) < 5 {
		return nil
	}
	return v.Value[4 : len(v.Value)-1]
}

// find returns the number of the record id names.
func (mc *Coll) find(id string) (int32, bool) {
	t := &mc.idx
	if t.n == 0 {
		return 0, false
	}
	mask := uint64(len(t.slots) - 1)
	for i := maphash.String(t.seed, id) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if string(idOf(mc.raw(s-1))) == id {
			return s - 1, true
		}
	}
}

// add records that id names record n (not held yet).
func (mc *Coll) add(id []byte, n int32) {
	t := &mc.idx
	if 2*(t.n+1) > len(t.slots) {
		size := max(64, 2*len(t.slots))
		t.slots = make([]int32, size)
		t.n = 0
		for m := range n {
			mc.place(idOf(mc.raw(m)), m)
		}
	}
	mc.place(id, n)
}

func (mc *Coll) place(id []byte, n int32) {
	t := &mc.idx
	mask := uint64(len(t.slots) - 1)
	i := maphash.Bytes(t.seed, id) & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = n + 1
	t.n++
}

// idString is record n's id.
func (mc *Coll) idString(n int32) string { return string(idOf(mc.raw(n))) }

// Keeps reports whether the index holds path whole for records of this
// spec: kept, and no dropped field at or under it.
func (s Spec) Keeps(path string) bool { return s.keeps(path) }
