package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"outreach/mailsync"
	"outreach/pitchsend"
	"outreach/repo"
	"outreach/repo/pitches"
)

// pitchConfig reads the pitch policy and the team mailbox's outgoing side
// from the environment; the sender's config is nil when OUTREACH_SMTP_ADDR
// is unset (pitches can then be drafted and approved, not sent).
func pitchConfig(publicURL string, mailbox pitchsend.Mailbox) (pitches.PitchPolicy, *pitchsend.Config, error) {
	pol := pitches.PitchPolicy{ApproverScope: env("OUTREACH_PITCH_APPROVER_SCOPE", repo.ScopeAdmin), RespondedOnReply: true}
	for _, v := range []struct {
		name string
		dst  *int
	}{{"OUTREACH_PITCH_DAILY_CAP", &pol.DailyCap}, {"OUTREACH_PITCH_DOMAIN_CAP", &pol.DomainCap}} {
		if s := os.Getenv(v.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return pol, nil, fmt.Errorf("%s=%q: want a positive number of recipients per 24 hours", v.name, s)
			}
			*v.dst = n
		}
	}
	if s := os.Getenv("OUTREACH_PITCH_RESPONDED_ON_REPLY"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return pol, nil, fmt.Errorf("OUTREACH_PITCH_RESPONDED_ON_REPLY=%q: want true or false", s)
		}
		pol.RespondedOnReply = b
	}
	if err := pol.Check(); err != nil {
		return pol, nil, fmt.Errorf("OUTREACH_PITCH_APPROVER_SCOPE: %w", err)
	}
	addr := os.Getenv("OUTREACH_SMTP_ADDR")
	if addr == "" {
		return pol, nil, nil
	}
	c := &pitchsend.Config{Addr: addr, Security: env("OUTREACH_SMTP_SECURITY", pitchsend.SecurityStartTLS), Auth: os.Getenv("OUTREACH_SMTP_AUTH"),
		User: os.Getenv("OUTREACH_SMTP_USER"), Password: os.Getenv("OUTREACH_SMTP_PASSWORD"),
		Token: os.Getenv("OUTREACH_SMTP_OAUTH2_TOKEN"), TokenFile: os.Getenv("OUTREACH_SMTP_OAUTH2_TOKEN_FILE"),
		From: os.Getenv("OUTREACH_SMTP_FROM"), SentMailbox: env("OUTREACH_SMTP_SENT_MAILBOX", "Sent"), Mailbox: mailbox}
	if s := os.Getenv("OUTREACH_PITCH_INTERVAL"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Second {
			return pol, nil, fmt.Errorf("OUTREACH_PITCH_INTERVAL=%q: want a duration of at least 1s, e.g. 30s", s)
		}
		c.Interval = d
	}
	if s := os.Getenv("OUTREACH_PITCH_LEASE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Second {
			return pol, nil, fmt.Errorf("OUTREACH_PITCH_LEASE=%q: want a duration of at least 1s, e.g. 2m", s)
		}
		c.Lease = d
	}
	c.PublicURL = publicURL
	if _, err := pitchsend.New(nil, *c, zerolog.Nop()); err != nil {
		return pol, nil, fmt.Errorf("pitch sending configuration: %w", err)
	}
	pol.From = c.From
	return pol, c, nil
}

// startPitches applies the pitch policy and, when a submission server is
// configured, returns the sender (its worker is started by the caller).
func startPitches(store *repo.Store, pol pitches.PitchPolicy, c *pitchsend.Config, inbox *mailsync.Syncer, base string, log zerolog.Logger) (*pitchsend.Sender, error) {
	if err := pitches.Of(store).SetPitchPolicy(pol); err != nil {
		return nil, err
	}
	if c == nil {
		return nil, nil
	}
	c.Inbox = inbox
	if os.Getenv("OUTREACH_PUBLIC_URL") == "" {
		c.PublicURL = base // the address actually listened on (a port 0 is chosen by now)
	}
	s, err := pitchsend.New(store, *c, log)
	if err != nil {
		return nil, fmt.Errorf("pitch sending configuration: %w", err)
	}
	log.Info().Str("smtp", c.Addr).Str("from", s.From()).Msg("pitch sending configured")
	return s, nil
}
