package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/gin-gonic/gin"
)

// Defaults of the body read bound: a body gets DefaultBodyReadTimeout,
// plus one second per DefaultBodyMinBytesPerSecond bytes received, to
// arrive (a 1 MiB JSON body: 26 s; a 256 MiB IPC body: 68 min).
const (
	DefaultBodyReadTimeout       = 10 * time.Second
	DefaultBodyMinBytesPerSecond = 64 << 10
)

// slowBodyError is a body that did not arrive in time (a 408).
type slowBodyError struct {
	timeout time.Duration
	rate    int64
}

func (e *slowBodyError) Error() string {
	if e.rate <= 0 {
		return fmt.Sprintf("request body too slow: it must arrive within %s (MVQ_BODY_READ_TIMEOUT)", e.timeout)
	}
	return fmt.Sprintf("request body too slow: it must arrive within %s plus 1 s per %d bytes (MVQ_BODY_READ_TIMEOUT, MVQ_BODY_MIN_BYTES_PER_SECOND)", e.timeout, e.rate)
}

// bodyDeadline is the middleware that bounds how long a request body may
// take to arrive: BodyReadTimeout from the first handler, plus one second
// per BodyMinBytesPerSecond bytes received so far. A client that trickles
// its body (authenticated or not) loses the connection at that deadline
// instead of holding it open: the read fails (the handler answers 408 if
// it still can) and the server closes the connection. Once the body has
// been read to its end the deadline is lifted, so a long answer (a stream
// of job events) is not cut. It runs before the configured middleware,
// on the server's own response writer (it needs its read deadline).
func (s *Server) bodyDeadline() gin.HandlerFunc {
	return func(c *gin.Context) {
		if s.cfg.BodyReadTimeout <= 0 || c.Request.Body == nil || c.Request.Body == http.NoBody || c.Request.ContentLength == 0 {
			c.Next()
			return
		}
		d := &deadlineBody{ReadCloser: c.Request.Body, rc: http.NewResponseController(c.Writer), start: time.Now(),
			timeout: s.cfg.BodyReadTimeout, rate: s.cfg.BodyMinBytesPerSecond}
		if d.rc.SetReadDeadline(d.deadline()) != nil {
			c.Next() // a writer without deadlines (a test recorder)
			return
		}
		r := c.Request.WithContext(c.Request.Context())
		r.Body = d
		c.Request = r
		c.Next()
	}
}

// deadlineBody moves the connection's read deadline as the body arrives.
type deadlineBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	start   time.Time
	timeout time.Duration
	rate    int64
	n       int64
	done    bool
}

func (d *deadlineBody) deadline() time.Time {
	t := d.start.Add(d.timeout)
	if d.rate > 0 {
		t = t.Add(time.Duration(float64(d.n) / float64(d.rate) * float64(time.Second)))
	}
	return t
}

func (d *deadlineBody) Read(p []byte) (int, error) {
	if d.done {
		return d.ReadCloser.Read(p)
	}
	n, err := d.ReadCloser.Read(p)
	d.n += int64(n)
	switch {
	case err == io.EOF:
		d.done = true
		_ = d.rc.SetReadDeadline(time.Time{})
	case err != nil:
		var ne net.Error
		if errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			d.done = true
			return n, &slowBodyError{timeout: d.timeout, rate: d.rate}
		}
	default:
		_ = d.rc.SetReadDeadline(d.deadline())
	}
	return n, err
}
