package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/jobs/idem"
	"github.com/mvq-dev/mvq/table"
)

// IdempotencyHeader names the request header that makes a create or
// refresh safe to retry.
const IdempotencyHeader = "Idempotency-Key"

// maxIdempotencyKey bounds the key's length.
const maxIdempotencyKey = 255

// maxReplayBody is the largest response stored for replay; a larger one
// (none of the routes answers that much) frees the key instead.
const maxReplayBody = 1 << 20

// IdempotencyStore keeps the records of the Idempotency-Key header;
// *idem.Store (jobs.Client.Idempotency) is the one in use.
type IdempotencyStore interface {
	Begin(ctx context.Context, principal, key, fingerprint string) (idem.Record, error)
	Finish(ctx context.Context, principal, key, fingerprint string, status int, contentType string, body []byte) error
	Abandon(ctx context.Context, principal, key, fingerprint string) error
}

var _ IdempotencyStore = (*idem.Store)(nil)

// idempotent serves the Idempotency-Key header on table create, view
// create and refresh. A request with the same key from the same principal
// (auth.PrincipalFrom) within idem.TTL (24h) gets the first
// request's status and body back (header Idempotent-Replayed: true) and
// does nothing else. The key is bound to the request: method, path, query
// and body; the same key with a different request is 422. While the first
// request runs, another with the same key is 409 with Retry-After: 1 (it
// is not queued). A first request answered 4xx or 5xx is not stored, so a
// retry runs again; a principal keeps at most jobs.IdempotencyMaxKeys
// records (its oldest go first). Without a Redis store (no view layer configured) the header
// is refused with 400 rather than silently ignored.
//
// Storage options (credentials) never go into Redis: a stored body keeps
// only the fact that it had them, and a replay answers the options this
// caller is given now (see withoutSecrets).
func (s *Server) idempotent() gin.HandlerFunc {
	var st IdempotencyStore
	if s.views != nil {
		st = s.views.IdempotencyStore()
	}
	return idempotent(st, func(c *gin.Context) map[string]string {
		id, err := pathID(c)
		if err != nil {
			return nil
		}
		opts, _ := s.storageOptions(c, id, nil, "")
		return opts
	})
}

// storageOptionsKey is the response field withoutSecrets redacts.
const storageOptionsKey = "storage_options"

// withoutSecrets is a JSON object response body as it is stored for
// replay: its storage_options, when it has them, become null (the mark
// that a replay fills them in again); any other body is kept as it is.
func withoutSecrets(contentType string, body []byte) []byte {
	obj, ok := replayObject(contentType, body)
	if !ok {
		return body
	}
	obj[storageOptionsKey] = json.RawMessage("null")
	out, err := json.Marshal(obj)
	if err != nil {
		return body
	}
	return out
}

// withSecrets is a stored body as it is replayed: a storage_options mark
// becomes the options opts (the caller's now), or goes when there are none.
func withSecrets(contentType string, body []byte, opts func() map[string]string) []byte {
	obj, ok := replayObject(contentType, body)
	if !ok {
		return body
	}
	delete(obj, storageOptionsKey)
	if o := opts(); len(o) > 0 {
		b, err := json.Marshal(o)
		if err != nil {
			return body
		}
		obj[storageOptionsKey] = b
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return body
	}
	return out
}

// replayObject is a JSON object body's members when it has a
// storage_options member (ok false otherwise: the body is kept as is).
func replayObject(contentType string, body []byte) (map[string]json.RawMessage, bool) {
	if !strings.HasPrefix(contentType, "application/json") || !bytes.Contains(body, []byte(`"`+storageOptionsKey+`"`)) {
		return nil, false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return nil, false
	}
	_, has := obj[storageOptionsKey]
	return obj, has
}

func idempotent(st IdempotencyStore, options func(c *gin.Context) map[string]string) gin.HandlerFunc {
	return func(c *gin.Context) {
		vals := c.Request.Header.Values(IdempotencyHeader)
		if len(vals) == 0 {
			c.Next()
			return
		}
		key := vals[0]
		switch {
		case len(vals) > 1:
			fail(c, badInput("%s: give one value, not %d", IdempotencyHeader, len(vals)))
			return
		case !validIdemKey(key):
			fail(c, badInput("%s: 1 to %d printable ASCII characters", IdempotencyHeader, maxIdempotencyKey))
			return
		case st == nil:
			fail(c, badInput("%s: not supported by this server (it has no Redis to remember requests)", IdempotencyHeader))
			return
		}
		body, err := readAll(c.Request.Body, c.Request.ContentLength)
		if err != nil {
			fail(c, bodyReadErr(err)) // over the limit: 413; too slow: 408
			return
		}
		c.Request.Body = newBufferedBody(body) // the handler takes it without a copy
		fp := fingerprint(c.Request, body)
		principal := auth.PrincipalFrom(c.Request.Context())
		ctx := c.Request.Context()
		rec, err := st.Begin(ctx, principal, key, fp)
		if err != nil {
			fail(c, err)
			return
		}
		switch rec.State {
		case idem.Done:
			c.Header("Idempotent-Replayed", "true")
			c.Data(rec.Status, rec.ContentType, withSecrets(rec.ContentType, rec.Body, func() map[string]string { return options(c) }))
			c.Abort()
			return
		case idem.InProgress:
			c.Header("Retry-After", "1")
			fail(c, errs.Errorf(errs.CodeInvalidTableState, "%s: a request with this key is still in progress; retry later", IdempotencyHeader))
			return
		case idem.Mismatch:
			problem(c, http.StatusUnprocessableEntity, "/errors/idempotency-key-reused", "Idempotency key reused",
				IdempotencyHeader+": this key was used for a different request (method, path, query or body)")
			return
		}
		rw := &recorder{ResponseWriter: c.Writer}
		c.Writer = rw
		c.Next()
		bg := context.WithoutCancel(ctx)
		status := c.Writer.Status()
		// A 4xx changed nothing: it is not kept (a client could otherwise
		// fill Redis with refused requests, 24 h each), and a retry with
		// the key runs again and is refused again.
		if status >= 400 || rw.buf.Len() > maxReplayBody || rw.over {
			_ = st.Abandon(bg, principal, key, fp)
			return
		}
		ct := c.Writer.Header().Get("Content-Type")
		_ = st.Finish(bg, principal, key, fp, status, ct, withoutSecrets(ct, rw.buf.Bytes()))
	}
}

func validIdemKey(k string) bool {
	if k == "" || len(k) > maxIdempotencyKey {
		return false
	}
	for i := range len(k) {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// fingerprint identifies what a request does.
func fingerprint(r *http.Request, body []byte) string {
	h := sha256.New()
	for _, s := range []string{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type")} {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// recorder keeps a copy of the response body (up to maxReplayBody).
type recorder struct {
	gin.ResponseWriter
	buf  bytes.Buffer
	over bool
}

func (r *recorder) Write(b []byte) (int, error) {
	r.keep(b)
	return r.ResponseWriter.Write(b)
}

func (r *recorder) WriteString(s string) (int, error) {
	r.keep([]byte(s))
	return r.ResponseWriter.WriteString(s)
}

func (r *recorder) keep(b []byte) {
	if r.over || r.buf.Len()+len(b) > maxReplayBody {
		r.over = true
		return
	}
	r.buf.Write(b)
}

// problem writes a problem body with a status the code table has no entry
// for.
func problem(c *gin.Context, status int, typ, title, detail string) {
	c.Header("Content-Type", errorContentType)
	c.AbortWithStatusJSON(status, Problem{Type: typ, Title: title, Status: status, Detail: detail,
		Instance: c.Request.URL.Path, Code: int(errs.CodeInvalidInput), Error: detail})
}

// retryAfter sets Retry-After on an answer to a refused submit (the
// cluster's backlog is full).
func retryAfter(c *gin.Context, err error) {
	if errors.Is(err, jobs.ErrBacklogFull) {
		c.Header("Retry-After", strconv.Itoa(int(jobs.BacklogRetryAfter.Seconds())))
	}
}

// dropped tells the view layer that table id (or, with ns, namespace id
// and everything under it) was dropped, so the jobs of the views that went
// with it are cancelled and their FIFOs removed. The drop itself has
// happened: a failure here is logged, and the jobs' commits fail on their
// own since their view is gone.
func (s *Server) dropped(c *gin.Context, id []string, ns bool) {
	if s.views == nil {
		return
	}
	if err := s.views.Dropped(context.WithoutCancel(c.Request.Context()), id, ns); err != nil {
		slog.WarnContext(c.Request.Context(), "cancel the jobs of a dropped view", "id", table.JoinID(id), "err", err)
	}
}
