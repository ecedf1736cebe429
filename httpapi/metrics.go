package httpapi

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

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
	// The attribute sets of each label set, built once: their number is
	// bounded (above), and building one on every request cost more than
	// recording it.
	var sets sync.Map // metricLabels -> metricAttrs
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = unmatchedRoute
		}
		k := metricLabels{route: route, method: methodLabel(c.Request.Method), status: c.Writer.Status()}
		a, ok := sets.Load(k)
		if !ok {
			r, m := attribute.String("route", k.route), attribute.String("method", k.method)
			a, _ = sets.LoadOrStore(k, metricAttrs{
				requests: telemetry.Attrs(r, m, attribute.String("status", strconv.Itoa(k.status))),
				duration: telemetry.Attrs(r, m),
			})
		}
		attrs := a.(metricAttrs)
		telemetry.HTTPRequests.Add(c.Request.Context(), 1, attrs.requests)
		telemetry.HTTPDuration.Record(c.Request.Context(), time.Since(start).Seconds(), attrs.duration)
	}
}

// metricLabels are a request's labels in Metrics.
type metricLabels struct {
	route, method string
	status        int
}

// metricAttrs are the attribute sets of one metricLabels.
type metricAttrs struct {
	requests, duration metric.MeasurementOption
}
