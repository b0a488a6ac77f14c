package repo

import (
	"encoding/json"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Secret is a value the service shows once, to the caller it was made for,
// and never keeps: a new agent key, a signed media URL. Everything that could
// keep or log it gets its kept form instead, which says what it was without
// containing it: JSON (a stored tool result, a log field), BSON (a document),
// text and fmt (a log line). Reveal is the one way to the value, and the
// tools' rendering of a result to its caller the one place that shows it
// (Shown). So a result that carries a secret can be stored, replayed or
// logged without anyone having to remember to take the secret out.
type Secret struct {
	value string
	kept  string
	shown bool
}

// NewSecret wraps value; kept is what stands for it wherever it may be kept
// or logged ("" keeps nothing: JSON null).
func NewSecret(value, kept string) Secret { return Secret{value: value, kept: kept} }

// Reveal returns the value.
func (s Secret) Reveal() string { return s.value }

// Kept returns the form that may be kept and logged.
func (s Secret) Kept() string { return s.kept }

// Shown returns a copy whose JSON is the value, for the rendering of a tool
// result to the caller it was made for, which marshals it at once and keeps
// nothing of it.
func (s Secret) Shown() Secret { s.shown = true; return s }

// IsZero reports a Secret that holds nothing (json's omitzero leaves it out).
func (s Secret) IsZero() bool { return s.value == "" && s.kept == "" }

// String is the kept form (fmt, and loggers that use it).
func (s Secret) String() string { return s.kept }

// GoString is the kept form (%#v).
func (s Secret) GoString() string { return "repo.Secret(" + strconv.Quote(s.kept) + ")" }

// MarshalText is the kept form.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.kept), nil }

// MarshalJSON is the kept form, or the value on a copy made by Shown.
func (s Secret) MarshalJSON() ([]byte, error) {
	switch {
	case s.shown:
		return json.Marshal(s.value)
	case s.kept == "":
		return []byte("null"), nil
	}
	return json.Marshal(s.kept)
}

// MarshalBSONValue is the kept form, always: a secret never reaches a
// stored document.
func (s Secret) MarshalBSONValue() (byte, []byte, error) {
	if s.kept == "" {
		return byte(bson.TypeNull), nil, nil
	}
	t, b, err := bson.MarshalValue(s.kept)
	return byte(t), b, err
}
