package table

import (
	"errors"
	"fmt"
)

// Code is a Lance Namespace error code. The HTTP layer maps each code to a
// status in one table; the domain never speaks HTTP.
type Code int

// Lance Namespace error codes (see the spec's ErrorResponse.code).
const (
	CodeUnsupported            Code = 0
	CodeNamespaceNotFound      Code = 1
	CodeNamespaceAlreadyExists Code = 2
	CodeNamespaceNotEmpty      Code = 3
	CodeTableNotFound          Code = 4
	CodeTableAlreadyExists     Code = 5
	CodeTransactionNotFound    Code = 10 // also: refresh job not found
	CodeTableVersionNotFound   Code = 11
	CodeTableColumnNotFound    Code = 12
	CodeInvalidInput           Code = 13
	CodeConcurrentModification Code = 14
	CodePermissionDenied       Code = 15
	CodeUnauthenticated        Code = 16
	CodeServiceUnavailable     Code = 17
	CodeInternal               Code = 18
	CodeInvalidTableState      Code = 19
	CodeSchemaValidation       Code = 20
	CodeThrottling             Code = 21
)

// Error is a domain error with a code and a message fit for users. Err, when
// set, is the underlying cause (logged, not shown for internal errors).
type Error struct {
	Code    Code
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil && e.Message == "" {
		return e.Err.Error()
	}
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds a coded error.
func Errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err, or CodeInternal when err carries none.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrConflict is wrapped by every commit that lost to a concurrent writer and
// could not be rebased.
var ErrConflict = &Error{Code: CodeConcurrentModification, Message: "concurrent modification"}

// IsConflict reports whether err is a commit conflict.
func IsConflict(err error) bool { return ErrorCode(err) == CodeConcurrentModification }
