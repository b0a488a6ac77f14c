package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"outreach/audit"
	"outreach/repo"
)

// Safe retries. Every tool that writes or acts (any kind but the reads,
// whatever scope it needs: list_agent_keys is a read) takes an optional
// idempotency key, in the call's _meta as "idempotency_key" (MCP's place for
// what is about a request rather than an argument of the tool, so every
// tool keeps exactly the catalogue's parameters) or as the HTTP header
// Idempotency-Key; both at once must agree. The key is scoped to the API
// key. Within repo.IdempotencyTTL (24 h) a repeat of the same tool with the
// same arguments returns the first call's result and writes nothing; the
// same key with another tool or other arguments is invalid_argument naming
// _meta.idempotency_key. A duplicate that arrives while the first call runs
// waits for its result. A failed call releases the key, so a retry runs
// again, with the same arguments or corrected ones. When a call's write landed but its result was never stored (the
// process stopped in between), the retry finds the call's change entries
// (they carry the key) and answers failed_precondition with their ids
// instead of writing again. Reads ignore the key: they are idempotent
// already.

// IdempotencyHeader is the HTTP header of an idempotency key.
const IdempotencyHeader = "Idempotency-Key"

const (
	// IdempotencyMeta is the key of an idempotency key in a call's _meta.
	IdempotencyMeta = "idempotency_key"
	// idempotencyField names it in errors.
	idempotencyField = "_meta." + IdempotencyMeta
	// maxIdempotencyKey is the longest key, in bytes of visible ASCII.
	maxIdempotencyKey = 255
	// idempotencyWait is how long a duplicate waits for the first call.
	idempotencyWait = 10 * time.Second
)

// idempotencyKey returns the call's idempotency key, from its _meta or its
// header ("" for none).
func idempotencyKey(req *mcp.CallToolRequest) (string, error) {
	var header string
	if req.Extra != nil && req.Extra.Header != nil {
		header = strings.TrimSpace(req.Extra.Header.Get(IdempotencyHeader))
		if header != "" && !validIdempotencyKey(header) {
			return "", repo.Invalid(IdempotencyHeader, "must be 1 to %d visible ASCII characters", maxIdempotencyKey)
		}
	}
	v, ok := req.Params.GetMeta()[IdempotencyMeta]
	if !ok || v == nil {
		return header, nil
	}
	key, isString := v.(string)
	if !isString || !validIdempotencyKey(key) {
		return "", repo.Invalid(idempotencyField, "must be a string of 1 to %d visible ASCII characters", maxIdempotencyKey)
	}
	if header != "" && header != key {
		return "", repo.Invalid(idempotencyField, "differs from the %s header; give one, or the same in both", IdempotencyHeader)
	}
	return key, nil
}

func validIdempotencyKey(k string) bool {
	return k != "" && len(k) <= maxIdempotencyKey && !strings.ContainsFunc(k, func(r rune) bool { return r < 0x21 || r > 0x7e })
}

// ArgsHash identifies a call: its tool and its arguments, in a canonical
// form (object keys sorted, insignificant space dropped).
func ArgsHash(tool string, args json.RawMessage) string {
	canon := bytes.TrimSpace(args)
	var v any
	if json.Unmarshal(args, &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			canon = b
		}
	}
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil))
}

// idempotent runs the call under its idempotency key: at most once per key
// and arguments. It returns the result's JSON and whether it is a replay.
//
// What is stored is the result's kept form (encodeResult): a secret it
// carried (a new agent key, a signed URL) is never stored as shown. A replay
// answers with the kept form, which says where a secret was and that it is
// not shown again, or, for a tool with a replay function, with what that
// function derives from it again (a signed URL is signed anew).
func (t Tool) idempotent(ctx context.Context, key string, args json.RawMessage, run func(context.Context) ([]byte, []byte, error)) ([]byte, bool, error) {
	actor, _ := audit.ActorFrom(ctx)
	hash := ArgsHash(t.Def.Name, args)
	deadline := time.Now().Add(idempotencyWait)
	for {
		c, outcome, err := t.store.ClaimIdempotency(ctx, actor.KeyID, key, t.Def.Name, hash)
		if err != nil {
			return nil, false, err
		}
		switch outcome {
		case repo.ClaimMismatch:
			what := "other arguments"
			if c.Tool != t.Def.Name {
				what = "another tool (" + c.Tool + ")"
			}
			return nil, false, repo.Invalid(idempotencyField, "this key was used with %s in the last %s; use a new key for a new call", what, repo.IdempotencyTTL)
		case repo.ClaimDone:
			if t.replay == nil {
				return []byte(c.Result), true, nil
			}
			out, err := t.replay(ctx, args, []byte(c.Result))
			if err != nil {
				return nil, true, err
			}
			shown, _, err := encodeResult(out)
			return shown, true, err
		case repo.ClaimRunning:
			if time.Now().After(deadline) {
				return nil, false, &repo.Error{Code: repo.CodeConflict, Field: idempotencyField, Retryable: true,
					Message: "a call with this idempotency key is still running; retry later to get its result"}
			}
			select {
			case <-ctx.Done():
				return nil, false, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
			continue
		case repo.ClaimResumed:
			if err := t.landed(ctx, c); err != nil {
				_ = t.store.FinishIdempotency(context.WithoutCancel(ctx), c, "")
				return nil, false, err
			}
		}
		actor.IdempotencyKey = c.Tag()
		text, kept, err := run(audit.WithActor(ctx, actor))
		result := ""
		if err == nil {
			result = string(kept)
		}
		if ferr := t.store.FinishIdempotency(context.WithoutCancel(ctx), c, result); ferr != nil {
			zerolog.Ctx(ctx).Error().Err(ferr).Str("tool", t.Def.Name).Msg("store idempotency result")
		}
		return text, false, err
	}
}

// landed refuses to run a call again when an earlier attempt under the same
// claim wrote changes whose result was not kept.
func (t Tool) landed(ctx context.Context, c *repo.Idempotency) error {
	entries, err := t.store.IdempotentChanges(ctx, c)
	if err != nil || len(entries) == 0 {
		return err
	}
	type change struct {
		ID         string `json:"change_id"`
		Collection string `json:"collection"`
		RecordID   string `json:"record_id"`
	}
	var changes []change
	for _, e := range entries {
		if e.State == audit.StatePending {
			return &repo.Error{Code: repo.CodeUnavailable, Retryable: true, Field: idempotencyField,
				Message: "an earlier call with this idempotency key is being recovered; retry in a moment"}
		}
		changes = append(changes, change{e.ID, e.Collection, e.RecordID})
	}
	return &repo.Error{Code: repo.CodeFailedPrecondition, Field: idempotencyField, Details: map[string]any{"changes": changes},
		Message: "an earlier call with this idempotency key was applied, but its result was not kept; it is not run again. " +
			"Read the records it changed (details.changes) or get_change each change id"}
}
