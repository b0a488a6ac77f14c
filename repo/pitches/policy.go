package pitches

import (
	"fmt"
	"sync/atomic"

	"outreach/repo"
)

// The operator's pitch settings, held per store from start (this area reads
// them when it drafts, approves and sends; package cmd/outreach sets them).

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
	if p.ApproverScope != "" && p.ApproverScope != repo.ScopeAdmin && p.ApproverScope != repo.ScopeWrite {
		return fmt.Errorf("pitch approver scope %q: use admin or write", p.ApproverScope)
	}
	return nil
}

// policy is the policy in force, kept in the store's AreaState.
type policy struct{ atomic.Pointer[PitchPolicy] }

type policyKey struct{}

func (s *Store) policy() *policy {
	return s.AreaState(policyKey{}, func() any { return new(policy) }).(*policy)
}

// SetPitchPolicy sets the operator's pitch settings.
func (s *Store) SetPitchPolicy(p PitchPolicy) error {
	if err := p.Check(); err != nil {
		return err
	}
	if p.ApproverScope == "" {
		p.ApproverScope = repo.ScopeAdmin
	}
	if p.DailyCap <= 0 {
		p.DailyCap = DefaultPitchDailyCap
	}
	if p.DomainCap <= 0 {
		p.DomainCap = DefaultPitchDomainCap
	}
	s.policy().Store(&p)
	return nil
}

// PitchPolicy is the pitch settings in force.
func (s *Store) PitchPolicy() PitchPolicy {
	if p := s.policy().Load(); p != nil {
		return *p
	}
	return PitchPolicy{ApproverScope: repo.ScopeAdmin, DailyCap: DefaultPitchDailyCap, DomainCap: DefaultPitchDomainCap, RespondedOnReply: true}
}
