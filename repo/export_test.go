package repo

import "sync/atomic"

// Hooks of the core's external tests (package repo_test, which sit above
// every area): built only into the tests.

// PatternBound is patternBound, for a test to shorten.
var PatternBound = &patternBound

// TextByPattern is the switch that makes s's free-text filters ask the
// store's pattern, for a test to compare the two answers.
func TextByPattern(s *Store) *atomic.Bool { return &s.textByPattern }

// OpenStore, ModeSerial, TestCtxSession and CheckInvariants are the core's
// test helpers (helpers_test.go), for its external tests that write through
// an area.
var (
	OpenStore       = openStore
	TestCtxSession  = testCtxSession
	CheckInvariants = checkInvariants
)

// ModeSerial names the serial protocol in tests (modeSerial).
const ModeSerial = modeSerial

// PtrTo is ptrTo.
func PtrTo[T any](v T) *T { return ptrTo(v) }
