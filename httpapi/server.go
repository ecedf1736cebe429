// Package httpapi is the HTTP surface of mvq: the Lance Namespace REST
// operations on namespaces and tables, materialized views and refresh
// jobs. Handlers decode, call the domain packages and map their coded
// errors to problem bodies through one table (errors.go).
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
}

// Views is what the API needs of the view and job layer; nil disables
// the materialized view and job routes.
type Views interface {
	routes(r gin.IRouter)
	ping(ctx context.Context) error
	// jobView returns the identifier of the view a job refreshes.
	jobView(ctx context.Context, jobID string) ([]string, error)
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

	// The jobs console: static files, no tenant data (openRoutes); what it
	// shows comes from API calls made with the user's token.
	console := ui.Handler(ui.Config{TraceURLTemplate: s.cfg.TraceURLTemplate, NotFound: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := gin.CreateTestContext(w)
		c.Request = r
		routerProblem(c, routeNotFound, errs.CodeUnsupported, "no file "+r.URL.Path)
	})})
	r.GET("/ui", func(c *gin.Context) { c.Redirect(http.StatusMovedPermanently, ui.Prefix) })
	r.GET(ui.Prefix+"*file", gin.WrapH(console))

	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", s.readyz)
	if s.cfg.Metrics != nil {
		r.GET("/metrics", gin.WrapH(s.cfg.Metrics))
	}

	v1 := r.Group("/v1")
	ns := v1.Group("/namespace/:id")
	ns.POST("/create", s.createNamespace)
	ns.GET("/list", s.listNamespaces)
	ns.POST("/list", s.listNamespaces)
	ns.POST("/describe", s.describeNamespace)
	ns.POST("/drop", s.dropNamespace)
	ns.POST("/exists", s.namespaceExists)
	ns.GET("/table/list", s.listTables)
	ns.POST("/table/list", s.listTables)

	t := v1.Group("/table/:id")
	t.POST("/create", s.idempotent(), s.createTable)
	t.POST("/insert", s.insertIntoTable)
	t.POST("/describe", s.describeTable)
	t.POST("/exists", s.tableExists)
	t.POST("/count_rows", s.countRows)
	t.POST("/query", s.queryTable)
	t.POST("/delete", s.deleteFromTable)
	t.POST("/update", s.updateTable)
	t.POST("/drop", s.dropTable)
	t.POST("/restore", s.restoreTable)
	t.POST("/stats", s.tableStats)
	t.GET("/version/list", s.listVersions)
	t.POST("/version/list", s.listVersions)
	t.POST("/version/describe", s.describeVersion)
	t.POST("/version/create", s.createVersion)
	t.POST("/merge_insert", s.mergeInsert)

	s.tableOps2Routes(v1)
	s.versionTagRoutes(v1)
	s.txnRoutes(v1)
	s.branchRoutes(v1)
	s.schemaRoutes(v1)
	s.indexRoutes(v1)
	if s.views != nil {
		s.views.routes(v1)
	}
	s.catalogRoutes(r)
	return r
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

func (s *Server) readyz(c *gin.Context) {
	if !s.ready.Load() {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "draining"})
		return
	}
	if db := s.cat.SQL(); db != nil {
		if busy, why := db.Saturated(); busy {
			c.JSON(http.StatusServiceUnavailable, gin.H{"status": "saturated", "reason": why})
			return
		}
	}
	if s.views != nil {
		if err := s.views.ping(c.Request.Context()); err != nil {
			// The cause names Redis's address: logged, not shown.
			slog.WarnContext(c.Request.Context(), "readyz: redis unreachable", "err", err)
			c.JSON(http.StatusServiceUnavailable, gin.H{"status": "redis unavailable", "error": "redis unreachable"})
			return
		}
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready"})
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
