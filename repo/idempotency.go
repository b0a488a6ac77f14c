package repo

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"

	"outreach/ledger"
)

// Idempotency keys make a retried mutation safe: the engine keeps the
// claims (ledger.Idempotency); the domain says what a stored result must
// not keep.

const CollIdempotency = ledger.CollIdempotency

// IdempotencyTTL is how long a key is kept: a repeat after that is a new call.
const IdempotencyTTL = ledger.IdempotencyTTL

// IdempotencyLease is how long a running call holds its claim.
const IdempotencyLease = ledger.IdempotencyLease

// States of a claim.
const (
	IdemRunning  = ledger.IdemRunning
	IdemDone     = ledger.IdemDone
	IdemReleased = ledger.IdemReleased
)

// Idempotency is one claim of an idempotency key.
type Idempotency = ledger.Idempotency

// Claim outcomes.
const (
	ClaimNew      = ledger.ClaimNew
	ClaimResumed  = ledger.ClaimResumed
	ClaimDone     = ledger.ClaimDone
	ClaimRunning  = ledger.ClaimRunning
	ClaimMismatch = ledger.ClaimMismatch
)

// KeyNotShownAgain stands for a new agent key wherever create_agent_key's
// result is kept (tools.Keys): a replay under the same idempotency key
// shows it instead of the key.
const KeyNotShownAgain = "not shown again: an agent key is shown only in the result of the call that created it. " +
	"If it was lost, revoke this key (revoke_agent_key with agent_key.id) and create another."

var (
	// rawKey is an agent key (keys.go: the prefix, 32 random characters
	// and a 6-character checksum).
	rawKey = regexp.MustCompile(`outreach_[0-9A-Za-z]{38}\b`)
	// urlSignature is the signature of a signed media URL, its & as JSON
	// writes it (\u0026) or as it is.
	urlSignature = regexp.MustCompile(`(&|\\u0026)signature=[0-9a-f]{64}`)
)

// scrubStoredResults takes the secrets out of the results older versions
// stored with idempotency claims, whole: the raw key of a create_agent_key,
// the signed URL of an upload_media_url. They become what this version
// stores (the key's kept form, the URL without its signature), so a replay
// answers as it would for a claim made now. Claims are operational data
// (no change entry); the pass reads the whole collection, as recovery reads
// the change log, which holds at least one entry per claim that ran.
func (s *Store) scrubStoredResults(ctx context.Context) error {
	n, err := s.ScrubIdempotencyResults(ctx, scrubResult)
	if err != nil {
		return err
	}
	if n > 0 {
		s.Log.Info().Int("results", n).Msg("removed the agent keys and URL signatures older versions stored with idempotency keys")
	}
	return nil
}

// scrubResult is a stored result's JSON without raw keys or URL signatures.
func scrubResult(result string) string {
	if !strings.Contains(result, "outreach_") && !strings.Contains(result, "signature=") {
		return result
	}
	kept, _ := json.Marshal(KeyNotShownAgain)
	out := rawKey.ReplaceAllLiteralString(result, strings.Trim(string(kept), `"`))
	return urlSignature.ReplaceAllLiteralString(out, "")
}
