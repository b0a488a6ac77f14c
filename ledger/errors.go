package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Error codes of the catalogue's error model.
const (
	CodeInvalid            = "invalid_argument"
	CodeNotFound           = "not_found"
	CodeConflict           = "conflict"
	CodeFailedPrecondition = "failed_precondition"
	CodePermissionDenied   = "permission_denied"
	CodeRateLimited        = "rate_limited"
	CodeUnavailable        = "unavailable"
	CodeInternal           = "internal"
)

// Error is an error whose code and message are safe to show to a caller.
// Anything that is not an *Error is shown only as "internal".
type Error struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Field     string `json:"field,omitempty"`
	Retryable bool   `json:"retryable"`
	// Details carries structured facts, such as the conflicting fields of a rollback.
	Details any `json:"details,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid reports a bad value of field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalid, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// NotFound reports an unknown id of a kind of record.
func NotFound(kind, id string) *Error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf("%s %s does not exist", kind, id)}
}

// NotFoundField reports an unknown id given in field.
func NotFoundField(field, kind, id string) *Error {
	return &Error{Code: CodeNotFound, Field: field, Message: fmt.Sprintf("%s: %s %s does not exist", field, kind, id)}
}

// ErrConflict is the sentinel of a lost race: the record changed between read
// and write, or is locked by a rollback in progress. It is retryable.
var ErrConflict = &Error{Code: CodeConflict, Message: "the record was changed by another call at the same time; read it again and retry", Retryable: true}

// ErrorCode returns the code of err: the *Error's code, or internal.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return CodeUnavailable
	}
	return CodeInternal
}

// AsError returns err as a safe *Error: itself when it is one, and a generic
// internal or unavailable error otherwise.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if ErrorCode(err) == CodeUnavailable {
		return &Error{Code: CodeUnavailable, Message: "the call was cancelled or timed out; try again", Retryable: true}
	}
	return &Error{Code: CodeInternal, Message: "internal error; it has been logged"}
}

// DriverErr maps the driver's errors at the store's edge: a missing
// record is NotFound(kind, id), a duplicate id a conflict, a timeout or an
// interrupted read a retryable unavailable.
func DriverErr(err error, kind, id string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mongo.ErrNoDocuments):
		return NotFound(kind, id)
	case mongo.IsDuplicateKeyError(err):
		return &Error{Code: CodeConflict, Message: fmt.Sprintf("%s %s already exists", kind, id)}
	case mongo.IsTimeout(err), mongo.IsNetworkError(err), IsInterrupted(err):
		return &Error{Code: CodeUnavailable, Message: "the store did not answer in time; try again", Retryable: true}
	}
	return fmt.Errorf("%s %s: %w", kind, id, err)
}

// IsInterrupted reports FerretDB's "interrupted (9)"-style transient read faults.
func IsInterrupted(err error) bool {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code == 11601 || strings.Contains(strings.ToLower(ce.Message), "interrupted")
	}
	return false
}
