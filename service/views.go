package service

import (
	"context"
	"fmt"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
)

// redisClients opens a go-redis client and the asynq connection options
// for one URL.
func redisClients(url string) (redis.UniversalClient, asynq.RedisConnOpt, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, nil, fmt.Errorf("redis url %q: %w", url, err)
	}
	conn, err := asynq.ParseRedisURI(url)
	if err != nil {
		return nil, nil, fmt.Errorf("redis url %q: %w", url, err)
	}
	rdb := redis.NewClient(opt)
	if err := redisotel.InstrumentTracing(rdb); err != nil {
		rdb.Close()
		return nil, nil, fmt.Errorf("redis tracing: %w", err)
	}
	return rdb, conn, nil
}

// openViews wires the view engine and the job client for the API.
func openViews(ctx context.Context, cfg Config, core *Core) (httpapi.Views, func(), error) {
	rdb, conn, err := redisClients(cfg.RedisURL)
	if err != nil {
		return nil, nil, err
	}
	eng := refresh.NewEngineWith(core.Catalog, cfg.engineOptions())
	client := jobs.NewClient(rdb, conn, eng, jobs.MaxPendingJobs(cfg.MaxPendingJobs), jobs.AutoRefresh(cfg.autoConfig()))
	core.Catalog.OnCommit(client.CommitHook())
	return &httpapi.ViewRoutes{Engine: eng, Jobs: client, Catalog: core.Catalog}, func() {
		core.Catalog.OnCommit(nil)
		client.Close()
		rdb.Close()
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
