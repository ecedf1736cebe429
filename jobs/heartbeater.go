package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// HeartbeaterConfig configures a Heartbeater.
type HeartbeaterConfig struct {
	// Interval between heartbeats; default 1s.
	Interval time.Duration
	// TTL is how long one heartbeat keeps the worker registered; default
	// 5s. The rescuer treats a worker whose registration lapsed as dead and
	// runs the tasks it held again elsewhere, so TTL bounds how long a
	// killed worker's work waits.
	TTL time.Duration
}

func (c *HeartbeaterConfig) defaults() {
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.TTL <= 0 {
		c.TTL = 5 * time.Second
	}
}

// Heartbeater keeps a worker registered in the registry of each cluster it
// serves (mvq:cluster:{name}:workers): Submit accepts a cluster only while
// a worker is registered, and the rescuer re-runs the tasks of workers
// whose registration expired.
type Heartbeater struct {
	st       *store
	id       string
	clusters []string
	cfg      HeartbeaterConfig
	log      *slog.Logger
	loop     loop
}

// NewHeartbeater returns a heartbeater that registers worker id for
// clusters in rdb. Servers make their own; this one is for processes that
// register without serving asynq (tests, tools).
func NewHeartbeater(rdb redis.UniversalClient, id string, clusters []string, cfg HeartbeaterConfig, log *slog.Logger) *Heartbeater {
	if log == nil {
		log = slog.Default()
	}
	return newHeartbeater(&store{rdb: rdb}, id, clusters, cfg, log)
}

func newHeartbeater(st *store, id string, clusters []string, cfg HeartbeaterConfig, log *slog.Logger) *Heartbeater {
	cfg.defaults()
	return &Heartbeater{st: st, id: id, clusters: clusters, cfg: cfg, log: log}
}

// Start registers the worker once (an error if Redis refuses) and keeps
// the registration fresh until Stop.
func (h *Heartbeater) Start(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := h.st.heartbeat(rctx, h.id, h.clusters, h.cfg.TTL); err != nil {
		return fmt.Errorf("jobs: register worker: %w", err)
	}
	return h.loop.start(ctx, func(ctx context.Context) {
		t := time.NewTicker(h.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				h.beat(ctx)
			}
		}
	})
}

func (h *Heartbeater) beat(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.TTL)
	defer cancel()
	if err := h.st.heartbeat(ctx, h.id, h.clusters, h.cfg.TTL); err != nil && ctx.Err() == nil {
		h.log.Warn("jobs: worker heartbeat failed", "worker", h.id, "err", err)
	}
}

// Stop ends the heartbeats and leaves the registry, so the cluster stops
// counting this worker at once.
func (h *Heartbeater) Stop(ctx context.Context) error {
	err := h.loop.stop(ctx)
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if uerr := h.st.unregister(uctx, h.id, h.clusters); uerr != nil {
		h.log.Warn("jobs: leave worker registry", "worker", h.id, "err", uerr)
	}
	return err
}

// alive reports whether this worker's own registration for cluster is
// current: when it is not, Redis was unreachable or slow, and the registry
// cannot be trusted to tell dead workers from live ones.
func (h *Heartbeater) alive(ctx context.Context, cluster string) bool {
	ok, err := h.st.workerAlive(ctx, cluster, h.id)
	return err == nil && ok
}
