// Package service assembles mvq's processes from configuration: the API,
// the worker and the all-in-one dev server. cmd/* mains only call it.
package service

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/iceberg"
	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/udf"
)

// Config is resolved once: defaults, then environment, then flags, then
// validated. Bad config fails before anything listens.
type Config struct {
	Listen    string // MVQ_LISTEN, default 127.0.0.1:2333
	Warehouse string // MVQ_WAREHOUSE, default file://./warehouse
	// TableFormat (MVQ_TABLE_FORMAT, API and worker) is the format of the
	// tables created and data files written: lance (default; LanceDB
	// opens them) or parquet (the earlier layout, only mvq reads it).
	// Both are read whatever it says.
	TableFormat       string
	RedisURL          string        // MVQ_REDIS_URL, default redis://127.0.0.1:6379/0 (ParseRedisURL: also Sentinel and Cluster)
	Clusters          []string      // MVQ_CLUSTERS, default "default"
	WorkerConcurrency int           // MVQ_WORKER_CONCURRENCY, default 8
	MetricsListen     string        // MVQ_METRICS_LISTEN (worker), default 127.0.0.1:9464
	MaxBodyBytes      int64         // MVQ_MAX_BODY_BYTES, default 256 MiB
	LogLevel          string        // MVQ_LOG_LEVEL: debug, info (default), warn, error
	QueryTimeout      time.Duration // MVQ_QUERY_TIMEOUT, default 60s: deadline of each SQL query
	QueryQueueWait    time.Duration // MVQ_QUERY_QUEUE_WAIT, default 2s: API wait for a SQL session before 503
	WriteTimeout      time.Duration // MVQ_WRITE_TIMEOUT, default 60s: longest stall of one response write

	// Admission and maintenance (environment only).
	MaxPendingJobs  int           // MVQ_MAX_PENDING_JOBS (API), default 1000; 0: no limit
	JobCacheMaxAge  time.Duration // MVQ_JOB_CACHE_MAX_AGE (API), default 1s; 0: every job read goes to Redis
	JobStallTimeout time.Duration // MVQ_JOB_STALL_TIMEOUT (worker), default 30m
	OrphanGrace     time.Duration // MVQ_ORPHAN_GRACE (worker), default 1h
	JanitorInterval time.Duration // MVQ_JANITOR_INTERVAL (worker), default 10m
	// HealthTimeout (MVQ_HEALTH_TIMEOUT, worker), default 60s: how long
	// Redis or the warehouse may be unreachable before /healthz fails.
	HealthTimeout time.Duration

	// Automatic refresh (API and worker, environment only).
	AutoMinInterval time.Duration // MVQ_AUTO_REFRESH_MIN_INTERVAL, default 1s; 0: none
	AutoDebounce    time.Duration // MVQ_AUTO_REFRESH_DEBOUNCE, default 0

	// MVQ_MAX_ITEM_OUTPUT_ROWS and MVQ_MAX_ITEM_OUTPUT_BYTES (worker):
	// bounds of one work item's output (refresh.EngineOptions).
	MaxItemOutputRows  int64
	MaxItemOutputBytes int64

	// Runtimes is the file MVQ_RUNTIMES_FILE names, loaded (API and
	// worker): the runtimes user code may run in. nil: none.
	Runtimes *udf.Registry

	// Auth is MVQ_AUTH and its settings (MVQ_AUTH_TOKENS_FILE,
	// MVQ_AUTH_JWT_SECRET, MVQ_AUTH_JWKS, MVQ_AUTH_JWT_AUDIENCE, MVQ_AUTH_JWT_ISSUER,
	// MVQ_ALLOW_UNAUTHENTICATED); the
	// API refuses to start without a mode (Auth.Check).
	Auth auth.Config

	// SQL engine bounds (environment only, loadQueryBounds): QueryMemory
	// (MVQ_QUERY_MEMORY, API and worker) is the memory of every DuckDB
	// database that may run a query at once, together; 0: OpenCore uses
	// DefaultQueryMemory. QuerySessions (MVQ_QUERY_SESSIONS, API and
	// worker) bounds the queries running at once, over which QueryMemory
	// is divided; 0: max(4, 2×GOMAXPROCS). QueryShare (MVQ_QUERY_SHARE,
	// API) bounds the SQL sessions one principal holds at once; 0: half,
	// rounded up.
	QueryMemory   int64
	QuerySessions int
	QueryShare    int

	// TraceURLTemplate (MVQ_TRACE_URL_TEMPLATE, API): the jobs console's
	// link from a job to its trace, "{trace_id}" replaced; empty: no link.
	TraceURLTemplate string

	// External tables (API, environment only). CatalogPrefix
	// (MVQ_CATALOG_PREFIX, default "mvq") is the {prefix} of the catalog
	// notification route; AllowedLocations (MVQ_ALLOWED_LOCATIONS, a comma
	// list of URI prefixes, each open to every namespace or, written
	// NAMESPACE=PREFIX, to one namespace and those nested in it; default
	// none) are where Iceberg tables may be read from: a notification
	// naming any other location is a 403.
	CatalogPrefix    string
	AllowedLocations iceberg.Allowed

	// StorageOptions is the file MVQ_STORAGE_OPTIONS_FILE names, loaded
	// (API, environment only): the storage_options describe, declare and
	// create answer, by principal and namespace, so that Lance clients
	// reach the warehouse's bucket (httpapi.StorageOptions). nil: none.
	StorageOptions *httpapi.StorageOptions

	// HTTPLimits bound request bodies, spooled results, event streams and
	// idempotency records (API, environment only; httplimits.go).
	HTTPLimits HTTPLimits
}

// ErrVersion is what LoadConfig returns for -version: the caller prints
// version.String and exits 0.
var ErrVersion = errors.New("version requested")

// roleOf maps a LoadConfig name to the flags it lists: "a" (api), "w"
// (worker) or "d" (mvq dev, mvq demo).
func roleOf(name string) string {
	switch name {
	case "api":
		return "a"
	case "worker":
		return "w"
	default:
		return "d"
	}
}

// Defaults returns the built-in configuration.
func Defaults() Config {
	return Config{
		Listen:             "127.0.0.1:2333",
		Warehouse:          table.DefaultWarehouse,
		RedisURL:           "redis://127.0.0.1:6379/0",
		Clusters:           []string{refresh.DefaultCluster},
		WorkerConcurrency:  8,
		MetricsListen:      "127.0.0.1:9464",
		MaxBodyBytes:       httpapi.DefaultMaxBodyBytes,
		LogLevel:           "info",
		QueryTimeout:       duck.DefaultQueryTimeout,
		QueryQueueWait:     2 * time.Second,
		WriteTimeout:       60 * time.Second,
		MaxPendingJobs:     1000,
		JobStallTimeout:    30 * time.Minute,
		OrphanGrace:        time.Hour,
		JanitorInterval:    10 * time.Minute,
		HealthTimeout:      time.Minute,
		AutoMinInterval:    time.Second,
		JobCacheMaxAge:     jobs.DefaultJobCacheMaxAge,
		CatalogPrefix:      "mvq",
		MaxItemOutputRows:  refresh.DefaultMaxItemOutputRows,
		MaxItemOutputBytes: refresh.DefaultMaxItemOutputBytes,
	}
}

// LoadConfig resolves the configuration from getenv and args.
func LoadConfig(name string, args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	cfg := Defaults()
	env := func(key string, dst *string) {
		if v := getenv(key); v != "" {
			*dst = v
		}
	}
	env("MVQ_LISTEN", &cfg.Listen)
	env("MVQ_WAREHOUSE", &cfg.Warehouse)
	env("MVQ_REDIS_URL", &cfg.RedisURL)
	env("MVQ_METRICS_LISTEN", &cfg.MetricsListen)
	env("MVQ_LOG_LEVEL", &cfg.LogLevel)
	env("MVQ_TABLE_FORMAT", &cfg.TableFormat)
	clusters := strings.Join(cfg.Clusters, ",")
	env("MVQ_CLUSTERS", &clusters)
	conc := strconv.Itoa(cfg.WorkerConcurrency)
	env("MVQ_WORKER_CONCURRENCY", &conc)
	maxBody := strconv.FormatInt(cfg.MaxBodyBytes, 10)
	env("MVQ_MAX_BODY_BYTES", &maxBody)
	itemRows := strconv.FormatInt(cfg.MaxItemOutputRows, 10)
	env("MVQ_MAX_ITEM_OUTPUT_ROWS", &itemRows)
	itemBytes := strconv.FormatInt(cfg.MaxItemOutputBytes, 10)
	env("MVQ_MAX_ITEM_OUTPUT_BYTES", &itemBytes)
	durations := []struct {
		env, flag, usage, roles string
		dst                     *time.Duration
		val                     string
	}{
		{"MVQ_QUERY_TIMEOUT", "query-timeout", "deadline of each SQL query", "awd", &cfg.QueryTimeout, ""},
		{"MVQ_QUERY_QUEUE_WAIT", "query-queue-wait", "how long an API request waits for a SQL session before 503", "ad", &cfg.QueryQueueWait, ""},
		{"MVQ_WRITE_TIMEOUT", "write-timeout", "longest a response write may stall before the connection is cut", "awd", &cfg.WriteTimeout, ""},
	}
	for i := range durations {
		durations[i].val = durations[i].dst.String()
		env(durations[i].env, &durations[i].val)
	}

	if v := getenv("MVQ_MAX_PENDING_JOBS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return cfg, fmt.Errorf("MVQ_MAX_PENDING_JOBS %q: want an integer >= 0 (0: no limit)", v)
		}
		cfg.MaxPendingJobs = n
	}
	for _, d := range []struct {
		key string
		dst *time.Duration
	}{{"MVQ_JOB_STALL_TIMEOUT", &cfg.JobStallTimeout}, {"MVQ_ORPHAN_GRACE", &cfg.OrphanGrace}, {"MVQ_JANITOR_INTERVAL", &cfg.JanitorInterval}, {"MVQ_HEALTH_TIMEOUT", &cfg.HealthTimeout}} {
		if v := getenv(d.key); v != "" {
			x, err := time.ParseDuration(v)
			if err != nil || x <= 0 {
				return cfg, fmt.Errorf("%s %q: want a positive duration such as 30m", d.key, v)
			}
			*d.dst = x
		}
	}
	for _, d := range []struct {
		key string
		dst *time.Duration
	}{{"MVQ_AUTO_REFRESH_MIN_INTERVAL", &cfg.AutoMinInterval}, {"MVQ_AUTO_REFRESH_DEBOUNCE", &cfg.AutoDebounce}, {"MVQ_JOB_CACHE_MAX_AGE", &cfg.JobCacheMaxAge}} {
		if v := getenv(d.key); v != "" {
			x, err := time.ParseDuration(v)
			if err != nil || x < 0 {
				return cfg, fmt.Errorf("%s %q: want a duration >= 0 such as 1s", d.key, v)
			}
			*d.dst = x
		}
	}
	env("MVQ_AUTH", &cfg.Auth.Mode)
	env("MVQ_AUTH_TOKENS_FILE", &cfg.Auth.TokensFile)
	env("MVQ_AUTH_JWT_SECRET", &cfg.Auth.JWTSecret)
	env("MVQ_AUTH_JWKS", &cfg.Auth.JWKS)
	env("MVQ_AUTH_JWT_AUDIENCE", &cfg.Auth.Audience) // jwt: aud must include it (auth.Config)
	env("MVQ_AUTH_JWT_ISSUER", &cfg.Auth.Issuer)     // jwt: iss must be it
	allowUnauth := "false"
	env("MVQ_ALLOW_UNAUTHENTICATED", &allowUnauth)

	if err := loadQueryBounds(&cfg, getenv); err != nil {
		return cfg, err
	}
	env("MVQ_TRACE_URL_TEMPLATE", &cfg.TraceURLTemplate)
	env("MVQ_CATALOG_PREFIX", &cfg.CatalogPrefix)
	if cfg.CatalogPrefix == "" || strings.ContainsAny(cfg.CatalogPrefix, "/%?#") {
		return cfg, fmt.Errorf("MVQ_CATALOG_PREFIX %q: want one non-empty path segment", cfg.CatalogPrefix)
	}
	if v := getenv("MVQ_ALLOWED_LOCATIONS"); v != "" {
		a, err := iceberg.ParseAllowed(v)
		if err != nil {
			return cfg, fmt.Errorf("MVQ_ALLOWED_LOCATIONS: %v", err)
		}
		cfg.AllowedLocations = a
	}
	if p := getenv("MVQ_STORAGE_OPTIONS_FILE"); p != "" {
		o, err := httpapi.LoadStorageOptions(p)
		if err != nil {
			return cfg, fmt.Errorf("MVQ_STORAGE_OPTIONS_FILE: %w", err)
		}
		cfg.StorageOptions = o
	}
	runtimesFile := ""
	env("MVQ_RUNTIMES_FILE", &runtimesFile)
	limits, err := loadHTTPLimits(getenv)
	if err != nil {
		return cfg, err
	}
	cfg.HTTPLimits = limits

	// Each binary lists only the flags it reads; a flag is named after its
	// variable (MVQ_WORKER_CONCURRENCY: -worker-concurrency).
	role := roleOf(name)
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	str := func(roles string, dst *string, flagName, usage, envName string) {
		if strings.Contains(roles, role) {
			fs.StringVar(dst, flagName, *dst, usage+" ("+envName+")")
		}
	}
	// Roles: a = api, w = worker, d = mvq dev and demo (API and worker in
	// one process, on their own Redis).
	str("ad", &cfg.Listen, "listen", "API listen address", "MVQ_LISTEN")
	str("awd", &cfg.Warehouse, "warehouse", "warehouse root URI: file://, mem://, s3://, gs://", "MVQ_WAREHOUSE")
	str("aw", &cfg.RedisURL, "redis-url", "Redis URL", "MVQ_REDIS_URL")
	str("awd", &clusters, "clusters", "comma-separated clusters (worker pools) this worker serves; the API reports their queues before any worker ran", "MVQ_CLUSTERS")
	str("wd", &conc, "worker-concurrency", "work items one worker runs at once", "MVQ_WORKER_CONCURRENCY")
	str("w", &cfg.MetricsListen, "metrics-listen", "worker /metrics and /healthz address", "MVQ_METRICS_LISTEN")
	str("ad", &maxBody, "max-body-bytes", "largest request body accepted", "MVQ_MAX_BODY_BYTES")
	str("wd", &itemRows, "max-item-output-rows", "most view rows one work item may produce", "MVQ_MAX_ITEM_OUTPUT_ROWS")
	str("wd", &itemBytes, "max-item-output-bytes", "most bytes one work item may produce", "MVQ_MAX_ITEM_OUTPUT_BYTES")
	str("awd", &cfg.LogLevel, "log-level", "debug, info, warn or error", "MVQ_LOG_LEVEL")
	str("awd", &cfg.TableFormat, "table-format", "format of new tables and data files: lance or parquet", "MVQ_TABLE_FORMAT")
	for i := range durations {
		d := &durations[i]
		str(d.roles, &d.val, d.flag, d.usage, d.env)
	}
	str("ad", &cfg.Auth.Mode, "auth", "API authentication: tokens, jwt or none", "MVQ_AUTH")
	str("ad", &cfg.Auth.TokensFile, "auth-tokens-file", "tokens file for -auth tokens", "MVQ_AUTH_TOKENS_FILE")
	str("ad", &cfg.Auth.JWKS, "auth-jwks", "JWKS file or URL for -auth jwt with RS256/ES256", "MVQ_AUTH_JWKS")
	str("ad", &cfg.Auth.Audience, "auth-jwt-audience", "-auth jwt: a token's aud must include this", "MVQ_AUTH_JWT_AUDIENCE")
	str("ad", &cfg.Auth.Issuer, "auth-jwt-issuer", "-auth jwt: a token's iss must be this", "MVQ_AUTH_JWT_ISSUER")
	str("ad", &allowUnauth, "allow-unauthenticated", "true: let -auth none listen on a non-loopback address", "MVQ_ALLOW_UNAUTHENTICATED")
	str("ad", &cfg.TraceURLTemplate, "trace-url-template", "jobs console link to a job's trace, {trace_id} replaced", "MVQ_TRACE_URL_TEMPLATE")
	str("awd", &runtimesFile, "runtimes-file", "YAML/JSON file declaring the runtimes user code runs in", "MVQ_RUNTIMES_FILE")
	showVersion := fs.Bool("version", false, "print the version and commit, then exit")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if *showVersion {
		return cfg, ErrVersion
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q (flags only; -h lists them)", fs.Arg(0))
	}
	for _, d := range durations {
		v, err := time.ParseDuration(d.val)
		if err != nil || v <= 0 || v > 24*time.Hour {
			return cfg, fmt.Errorf("%s %q: want a duration such as 30s or 2m, above 0 and at most 24h", d.env, d.val)
		}
		*d.dst = v
	}
	cfg.Clusters = nil
	for _, c := range strings.Split(clusters, ",") {
		if c = strings.TrimSpace(c); c != "" {
			cfg.Clusters = append(cfg.Clusters, c)
		}
	}
	switch cfg.TableFormat {
	case "":
		cfg.TableFormat = table.FormatLance
	case table.FormatLance, table.FormatParquet:
	default:
		return cfg, fmt.Errorf("MVQ_TABLE_FORMAT %q: want lance or parquet", cfg.TableFormat)
	}
	if cfg.WorkerConcurrency, err = strconv.Atoi(conc); err != nil || cfg.WorkerConcurrency <= 0 || cfg.WorkerConcurrency > 4096 {
		return cfg, fmt.Errorf("worker concurrency %q: want an integer in 1..4096", conc)
	}
	if cfg.MaxBodyBytes, err = strconv.ParseInt(maxBody, 10, 64); err != nil || cfg.MaxBodyBytes <= 0 {
		return cfg, fmt.Errorf("max body bytes %q: want a positive integer", maxBody)
	}
	if cfg.MaxItemOutputRows, err = strconv.ParseInt(itemRows, 10, 64); err != nil || cfg.MaxItemOutputRows <= 0 {
		return cfg, fmt.Errorf("MVQ_MAX_ITEM_OUTPUT_ROWS %q: want a positive integer", itemRows)
	}
	if cfg.MaxItemOutputBytes, err = strconv.ParseInt(itemBytes, 10, 64); err != nil || cfg.MaxItemOutputBytes <= 0 {
		return cfg, fmt.Errorf("MVQ_MAX_ITEM_OUTPUT_BYTES %q: want a positive integer", itemBytes)
	}
	if p := runtimesFile; p != "" {
		if cfg.Runtimes, err = udf.Load(p); err != nil {
			return cfg, fmt.Errorf("MVQ_RUNTIMES_FILE: %w", err)
		}
	}
	if cfg.Auth.AllowUnauthenticated, err = strconv.ParseBool(allowUnauth); err != nil {
		return cfg, fmt.Errorf("MVQ_ALLOW_UNAUTHENTICATED %q: want true or false", allowUnauth)
	}
	if len(cfg.Clusters) == 0 {
		return cfg, fmt.Errorf("clusters: at least one is needed")
	}
	if _, err := ParseRedisURL(cfg.RedisURL); err != nil {
		return cfg, fmt.Errorf("MVQ_REDIS_URL: %w", err)
	}
	switch cfg.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return cfg, fmt.Errorf("log level %q: want debug, info, warn or error", cfg.LogLevel)
	}
	return cfg, nil
}

// ReadyFile returns a ready callback that writes the bound address to the
// file MVQ_READY_FILE names (for supervisors and tests that start the
// binaries on port 0); without it the callback does nothing.
func ReadyFile(getenv func(string) string) func(addr string) {
	return func(addr string) {
		if p := getenv("MVQ_READY_FILE"); p != "" {
			// Written aside and renamed: a reader never sees half an address.
			if os.WriteFile(p+".tmp", []byte(addr), 0o644) == nil {
				_ = os.Rename(p+".tmp", p)
			}
		}
	}
}
