package service

import (
	"context"

	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
)

// openViews wires the view engine and the job client for the API.
func openViews(ctx context.Context, cfg Config, core *Core) (httpapi.Views, func(), error) {
	rdb, conn, err := redisClients(cfg.RedisURL)
	if err != nil {
		return nil, nil, err
	}
	eng := refresh.NewEngine(core.Catalog)
	client := jobs.NewClient(rdb, conn, eng, jobs.MaxPendingJobs(cfg.MaxPendingJobs))
	return &httpapi.ViewRoutes{Engine: eng, Jobs: client, Catalog: core.Catalog}, func() {
		client.Close()
		rdb.Close()
	}, nil
}
