package testenv

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
)

// AsynqNoopRate is the baseline of the small-job benchmarks: it runs n
// no-op tasks through an asynq server of concurrency 8 polling every
// checkInterval (enqueued by enqueuers goroutines) and returns tasks/s.
func AsynqNoopRate(tb testing.TB, conn asynq.RedisClientOpt, n, enqueuers int, checkInterval time.Duration) float64 {
	tb.Helper()
	var done atomic.Int64
	all := make(chan struct{})
	srv := asynq.NewServer(conn, asynq.Config{Concurrency: 8, Queues: map[string]int{"bench-noop": 1},
		TaskCheckInterval: checkInterval, LogLevel: asynq.ErrorLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc("noop", func(context.Context, *asynq.Task) error {
		if done.Add(1) == int64(n) {
			close(all)
		}
		return nil
	})
	if err := srv.Start(mux); err != nil {
		tb.Fatal(err)
	}
	defer srv.Shutdown()
	c := asynq.NewClient(conn)
	defer c.Close()
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range max(enqueuers, 1) {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, err := c.Enqueue(asynq.NewTask("noop", nil), asynq.Queue("bench-noop")); err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		tb.Fatalf("asynq ran %d of %d tasks in 5 minutes", done.Load(), n)
	}
	return float64(n) / time.Since(start).Seconds()
}
