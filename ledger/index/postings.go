package index

import (
	"math"
	mbits "math/bits"
)

// Posting lists with the one-record case inline. Most values a key path
// or the word index holds are held by one record (a link's id, a change
// entry's record id or idempotency key, a number in a note's text): at
// 100,000 notes some 360,000 of them, each a slice header (with a
// pointer the collector follows) and an allocation of its own for one
// number. A set of records is now named by one int32, an entry: the one
// record's number itself (≥ 0), noRecords, or a list of several records
// in a slab (-1-place).

// noRecords is the entry of an empty set.
const noRecords int32 = math.MinInt32

// slab holds the lists of the entries of several records. Where bitmaps
// is set (the word index's slab: a common word is in most records, and at
// 100,000 notes 23 words held 1.9 million numbers, 7.8 MB), a list dense
// enough becomes a bitmap of the record numbers (a bit a record instead of
// four bytes), and stays one while it holds more than one record.
type slab struct {
	lists [][]int32
	// dense: place → its bitmap (bits nil: the place is a list).
	dense   []denseSet
	free    []int32 // places in lists no entry names
	bitmaps bool
}

// denseSet is a list as a bitmap: bit n of bits is record n; n counts them.
type denseSet struct {
	bits []uint64
	n    int32
}

// denseMin is the fewest records a list holds before it may become a
// bitmap; it does when its largest number is below 16 times its length,
// so the bitmap takes at most half the list's bytes.
const denseMin = 256

// bitmap is place at's bitmap, nil when it is a list.
func (s *slab) bitmap(at int32) *denseSet {
	if int(at) < len(s.dense) && s.dense[at].bits != nil {
		return &s.dense[at]
	}
	return nil
}

// list is the records of entry e, ascending (nil: none). One record gets
// a list of its own, as does a bitmap; the caller may keep it.
func (s *slab) list(e int32) []int32 {
	switch {
	case e == noRecords:
		return nil
	case e >= 0:
		return []int32{e}
	}
	if d := s.bitmap(-1 - e); d != nil {
		out := make([]int32, 0, d.n)
		eachBit(d.bits, func(n int32) { out = append(out, n) })
		return out
	}
	return s.lists[-1-e]
}

// each calls fn for every record of entry e, ascending.
func (s *slab) each(e int32, fn func(int32)) {
	switch {
	case e == noRecords:
	case e >= 0:
		fn(e)
	default:
		if d := s.bitmap(-1 - e); d != nil {
			eachBit(d.bits, fn)
			return
		}
		for _, n := range s.lists[-1-e] {
			fn(n)
		}
	}
}

// size is the number of records of entry e.
func (s *slab) size(e int32) int {
	switch {
	case e == noRecords:
		return 0
	case e >= 0:
		return 1
	}
	if d := s.bitmap(-1 - e); d != nil {
		return int(d.n)
	}
	return len(s.lists[-1-e])
}

// insert returns entry e with record n added, once.
func (s *slab) insert(e, n int32) int32 {
	switch {
	case e == noRecords:
		return n
	case e >= 0:
		if e == n {
			return e
		}
		list := []int32{e, n}
		if n < e {
			list[0], list[1] = n, e
		}
		return -1 - s.place(list)
	}
	at := -1 - e
	if d := s.bitmap(at); d != nil {
		w := int(n >> 6)
		if w >= len(d.bits) {
			d.bits = append(d.bits, make([]uint64, w+1-len(d.bits))...)
		}
		if d.bits[w]&(1<<(n&63)) == 0 {
			d.bits[w] |= 1 << (n & 63)
			d.n++
		}
		return e
	}
	list := insertNum(s.lists[at], n)
	if k := len(list); s.bitmaps && k >= denseMin && int(list[k-1]) < 16*k {
		for len(s.dense) <= int(at) {
			s.dense = append(s.dense, denseSet{})
		}
		bits := make([]uint64, int(list[k-1])>>6+1)
		for _, m := range list {
			bits[m>>6] |= 1 << (m & 63)
		}
		s.dense[at] = denseSet{bits: bits, n: int32(k)}
		list = nil
	}
	s.lists[at] = list
	return e
}

// remove returns entry e without record n: a list (or bitmap) left with
// one record becomes that number, an empty one noRecords.
func (s *slab) remove(e, n int32) int32 {
	switch {
	case e == noRecords:
		return e
	case e >= 0:
		if e == n {
			return noRecords
		}
		return e
	}
	at := -1 - e
	var left int32 = noRecords
	if d := s.bitmap(at); d != nil {
		if w := int(n >> 6); w < len(d.bits) && d.bits[w]&(1<<(n&63)) != 0 {
			d.bits[w] &^= 1 << (n & 63)
			d.n--
		}
		if d.n > 1 {
			return e
		}
		eachBit(d.bits, func(m int32) { left = m })
		s.dense[at] = denseSet{}
	} else {
		list := removeNum(s.lists[at], n)
		if len(list) > 1 {
			s.lists[at] = list
			return e
		}
		if len(list) == 1 {
			left = list[0]
		}
	}
	s.lists[at] = nil
	s.free = append(s.free, at)
	return left
}

// place stores list in the slab and returns where.
func (s *slab) place(list []int32) int32 {
	if k := len(s.free); k > 0 {
		at := s.free[k-1]
		s.free = s.free[:k-1]
		s.lists[at] = list
		return at
	}
	s.lists = append(s.lists, list)
	return int32(len(s.lists) - 1)
}

// eachBit calls fn for every bit set in bits, ascending.
func eachBit(bits []uint64, fn func(int32)) {
	for i, w := range bits {
		for w != 0 {
			fn(int32(i*64 + mbits.TrailingZeros64(w)))
			w &= w - 1
		}
	}
}

// postings are one key path's posting lists: value → the entry of the
// records holding it (never noRecords: a value no record holds leaves).
type postings struct {
	m map[string]int32
	slab
}

func newPostings() *postings { return &postings{m: map[string]int32{}} }

// get is the records holding v, ascending (nil: none).
func (p *postings) get(v string) []int32 {
	if p == nil {
		return nil
	}
	e, ok := p.m[v]
	if !ok {
		return nil
	}
	return p.list(e)
}

// insert adds record n to v's records.
func (p *postings) insert(v string, n int32) {
	e, ok := p.m[v]
	if !ok {
		e = noRecords
	}
	p.m[v] = p.slab.insert(e, n)
}

// remove takes record n out of v's records; v leaves when none is left.
func (p *postings) remove(v string, n int32) {
	e, ok := p.m[v]
	if !ok {
		return
	}
	if e = p.slab.remove(e, n); e == noRecords {
		delete(p.m, v)
	} else {
		p.m[v] = e
	}
}

// each calls fn for every value and its records.
func (p *postings) each(fn func(v string, list []int32)) {
	if p == nil {
		return
	}
	for v, e := range p.m {
		fn(v, p.list(e))
	}
}
