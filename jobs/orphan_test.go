package jobs

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/mvq-dev/mvq/refresh"
)

// TestRescuerRerunsOrphanedTasks: a worker that asynq hands tasks to and
// that dies before it records holding them leaves them active in asynq,
// held by nobody, until asynq's 30s lease and its recoverer (a minute more)
// give them back. The thief here is a bare asynq server on the job's queue
// whose handler never returns: it takes the plan task first and then the
// work items the plan releases, as a worker SIGKILLed right after each
// dequeue would. The live worker's rescuer runs the plan and the items
// again once they stay unheld for OrphanGrace: the job ends DONE within
// seconds, every item expanded once (the thief never ran any).
func TestRescuerRerunsOrphanedTasks(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"v"}
	fe.addSource(view, 40)
	b := setup(t, fe)
	ctx := context.Background()

	// A registered worker, so the cluster accepts the job; it runs no tasks.
	ghost := newHeartbeater(b.client.st, "ghost", []string{"default"}, HeartbeaterConfig{}, testLogger)
	if err := ghost.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ghost.Stop(ctx) })

	var mu sync.Mutex
	var stolen []string
	block := make(chan struct{})
	thief := asynq.NewServer(b.conn, asynq.Config{Concurrency: 3, Queues: map[string]int{QueueName("default"): 1},
		TaskCheckInterval: 5 * time.Millisecond, LogLevel: asynq.FatalLevel, ShutdownTimeout: time.Second})
	err := thief.Start(asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		id, _ := asynq.GetTaskID(ctx)
		mu.Lock()
		stolen = append(stolen, id)
		mu.Unlock()
		select { // taken and never held: a worker killed right after the dequeue
		case <-block:
		case <-ctx.Done():
		}
		return ctx.Err()
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(block); thief.Shutdown() })

	// Item 0 runs in place in the live worker's plan copy; it waits for the
	// thief to take the items the plan released (1 and 2).
	b.eng.beforeExpand = func(ctx context.Context, _ *refresh.Plan, i int) error {
		if i != 0 {
			return nil
		}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			n := len(stolen)
			mu.Unlock()
			if n >= 3 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		return nil
	}
	start := time.Now()
	j, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 10, Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the thief to take the plan task", 10*time.Second, func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(stolen) == 1, nil
	})
	// The live worker has one slot: while its plan copy runs item 0 in
	// place, only the thief can take the items the plan releases.
	b.startServerCfg(t, func(c *ServerConfig) {
		c.Concurrency = 1
		c.Rescue.Interval = 100 * time.Millisecond
		c.Rescue.OrphanGrace = 300 * time.Millisecond
	})
	done := b.waitState(t, j.ID, StateDone)
	took := time.Since(start)
	mu.Lock()
	t.Logf("the thief took %v; the job was DONE %v after submission", stolen, took.Round(time.Millisecond))
	nStolen := len(stolen)
	mu.Unlock()
	if nStolen < 3 {
		t.Fatalf("the thief took %d tasks, want the plan and items 1 and 2; the test proves nothing", nStolen)
	}
	if took > 15*time.Second {
		t.Fatalf("DONE %v after submission: the orphans waited for asynq's lease", took)
	}
	if done.Progress.WorkItemsDone != 4 || done.Result.RowsAdded != 80 {
		t.Fatalf("job %+v", done)
	}
	for i := 0; i < 4; i++ {
		if n := b.eng.calls(j.ID, i); n != 1 {
			t.Fatalf("item %d expanded %d times, want 1", i, n)
		}
	}
}
