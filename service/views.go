package service

import (
	"context"

	"github.com/hibiken/asynq"

	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/telemetry"
)

// openViews wires the view engine and the job client for the API.
func openViews(ctx context.Context, cfg Config, core *Core) (httpapi.Views, func(), error) {
	rdb, conn, err := redisClients(cfg.RedisURL)
	if err != nil {
		return nil, nil, err
	}
	// Job event streams block on Redis through a pool of their own, one
	// connection per stream the API lets open (MVQ_MAX_EVENT_STREAMS), so
	// followers never take the connections other requests need.
	streamRdb, _, err := redisClientsPool(cfg.RedisURL, cfg.HTTPLimits.eventStreams())
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	eng := refresh.NewEngineWith(core.Catalog, cfg.engineOptions())
	client := jobs.NewClient(rdb, conn, eng, append([]jobs.ClientOption{jobs.MaxPendingJobs(cfg.MaxPendingJobs), jobs.AutoRefresh(cfg.autoConfig()),
		jobs.JobCacheMaxAge(cfg.JobCacheMaxAge), jobs.EventsRedis(streamRdb)}, cfg.HTTPLimits.jobsOptions()...)...)
	// The API reports the queue gauges of every known cluster (any ever
	// served, plus cfg.Clusters), so a pool without workers has series.
	stats := jobs.NewClusterStats(rdb, conn, cfg.Clusters)
	unregister, err := telemetry.RegisterQueueGauges(stats.Read)
	if err != nil {
		stats.Close()
		client.Close()
		rdb.Close()
		streamRdb.Close()
		return nil, nil, err
	}
	core.Catalog.OnCommit(client.CommitHook())
	pools := poolAdmin{ClusterStats: stats, inspector: asynq.NewInspector(conn), rdb: rdb}
	return &httpapi.ViewRoutes{Engine: eng, Jobs: client, Catalog: core.Catalog, Pools: pools,
			MaxStreams: cfg.HTTPLimits.MaxEventStreams, MaxStreamsPerPrincipal: cfg.HTTPLimits.MaxEventStreamsPerPrincipal}, func() {
			core.Catalog.OnCommit(nil)
			unregister()
			pools.inspector.Close()
			stats.Close()
			client.Close()
			rdb.Close()
			streamRdb.Close()
			_ = eng.Close()
		}, nil
}

// autoConfig is the automatic refresh settings (MVQ_AUTO_REFRESH_*).
func (cfg Config) autoConfig() jobs.AutoConfig {
	a := jobs.AutoConfig{MinInterval: cfg.AutoMinInterval, Debounce: cfg.AutoDebounce}
	if a.MinInterval == 0 {
		a.MinInterval = -1 // none
	}
	return a
}
