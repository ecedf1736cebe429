// Package errs is mvq's error vocabulary, used by every layer: a Code (the
// Lance Namespace error codes, plus mvq's own), an Error carrying one with a
// message fit for users, and the questions the layers ask of an error (its
// code, whether retrying can help). It imports nothing of mvq: the HTTP
// layer maps codes to statuses and titles, the job layer decides retries
// with Retryable, and neither reaches into the storage package for it.
package errs

import (
	"errors"
	"fmt"
)

// Code is an error code. The HTTP layer maps each code to a status in one
// table; the domain never speaks HTTP.
type Code int

// Lance Namespace error codes (see the spec's ErrorResponse.code).
const (
	CodeUnsupported              Code = 0
	CodeNamespaceNotFound        Code = 1
	CodeNamespaceAlreadyExists   Code = 2
	CodeNamespaceNotEmpty        Code = 3
	CodeTableNotFound            Code = 4
	CodeTableAlreadyExists       Code = 5
	CodeTableIndexNotFound       Code = 6
	CodeTableIndexAlreadyExists  Code = 7
	CodeTableTagNotFound         Code = 8
	CodeTableTagAlreadyExists    Code = 9
	CodeTransactionNotFound      Code = 10
	CodeTableVersionNotFound     Code = 11
	CodeTableColumnNotFound      Code = 12
	CodeInvalidInput             Code = 13
	CodeConcurrentModification   Code = 14
	CodePermissionDenied         Code = 15
	CodeUnauthenticated          Code = 16
	CodeServiceUnavailable       Code = 17
	CodeInternal                 Code = 18
	CodeInvalidTableState        Code = 19
	CodeSchemaValidation         Code = 20
	CodeThrottling               Code = 21
	CodeTableBranchNotFound      Code = 22
	CodeTableBranchAlreadyExists Code = 23
)

// mvq's own codes, outside the spec's range.
const (
	// CodeJobNotFound: no refresh job has the id (or its record expired).
	CodeJobNotFound Code = 100
	// CodeJobFinished: the job is past the point the request needs (a
	// cancel of a job that is done, failed or committing).
	CodeJobFinished Code = 101
	// CodePoolNotFound: no worker pool serves the cluster, nor does the
	// configuration name it (the operations page's pause and resume).
	CodePoolNotFound Code = 102
)

// titles say in a few words what happened, per code.
var titles = map[Code]string{
	CodeUnsupported:              "Unsupported operation",
	CodeNamespaceNotFound:        "Namespace not found",
	CodeNamespaceAlreadyExists:   "Namespace already exists",
	CodeNamespaceNotEmpty:        "Namespace not empty",
	CodeTableNotFound:            "Table not found",
	CodeTableAlreadyExists:       "Table already exists",
	CodeTableIndexNotFound:       "Index not found",
	CodeTableIndexAlreadyExists:  "Index already exists",
	CodeTableTagNotFound:         "Tag not found",
	CodeTableTagAlreadyExists:    "Tag already exists",
	CodeTransactionNotFound:      "Transaction not found",
	CodeTableVersionNotFound:     "Table version not found",
	CodeTableColumnNotFound:      "Column not found",
	CodeInvalidInput:             "Invalid input",
	CodeConcurrentModification:   "Concurrent modification",
	CodePermissionDenied:         "Permission denied",
	CodeUnauthenticated:          "Not authenticated",
	CodeServiceUnavailable:       "Service unavailable",
	CodeInternal:                 "Internal error",
	CodeInvalidTableState:        "Invalid table state",
	CodeSchemaValidation:         "Schema validation failed",
	CodeThrottling:               "Too many requests",
	CodeTableBranchNotFound:      "Branch not found",
	CodeTableBranchAlreadyExists: "Branch already exists",
	CodeJobNotFound:              "Job not found",
	CodeJobFinished:              "Job already finished",
	CodePoolNotFound:             "Pool not found",
}

// Title is a short statement of what happened for errors of code c.
func Title(c Code) string {
	if t, ok := titles[c]; ok {
		return t
	}
	return titles[CodeInternal]
}

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

// CodeOf returns the code of err, or CodeInternal when err carries none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// Retryable reports whether trying the same work again may succeed: err
// carries no code (an I/O error, a crash), or one of internal, unavailable,
// throttling and concurrent modification. Every other code says the request
// itself is wrong or names something missing, which a retry cannot change.
func Retryable(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return true
	}
	switch e.Code {
	case CodeInternal, CodeServiceUnavailable, CodeConcurrentModification, CodeThrottling:
		return true
	}
	return false
}
