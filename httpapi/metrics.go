package httpapi

import (
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"

	"github.com/mvq-dev/mvq/telemetry"
)

// Metrics records mvq_http_requests_total and
// mvq_http_request_duration_seconds by route template (never the raw path:
// ids would explode the label set), method and status.
func Metrics() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		r, m := attribute.String("route", route), attribute.String("method", c.Request.Method)
		telemetry.HTTPRequests.Add(c.Request.Context(), 1, telemetry.Attrs(r, m, attribute.String("status", strconv.Itoa(c.Writer.Status()))))
		telemetry.HTTPDuration.Record(c.Request.Context(), time.Since(start).Seconds(), telemetry.Attrs(r, m))
	}
}
