package service

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/telemetry"
)

// Shutdown budget of a worker: running work items get
// WorkerShutdownTimeout to finish (asynq's ShutdownTimeout; the rest are
// re-queued), then the metrics/health listener drains for
// WorkerDrainTimeout. A pod's terminationGracePeriodSeconds must exceed
// their sum (deploy/k8s is tested for it).
const (
	WorkerShutdownTimeout = 20 * time.Second
	WorkerDrainTimeout    = 5 * time.Second
)

func (cfg Config) engineOptions() refresh.EngineOptions {
	return refresh.EngineOptions{MaxItemOutputRows: cfg.MaxItemOutputRows, MaxItemOutputBytes: cfg.MaxItemOutputBytes, Runtimes: cfg.Runtimes}
}

// startWorker starts an asynq server for cfg.Clusters, reports its queues
// to the metrics (unless the API in the same process reports every
// cluster's: gauges false), and returns its shutdown.
func startWorker(cfg Config, core *Core, gauges bool) (func(), error) {
	rdb, conn, err := redisClients(cfg.RedisURL)
	if err != nil {
		return nil, err
	}
	eng := refresh.NewEngineWith(core.Catalog, cfg.engineOptions())
	srv, err := jobs.NewServer(jobs.ServerConfig{
		Redis: conn, RDB: rdb, Engine: eng,
		Clusters: cfg.Clusters, Concurrency: cfg.WorkerConcurrency,
		ShutdownTimeout: WorkerShutdownTimeout, Logger: slog.Default(),
		Rescue: jobs.RescuerConfig{StallTimeout: cfg.JobStallTimeout},
		Janitor: &jobs.JanitorConfig{Catalog: core.Catalog, Interval: cfg.JanitorInterval, OrphanGrace: cfg.OrphanGrace,
			Compactor: jobs.TableCompactor{Catalog: core.Catalog}},
	})
	if err != nil {
		rdb.Close()
		return nil, err
	}
	// Views over views: a view this worker commits is a change of the
	// views that read it.
	trig := jobs.NewClient(rdb, conn, eng, jobs.AutoRefresh(cfg.autoConfig()))
	core.Catalog.OnCommit(trig.CommitHook())
	if err := srv.Start(); err != nil {
		core.Catalog.OnCommit(nil)
		trig.Close()
		rdb.Close()
		return nil, err
	}
	stale := trig.NewStalenessReporter(eng, 0)
	_ = stale.Start(context.Background())
	// Views' refresh_every schedules: every worker polls; each period
	// fires once in the pool.
	sched := trig.NewScheduler(jobs.SchedulerConfig{})
	_ = sched.Start(context.Background())
	unregisterStale, err := telemetry.RegisterStalenessGauge(stale.Values)
	if err != nil {
		_ = sched.Stop(context.Background())
		_ = stale.Stop(context.Background())
		srv.Shutdown()
		core.Catalog.OnCommit(nil)
		trig.Close()
		rdb.Close()
		return nil, err
	}
	unregister := func() {}
	if gauges {
		if unregister, err = telemetry.RegisterQueueGauges(srv.QueueStats); err != nil {
			unregisterStale()
			_ = sched.Stop(context.Background())
			_ = stale.Stop(context.Background())
			srv.Shutdown()
			core.Catalog.OnCommit(nil)
			trig.Close()
			rdb.Close()
			return nil, err
		}
	}
	return func() {
		unregister()
		unregisterStale()
		_ = sched.Stop(context.Background())
		_ = stale.Stop(context.Background())
		srv.Shutdown()
		core.Catalog.OnCommit(nil)
		trig.Close()
		rdb.Close()
		_ = eng.Close() // stops the user-code subprocesses
	}, nil
}

// healthKey is the object the warehouse probe asks about (it need not
// exist: a reachable store answers "no").
const healthKey = ".mvq-health"

// RunWorker runs a worker until ctx ends, then shuts down gracefully. It
// serves /healthz, /readyz (health.go) and /metrics on cfg.MetricsListen.
func RunWorker(ctx context.Context, cfg Config, ready func(metricsAddr string)) error {
	TuneGC()
	core, tel, stopCore, err := boot(ctx, cfg, "mvq-worker")
	if err != nil {
		return err
	}
	defer stopCore()
	stop, err := startWorker(cfg, core, true)
	if err != nil {
		return err
	}
	defer stop()
	ln, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		return err
	}
	target, err := ParseRedisURL(cfg.RedisURL)
	if err != nil {
		return err
	}
	// An untraced client of its own: probes every few seconds are no
	// trace anyone wants.
	probeRDB := target.Client()
	defer probeRDB.Close()
	h := newHealth(cfg.HealthTimeout,
		healthDep{"redis", func(ctx context.Context) error { return probeRDB.Ping(ctx).Err() }},
		healthDep{"warehouse", func(ctx context.Context) error { _, err := core.wh.Exists(ctx, healthKey); return err }})
	hctx, stopHealth := context.WithCancel(context.Background())
	defer stopHealth()
	go h.run(hctx)
	h.ready.Store(true)
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", h.healthz)
	mux.HandleFunc("/readyz", h.readyz)
	mux.Handle("/metrics", tel.MetricsHandler())
	slog.Info("mvq worker started", "clusters", cfg.Clusters, "concurrency", cfg.WorkerConcurrency, "metrics", ln.Addr().String())
	if ready != nil {
		ready(ln.Addr().String())
	}
	return Serve(ctx, ln, mux, func() { h.ready.Store(false) }, WorkerDrainTimeout, cfg.WriteTimeout)
}
