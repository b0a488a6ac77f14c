package index

import "math"

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

// slab holds the lists of the entries of several records.
type slab struct {
	lists [][]int32
	free  []int32 // places in lists no entry names
}

// list is the records of entry e, ascending (nil: none). One record gets
// a list of its own, which the caller may keep.
func (s *slab) list(e int32) []int32 {
	switch {
	case e == noRecords:
		return nil
	case e >= 0:
		return []int32{e}
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
	s.lists[-1-e] = insertNum(s.lists[-1-e], n)
	return e
}

// remove returns entry e without record n: a list left with one record
// becomes that number, an empty one noRecords.
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
	list := removeNum(s.lists[at], n)
	if len(list) > 1 {
		s.lists[at] = list
		return e
	}
	s.lists[at] = nil
	s.free = append(s.free, at)
	if len(list) == 1 {
		return list[0]
	}
	return noRecords
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
