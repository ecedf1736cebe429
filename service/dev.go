package service

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/alicebob/miniredis/v2"

	"github.com/mvq-dev/mvq/auth"
)

// RunDev runs the API and a worker in one process on an embedded Redis
// (miniredis, in memory: jobs are lost on exit, the warehouse is not).
// cfg.RedisURL is ignored. ready gets the API address. Authentication
// defaults to none, which needs a loopback listen address (the default)
// unless unauthenticated access is allowed explicitly.
func RunDev(ctx context.Context, cfg Config, ready func(addr string)) error {
	if cfg.Auth.Mode == "" {
		cfg.Auth.Mode = auth.ModeNone
	}
	if err := cfg.Auth.Check(cfg.Listen); err != nil {
		return err
	}
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return fmt.Errorf("embedded redis: %w", err)
	}
	defer mr.Close()
	cfg.RedisURL = "redis://" + mr.Addr() + "/0"
	TuneGC()
	core, tel, stopCore, err := boot(ctx, cfg, "mvq-dev")
	if err != nil {
		return err
	}
	defer stopCore()
	stop, err := startWorker(cfg, core, false)
	if err != nil {
		return err
	}
	defer stop()
	slog.Info("mvq dev: embedded redis", "addr", mr.Addr())
	return serveAPI(ctx, cfg, core, tel, ready)
}
