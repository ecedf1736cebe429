// Package httpapi is the HTTP surface of mvq: the Lance Namespace REST
// operations on namespaces and tables, materialized views and refresh
// jobs. Every route is one entry of the route table (routes.go): method,
// path, the grant it needs (read by the auth middleware) and a handler
// that decodes, calls the domain packages (the view use cases: package
// views) with the request's context, encodes, and returns an error that
// one adapter (handle) maps to a problem body through one table
// (errors.go).
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/iceberg"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/ui"
)

// DefaultMaxBodyBytes bounds the bodies of the record routes (Arrow IPC
// or JSON rows: dataRoutes) unless configured; DefaultMaxJSONBodyBytes
// bounds every other body.
const (
	DefaultMaxBodyBytes     = 256 << 20
	DefaultMaxJSONBodyBytes = 1 << 20
)

// Config tunes the API.
type Config struct {
	// MaxBodyBytes (MVQ_MAX_BODY_BYTES) caps the bodies of the routes that
	// take records (dataRoutes); MaxJSONBodyBytes (MVQ_MAX_JSON_BODY_BYTES)
	// those of every other route, never above MaxBodyBytes. A larger body
	// is a 413 naming the limit, refused from its Content-Length before a
	// byte is read when it declares one.
	MaxBodyBytes     int64
	MaxJSONBodyBytes int64
	// BodyReadTimeout (MVQ_BODY_READ_TIMEOUT) and BodyMinBytesPerSecond
	// (MVQ_BODY_MIN_BYTES_PER_SECOND) bound how long a request body may
	// take to arrive (bodydeadline.go); zero: the defaults, negative: none.
	BodyReadTimeout       time.Duration
	BodyMinBytesPerSecond int64
	// SpoolBudgetBytes (MVQ_SPOOL_BUDGET_BYTES) bounds the memory of all
	// query results spooled at once, SpoolPrincipalBytes
	// (MVQ_SPOOL_PRINCIPAL_BYTES) one principal's share; past them results
	// spill to temporary files (spool.go). Zero: the defaults.
	SpoolBudgetBytes    int64
	SpoolPrincipalBytes int64
	// Middleware runs before every handler (tracing, metrics), and
	// before authentication: it sees no principal. Middleware that needs
	// auth.PrincipalFrom goes after s.authenticate() in Handler.
	Middleware []gin.HandlerFunc
	// Metrics, when set, is served on GET /metrics.
	Metrics http.Handler
	// Auth authenticates requests (auth.go has the grant each route
	// needs); nil is MVQ_AUTH=none: every request is allowed.
	Auth auth.Authenticator
	// TraceURLTemplate (MVQ_TRACE_URL_TEMPLATE) is the link from a job to
	// its trace in the jobs console; "{trace_id}" is replaced.
	TraceURLTemplate string
	// CatalogPrefix (MVQ_CATALOG_PREFIX, default DefaultCatalogPrefix) is
	// the {prefix} of the catalog notification route; AllowedLocations
	// (MVQ_ALLOWED_LOCATIONS) where the Iceberg tables it registers may be
	// read from (none: every notification that reads is a 403).
	CatalogPrefix    string
	AllowedLocations iceberg.Allowed
	// StorageOptions are what describe, declare and create answer as
	// storage_options (storage_options.go); nil: none.
	StorageOptions *StorageOptions
}

// Views is what the API needs of the view and job layer: the view and job
// routes, and what the table routes, the auth middleware and readiness ask
// of it. nil disables the materialized view and job routes (a table drop
// then has no dependents, a describe no view status, and the
// Idempotency-Key header is refused). ViewRoutes is the implementation.
type Views interface {
	// routes are the view and job routes, in the route table's form
	// (routes.go).
	routes() []route
	// Ping reports whether the job store answers (readyz).
	Ping(ctx context.Context) error
	// JobView returns the identifier of the view a job refreshes.
	JobView(ctx context.Context, jobID string) ([]string, error)
	// ToDrop returns the views that read table id, transitively, deepest
	// first, and the direct ones: what a table drop refuses, or with
	// cascade drops first.
	ToDrop(ctx context.Context, id []string) (all, direct [][]string, err error)
	// Dropped cancels the jobs of a dropped table (a view's) or, with ns,
	// of every view under a dropped namespace.
	Dropped(ctx context.Context, id []string, ns bool) error
	// DescribeView is the status a table describe shows for a view: nil
	// when m is not a view's.
	DescribeView(ctx context.Context, t *table.Table, m *table.Manifest) (any, error)
	// IdempotencyStore keeps the records of the Idempotency-Key header.
	IdempotencyStore() IdempotencyStore
}

// Server serves the API.
type Server struct {
	cfg   Config
	cat   *table.Catalog
	views Views
	ready atomic.Bool
	// notifier applies catalog notifications (notifications.go).
	notifier *iceberg.Registrar
	// spoolBudget is the memory spooled query results share (spool.go).
	spoolBudget *quota
	// rules is each route's rule by "METHOD path", read from the route
	// table (routes.go) by the auth middleware.
	rules map[string]routeRule
}

// New returns a server over the catalog; views may be nil.
func New(cfg Config, cat *table.Catalog, views Views) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxJSONBodyBytes <= 0 {
		cfg.MaxJSONBodyBytes = DefaultMaxJSONBodyBytes
	}
	cfg.MaxJSONBodyBytes = min(cfg.MaxJSONBodyBytes, cfg.MaxBodyBytes)
	switch {
	case cfg.BodyReadTimeout == 0:
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	case cfg.BodyReadTimeout < 0:
		cfg.BodyReadTimeout = 0 // none
	}
	switch {
	case cfg.BodyMinBytesPerSecond == 0:
		cfg.BodyMinBytesPerSecond = DefaultBodyMinBytesPerSecond
	case cfg.BodyMinBytesPerSecond < 0:
		cfg.BodyMinBytesPerSecond = 0 // no rate: the timeout alone
	}
	s := &Server{cfg: cfg, cat: cat, views: views, spoolBudget: newSpoolBudget(cfg.SpoolBudgetBytes, cfg.SpoolPrincipalBytes)}
	s.notifier = iceberg.NewRegistrar(cat, cfg.AllowedLocations)
	s.rules = map[string]routeRule{}
	for _, rt := range s.routes() {
		s.rules[rt.method+" "+rt.path] = rt.rule
	}
	s.ready.Store(true)
	return s
}

// SetReady flips /readyz; the API fails readiness first when draining.
func (s *Server) SetReady(ok bool) { s.ready.Store(ok) }

// Handler builds the router.
func (s *Server) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.ContextWithFallback = true
	r.Use(recovery())
	r.Use(s.bodyDeadline())
	r.Use(s.cfg.Middleware...)
	r.Use(s.bodyLimit())
	// After the body limit (it may read the body), before every handler.
	r.Use(s.authenticate())
	r.NoRoute(noRoute)
	r.HandleMethodNotAllowed = true
	r.NoMethod(func(c *gin.Context) {
		if allow := allowedMethods(r, c.Request.URL.Path); allow != "" {
			c.Header("Allow", allow)
		}
		routerProblem(c, methodNotAllowed, errs.CodeUnsupported, "method "+c.Request.Method+" not allowed on "+c.Request.URL.Path)
	})

	idem := s.idempotent()
	for _, rt := range s.routes() {
		h := []gin.HandlerFunc{handle(rt.handler)}
		if rt.idempotent {
			h = []gin.HandlerFunc{idem, handle(rt.handler)}
		}
		r.Handle(rt.method, rt.path, h...)
	}
	return r
}

// console serves the jobs console's static files.
func (s *Server) console() http.Handler {
	return ui.Handler(ui.Config{TraceURLTemplate: s.cfg.TraceURLTemplate, NotFound: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := gin.CreateTestContext(w)
		c.Request = r
		routerProblem(c, routeNotFound, errs.CodeUnsupported, "no file "+r.URL.Path)
	})})
}

// Answers of the router itself: no route, or a route without this method.
var (
	routeNotFound    = statusInfo{http.StatusNotFound, "/errors/not-found-error", "No such route"}
	methodNotAllowed = statusInfo{http.StatusMethodNotAllowed, "/errors/method-not-allowed", "Method not allowed"}
)

// routerProblem writes a problem body with the given status and code and aborts.
func routerProblem(c *gin.Context, info statusInfo, code errs.Code, msg string) {
	c.Header("Content-Type", errorContentType)
	c.AbortWithStatusJSON(info.status, Problem{
		Type: info.typ, Title: info.title, Status: info.status, Detail: msg,
		Instance: c.Request.URL.Path, Code: int(code), Error: msg,
	})
}

// allowedMethods lists the methods that have a route matching path, for
// the Allow header of a 405.
func allowedMethods(r *gin.Engine, path string) string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		for _, rt := range r.Routes() {
			if rt.Method == m && routeMatches(rt.Path, path) {
				out = append(out, m)
				break
			}
		}
	}
	return strings.Join(out, ", ")
}

// routeMatches reports whether a gin route pattern (":param" segments, a
// trailing "*rest") matches path.
func routeMatches(pattern, path string) bool {
	ps, xs := strings.Split(pattern, "/"), strings.Split(path, "/")
	for i, p := range ps {
		if strings.HasPrefix(p, "*") {
			return true
		}
		if i >= len(xs) || (!strings.HasPrefix(p, ":") && p != xs[i]) || (strings.HasPrefix(p, ":") && xs[i] == "") {
			return false
		}
	}
	return len(ps) == len(xs)
}

func (s *Server) readyz(c *gin.Context) error {
	if !s.ready.Load() {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "draining"})
		return nil
	}
	if db := s.cat.SQL(); db != nil {
		if busy, why := db.Saturated(); busy {
			c.JSON(http.StatusServiceUnavailable, gin.H{"status": "saturated", "reason": why})
			return nil
		}
	}
	if s.views != nil {
		if err := s.views.Ping(c.Request.Context()); err != nil {
			// The cause names Redis's address: logged, not shown.
			slog.WarnContext(c.Request.Context(), "readyz: redis unreachable", "err", err)
			c.JSON(http.StatusServiceUnavailable, gin.H{"status": "redis unavailable", "error": "redis unreachable"})
			return nil
		}
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready"})
	return nil
}

// recovery turns a panic into a 500 problem body; it is logged, never
// shown.
func recovery() gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				fail(c, &errs.Error{Code: errs.CodeInternal, Message: "panic", Err: panicErr{p}})
			}
		}()
		c.Next()
	}
}

type panicErr struct{ v any }

func (p panicErr) Error() string { return "panic: " + fmtAny(p.v) }
