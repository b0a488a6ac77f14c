package ledger

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
)

// The domain derives some answers from the change log and the session
// bindings alone (a key's implicit session: its last applied change, its
// newest bound session). Where this process is the store's only writer and
// its index is live, every change that can alter such an answer passes
// through the engine: a change entry it lands (mirrorPut), a write whose
// outcome was lost (mirrorLost), a session bound or opened. Each moves a
// generation; an answer read under one generation may be reused until the
// next.
//
// A change entry landing moves the generation too, but it also says what
// landed (ChangeLanded): a cache of answers that depend only on the applied
// entries' maxima (the last applied change of a session prefix) can carry
// them over to the new generation by folding the entry in, instead of
// reading the store again after every write.

// bumpSessionGen is called after a change that may alter what is derived
// from the change log or the session bindings.
func (s *Engine) bumpSessionGen() { s.sessionGen.Add(1) }

// SessionGeneration returns the current generation, and whether answers
// derived from the change log and the session bindings may be cached at
// all: only where this process is the store's only writer and its index is
// live (elsewhere another process may write, and every call reads).
func (s *Engine) SessionGeneration() (gen uint64, cacheable bool) {
	gen = s.sessionGen.Load()
	return gen, s.written() && !s.mirror.stale.Load()
}

// LandedChange is a change entry the write path has just stored, as
// ChangeLanded hands it over.
type LandedChange struct {
	// Applied says the entry is stored applied; only then do the other
	// fields count (an entry stored in another state changes no answer
	// derived from the applied entries).
	Applied   bool
	SessionID string
	Seq       int64
	At        time.Time
}

// OnChangeLanded registers fn, called after each change entry this process
// stores (under the write lock, once the entry is in the store and in the
// index), with the generation that entry's landing moved to: the
// generation before it is gen-1, exactly. A cache holding answers of
// generation gen-1 may fold c in and hold them for gen; a cache holding
// any other generation must not (something else moved it). One function;
// register it before serving.
func (s *Engine) OnChangeLanded(fn func(gen uint64, c LandedChange)) {
	s.landedHook.Store(&fn)
}

// changeLanded moves the generation for a change entry just stored and
// tells the registered function what landed.
func (s *Engine) changeLanded(doc any) {
	gen := s.sessionGen.Add(1)
	fn := s.landedHook.Load()
	if fn == nil {
		return
	}
	c, ok := landedOf(doc)
	if !ok {
		return // unknown shape: the generation moved, caches start again
	}
	(*fn)(gen, c)
}

// landedOf reads what a stored change entry says about its landing.
func landedOf(doc any) (LandedChange, bool) {
	switch d := doc.(type) {
	case *audit.Entry:
		// As stored: a BSON date holds milliseconds.
		return LandedChange{Applied: d.State == audit.StateApplied, SessionID: d.SessionID, Seq: d.Seq,
			At: time.UnixMilli(d.At.UnixMilli()).UTC()}, true
	case bson.Raw:
		state, ok := d.Lookup("state").StringValueOK()
		if !ok {
			return LandedChange{}, false
		}
		if state != audit.StateApplied {
			return LandedChange{}, true
		}
		sid, ok1 := d.Lookup("session_id").StringValueOK()
		seq, ok2 := d.Lookup("seq").AsInt64OK()
		at, ok3 := d.Lookup("at").TimeOK()
		if !ok1 || !ok2 || !ok3 {
			return LandedChange{}, false
		}
		return LandedChange{Applied: true, SessionID: sid, Seq: seq, At: at.UTC()}, true
	}
	return LandedChange{}, false
}
