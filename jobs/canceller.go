package jobs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// CancellerConfig configures a Canceller.
type CancellerConfig struct {
	// Interval of the fallback poll, which reads the state of every job
	// with a running handler in one round trip (a published stop can be
	// missed while the subscription reconnects); default 2s.
	Interval time.Duration
}

// Canceller stops a worker's running handlers when their job is cancelled
// or failed elsewhere: it subscribes to the ids that terminal transitions
// publish (stoppedChannel) and, as a fallback, polls the jobs it watches
// every Interval. Watch hands a handler a context that it cancels with
// cause errJobStopped.
type Canceller struct {
	st   *store
	cfg  CancellerConfig
	log  *slog.Logger
	loop loop

	mu      sync.Mutex
	running map[string]map[*watcher]struct{}
	// subscribed is closed once the subscription is confirmed (tests).
	subscribed chan struct{}
}

type watcher struct{ cancel context.CancelCauseFunc }

func newCanceller(st *store, cfg CancellerConfig, log *slog.Logger) *Canceller {
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	return &Canceller{st: st, cfg: cfg, log: log, running: map[string]map[*watcher]struct{}{}, subscribed: make(chan struct{})}
}

// Start subscribes and starts the fallback poll.
func (c *Canceller) Start(ctx context.Context) error {
	return c.loop.start(ctx, c.run)
}

// Stop ends the subscription and the poll. Contexts handed out stay
// valid; they are no longer cancelled on a job's stop.
func (c *Canceller) Stop(ctx context.Context) error { return c.loop.stop(ctx) }

func (c *Canceller) run(ctx context.Context) {
	sub := c.st.subscribe(ctx, stoppedChannel)
	defer sub.Close()
	// Receive confirms the subscription; Channel takes over after (and
	// resubscribes on its own if this first attempt failed).
	if _, err := sub.Receive(ctx); err == nil {
		close(c.subscribed)
	}
	msgs := sub.Channel(redis.WithChannelHealthCheckInterval(10 * time.Second))
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			c.check(ctx, []string{m.Payload})
		case <-t.C:
			c.check(ctx, c.watched())
		}
	}
}

func (c *Canceller) watched() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.running))
	for id := range c.running {
		ids = append(ids, id)
	}
	return ids
}

// check reads the state of the given jobs that have watchers and cancels
// those of jobs no longer PENDING or RUNNING (a missing record counts as
// stopped). A Redis error changes nothing: the next round retries.
func (c *Canceller) check(ctx context.Context, ids []string) {
	c.mu.Lock()
	var mine []string
	for _, id := range ids {
		if len(c.running[id]) > 0 {
			mine = append(mine, id)
		}
	}
	c.mu.Unlock()
	if len(mine) == 0 {
		return
	}
	states, err := c.st.states(ctx, mine)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Debug("jobs: canceller poll failed", "err", err)
		}
		return
	}
	for _, id := range mine {
		if st, ok := states[id]; ok && st != StatePending && st != StateRunning {
			c.stop(id)
		}
	}
}

func (c *Canceller) stop(jobID string) {
	c.mu.Lock()
	ws := c.running[jobID]
	delete(c.running, jobID)
	c.mu.Unlock()
	for w := range ws {
		w.cancel(errJobStopped)
	}
}

// Watch returns a context that is cancelled with cause errJobStopped once
// job jobID is no longer PENDING or RUNNING, and a func that ends the
// watch (and cancels the context); call it when the handler returns.
func (c *Canceller) Watch(ctx context.Context, jobID string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watcher{cancel: cancel}
	c.mu.Lock()
	if c.running[jobID] == nil {
		c.running[jobID] = map[*watcher]struct{}{}
	}
	c.running[jobID][w] = struct{}{}
	c.mu.Unlock()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			c.mu.Lock()
			if ws := c.running[jobID]; ws != nil {
				delete(ws, w)
				if len(ws) == 0 {
					delete(c.running, jobID)
				}
			}
			c.mu.Unlock()
			cancel(nil)
		})
	}
}
