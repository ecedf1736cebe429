package jobs

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/internal/testenv"
	"github.com/mvq-dev/mvq/refresh"
)

// rate runs fn from clients goroutines for d and returns calls/s; any
// error fails the benchmark.
func rate(b *testing.B, clients int, d time.Duration, fn func(i int) error) float64 {
	var next atomic.Int64
	var failed atomic.Value
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := fn(int(next.Add(1) - 1)); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return float64(next.Load()) / time.Since(start).Seconds()
}

// BenchmarkControlPlaneRedis: the Redis side of the control plane alone
// (an engine that does no work, so no warehouse reads): Submit (the create
// script) and Get (one HGETALL) next to PING, 32 concurrent callers; then
// 500 one-item jobs of 500 views submitted at once, finished per second,
// next to asynq's own no-op tasks/s with the same concurrency (8). This is
// the ceiling the orchestration puts on BenchmarkSmallJobs (service/),
// whose jobs also read and write the warehouse. Every job is checked DONE.
func BenchmarkControlPlaneRedis(b *testing.B) {
	fe := newFakeEngine()
	const views = 500
	for i := range views {
		fe.addSource([]string{fmt.Sprintf("v%d", i)}, 10)
	}
	bn := setup(b, fe)
	ctx := context.Background()
	// A live worker that takes no tasks: submitted jobs stay queued.
	exp := time.Now().Add(time.Hour).UnixMilli()
	if err := bn.rdb.ZAdd(ctx, workersKey("default"), redis.Z{Score: float64(exp), Member: "bench-idle"}).Err(); err != nil {
		b.Fatal(err)
	}
	for it := 0; it < b.N; it++ {
		const clients, d = 32, time.Second
		ping := rate(b, clients, d, func(int) error { return bn.rdb.Ping(ctx).Err() })
		var someID atomic.Value
		base := it * 10_000_000
		submit := rate(b, clients, d, func(i int) error {
			j, err := bn.client.Submit(ctx, []string{fmt.Sprintf("v%d", i%64)}, refresh.Options{MaxRowsPerFragment: 1000 + base + i})
			if err == nil && (j.Coalesced || j.State != StatePending) {
				err = fmt.Errorf("submit: %+v", j)
			}
			if err == nil {
				someID.Store(j.ID)
			}
			return err
		})
		id := someID.Load().(string)
		get := rate(b, clients, d, func(int) error {
			j, err := bn.client.Get(ctx, id)
			if err == nil && j.ID != id {
				err = fmt.Errorf("get %s: %s", id, j.ID)
			}
			return err
		})
		b.Logf("run %d, %d callers: PING %.0f/s; Submit %.0f/s (%.2f of PING); Get %.0f/s (%.2f of PING)",
			it, clients, ping, submit, submit/ping, get, get/ping)
		if st, err := bn.rdb.Info(ctx, "commandstats").Result(); err == nil {
			for _, l := range strings.Split(st, "\n") {
				if strings.Contains(l, "evalsha") || strings.Contains(l, "hgetall") || strings.Contains(l, "ping") {
					b.Logf("redis %s", strings.TrimSpace(l))
				}
			}
		}
		b.ReportMetric(submit/ping, "submit/ping")
		b.ReportMetric(get/ping, "get/ping")
	}
	if b.N > 1 {
		return
	}
	// One-item jobs through a worker (the queued jobs above go first:
	// drop them).
	if err := bn.rdb.FlushDB(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	bn.startServer(b)
	tasks := testenv.AsynqNoopRate(b, bn.conn, 3*views, 1, TaskCheckInterval)
	sub := bn.rdb.Subscribe(ctx, stoppedChannel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		b.Fatal(err)
	}
	ch := sub.Channel(redis.WithChannelSize(4096))
	ids := make([]string, views)
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < views; i = int(next.Add(1) - 1) {
				j, err := bn.client.Submit(ctx, []string{fmt.Sprintf("v%d", i)}, refresh.Options{SourceTaskSize: 10})
				if err != nil {
					b.Error(err)
					return
				}
				ids[i] = j.ID
			}
		}()
	}
	wg.Wait()
	mine := map[string]bool{}
	for _, id := range ids {
		mine[id] = true
	}
	for left, deadline := len(mine), time.After(5*time.Minute); left > 0; {
		select {
		case m := <-ch:
			if mine[m.Payload] {
				left--
			}
		case <-deadline:
			b.Fatalf("%d jobs unfinished after 5 minutes", left)
		}
	}
	jobsPerSec := float64(views) / time.Since(start).Seconds()
	for _, id := range ids {
		if j, err := bn.client.Get(ctx, id); err != nil || j.State != StateDone || j.Progress.WorkItemsTotal != 1 {
			b.Fatalf("job %s: %+v %v", id, j, err)
		}
	}
	b.Logf("%d one-item jobs (engine doing no work), submitted at once: %.0f jobs/s; asynq no-op tasks %.0f/s; ratio %.3f",
		views, jobsPerSec, tasks, jobsPerSec/tasks)
	b.ReportMetric(jobsPerSec/tasks, "jobs/tasks")
}
