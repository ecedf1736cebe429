package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/refresh"
)

// startServerCfg starts a worker whose config tune adjusts.
func (b *bundle) startServerCfg(t *testing.T, tune func(*ServerConfig)) *Server {
	t.Helper()
	cfg := ServerConfig{Redis: b.conn, RDB: b.rdb, Concurrency: 4,
		ShutdownTimeout: 5 * time.Second, Logger: testLogger, engine: b.eng}
	tune(&cfg)
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestHeartbeaterRegistersRenewsAndLeaves(t *testing.T) {
	t.Parallel()
	b := setup(t, newFakeEngine())
	ctx := context.Background()
	h := newHeartbeater(b.client.st, "w1", []string{"a", "b"}, HeartbeaterConfig{Interval: 50 * time.Millisecond, TTL: 300 * time.Millisecond}, testLogger)
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx); !errors.Is(err, errStarted) {
		t.Fatalf("second Start: %v", err)
	}
	// Registered in both clusters, and still after several TTLs: it renews.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		for _, c := range []string{"a", "b"} {
			if ok, err := b.client.st.workerAlive(ctx, c, "w1"); err != nil || !ok {
				t.Fatalf("worker not alive in %s: %v", c, err)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"a", "b"} {
		if n, _ := b.client.st.liveWorkers(ctx, c); n != 0 {
			t.Fatalf("%d live workers in %s after Stop", n, c)
		}
	}
}

// TestHeartbeatLapses: a worker whose beats stop (killed) stops counting
// once its TTL passes, without unregistering.
func TestHeartbeatLapses(t *testing.T) {
	t.Parallel()
	b := setup(t, newFakeEngine())
	ctx := context.Background()
	h := newHeartbeater(b.client.st, "w1", []string{"default"}, HeartbeaterConfig{Interval: 50 * time.Millisecond, TTL: 300 * time.Millisecond}, testLogger)
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	_ = h.loop.stop(ctx) // the beats stop; nothing unregisters
	waitFor(t, "the registration to lapse", 5*time.Second, func() (bool, error) {
		ok, err := b.client.st.workerAlive(ctx, "default", "w1")
		return !ok, err
	})
	if h.alive(ctx, "default") {
		t.Fatal("alive() after the lapse")
	}
}

// TestCancellerPublishAndPoll: a published stop cancels the watchers of
// that job only (the poll is too slow to be what did it), and the
// fallback poll catches a stop nobody published.
func TestCancellerPublishAndPoll(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	fe.addSource([]string{"v"}, 10)
	b := setup(t, fe)
	ctx := context.Background()
	if err := b.client.st.heartbeat(ctx, "placeholder", []string{"default"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	j1, err := b.client.Submit(ctx, []string{"v"}, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j2, err := b.client.Submit(ctx, []string{"v"}, refresh.Options{Concurrency: 2}) // not identical: would join j1
	if err != nil {
		t.Fatal(err)
	}
	c := newCanceller(b.client.st, CancellerConfig{Interval: time.Hour}, testLogger)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	<-c.subscribed
	w1, stop1 := c.Watch(ctx, j1.ID)
	defer stop1()
	w1b, stop1b := c.Watch(ctx, j1.ID)
	defer stop1b()
	w2, stop2 := c.Watch(ctx, j2.ID)
	defer stop2()
	if _, err := b.client.Cancel(ctx, j1.ID); err != nil {
		t.Fatal(err)
	}
	for _, w := range []context.Context{w1, w1b} {
		select {
		case <-w.Done():
			if !errors.Is(context.Cause(w), errJobStopped) {
				t.Fatalf("cause %v", context.Cause(w))
			}
		case <-time.After(10 * time.Second):
			t.Fatal("published cancel did not reach the watcher")
		}
	}
	if w2.Err() != nil {
		t.Fatal("the other job's watcher was cancelled")
	}
	_ = c.Stop(ctx)

	// Poll only: a state change that published nothing.
	p := newCanceller(b.client.st, CancellerConfig{Interval: 50 * time.Millisecond}, testLogger)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(ctx)
	w3, stop3 := p.Watch(ctx, j2.ID)
	defer stop3()
	if err := b.rdb.HSet(ctx, jobKey(j2.ID), fState, StateFailed).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w3.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the poll did not notice the stopped job")
	}
	// A watch that ended is not cancelled later, and leaves no entry.
	stop3()
	if n := len(p.watched()); n != 0 {
		t.Fatalf("%d jobs still watched", n)
	}
}

// TestRescuerRerunsDeadWorkersItems: worker A holds two work items that
// hang; its heartbeats stop (as if SIGKILLed: nothing unregisters, its
// handlers never return). Worker B's rescuer runs A's items again once A's
// registration lapses, and the job ends DONE while A's copies still hang.
func TestRescuerRerunsDeadWorkersItems(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"v"}
	fe.addSource(view, 40)
	b := setup(t, fe)
	release := make(chan struct{})
	defer close(release)
	var calls atomic.Int32
	hung := make(chan int, 8)
	b.eng.beforeExpand = func(ctx context.Context, _ *refresh.Plan, i int) error {
		if calls.Add(1) <= 2 { // the first two run on A: hang like a dead process
			hung <- i
			<-release
			return errors.New("released")
		}
		return nil
	}
	fast := HeartbeaterConfig{Interval: 100 * time.Millisecond, TTL: time.Second}
	a := b.startServerCfg(t, func(c *ServerConfig) { c.Concurrency = 2; c.Heartbeat = fast })
	ctx := context.Background()
	j, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 10, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	held := []int{<-hung, <-hung}
	_ = a.hb.loop.stop(ctx) // A "dies": its registration lapses after 1s
	_ = a.rescuer.Stop(ctx)
	killed := time.Now()
	b.startServerCfg(t, func(c *ServerConfig) { c.Heartbeat = fast; c.Rescue.Interval = 100 * time.Millisecond })
	done := b.waitState(t, j.ID, StateDone)
	t.Logf("dead worker's items ran again and the job finished %v after the heartbeats stopped", time.Since(killed).Round(time.Millisecond))
	if done.Progress.WorkItemsDone != 4 || done.Result.RowsAdded != 80 {
		t.Fatalf("job %+v", done)
	}
	for _, i := range held {
		if n := b.eng.calls(j.ID, i); n != 2 {
			t.Fatalf("item %d held by the dead worker expanded %d times, want 2", i, n)
		}
	}
	if v, rows := fe.state(view); v != 1 || rows != 80 {
		t.Fatalf("view version %d rows %d", v, rows)
	}
}

// TestRescuerFailsStalledJob: a job whose items never finish is failed,
// retryable, after the stall timeout; its handlers are cancelled, and the
// next job of the view runs.
func TestRescuerFailsStalledJob(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"v"}
	fe.addSource(view, 20)
	b := setup(t, fe)
	var stuck atomic.Bool
	stuck.Store(true)
	cancelled := make(chan struct{}, 8)
	b.eng.beforeExpand = func(ctx context.Context, _ *refresh.Plan, _ int) error {
		if !stuck.Load() {
			return nil
		}
		<-ctx.Done()
		cancelled <- struct{}{}
		return ctx.Err()
	}
	b.startServerCfg(t, func(c *ServerConfig) {
		c.Rescue = RescuerConfig{Interval: 100 * time.Millisecond, StallTimeout: 700 * time.Millisecond}
	})
	ctx := context.Background()
	j1, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	f := b.waitState(t, j1.ID, StateFailed)
	if f.Failure == nil || !f.Failure.Retryable || !strings.Contains(f.Failure.Message, "no progress") || f.Failure.Phase != PhaseExpanding {
		t.Fatalf("failure %+v", f.Failure)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled job's handlers were not cancelled")
	}
	stuck.Store(false)
	j2, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if d := b.waitState(t, j2.ID, StateDone); d.Result.RowsAdded != 40 {
		t.Fatalf("next job %+v", d.Result)
	}
}

// TestRedisErrorInHandlerDoesNotBlockView: a handler's Redis call fails
// (the job's results key has the wrong type), so its task retries; once
// the task is archived, the rescuer fails the job, retryable, and the
// view's next job runs.
func TestRedisErrorInHandlerDoesNotBlockView(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"v"}
	fe.addSource(view, 20)
	b := setup(t, fe)
	ctx := context.Background()
	if err := b.client.st.heartbeat(ctx, "placeholder", []string{"default"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	j1, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	// Fault: every HEXISTS on the results key now fails with WRONGTYPE.
	if err := b.rdb.Set(ctx, resultsKey(j1.ID), "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	j2, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 10, Concurrency: 2}) // not identical: would join j1
	if err != nil {
		t.Fatal(err)
	}
	b.startServerCfg(t, func(c *ServerConfig) {
		c.Rescue = RescuerConfig{Interval: 100 * time.Millisecond, ArchiveScanInterval: 100 * time.Millisecond}
	})
	insp := asynq.NewInspectorFromRedisClient(b.rdb)
	// The plan task fails on the Redis error and waits for its retry.
	waitFor(t, "the plan task to fail and wait for a retry", 15*time.Second, func() (bool, error) {
		ti, err := insp.GetTaskInfo(QueueName("default"), "plan:"+j1.ID)
		if err != nil {
			return false, nil
		}
		return ti.State == asynq.TaskStateRetry && strings.Contains(ti.LastErr, "WRONGTYPE"), nil
	})
	if j, _ := b.client.Get(ctx, j1.ID); j.State != StateRunning {
		t.Fatalf("job is %s before the archive", j.State)
	}
	if err := insp.ArchiveTask(QueueName("default"), "plan:"+j1.ID); err != nil {
		t.Fatal(err)
	}
	f := b.waitState(t, j1.ID, StateFailed)
	if !f.Failure.Retryable || !strings.Contains(f.Failure.Message, "archived") || !strings.Contains(f.Failure.Message, "WRONGTYPE") {
		t.Fatalf("failure %+v", f.Failure)
	}
	if d := b.waitState(t, j2.ID, StateDone); d.Result.RowsAdded != 40 {
		t.Fatalf("next job %+v", d.Result)
	}
}

// TestLastAttemptFailsJob: a task failing on its last attempt with an
// error the handler did not settle fails its job at once (retryable).
func TestLastAttemptFailsJob(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"v"}
	fe.addSource(view, 20)
	b := setup(t, fe)
	ctx := context.Background()
	if err := b.client.st.heartbeat(ctx, "placeholder", []string{"default"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	j, err := b.client.Submit(ctx, view, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Re-enqueue the plan with no retries, and inject the Redis fault.
	insp := asynq.NewInspectorFromRedisClient(b.rdb)
	if err := insp.DeleteTask(QueueName("default"), "plan:"+j.ID); err != nil {
		t.Fatal(err)
	}
	task, _ := NewPlanTask(j.ID, "default", nil)
	if _, err := b.client.enq.Enqueue(task, asynq.MaxRetry(0)); err != nil {
		t.Fatal(err)
	}
	if err := b.rdb.Set(ctx, resultsKey(j.ID), "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	b.startServer(t)
	f := b.waitState(t, j.ID, StateFailed)
	if !f.Failure.Retryable || !strings.Contains(f.Failure.Message, "refresh:plan task failed after 0 retries") {
		t.Fatalf("failure %+v", f.Failure)
	}
	if n, _ := b.rdb.LLen(ctx, viewQueueKey(view)).Result(); n != 0 {
		t.Fatalf("the failed job is still in its view's FIFO (%d)", n)
	}
}

// TestBacklogAdmission: with MaxPendingJobs 3 and no worker processing,
// 20 concurrent submits give exactly 3 jobs and 17 ErrBacklogFull, with
// nothing recorded for the refused ones; every accepted job then runs.
func TestBacklogAdmission(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	for i := range 20 {
		fe.addSource([]string{fmt.Sprint("v", i)}, 10)
	}
	b := setup(t, fe)
	c := newClient(b.rdb, b.conn, b.eng, MaxPendingJobs(3))
	defer c.Close()
	ctx := context.Background()
	if err := b.client.st.heartbeat(ctx, "placeholder", []string{"default"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var accepted []string
	refused := 0
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j, err := c.Submit(ctx, []string{fmt.Sprint("v", i)}, refresh.Options{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted = append(accepted, j.ID)
			case errors.Is(err, ErrBacklogFull) && errs.CodeOf(err) == errs.CodeServiceUnavailable:
				refused++
			default:
				t.Errorf("submit: %v", err)
			}
		}()
	}
	wg.Wait()
	if len(accepted) != 3 || refused != 17 {
		t.Fatalf("accepted %d refused %d", len(accepted), refused)
	}
	if err := c.Admit(ctx, ""); !errors.Is(err, ErrBacklogFull) {
		t.Fatalf("Admit with a full backlog: %v", err)
	}
	list, _, err := c.List(ctx, ListFilter{})
	if err != nil || len(list) != 3 {
		t.Fatalf("recorded jobs %d (%v), want 3", len(list), err)
	}
	b.startServer(t)
	for _, id := range accepted {
		b.waitState(t, id, StateDone)
	}
	if n, _ := b.rdb.ZCard(ctx, liveJobsKey("default")).Result(); n != 0 {
		t.Fatalf("backlog %d after all ended", n)
	}
	if err := c.Admit(ctx, ""); err != nil {
		t.Fatalf("Admit with an empty backlog: %v", err)
	}
}

// TestCancelViewStopsItsJobs: dropping a view cancels its running job
// (committing or not) and its queued jobs, cancels running handlers and
// removes the FIFO; another view's job is untouched.
func TestCancelViewStopsItsJobs(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view, other := []string{"ns", "v"}, []string{"ns2", "v"}
	fe.addSource(view, 20)
	fe.addSource(other, 20)
	b := setup(t, fe)
	running := make(chan struct{}, 8)
	b.eng.beforeExpand = func(ctx context.Context, p *refresh.Plan, _ int) error {
		if p.View[0] != "ns" {
			return nil
		}
		running <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	b.startServer(t)
	ctx := context.Background()
	j1, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	j2, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 10, Concurrency: 2}) // not identical: would join j1
	if err != nil {
		t.Fatal(err)
	}
	<-running
	n, err := b.client.CancelViewsUnder(ctx, []string{"ns"}, "the view was dropped")
	if err != nil || n != 2 {
		t.Fatalf("cancelled %d: %v", n, err)
	}
	for _, id := range []string{j1.ID, j2.ID} {
		b.waitState(t, id, StateCancelled)
		if evs := b.events(t, id); !strings.Contains(evs[len(evs)-1].Message, "dropped") {
			t.Fatalf("job %s events %s", id, eventSummary(evs))
		}
	}
	waitFor(t, "the running items to stop", 10*time.Second, func() (bool, error) {
		n, err := b.rdb.HLen(ctx, activeKey(j1.ID)).Result()
		return n == 0, err
	})
	if n, _ := b.rdb.Exists(ctx, viewQueueKey(view)).Result(); n != 0 {
		t.Fatal("the view's FIFO is still there")
	}
	j3, err := b.client.Submit(ctx, other, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b.waitState(t, j3.ID, StateDone)

	// A committing job is cancelled too: its commit must not land.
	fe.addSource(view, 5)
	if err := b.client.st.heartbeat(ctx, "placeholder", []string{"default"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	j4, err := b.client.Submit(ctx, []string{"ns", "w"}, refresh.Options{})
	if errs.CodeOf(err) != errs.CodeTableNotFound {
		t.Fatalf("submit to a missing view: %v %v", j4, err)
	}
	jc := &Job{ID: "00000000-0000-7000-8000-000000000001", Cluster: "default", viewID: view}
	if err := scriptCreate.Run(ctx, b.rdb, []string{jobKey(jc.ID), eventsKey(jc.ID), allJobsKey, viewJobsKey(view), viewQueueKey(view), liveJobsKey("default"),
		workersKey("default"), viewPendingKey(view), "unused", "unused", "unused", "unused"},
		jc.ID, formatTime(time.Now()), eventsMaxLen, "submitted", 0, time.Now().UnixMilli(), "", 0, jobKey(""), 0, "", "", 0, "", 0, fID, jc.ID, fState, StateRunning, fPhase, PhaseCommitting,
		fCreated, formatTime(time.Now()), fViewID, `["ns","v"]`, fRequest, "{}", fCluster, "default").Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.client.CancelView(ctx, view, "the view was dropped"); err != nil || n != 1 {
		t.Fatalf("cancel committing: %d %v", n, err)
	}
	if st, _ := b.client.st.state(ctx, jc.ID); st != StateCancelled {
		t.Fatalf("committing job is %s", st)
	}
}
