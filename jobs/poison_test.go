package jobs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/refresh"
)

// TestRescuerFailsPoisonedJob: a work item kills every worker that runs
// it (as a view's SQL past the worker's memory did: the process is
// OOM-killed, nothing unregisters, its handler never returns). The
// rescuer hands it to the next worker after the first and second deaths;
// after the third it fails the job, not retryable, naming the task (the
// plan task, which runs the job's first item itself) and the deaths, and
// no fourth worker runs it.
func TestRescuerFailsPoisonedJob(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"v"}
	fe.addSource(view, 10)
	b := setup(t, fe)
	release := make(chan struct{})
	defer close(release)
	hung := make(chan int, 8)
	b.eng.beforeExpand = func(ctx context.Context, _ *refresh.Plan, i int) error {
		hung <- i
		select { // the worker "died" running it: the handler never ends
		case <-release:
		case <-ctx.Done():
		}
		return errors.New("released")
	}
	tune := func(c *ServerConfig) {
		c.Concurrency = 1                                                                       // a dead worker's only slot stays taken
		c.Heartbeat = HeartbeaterConfig{Interval: 100 * time.Millisecond, TTL: 3 * time.Second} // a starved live worker is not a death
		c.Rescue.Interval = 100 * time.Millisecond
	}
	ctx := context.Background()
	w := b.startServerCfg(t, tune)
	j, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	for death := 1; death <= DefaultMaxWorkerDeaths; death++ {
		select {
		case i := <-hung:
			if i != 0 {
				t.Fatalf("item %d ran, want the only item 0", i)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("the item did not run on worker %d", death)
		}
		_ = w.hb.loop.stop(ctx) // the worker dies: its registration lapses
		_ = w.rescuer.Stop(ctx)
		w = b.startServerCfg(t, tune)
	}
	f := b.waitState(t, j.ID, StateFailed)
	if f.Failure == nil || f.Failure.Retryable || !strings.Contains(f.Failure.Message, "the plan task (which runs work item 0 in place) was running on 3 workers that died") {
		t.Fatalf("failure %+v, want one naming the task and its 3 dead workers, not retryable", f.Failure)
	}
	t.Logf("job failed: %s", f.Failure.Message)
	select {
	case <-hung:
		t.Fatal("the item was handed to a fourth worker")
	default:
	}
	if n := b.eng.calls(j.ID, 0); n != DefaultMaxWorkerDeaths {
		t.Fatalf("item expanded %d times, want %d", n, DefaultMaxWorkerDeaths)
	}
}
