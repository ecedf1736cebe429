package httpapi

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/duck"
)

// QueryQueueWait bounds how long a request waits for a DuckDB session:
// past wait it gets 503 "Slow down" with Retry-After instead of queueing
// behind busy sessions (and /readyz reports saturation meanwhile).
func QueryQueueWait(wait time.Duration) gin.HandlerFunc {
	return func(c *gin.Context) {
		if wait > 0 {
			c.Request = c.Request.WithContext(duck.WithQueueWait(c.Request.Context(), wait))
		}
		c.Next()
	}
}

// WriteDeadlines bounds every write of a response to d: before each
// write or flush the connection's write deadline moves to now+d, and once
// more when the handler returns (for the status line and headers written
// after it). A client that stops reading is cut off after d; a response
// that keeps flowing (a large query result, a job event stream) is not,
// however long it lasts, and a handler that works long before writing is
// not cut off either. Pair it with http.Server.WriteTimeout = d, which
// then only bounds responses written outside gin.
func WriteDeadlines(d time.Duration) gin.HandlerFunc {
	return func(c *gin.Context) {
		if d <= 0 {
			c.Next()
			return
		}
		rc := http.NewResponseController(c.Writer)
		c.Writer = &deadlineWriter{ResponseWriter: c.Writer, rc: rc, d: d}
		c.Next()
		_ = rc.SetWriteDeadline(time.Now().Add(d))
	}
}

type deadlineWriter struct {
	gin.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) extend() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(b)
}

func (w *deadlineWriter) WriteString(s string) (int, error) {
	w.extend()
	return w.ResponseWriter.WriteString(s)
}

func (w *deadlineWriter) Flush() {
	w.extend()
	w.ResponseWriter.Flush()
}

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
