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
// cluster's: gauges false), and returns its shutdown. On an error whatever
// was started is stopped again, in reverse order.
func startWorker(cfg Config, core *Core, gauges bool) (func(), error) {
	var undo []func() // run last to first
	stop := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	fail := func(err error) (func(), error) {
		stop()
		return nil, err
	}
	rdb, conn, err := redisClients(cfg.RedisURL)
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { rdb.Close() })
	eng := refresh.NewEngineWith(core.Catalog, cfg.engineOptions())
	undo = append(undo, func() { _ = eng.Close() }) // stops the user-code subprocesses
	srv, err := jobs.NewServer(jobs.ServerConfig{
		Redis: conn, RDB: rdb, Engine: eng,
		Clusters: cfg.Clusters, Concurrency: cfg.WorkerConcurrency,
		ShutdownTimeout: WorkerShutdownTimeout, Logger: slog.Default(),
		Rescue: jobs.RescuerConfig{StallTimeout: cfg.JobStallTimeout},
		Janitor: &jobs.JanitorConfig{Catalog: core.Catalog, Interval: cfg.JanitorInterval, OrphanGrace: cfg.OrphanGrace,
			Compactor: jobs.TableCompactor{Catalog: core.Catalog}},
	})
	if err != nil {
		return fail(err)
	}
	// Views over views: a view this worker commits is a change of the
	// views that read it.
	trig := jobs.NewClient(rdb, conn, eng, jobs.AutoRefresh(cfg.autoConfig()))
	core.Catalog.OnCommit(trig.CommitHook())
	undo = append(undo, func() { trig.Close() }, func() { core.Catalog.OnCommit(nil) })
	if err := srv.Start(); err != nil {
		return fail(err)
	}
	undo = append(undo, srv.Shutdown)
	stale := trig.NewStalenessReporter(eng, 0)
	if err := stale.Start(context.Background()); err != nil {
		return fail(err)
	}
	undo = append(undo, func() { _ = stale.Stop(context.Background()) })
	// Views' refresh_every schedules: every worker polls; each period
	// fires once in the pool.
	sched := trig.NewScheduler(jobs.SchedulerConfig{})
	if err := sched.Start(context.Background()); err != nil {
		return fail(err)
	}
	undo = append(undo, func() { _ = sched.Stop(context.Background()) })
	unregisterStale, err := telemetry.RegisterStalenessGauge(stale.Values)
	if err != nil {
		return fail(err)
	}
	undo = append(undo, unregisterStale)
	if gauges {
		unregister, err := telemetry.RegisterQueueGauges(srv.QueueStats)
		if err != nil {
			return fail(err)
		}
		undo = append(undo, unregister)
	}
	return stop, nil
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
