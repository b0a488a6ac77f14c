package repo

import (
	"errors"

	"outreach/ledger"
)

// The service's errors are the engine's (package ledger): one model, one
// set of codes, from the store's edge to the caller.

// Error codes of the catalogue's error model.
const (
	CodeInvalid            = ledger.CodeInvalid
	CodeNotFound           = ledger.CodeNotFound
	CodeConflict           = ledger.CodeConflict
	CodeFailedPrecondition = ledger.CodeFailedPrecondition
	CodePermissionDenied   = ledger.CodePermissionDenied
	CodeRateLimited        = ledger.CodeRateLimited
	CodeUnavailable        = ledger.CodeUnavailable
	CodeInternal           = ledger.CodeInternal
)

// Error is an error whose code and message are safe to show to a caller.
type Error = ledger.Error

// ErrConflict is the sentinel of a lost race (ledger.ErrConflict).
var ErrConflict = ledger.ErrConflict

// Errorf returns an *Error with code and a formatted message.
func Errorf(code, format string, args ...any) *Error { return ledger.Errorf(code, format, args...) }

// Invalid reports a bad value of field.
func Invalid(field, format string, args ...any) *Error { return ledger.Invalid(field, format, args...) }

// NotFound reports an unknown id of a kind of record.
func NotFound(kind, id string) *Error { return ledger.NotFound(kind, id) }

// NotFoundField reports an unknown id given in field.
func NotFoundField(field, kind, id string) *Error { return ledger.NotFoundField(field, kind, id) }

// ErrorCode returns the code of err: the *Error's code, or internal.
func ErrorCode(err error) string { return ledger.ErrorCode(err) }

// AsError returns err as a safe *Error.
func AsError(err error) *Error { return ledger.AsError(err) }

// IsNotFound reports whether err is a not_found error.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeNotFound
}

// WithField names field on a not_found error about an id given in it.
func WithField(err error, field string) error {
	if e, ok := err.(*Error); ok && e.Code == CodeNotFound && e.Field == "" {
		return &Error{Code: e.Code, Field: field, Message: field + ": " + e.Message}
	}
	return err
}
