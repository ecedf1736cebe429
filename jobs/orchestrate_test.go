package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/refresh"
)

// These tests drive the orchestration with the in-memory fake engine, so
// that they can count calls and inject failures and timings exactly.

func TestFakeSubmitRunsToDone(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"ns", "v"}
	fe.addSource(view, 100)
	b := setup(t, fe)
	b.startServer(t)
	ctx := context.Background()

	j, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 30, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if j.State != StatePending || j.View != "ns$v" || j.Cluster != "default" || j.Type != JobTypeRefresh {
		t.Fatalf("submitted job = %+v", j)
	}
	j = b.waitState(t, j.ID, StateDone)
	want := Progress{WorkItemsTotal: 4, WorkItemsDone: 4, RowsRead: 100, RowsWritten: 200}
	got := j.Progress
	got.MaxRunning = 0
	if got != want {
		t.Fatalf("progress = %+v, want %+v", j.Progress, want)
	}
	if j.Progress.MaxRunning < 1 || j.Progress.MaxRunning > 2 {
		t.Fatalf("max_running = %d, want 1..2", j.Progress.MaxRunning)
	}
	if j.Result == nil || j.Result.ViewVersion != 1 || j.Result.RowsAdded != 200 {
		t.Fatalf("result = %+v", j.Result)
	}
	if j.StartedAt == nil || j.FinishedAt == nil || j.FinishedAt.Before(*j.StartedAt) || j.Phase != "" {
		t.Fatalf("times/phase: %+v", j)
	}
	if v, rows := fe.state(view); v != 1 || rows != 200 {
		t.Fatalf("view version %d rows %d, want 1 and 200", v, rows)
	}
	for i := range 4 {
		if n := b.eng.calls(j.ID, i); n != 1 {
			t.Fatalf("item %d expanded %d times", i, n)
		}
	}

	evs := b.events(t, j.ID)
	if len(evs) == 0 || !evs[len(evs)-1].Terminal() || evs[len(evs)-1].State != StateDone {
		t.Fatalf("events do not end with DONE: %s", eventSummary(evs))
	}
	var progress int
	for _, e := range evs {
		if e.JobID != j.ID || e.ID == "" || e.Time.IsZero() {
			t.Fatalf("bad event %+v", e)
		}
		if e.Type == EventProgress {
			progress++
		}
	}
	if progress != 4 || evs[0].State != StatePending || evs[1].State != StateRunning {
		t.Fatalf("events: %s", eventSummary(evs))
	}
	last := evs[len(evs)-1]
	if last.Progress.RowsWritten != 200 || last.Progress.WorkItemsDone != 4 {
		t.Fatalf("last event progress = %+v", last.Progress)
	}
	// Resuming after an event returns only the later ones.
	var rest []Event
	if err := b.client.Events(ctx, j.ID, evs[len(evs)-3].ID, func(e Event) error { rest = append(rest, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(rest) != 2 || rest[1].ID != last.ID {
		t.Fatalf("resumed events: %s", eventSummary(rest))
	}

	// A second refresh with nothing new is a no-op and keeps the version.
	j2, err := b.client.Submit(ctx, view, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j2 = b.waitState(t, j2.ID, StateDone)
	if j2.Result.Mode != refresh.ModeNoOp || j2.Result.ViewVersion != 1 || j2.Progress.WorkItemsTotal != 0 {
		t.Fatalf("no-op job = %+v result %+v", j2, j2.Result)
	}
}

func TestFakeConcurrencyBoundAcrossWorkers(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"v"}
	fe.addSource(view, 10)
	b := setup(t, fe)
	// Each Expand waits until two run at once (or 5s pass), so the peak of
	// two is certain to be seen and a third, were it let through, would be.
	var once sync.Once
	two := make(chan struct{})
	b.eng.beforeExpand = func(ctx context.Context, _ *refresh.Plan, _ int) error {
		if b.eng.peakInFlight() >= 2 {
			once.Do(func() { close(two) })
		}
		select {
		case <-two:
		case <-time.After(5 * time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	b.startServer(t)
	b.startServer(t)

	j, err := b.client.Submit(context.Background(), view, refresh.Options{SourceTaskSize: 1, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	j = b.waitState(t, j.ID, StateDone)
	if j.Progress.WorkItemsDone != 10 || j.Result.RowsAdded != 20 {
		t.Fatalf("job = %+v", j.Progress)
	}
	if j.Progress.MaxRunning != 2 {
		t.Fatalf("max_running = %d, want 2", j.Progress.MaxRunning)
	}
	if p := b.eng.peakInFlight(); p != 2 {
		t.Fatalf("engine saw %d items expanding at once, want 2", p)
	}
}

func TestFakeOneRefreshPerViewInOrder(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"v"}
	fe.addSource(view, 40)
	b := setup(t, fe)
	// Slow the first job's items so the second is submitted while the
	// first runs.
	first := make(chan string, 1)
	release := make(chan struct{})
	b.eng.beforeExpand = func(ctx context.Context, p *refresh.Plan, _ int) error {
		select {
		case first <- p.JobID:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	b.startServer(t)
	b.startServer(t)
	ctx := context.Background()
	j1, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := <-first; got != j1.ID {
		t.Fatalf("first item is of job %s, want %s", got, j1.ID)
	}
	fe.addSource(view, 10) // the second refresh sees new rows
	j2, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	// j2 waits: still PENDING after its plan task has been tried.
	waitFor(t, "job 2 to be tried", 10*time.Second, func() (bool, error) {
		info, err := asynq.NewInspectorFromRedisClient(b.rdb).GetTaskInfo(QueueName("default"), "plan:"+j2.ID)
		if err != nil {
			return false, nil
		}
		return info.LastErr != "", nil
	})
	if j, _ := b.client.Get(ctx, j2.ID); j.State != StatePending {
		t.Fatalf("job 2 is %s while job 1 runs", j.State)
	}
	close(release)
	d1 := b.waitState(t, j1.ID, StateDone)
	d2 := b.waitState(t, j2.ID, StateDone)
	if d1.Result.ViewVersion != 1 || d2.Result.ViewVersion != 2 {
		t.Fatalf("versions %d, %d; want 1, 2", d1.Result.ViewVersion, d2.Result.ViewVersion)
	}
	if d2.StartedAt.Before(*d1.FinishedAt) {
		t.Fatalf("job 2 started %v before job 1 finished %v", d2.StartedAt, d1.FinishedAt)
	}
	if v, rows := fe.state(view); v != 2 || rows != 100 {
		t.Fatalf("view version %d rows %d, want 2 and 100", v, rows)
	}
	want := []string{"plan " + j1.ID, "commit " + j1.ID, "plan " + j2.ID, "commit " + j2.ID}
	if got := b.eng.calls2(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("engine calls %v, want %v", got, want)
	}
	if n, _ := b.rdb.LLen(ctx, viewQueueKey([]string{"v"})).Result(); n != 0 {
		t.Fatalf("view queue holds %d jobs after both ended", n)
	}
}

func TestFakeCancelWhileItemsRun(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"v"}
	fe.addSource(view, 50)
	b := setup(t, fe)
	running := make(chan struct{}, 10)
	b.eng.beforeExpand = func(ctx context.Context, _ *refresh.Plan, _ int) error {
		running <- struct{}{}
		<-ctx.Done() // an item that only ends when its job is stopped
		return ctx.Err()
	}
	b.startServer(t)
	ctx := context.Background()
	j, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 10, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	<-running
	c, err := b.client.Cancel(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.State != StateCancelled || c.FinishedAt == nil {
		t.Fatalf("cancelled job = %+v", c)
	}
	// The running items notice, discard and end; nothing more is released.
	waitFor(t, "items to stop", 10*time.Second, func() (bool, error) {
		n, err := b.rdb.HLen(ctx, activeKey(j.ID)).Result()
		return n == 0 && fe.discardCount(j.ID) >= 2, err
	})
	if v, rows := fe.state(view); v != 0 || rows != 0 {
		t.Fatalf("cancelled job changed the view: version %d rows %d", v, rows)
	}
	j, _ = b.client.Get(ctx, j.ID)
	if j.State != StateCancelled || j.Progress.WorkItemsDone != 0 || j.Result != nil {
		t.Fatalf("job after cancel = %+v", j)
	}
	if _, err := b.client.Cancel(ctx, j.ID); errs.CodeOf(err) != errs.CodeJobFinished {
		t.Fatalf("second cancel: %v, want CodeJobFinished", err)
	}
	evs := b.events(t, j.ID)
	if last := evs[len(evs)-1]; last.State != StateCancelled {
		t.Fatalf("events: %s", eventSummary(evs))
	}
	// The view is free again: the next refresh runs.
	b.eng.mu.Lock()
	b.eng.beforeExpand = nil
	b.eng.mu.Unlock()
	j2, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if j2 = b.waitState(t, j2.ID, StateDone); j2.Result.RowsAdded != 100 {
		t.Fatalf("next job result %+v", j2.Result)
	}
}

func TestFakeSubmitChecksCluster(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"v"}
	fe.addSource(view, 1)
	b := setup(t, fe)
	ctx := context.Background()
	_, err := b.client.Submit(ctx, view, refresh.Options{Cluster: "gpu"})
	if errs.CodeOf(err) != errs.CodeInvalidInput || err.Error() != `cluster: no worker serves cluster "gpu"` {
		t.Fatalf("submit to a cluster nobody serves: %v", err)
	}
	s := b.startServer(t, "gpu", "cpu")
	j, err := b.client.Submit(ctx, view, refresh.Options{Cluster: "gpu"})
	if err != nil {
		t.Fatal(err)
	}
	if j = b.waitState(t, j.ID, StateDone); j.Cluster != "gpu" || j.Request.Cluster != "gpu" {
		t.Fatalf("job = %+v", j)
	}
	if _, err := b.client.Submit(ctx, view, refresh.Options{Cluster: "default"}); errs.CodeOf(err) != errs.CodeInvalidInput {
		t.Fatalf("submit to default with only gpu,cpu served: %v", err)
	}
	if _, err := b.client.Submit(ctx, []string{"missing"}, refresh.Options{Cluster: "gpu"}); errs.CodeOf(err) != errs.CodeTableNotFound {
		t.Fatalf("submit of a missing view: %v", err)
	}
	s.Shutdown()
	if _, err := b.client.Submit(ctx, view, refresh.Options{Cluster: "cpu"}); errs.CodeOf(err) != errs.CodeInvalidInput {
		t.Fatalf("submit after the only worker left: %v", err)
	}
}

// TestFakeDuplicateDelivery calls the handlers directly, as asynq would on
// a redelivery: the second delivery of an item must neither expand again
// nor count again, and must hand the baton to the same successor.
func TestFakeDuplicateDelivery(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"v"}
	fe.addSource(view, 30)
	b := setup(t, fe)
	s := b.newServer(t) // not started: the test is the only consumer
	ctx := context.Background()
	if err := s.st.heartbeat(ctx, s.id, []string{"default"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	j, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 10, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	task := func(typ string, v any) *asynq.Task {
		b, _ := jsonMarshal(v)
		return asynq.NewTask(typ, b)
	}
	if err := s.handlePlan(ctx, task(TypePlan, PlanPayload{JobID: j.ID})); err != nil {
		t.Fatal(err)
	}
	if err := s.handlePlan(ctx, task(TypePlan, PlanPayload{JobID: j.ID})); err != nil {
		t.Fatal(err)
	}
	pending := func() []string {
		infos, _ := asynq.NewInspectorFromRedisClient(b.rdb).ListPendingTasks(QueueName("default"))
		var ids []string
		for _, in := range infos {
			if in.Type == TypeWorkItem { // the plan task stays pending: the test ran copies
				ids = append(ids, in.ID)
			}
		}
		return ids
	}
	// The plan task expands item 0 in place; its completion released
	// item 1.
	if got := fmt.Sprint(pending()); got != fmt.Sprintf("[item:%s:1]", j.ID) {
		t.Fatalf("pending after plan = %s", got)
	}
	item := func(i int) *asynq.Task { return task(TypeWorkItem, WorkItemPayload{JobID: j.ID, Index: i}) }
	// Two concurrent deliveries and a late third one of item 0.
	var wg sync.WaitGroup
	errList := make([]error, 2)
	for k := range 2 {
		wg.Go(func() { errList[k] = s.handleWorkItem(ctx, item(0)) })
	}
	wg.Wait()
	if err := errors.Join(errList...); err != nil {
		t.Fatal(err)
	}
	if err := s.handleWorkItem(ctx, item(0)); err != nil {
		t.Fatal(err)
	}
	if n := b.eng.calls(j.ID, 0); n < 1 || n > 2 {
		t.Fatalf("item 0 expanded %d times", n)
	}
	got, _ := b.client.Get(ctx, j.ID)
	if got.Progress.WorkItemsDone != 1 || got.Progress.RowsRead != 10 || got.Progress.RowsWritten != 20 {
		t.Fatalf("progress after duplicate deliveries = %+v", got.Progress)
	}
	if p := fmt.Sprint(pending()); p != fmt.Sprintf("[item:%s:1]", j.ID) {
		t.Fatalf("pending = %s", p)
	}
	for _, i := range []int{1, 1, 2, 2} {
		if err := s.handleWorkItem(ctx, item(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if n := b.eng.calls(j.ID, i); i > 0 && n != 1 {
			t.Fatalf("item %d expanded %d times", i, n)
		}
	}
	got, _ = b.client.Get(ctx, j.ID)
	if got.Progress.WorkItemsDone != 3 || got.Progress.RowsWritten != 60 || got.Progress.MaxRunning != 1 {
		t.Fatalf("progress = %+v", got.Progress)
	}
	commit := task(TypeCommit, CommitPayload{JobID: j.ID})
	for range 2 {
		if err := s.handleCommit(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	got, _ = b.client.Get(ctx, j.ID)
	if got.State != StateDone || got.Result.RowsAdded != 60 || got.Result.ViewVersion != 1 {
		t.Fatalf("job = %+v result %+v", got, got.Result)
	}
	// A delivery after the end changes nothing.
	if err := s.handleWorkItem(ctx, item(1)); err != nil {
		t.Fatal(err)
	}
	if n := b.eng.calls(j.ID, 1); n != 1 {
		t.Fatalf("item 1 expanded %d times after the job ended", n)
	}
	if v, rows := fe.state(view); v != 1 || rows != 60 {
		t.Fatalf("view version %d rows %d", v, rows)
	}
}

func TestFakePermanentItemErrorFailsJob(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"v"}
	fe.addSource(view, 50)
	b := setup(t, fe)
	bad := true
	var mu sync.Mutex
	b.eng.beforeExpand = func(_ context.Context, _ *refresh.Plan, i int) error {
		mu.Lock()
		defer mu.Unlock()
		if i == 3 && bad {
			return errs.Errorf(errs.CodeSchemaValidation, "column text is not a string")
		}
		return nil
	}
	b.startServer(t)
	ctx := context.Background()
	j, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 10, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	j = b.waitState(t, j.ID, StateFailed)
	want := Failure{Phase: PhaseExpanding, Message: "column text is not a string", Retryable: false}
	if j.Failure == nil || *j.Failure != want {
		t.Fatalf("failure = %+v, want %+v", j.Failure, want)
	}
	if j.Progress.WorkItemsFailed != 1 || j.Progress.WorkItemsDone != 3 {
		t.Fatalf("progress = %+v", j.Progress)
	}
	if b.eng.calls(j.ID, 3) != 1 || b.eng.calls(j.ID, 4) != 0 {
		t.Fatalf("item 3 tried %d times, item 4 %d", b.eng.calls(j.ID, 3), b.eng.calls(j.ID, 4))
	}
	// The discard follows the FAILED state change (it runs after the
	// state is written, so a crash between the two leaves it to the
	// janitor).
	waitFor(t, "staged output of the failed job discarded", 10*time.Second, func() (bool, error) {
		return fe.discardCount(j.ID) >= 1, nil
	})
	if v, _ := fe.state(view); v != 0 {
		t.Fatalf("failed job changed the view to version %d", v)
	}
	// The view queue was released.
	mu.Lock()
	bad = false
	mu.Unlock()
	j2, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	b.waitState(t, j2.ID, StateDone)
}

func TestFakeTransientErrorIsRetried(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"v"}
	fe.addSource(view, 20)
	b := setup(t, fe)
	var mu sync.Mutex
	failures := 0
	b.eng.beforeExpand = func(_ context.Context, _ *refresh.Plan, i int) error {
		mu.Lock()
		defer mu.Unlock()
		if i == 1 && failures == 0 {
			failures++
			return errors.New("connection reset by peer")
		}
		return nil
	}
	b.startServer(t)
	j, err := b.client.Submit(context.Background(), view, refresh.Options{SourceTaskSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	j = b.waitState(t, j.ID, StateDone)
	if b.eng.calls(j.ID, 1) != 2 || j.Result.RowsAdded != 40 || j.Progress.WorkItemsDone != 2 {
		t.Fatalf("item 1 tried %d times; job %+v", b.eng.calls(j.ID, 1), j.Progress)
	}
}

func TestFakeGetListCancelErrors(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	fe.addSource([]string{"a"}, 1)
	fe.addSource([]string{"b"}, 1)
	b := setup(t, fe)
	ctx := context.Background()
	if _, err := b.client.Get(ctx, "nope"); errs.CodeOf(err) != errs.CodeJobNotFound {
		t.Fatalf("get unknown: %v", err)
	}
	if _, err := b.client.Cancel(ctx, "nope"); errs.CodeOf(err) != errs.CodeJobNotFound {
		t.Fatalf("cancel unknown: %v", err)
	}
	if err := b.client.Events(ctx, "nope", "", func(Event) error { return nil }); errs.CodeOf(err) != errs.CodeJobNotFound {
		t.Fatalf("events of unknown: %v", err)
	}
	s := b.newServer(t) // registered, not started: jobs stay PENDING
	if err := s.st.heartbeat(ctx, s.id, []string{"default"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 5 {
		v := []string{"a"}
		if i%2 == 1 {
			v = []string{"b"}
		}
		// Options differ: identical ones would join the PENDING job.
		j, err := b.client.Submit(ctx, v, refresh.Options{Concurrency: i + 1})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	if _, err := b.client.Cancel(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	all, next, err := b.client.List(ctx, ListFilter{})
	if err != nil || next != "" || len(all) != 5 {
		t.Fatalf("list all: %d jobs, next %q, %v", len(all), next, err)
	}
	for i, j := range all {
		if j.ID != ids[4-i] {
			t.Fatalf("list order: %d is %s, want %s", i, j.ID, ids[4-i])
		}
	}
	var paged []string
	tok := ""
	for {
		page, next, err := b.client.List(ctx, ListFilter{Limit: 2, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page {
			paged = append(paged, j.ID)
		}
		if next == "" {
			break
		}
		tok = next
	}
	if fmt.Sprint(paged) != fmt.Sprint([]string{ids[4], ids[3], ids[2], ids[1], ids[0]}) {
		t.Fatalf("paged %v", paged)
	}
	bs, _, err := b.client.List(ctx, ListFilter{View: []string{"b"}})
	if err != nil || len(bs) != 2 || bs[0].ID != ids[3] || bs[1].ID != ids[1] {
		t.Fatalf("list view b: %v %v", bs, err)
	}
	as, _, err := b.client.List(ctx, ListFilter{View: []string{"a"}, State: "pending"})
	if err != nil || len(as) != 2 || as[0].ID != ids[4] || as[1].ID != ids[2] {
		t.Fatalf("list pending of a: %v %v", as, err)
	}
	cs, _, err := b.client.List(ctx, ListFilter{State: string(StateCancelled), Limit: 1})
	if err != nil || len(cs) != 1 || cs[0].ID != ids[0] {
		t.Fatalf("list cancelled: %v %v", cs, err)
	}
	if _, _, err := b.client.List(ctx, ListFilter{State: "bogus"}); errs.CodeOf(err) != errs.CodeInvalidInput {
		t.Fatalf("bad state: %v", err)
	}
	if _, _, err := b.client.List(ctx, ListFilter{Limit: -1}); errs.CodeOf(err) != errs.CodeInvalidInput {
		t.Fatalf("bad limit: %v", err)
	}
	if err := b.client.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFakeLostPlanIsHealed: a job whose plan task never reached the queue
// (its submitter died between the record and the enqueue) does not block
// its view forever: after lostPlanAge the next job fails it and runs.
func TestFakeLostPlanIsHealed(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"v"}
	fe.addSource(view, 10)
	b := setup(t, fe)
	ctx := context.Background()
	// A registered worker that does not process yet, so Submit accepts.
	if err := b.client.st.heartbeat(ctx, "placeholder", []string{"default"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	j1, err := b.client.Submit(ctx, view, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := asynq.NewInspectorFromRedisClient(b.rdb).DeleteTask(QueueName("default"), "plan:"+j1.ID); err != nil {
		t.Fatal(err)
	}
	// Created two lostPlanAge ago (the record and the cluster's index).
	old := time.Now().Add(-2 * lostPlanAge)
	if err := b.rdb.HSet(ctx, jobKey(j1.ID), fCreated, formatTime(old)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.rdb.ZAdd(ctx, liveJobsKey("default"), redis.Z{Score: float64(old.UnixMilli()), Member: j1.ID}).Err(); err != nil {
		t.Fatal(err)
	}
	// The same request does not join a PENDING job that old: its plan
	// may be lost.
	j2, err := b.client.Submit(ctx, view, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if j2.ID == j1.ID || j2.Coalesced {
		t.Fatalf("a request joined a job whose plan task is lost")
	}
	b.startServer(t)
	d2 := b.waitState(t, j2.ID, StateDone)
	f1 := b.waitState(t, j1.ID, StateFailed)
	if f1.Failure == nil || !f1.Failure.Retryable || !strings.Contains(f1.Failure.Message, "plan task was lost") {
		t.Fatalf("lost job failure: %+v", f1.Failure)
	}
	if d2.Result == nil || d2.Result.ViewVersion != 1 {
		t.Fatalf("job 2 result %+v", d2.Result)
	}
}

// TestFailRefusedWhileCommitting: a failing straggler item cannot fail a
// job whose commit is under way; the commit itself can.
func TestFailRefusedWhileCommitting(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"v"}
	fe.addSource(view, 10)
	b := setup(t, fe)
	ctx := context.Background()
	if err := b.client.st.heartbeat(ctx, "placeholder", []string{"default"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	j, err := b.client.Submit(ctx, view, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.st.transition(ctx, j, transition{from: []State{StatePending}, set: []string{fState, string(StateRunning), fPhase, PhaseCommitting}}); err != nil {
		t.Fatal(err)
	}
	r, err := b.client.st.fail(ctx, j, Failure{Phase: PhaseExpanding, Message: "straggler"}, 1)
	if err != nil || r.applied() {
		t.Fatalf("straggler failed a committing job: %+v %v", r, err)
	}
	if got, _ := b.client.Get(ctx, j.ID); got.State != StateRunning {
		t.Fatalf("job is %s", got.State)
	}
	r, err = b.client.st.fail(ctx, j, Failure{Phase: PhaseCommitting, Message: "commit failed"}, 0)
	if err != nil || !r.changed() {
		t.Fatalf("commit failure refused: %+v %v", r, err)
	}
}
