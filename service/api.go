package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	"go.opentelemetry.io/otel"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/telemetry"
)

// Core is what every process shares: the warehouse catalog and SQL engine.
type Core struct {
	Catalog *table.Catalog
	SQL     *duck.DB
	wh      *table.Warehouse
}

// OpenCore opens the warehouse and the SQL engine. An object-store
// warehouse must honour conditional writes (table.CheckConditionalWrites)
// and be reachable within 30 s, or OpenCore fails. In the Lance table
// format a warehouse of the Parquet + JSON layout is refused, naming
// mvq warehouse upgrade (table.CheckWarehouseFormat).
func OpenCore(ctx context.Context, cfg Config) (*Core, error) {
	wh, err := table.OpenWarehouse(ctx, cfg.Warehouse)
	if err != nil {
		return nil, err
	}
	// Commits are put-if-absent: a store that ignores the condition would
	// let two writers commit the same version, so refuse to start on it.
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = wh.CheckConditionalWrites(pctx)
	cancel()
	if err != nil {
		wh.Close()
		return nil, err
	}
	budget := cfg.QueryMemory
	if budget == 0 {
		budget = DefaultQueryMemory()
	}
	// The API's requests carry their principal; a worker's work carries
	// none and is not shared out.
	db, err := duck.Open(duck.Options{QueryTimeout: cfg.QueryTimeout, MemoryBudget: budget, Sessions: cfg.QuerySessions,
		ShareKey: auth.PrincipalFrom, Share: cfg.QueryShare})
	if err != nil {
		wh.Close()
		return nil, fmt.Errorf("duckdb: %w", err)
	}
	slog.Info("sql engine", "sessions", db.Sessions(), "session_memory_mib", db.SessionMemory()>>20, "query_memory_mib", budget>>20)
	// The catalog uses and maintains indexes, and refuses direct writes to
	// views whether or not this process builds a refresh engine.
	cat := table.NewCatalog(wh, db, table.Options{Indexes: index.Maintenance(), Format: cfg.TableFormat})
	// In the Lance table format (MVQ_TABLE_FORMAT=lance) a warehouse of
	// the Parquet + JSON layout is refused until mvq warehouse upgrade
	// converted it; an empty one is marked as Lance.
	if err := table.CheckWarehouseFormat(ctx, cat); err != nil {
		db.Close()
		wh.Close()
		return nil, err
	}
	cat.Use(refresh.Hooks())
	return &Core{Catalog: cat, SQL: db, wh: wh}, nil
}

// Close releases the core.
func (c *Core) Close() {
	c.SQL.Close()
	c.wh.Close()
}

// Serve runs h on ln until ctx ends, then fails readiness, drains for up
// to drain and returns. Request headers must arrive within 10 s (a body
// within MVQ_BODY_READ_TIMEOUT and its minimum rate: httpapi's
// bodyDeadline moves the read deadline as it arrives); a
// response write may stall at most writeTimeout (0: 60 s). Handlers that
// stream (query results, job events) keep their connection by writing:
// httpapi.WriteDeadlines moves the deadline before every write, so
// WriteTimeout bounds a stall, not a response's length.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, onDrain func(), drain, writeTimeout time.Duration) error {
	if writeTimeout <= 0 {
		writeTimeout = 60 * time.Second
	}
	// Streams (job events) end when shutdown begins; other requests drain.
	stopping := make(chan struct{})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: writeTimeout, IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return httpapi.WithShutdown(context.Background(), stopping) }}
	srv.RegisterOnShutdown(func() { close(stopping) })
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if onDrain != nil {
		onDrain()
	}
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// APIDrainTimeout is how long the API drains requests after failing
// /readyz on shutdown; a pod's grace period must exceed it.
const APIDrainTimeout = 15 * time.Second

// RunAPI serves the HTTP API until ctx ends. ready, when set, is called
// with the bound address once the listener is up.
func RunAPI(ctx context.Context, cfg Config, ready func(addr string)) error {
	if err := cfg.Auth.Check(cfg.Listen); err != nil {
		return err
	}
	defer TuneAPIGC()()
	core, tel, stop, err := boot(ctx, cfg, "mvq-api")
	if err != nil {
		return err
	}
	defer stop()
	return serveAPI(ctx, cfg, core, tel, ready)
}

func serveAPI(ctx context.Context, cfg Config, core *Core, tel *telemetry.Telemetry, ready func(addr string)) error {
	if err := cfg.Auth.Check(cfg.Listen); err != nil {
		return err
	}
	authn, err := auth.New(ctx, cfg.Auth)
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	if authn != nil {
		defer authn.Close()
	} else if !auth.Loopback(cfg.Listen) {
		slog.Warn("MVQ_AUTH=none on a non-loopback address: every caller can do anything", "listen", cfg.Listen)
	}
	views, closeViews, err := openViews(ctx, cfg, core)
	if err != nil {
		return err
	}
	defer closeViews()
	apiCfg := httpapi.Config{
		MaxBodyBytes: cfg.MaxBodyBytes,
		Metrics:      tel.MetricsHandler(),
		// The request span is the root of a refresh job's trace
		// (requestTracing); requests are counted and timed by
		// httpapi.Metrics (mvq_http_*, the metrics contract).
		Middleware: []gin.HandlerFunc{requestTracing(tel), httpapi.Metrics(),
			httpapi.WriteDeadlines(cfg.WriteTimeout), httpapi.QueryQueueWait(cfg.QueryQueueWait)},
		Auth:             authn,
		TraceURLTemplate: cfg.TraceURLTemplate,
		CatalogPrefix:    cfg.CatalogPrefix,
		AllowedLocations: cfg.AllowedLocations,
		StorageOptions:   cfg.StorageOptions,
	}
	cfg.HTTPLimits.apply(&apiCfg)
	api := httpapi.New(apiCfg, core.Catalog, views)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	slog.Info("mvq api listening", "addr", ln.Addr().String(), "warehouse", core.wh.URI(), "auth", cfg.Auth.Mode)
	if ready != nil {
		ready(ln.Addr().String())
	}
	return Serve(ctx, ln, api.Handler(), func() { api.SetReady(false) }, APIDrainTimeout, cfg.WriteTimeout)
}

// requestTracing is the middleware whose span is a request's, the root of
// a refresh job's trace: otelgin's when spans are exported; else a span
// with ids only (continuing the traceparent a client sent), without the
// request attributes otelgin computes for a record nobody would keep.
// otelgin's own http.server.* series are off: they would count every
// request a second time, outside the metrics contract.
func requestTracing(tel *telemetry.Telemetry) gin.HandlerFunc {
	if tel.Exporting {
		return otelgin.Middleware("mvq-api", otelgin.WithTracerProvider(tel.Tracing), otelgin.WithMeterProvider(noopmetric.NewMeterProvider()))
	}
	tracer := tel.Tracing.Tracer("mvq-api")
	return func(c *gin.Context) {
		saved := c.Request.Context()
		ctx := otel.GetTextMapPropagator().Extract(saved, propagation.HeaderCarrier(c.Request.Header))
		ctx, span := tracer.Start(ctx, c.FullPath(), trace.WithSpanKind(trace.SpanKindServer))
		c.Request = c.Request.WithContext(ctx)
		defer func() {
			span.End()
			c.Request = c.Request.WithContext(saved)
		}()
		c.Next()
	}
}
