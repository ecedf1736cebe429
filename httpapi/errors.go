package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/errs"
)

// Problem is the error body every failed request gets: the spec's
// ErrorResponse (code, error, detail, instance) with the RFC 9457 fields
// type, title and status beside them. It is served as application/json,
// the media type the spec gives every error response (errorContentType).
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail"`
	Instance string `json:"instance"`
	Code     int    `json:"code"`
	Error    string `json:"error"`
}

// errorContentType is the media type of error bodies: the spec defines
// every error response as application/json with the ErrorResponse schema.
const errorContentType = "application/json"

type statusInfo struct {
	status int
	typ    string
	title  string
}

var (
	badRequest  = statusInfo{http.StatusBadRequest, "/errors/bad-request", "Malformed request"}
	notFound    = statusInfo{http.StatusNotFound, "/errors/not-found-error", "Not found Error"}
	conflict    = statusInfo{http.StatusConflict, "/errors/conflict", "The namespace has been concurrently modified"}
	unsupported = statusInfo{http.StatusNotAcceptable, "/errors/unsupported-operation", "Unsupported operation"}
	unavailable = statusInfo{http.StatusServiceUnavailable, "/errors/service-unavailable", "Slow down"}
	serverError = statusInfo{http.StatusInternalServerError, "/errors/server-error", "Internal Server Error"}
	tooLarge    = statusInfo{http.StatusRequestEntityTooLarge, "/errors/payload-too-large", "Request body too large"}
	// A body that did not arrive in time (bodydeadline.go).
	requestTimeout = statusInfo{http.StatusRequestTimeout, "/errors/request-timeout", "Request body too slow"}
)

// Authentication, authorization and rate limiting (httpapi/auth.go).
var (
	unauthorized = statusInfo{http.StatusUnauthorized, "/errors/unauthorized-request", "No valid authentication credentials for the operation"}
	forbidden    = statusInfo{http.StatusForbidden, "/errors/forbidden-request", "Not authorized to make this request"}
	tooMany      = statusInfo{http.StatusTooManyRequests, "/errors/too-many-requests", "Request rate limit exceeded"}
)

// statusOf is the one table from domain codes to HTTP statuses.
var statusOf = map[errs.Code]statusInfo{
	errs.CodeUnsupported:              unsupported,
	errs.CodeNamespaceNotFound:        notFound,
	errs.CodeNamespaceAlreadyExists:   conflict,
	errs.CodeNamespaceNotEmpty:        badRequest,
	errs.CodeTableNotFound:            notFound,
	errs.CodeTableAlreadyExists:       conflict,
	errs.CodeTransactionNotFound:      notFound,
	errs.CodeJobNotFound:              notFound,
	errs.CodeJobFinished:              conflict,
	errs.CodePoolNotFound:             notFound,
	errs.CodeTableVersionNotFound:     notFound,
	errs.CodeTableColumnNotFound:      notFound,
	errs.CodeInvalidInput:             badRequest,
	errs.CodeConcurrentModification:   conflict,
	errs.CodeServiceUnavailable:       unavailable,
	errs.CodeInternal:                 serverError,
	errs.CodeInvalidTableState:        conflict,
	errs.CodeSchemaValidation:         badRequest,
	errs.CodeUnauthenticated:          unauthorized,
	errs.CodePermissionDenied:         forbidden,
	errs.CodeThrottling:               tooMany,
	errs.CodeTableIndexNotFound:       notFound,
	errs.CodeTableIndexAlreadyExists:  conflict,
	errs.CodeTableTagNotFound:         notFound,
	errs.CodeTableTagAlreadyExists:    conflict,
	errs.CodeTableBranchNotFound:      notFound,
	errs.CodeTableBranchAlreadyExists: conflict,
}

// fail writes err as a problem body and aborts. Only internal errors are
// logged with detail; users get the domain message, never internals.
func fail(c *gin.Context, err error) {
	if isCatalogRoute(c) {
		icebergFail(c, err)
		return
	}
	code := errs.CodeOf(err)
	info, ok := statusOf[code]
	if !ok {
		info = serverError
	}
	var mbe *http.MaxBytesError
	var ble *bodyLimitError
	var slow *slowBodyError
	if errors.As(err, &slow) {
		info, code, err = requestTimeout, errs.CodeInvalidInput, slow
		c.Header("Connection", "close")
	} else if errors.As(err, &ble) {
		info, code, err = tooLarge, errs.CodeInvalidInput, ble
	} else if errors.As(err, &mbe) {
		info, code = tooLarge, errs.CodeInvalidInput
		err = fmt.Errorf("request body larger than %d bytes", mbe.Limit)
	}
	msg := err.Error()
	// A 503 is the server asking the client to slow down: its domain
	// message is shown (the cause behind it is not), with Retry-After when
	// the error says how long to wait.
	var te *errs.Error
	if info.status == http.StatusServiceUnavailable && errors.As(err, &te) {
		if te.Message != "" {
			msg = te.Message
		}
		var ra interface{ RetryAfter() time.Duration }
		if errors.As(err, &ra) {
			c.Header("Retry-After", strconv.Itoa(int(math.Ceil(ra.RetryAfter().Seconds()))))
		}
	} else if info.status >= 500 {
		slog.ErrorContext(c.Request.Context(), "request failed", "route", c.FullPath(), "err", err)
		msg = "internal error; see the server log"
	}
	// A client error is titled by what happened (errs.Title: "Table not
	// found", "Tag already exists"); a body too large or too slow, and the
	// server's own errors, keep their status's title.
	title := info.title
	if _, domain := statusOf[code]; domain && ok && info.status < 500 && info != tooLarge && info != requestTimeout {
		title = errs.Title(code)
	}
	c.Header("Content-Type", errorContentType)
	c.AbortWithStatusJSON(info.status, Problem{
		Type: info.typ, Title: title, Status: info.status, Detail: msg,
		Instance: c.Request.URL.Path, Code: int(code), Error: msg,
	})
}

// badInput is a 400 with a message naming the field.
func badInput(format string, args ...any) error {
	return errs.Errorf(errs.CodeInvalidInput, format, args...)
}
