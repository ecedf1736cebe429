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

func (cfg Config) engineOptions() refresh.EngineOptions {
	return refresh.EngineOptions{MaxItemOutputRows: cfg.MaxItemOutputRows, MaxItemOutputBytes: cfg.MaxItemOutputBytes, Runtimes: cfg.Runtimes}
}

// startWorker starts an asynq server for cfg.Clusters, reports its queues
// to the metrics, and returns its shutdown.
func startWorker(cfg Config, core *Core) (func(), error) {
	rdb, conn, err := redisClients(cfg.RedisURL)
	if err != nil {
		return nil, err
	}
	eng := refresh.NewEngineWith(core.Catalog, cfg.engineOptions())
	srv, err := jobs.NewServer(jobs.ServerConfig{
		Redis: conn, RDB: rdb, Engine: eng,
		Clusters: cfg.Clusters, Concurrency: cfg.WorkerConcurrency,
		ShutdownTimeout: 20 * time.Second, Logger: slog.Default(),
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
	if err := telemetry.RegisterStalenessGauge(stale.Values); err != nil {
		_ = stale.Stop(context.Background())
		srv.Shutdown()
		core.Catalog.OnCommit(nil)
		trig.Close()
		rdb.Close()
		return nil, err
	}
	if err := telemetry.RegisterQueueGauges(srv.QueueStats); err != nil {
		_ = stale.Stop(context.Background())
		srv.Shutdown()
		core.Catalog.OnCommit(nil)
		trig.Close()
		rdb.Close()
		return nil, err
	}
	return func() {
		_ = stale.Stop(context.Background())
		srv.Shutdown()
		core.Catalog.OnCommit(nil)
		trig.Close()
		rdb.Close()
		_ = eng.Close() // stops the user-code subprocesses
	}, nil
}

// RunWorker runs a worker until ctx ends, then shuts down gracefully. It
// serves /healthz (and /metrics) on cfg.MetricsListen.
func RunWorker(ctx context.Context, cfg Config, ready func(metricsAddr string)) error {
	TuneGC()
	core, tel, stopCore, err := boot(ctx, cfg, "mvq-worker")
	if err != nil {
		return err
	}
	defer stopCore()
	stop, err := startWorker(cfg, core)
	if err != nil {
		return err
	}
	defer stop()
	ln, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"status":"ok"}`)) })
	mux.Handle("/metrics", tel.MetricsHandler())
	slog.Info("mvq worker started", "clusters", cfg.Clusters, "concurrency", cfg.WorkerConcurrency, "metrics", ln.Addr().String())
	if ready != nil {
		ready(ln.Addr().String())
	}
	return Serve(ctx, ln, mux, nil, 5*time.Second, cfg.WriteTimeout)
}
