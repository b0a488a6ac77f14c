package pipeline

import (
	"sync/atomic"
	"time"
)

// The double-pitch window (the pipeline's guard, guards.go, and the guards
// at sending, repo/pitches, read it), held per store from start (package
// cmd/outreach sets it).

// DefaultPitchWindow is the double-pitch window when none is configured.
const DefaultPitchWindow = 14 * 24 * time.Hour

// pitchWindow is the window in nanoseconds; 0: the default. It is kept in
// the store's AreaState.
type pitchWindow struct{ atomic.Int64 }

type pitchWindowKey struct{}

func (s *Store) pitchWindow() *pitchWindow {
	return s.AreaState(pitchWindowKey{}, func() any { return new(pitchWindow) }).(*pitchWindow)
}

// SetPitchWindow sets the double-pitch window; zero or less restores the
// default.
func (s *Store) SetPitchWindow(d time.Duration) {
	if d <= 0 {
		d = DefaultPitchWindow
	}
	s.pitchWindow().Store(int64(d))
}

// PitchWindow is the double-pitch window in force.
func (s *Store) PitchWindow() time.Duration {
	if d := s.pitchWindow().Load(); d > 0 {
		return time.Duration(d)
	}
	return DefaultPitchWindow
}
