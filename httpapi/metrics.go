package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"

	"github.com/mvq-dev/mvq/telemetry"
)

// Labels of requests the router did not match: any method outside the
// standard ones is "OTHER", any path without a route "unmatched". Both are
// chosen before authentication, so a label never takes a client's string.
const (
	otherMethodLabel = "OTHER"
	unmatchedRoute   = "unmatched"
)

// knownMethods are the methods that are their own label.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
	http.MethodConnect: true, http.MethodTrace: true,
}

// methodLabel is the metric label of a request method.
func methodLabel(m string) string {
	if knownMethods[m] {
		return m
	}
	return otherMethodLabel
}

// Metrics records mvq_http_requests_total and
// mvq_http_request_duration_seconds by route template (never the raw path:
// ids would explode the label set), method and status. The label set is
// bounded whatever clients send: routes are the router's templates or
// "unmatched", methods the standard ones or "OTHER", statuses what the
// handlers answer.
func Metrics() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = unmatchedRoute
		}
		r, m := attribute.String("route", route), attribute.String("method", methodLabel(c.Request.Method))
		telemetry.HTTPRequests.Add(c.Request.Context(), 1, telemetry.Attrs(r, m, attribute.String("status", strconv.Itoa(c.Writer.Status()))))
		telemetry.HTTPDuration.Record(c.Request.Context(), time.Since(start).Seconds(), telemetry.Attrs(r, m))
	}
}
