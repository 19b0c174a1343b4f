package kubewasm

import (
	"errors"
	"fmt"
)

// ErrorCode says why a host call failed: the WIT contract's error-code.
type ErrorCode uint8

const (
	// CodeNotFound: the object does not exist.
	CodeNotFound ErrorCode = iota
	// CodeAlreadyExists: a create found an object of that name already there.
	CodeAlreadyExists
	// CodeConflict: another actor changed the object first (stale resourceVersion). Re-read,
	// then retry; returned from Reconcile it requeues the key without a Warning Event.
	CodeConflict
	// CodeForbidden: the manifest does not grant this access, or Kubernetes RBAC refused it.
	CodeForbidden
	// CodeInvalid: a malformed request: bad JSON, a missing name, a bad selector, a namespace
	// given for a cluster-scoped resource, a resource the API server does not serve, ...
	CodeInvalid
	// CodeUnavailable: the API server could not be reached, timed out, throttled the call, or
	// this host is a standby that does not write. Retrying later may succeed.
	CodeUnavailable
	// CodeOther: anything else; the message says what.
	CodeOther
)

var codeNames = [...]string{"not-found", "already-exists", "conflict", "forbidden", "invalid", "unavailable", "other"}

// String is the code's WIT name: "not-found", "conflict", ...
func (c ErrorCode) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("error-code(%d)", uint8(c))
}

// Error is a failed host call, or the failure a reconcile returns: a code to branch on and a
// message for humans.
//
// Match codes with errors.Is against the sentinels (errors.Is(err, kubewasm.ErrNotFound)), or
// with the helpers (kubewasm.IsNotFound(err)); get the message with errors.As. Both see through
// wrapping (fmt.Errorf("...: %w", err)).
type Error struct {
	Code    ErrorCode
	Message string
}

// Error is the message (the code's name when there is none): the host prefixes the code
// itself when it reports the error.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code.String()
	}
	return e.Message
}

// Is matches another *Error of the same code: the sentinels (ErrNotFound, ...) carry no
// message and match every error of their code; two errors with messages match when both agree.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return t.Code == e.Code && (t.Message == "" || t.Message == e.Message)
}

// NewError is an error of a code with a message, e.g. to fail a reconcile with "conflict"
// (retried without a Warning Event).
func NewError(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Sentinels for errors.Is: each matches every error of its code.
var (
	ErrNotFound      = &Error{Code: CodeNotFound}
	ErrAlreadyExists = &Error{Code: CodeAlreadyExists}
	ErrConflict      = &Error{Code: CodeConflict}
	ErrForbidden     = &Error{Code: CodeForbidden}
	ErrInvalid       = &Error{Code: CodeInvalid}
	ErrUnavailable   = &Error{Code: CodeUnavailable}
	ErrOther         = &Error{Code: CodeOther}
)

// CodeOf is the code of err: its *Error's code if it is or wraps one, CodeOther otherwise.
func CodeOf(err error) ErrorCode {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeOther
}

// IsNotFound is errors.Is(err, ErrNotFound).
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsAlreadyExists is errors.Is(err, ErrAlreadyExists).
func IsAlreadyExists(err error) bool { return errors.Is(err, ErrAlreadyExists) }

// IsConflict is errors.Is(err, ErrConflict).
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// IsForbidden is errors.Is(err, ErrForbidden).
func IsForbidden(err error) bool { return errors.Is(err, ErrForbidden) }

// IsUnavailable is errors.Is(err, ErrUnavailable): the API server did not answer, or a member
// cluster is not engaged (or not synced) now. Worth trying again later.
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// IgnoreNotFound is nil for a not-found error and err otherwise, as in controller-runtime:
// `if err := ctx.Delete(...); kubewasm.IgnoreNotFound(err) != nil { return ..., err }`.
func IgnoreNotFound(err error) error {
	if IsNotFound(err) {
		return nil
	}
	return err
}

// asError is what a failed call returns to the host: err's *Error (code and message) when it
// is or wraps one, keeping the whole text of a wrapped one; code other otherwise. The message
// is cut to MaxErrorMessage, what the host takes.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		if e == err && len(e.Message) <= MaxErrorMessage {
			return e
		}
		// Wrapped: keep the code and the wrapper's context.
		return &Error{Code: e.Code, Message: cut(err.Error())}
	}
	return &Error{Code: CodeOther, Message: cut(err.Error())}
}
