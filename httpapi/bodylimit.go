package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"
)

// dataRoutes take records (an Arrow IPC stream or file, or JSON rows):
// their bodies may be as large as MaxBodyBytes. Every other route takes a
// small JSON control body (or none) and gets MaxJSONBodyBytes.
//
// The Iceberg notification route is one too: its payload may carry a whole
// metadata.json inline, which grows with a table's history past any small
// control-body limit.
var dataRoutes = map[string]bool{
	"POST /v1/table/:id/create":       true,
	"POST /v1/table/:id/insert":       true,
	"POST /v1/table/:id/merge_insert": true,
	"POST " + notificationRoute:       true,
}

// bodyLimitError is a body over its route's limit: an *http.MaxBytesError
// (what fail turns into a 413) that also names the setting.
type bodyLimitError struct {
	mbe     *http.MaxBytesError
	setting string
}

func (e *bodyLimitError) Error() string {
	return fmt.Sprintf("request body larger than %d bytes, the limit of this route (%s)", e.mbe.Limit, e.setting)
}
func (e *bodyLimitError) Unwrap() error { return e.mbe }

// limitedBody turns the *http.MaxBytesError of the reader under it into a
// *bodyLimitError.
type limitedBody struct {
	io.ReadCloser
	setting string
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var mbe *http.MaxBytesError
	if err != nil && errors.As(err, &mbe) {
		err = &bodyLimitError{mbe: mbe, setting: b.setting}
	}
	return n, err
}

// bodyLimit is the middleware that bounds the request body by its route:
// MaxBodyBytes on dataRoutes, MaxJSONBodyBytes elsewhere (no route: the
// small one too). A body that declares a larger Content-Length is refused
// before it is read; one that does not is cut at the limit.
func (s *Server) bodyLimit() gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.Body == nil || c.Request.Body == http.NoBody {
			c.Next()
			return
		}
		limit, setting := s.cfg.MaxJSONBodyBytes, "MVQ_MAX_JSON_BODY_BYTES"
		if dataRoutes[c.Request.Method+" "+c.FullPath()] {
			limit, setting = s.cfg.MaxBodyBytes, "MVQ_MAX_BODY_BYTES"
		}
		if c.Request.ContentLength > limit {
			fail(c, &bodyLimitError{mbe: &http.MaxBytesError{Limit: limit}, setting: setting})
			return
		}
		// On a copy of the request: the server checks the original's
		// body after the handler and closes a connection whose body was
		// left unread, instead of reading the rest as the next request.
		r := c.Request.WithContext(c.Request.Context())
		r.Body = &limitedBody{ReadCloser: http.MaxBytesReader(c.Writer, c.Request.Body, limit), setting: setting}
		c.Request = r
		c.Next()
	}
}

// bufferedBody is a request body already read into memory by a middleware
// (idempotency, authentication) and put back: readBody takes its bytes
// instead of copying them again.
type bufferedBody struct {
	*bytes.Reader
	b []byte
}

func newBufferedBody(b []byte) *bufferedBody {
	return &bufferedBody{Reader: bytes.NewReader(b), b: b}
}

func (*bufferedBody) Close() error { return nil }

// take returns the bytes of an unread buffered body and marks it read.
func (bb *bufferedBody) take() ([]byte, bool) {
	if bb.Len() != len(bb.b) {
		return nil, false
	}
	_, _ = bb.Seek(0, io.SeekEnd)
	return bb.b, true
}

// readAll reads r whole. With a known length (Content-Length, already
// checked against the limit) the buffer never grows past it, so a body
// that arrives whole leaves no doubled buffer behind; the length is a
// hint only (a body put in place by a middleware may differ from it).
func readAll(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 {
		return io.ReadAll(r)
	}
	// The length is the client's word: the buffer starts at most 1 MiB
	// and, when full, grows toward the declared length by at most
	// doubling, so a large declared body that trickles in holds no more
	// than twice what it has sent, and one that arrives whole is not
	// grown past its length.
	buf := make([]byte, 0, min(size, 1<<20))
	for {
		if len(buf) == cap(buf) && int64(cap(buf)) < size {
			grown := make([]byte, len(buf), min(size, 2*int64(cap(buf))))
			copy(grown, buf)
			buf = grown
		}
		if len(buf) == cap(buf) {
			// At the declared length: look for the end without growing.
			var one [1]byte
			n, err := r.Read(one[:])
			buf = append(buf, one[:n]...)
			if err == io.EOF {
				return buf, nil
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
