package repo

import (
	"fmt"
	"time"
)

// The operator's pitch settings, held by the store from start (package
// pitches reads them when it sends, package cmd/outreach sets them).

// PitchPolicy is the operator's pitch settings.
type PitchPolicy struct {
	// From is the team mailbox pitches are sent from ("Name <address>" or
	// an address); empty: pitches can be drafted, not sent.
	From string
	// ApproverScope is the scope a key needs to approve a pitch: admin
	// (default) or write.
	ApproverScope string
	// DailyCap and DomainCap bound the recipients sent in 24 hours, in
	// total and per recipient domain.
	DailyCap, DomainCap int
	// RespondedOnReply moves the opportunity to responded when a recipient
	// replies.
	RespondedOnReply bool
}

// Default caps.
const (
	DefaultPitchDailyCap  = 200
	DefaultPitchDomainCap = 20
)

// Check refuses a policy that cannot work.
func (p PitchPolicy) Check() error {
	if p.ApproverScope != "" && p.ApproverScope != ScopeAdmin && p.ApproverScope != ScopeWrite {
		return fmt.Errorf("pitch approver scope %q: use admin or write", p.ApproverScope)
	}
	return nil
}

// SetPitchPolicy sets the operator's pitch settings.
func (s *Store) SetPitchPolicy(p PitchPolicy) error {
	if err := p.Check(); err != nil {
		return err
	}
	if p.ApproverScope == "" {
		p.ApproverScope = ScopeAdmin
	}
	if p.DailyCap <= 0 {
		p.DailyCap = DefaultPitchDailyCap
	}
	if p.DomainCap <= 0 {
		p.DomainCap = DefaultPitchDomainCap
	}
	s.pitchPolicy.Store(&p)
	return nil
}

// PitchPolicy is the pitch settings in force.
func (s *Store) PitchPolicy() PitchPolicy {
	if p := s.pitchPolicy.Load(); p != nil {
		return *p
	}
	return PitchPolicy{ApproverScope: ScopeAdmin, DailyCap: DefaultPitchDailyCap, DomainCap: DefaultPitchDomainCap, RespondedOnReply: true}
}

// The double-pitch window (the pipeline's guard, repo/pipeline/guards.go, reads
// it), held by the store from start.

// DefaultPitchWindow is the double-pitch window when none is configured.
const DefaultPitchWindow = 14 * 24 * time.Hour

// SetPitchWindow sets the double-pitch window; zero or less restores the
// default.
func (s *Store) SetPitchWindow(d time.Duration) {
	if d <= 0 {
		d = DefaultPitchWindow
	}
	s.pitchWindow.Store(int64(d))
}

// PitchWindow is the double-pitch window in force.
func (s *Store) PitchWindow() time.Duration {
	if d := s.pitchWindow.Load(); d > 0 {
		return time.Duration(d)
	}
	return DefaultPitchWindow
}
