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
	"github.com/mvq-dev/mvq/table"
)

// The scenarios in this file are written once and run against each engine
// (runScenario): the in-memory fake (fake_engine_test.go), which is quick,
// and the real refresh engine over a file:// warehouse (engine_test.go),
// whose view content is checked row by row. Both run on a real
// redis-server. Tests that need failures or timings only the fake can show
// stay in orchestrate_test.go; those only the real engine can answer, in
// engine_test.go.

// engineEnv is an engine the scenarios drive, with what they read of its
// one view.
type engineEnv struct {
	eng       engine
	view      []string
	perRow    int64  // view rows one source row gives
	base      uint64 // the view's version before its first refresh
	firstMode string // the mode of the view's first refresh
	// add appends n source rows as a new source version.
	add func(t testing.TB, n int)
	// check fails t unless the view holds exactly the rows of source
	// batches of these sizes, in order.
	check   func(t *testing.T, what string, batches ...int)
	version func(t *testing.T) uint64
	// staged counts a job's staged output that is neither committed nor
	// discarded.
	staged func(t *testing.T, job string) int
}

// realEnv is the refresh engine over a warehouse whose source starts with
// rows rows (version 1) and a chunker view of it (version 1, empty).
func realEnv(t testing.TB, rows int) *engineEnv {
	w := newWarehouse(t, rows)
	return &engineEnv{eng: w.eng, view: w.view, perRow: 3, base: 1, firstMode: refresh.ModeFull,
		add: w.insert,
		check: func(t *testing.T, what string, batches ...int) {
			t.Helper()
			eqRows(t, what, w.rows(t), want(batches...))
		},
		version: w.version, staged: w.staged}
}

// fakeEnv is the fake engine with a view whose source holds rows rows.
func fakeEnv(_ testing.TB, rows int) *engineEnv {
	fe := newFakeEngine()
	view := []string{"ns", "v"}
	fe.addSource(view, int64(rows))
	return &engineEnv{eng: fe, view: view, perRow: 2, base: 0, firstMode: refresh.ModeIncremental,
		add: func(_ testing.TB, n int) { fe.addSource(view, int64(n)) },
		check: func(t *testing.T, what string, batches ...int) {
			t.Helper()
			var n int64
			for _, b := range batches {
				n += int64(b)
			}
			if _, rows := fe.state(view); rows != 2*n {
				t.Fatalf("%s: %d rows, want %d", what, rows, 2*n)
			}
		},
		version: func(*testing.T) uint64 { v, _ := fe.state(view); return v },
		staged:  func(_ *testing.T, job string) int { return fe.stagedCount(job) }}
}

// runScenario runs scenario as a parallel subtest per engine, each over
// its own view whose source starts with rows rows.
func runScenario(t *testing.T, rows int, scenario func(t *testing.T, env *engineEnv)) {
	for _, e := range []struct {
		name string
		new  func(testing.TB, int) *engineEnv
	}{{"fake", fakeEnv}, {"real", realEnv}} {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			scenario(t, e.new(t, rows))
		})
	}
}

func TestScenarioSubmitRunsToDone(t *testing.T) {
	t.Parallel()
	runScenario(t, 12, func(t *testing.T, env *engineEnv) {
		b := setup(t, env.eng)
		b.startServer(t)
		ctx := context.Background()
		view := env.view

		j, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 5, Concurrency: 2, MaxRowsPerFragment: 7})
		if err != nil {
			t.Fatal(err)
		}
		if j.State != StatePending || j.View != table.JoinID(view) || j.Cluster != "default" || j.Type != JobTypeRefresh {
			t.Fatalf("submitted job = %+v", j)
		}
		if j.Request.IntraApplierConcurrency == 0 || j.Request.MaxRowsPerFragment != 7 {
			t.Fatalf("effective request not recorded: %+v", j.Request)
		}
		j = b.waitState(t, j.ID, StateDone)
		if *j.Result != (refresh.Result{Mode: env.firstMode, SourceVersion: 1, ViewVersion: env.base + 1, RowsAdded: 12 * env.perRow}) {
			t.Fatalf("result %+v", *j.Result)
		}
		wantP := Progress{WorkItemsTotal: 3, WorkItemsDone: 3, RowsRead: 12, RowsWritten: 12 * env.perRow}
		got := j.Progress
		got.MaxRunning = 0
		if got != wantP {
			t.Fatalf("progress = %+v, want %+v", j.Progress, wantP)
		}
		if j.Progress.MaxRunning < 1 || j.Progress.MaxRunning > 2 {
			t.Fatalf("max_running = %d, want 1..2", j.Progress.MaxRunning)
		}
		if j.StartedAt == nil || j.FinishedAt == nil || j.FinishedAt.Before(*j.StartedAt) || j.Phase != "" {
			t.Fatalf("times/phase: %+v", j)
		}
		for i := range 3 {
			if n := b.eng.calls(j.ID, i); n != 1 {
				t.Fatalf("item %d expanded %d times", i, n)
			}
		}
		env.check(t, "view after the first refresh", 12)

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
		if progress != 3 || evs[0].State != StatePending || evs[1].State != StateRunning {
			t.Fatalf("events: %s", eventSummary(evs))
		}
		last := evs[len(evs)-1]
		if last.Progress.RowsWritten != 12*env.perRow || last.Progress.WorkItemsDone != 3 {
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

		// New source rows: the next refresh is incremental and adds only them.
		env.add(t, 4)
		j2, err := b.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 3})
		if err != nil {
			t.Fatal(err)
		}
		j2 = b.waitState(t, j2.ID, StateDone)
		if *j2.Result != (refresh.Result{Mode: refresh.ModeIncremental, SourceVersion: 2, ViewVersion: env.base + 2, RowsAdded: 4 * env.perRow}) {
			t.Fatalf("second result %+v", *j2.Result)
		}
		env.check(t, "view after the incremental refresh", 12, 4)

		// Nothing new: a no-op keeps the version.
		j3, err := b.client.Submit(ctx, view, refresh.Options{})
		if err != nil {
			t.Fatal(err)
		}
		j3 = b.waitState(t, j3.ID, StateDone)
		if j3.Result.Mode != refresh.ModeNoOp || j3.Result.ViewVersion != env.base+2 || j3.Progress.WorkItemsTotal != 0 {
			t.Fatalf("no-op job = %+v result %+v", j3, j3.Result)
		}

		// Validation happens at Submit.
		lim := int64(-1)
		if _, err := b.client.Submit(ctx, view, refresh.Options{OutputLimit: &lim}); errs.CodeOf(err) != errs.CodeInvalidInput {
			t.Fatalf("negative output_limit: %v", err)
		}
		if _, err := b.client.Submit(ctx, view, refresh.Options{Cluster: "elsewhere"}); errs.CodeOf(err) != errs.CodeInvalidInput ||
			!strings.Contains(err.Error(), `no worker serves cluster "elsewhere"`) {
			t.Fatalf("unserved cluster: %v", err)
		}
		if _, err := b.client.Submit(ctx, []string{"docs", "nope"}, refresh.Options{}); errs.CodeOf(err) != errs.CodeTableNotFound {
			t.Fatalf("missing view: %v", err)
		}
	})
}

func TestScenarioConcurrencyBoundAcrossWorkers(t *testing.T) {
	t.Parallel()
	runScenario(t, 10, func(t *testing.T, env *engineEnv) {
		b := setup(t, env.eng)
		// Each Expand waits until two run at once (or 5s pass), so the
		// peak of two is certain to be seen and a third, were it let
		// through, would be.
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
		s1, s2 := b.startServer(t), b.startServer(t)
		if n, _ := b.client.st.liveWorkers(context.Background(), "default"); n != 2 || s1.ID() == s2.ID() {
			t.Fatalf("%d live workers", n)
		}
		j, err := b.client.Submit(context.Background(), env.view, refresh.Options{SourceTaskSize: 1, Concurrency: 2})
		if err != nil {
			t.Fatal(err)
		}
		j = b.waitState(t, j.ID, StateDone)
		if j.Progress.WorkItemsTotal != 10 || j.Progress.WorkItemsDone != 10 || j.Result.RowsAdded != 10*env.perRow {
			t.Fatalf("job %+v result %+v", j.Progress, j.Result)
		}
		if j.Progress.MaxRunning != 2 {
			t.Fatalf("max_running = %d, want 2", j.Progress.MaxRunning)
		}
		if p := b.eng.peakInFlight(); p != 2 {
			t.Fatalf("engine saw %d items expanding at once, want 2", p)
		}
		for i := range 10 {
			if n := b.eng.calls(j.ID, i); n != 1 {
				t.Fatalf("item %d expanded %d times", i, n)
			}
		}
		env.check(t, "view", 10)
	})
}

func TestScenarioOneRefreshPerViewInOrder(t *testing.T) {
	t.Parallel()
	runScenario(t, 6, func(t *testing.T, env *engineEnv) {
		b := setup(t, env.eng)
		// Items wait for release, so the second job is submitted while
		// the first runs.
		started := make(chan string, 16)
		release := make(chan struct{})
		b.eng.beforeExpand = func(ctx context.Context, p *refresh.Plan, _ int) error {
			started <- p.JobID
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}
		b.startServer(t)
		b.startServer(t)
		ctx := context.Background()
		j1, err := b.client.Submit(ctx, env.view, refresh.Options{SourceTaskSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		if got := <-started; got != j1.ID {
			t.Fatalf("first expanding job %s, want %s", got, j1.ID)
		}
		// While job 1 expands, the source grows and job 2 is submitted.
		env.add(t, 3)
		j2, err := b.client.Submit(ctx, env.view, refresh.Options{SourceTaskSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		// Job 2 waits: still PENDING after its plan task has been tried.
		waitFor(t, "job 2's plan to wait its turn", 10*time.Second, func() (bool, error) {
			info, err := asynq.NewInspectorFromRedisClient(b.rdb).GetTaskInfo(QueueName("default"), "plan:"+j2.ID)
			return err == nil && strings.Contains(info.LastErr, "earlier refresh"), nil
		})
		if j, _ := b.client.Get(ctx, j2.ID); j.State != StatePending {
			t.Fatalf("job 2 is %s while job 1 runs", j.State)
		}
		close(release)
		d1 := b.waitState(t, j1.ID, StateDone)
		d2 := b.waitState(t, j2.ID, StateDone)
		if *d1.Result != (refresh.Result{Mode: env.firstMode, SourceVersion: 1, ViewVersion: env.base + 1, RowsAdded: 6 * env.perRow}) {
			t.Fatalf("job 1 result %+v", *d1.Result)
		}
		if *d2.Result != (refresh.Result{Mode: refresh.ModeIncremental, SourceVersion: 2, ViewVersion: env.base + 2, RowsAdded: 3 * env.perRow}) {
			t.Fatalf("job 2 result %+v", *d2.Result)
		}
		if d2.StartedAt.Before(*d1.FinishedAt) {
			t.Fatalf("job 2 started at %v, before job 1 finished at %v", d2.StartedAt, d1.FinishedAt)
		}
		env.check(t, "view", 6, 3)
		want := []string{"plan " + j1.ID, "commit " + j1.ID, "plan " + j2.ID, "commit " + j2.ID}
		if got := b.eng.calls2(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("engine calls %v, want %v", got, want)
		}
		if n, _ := b.rdb.LLen(ctx, viewQueueKey(env.view)).Result(); n != 0 {
			t.Fatalf("view queue holds %d jobs after both ended", n)
		}
	})
}

func TestScenarioCancelWhileItemsRun(t *testing.T) {
	t.Parallel()
	runScenario(t, 2000, func(t *testing.T, env *engineEnv) {
		b := setup(t, env.eng)
		// Item 0 expands and finishes; items from 1 on expand (their
		// output is staged) and then hang until their job is stopped.
		hang := make(chan int, 64)
		h := &hangAfterExpand{engine: env.eng, from: 1, hung: hang}
		b.eng.engine = h
		b.startServer(t)
		ctx := context.Background()
		before := env.version(t)
		j, err := b.client.Submit(ctx, env.view, refresh.Options{SourceTaskSize: 200, Concurrency: 2})
		if err != nil {
			t.Fatal(err)
		}
		<-hang
		<-hang // two items staged and hanging; item 0 is done
		if n := env.staged(t, j.ID); n == 0 {
			t.Fatal("no staged output before cancel")
		}
		c, err := b.client.Cancel(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if c.State != StateCancelled || c.Phase != "" || c.FinishedAt == nil {
			t.Fatalf("cancelled job %+v", c)
		}
		// The hung items notice, discard and end; nothing more is released.
		// Item 0's output stays: a checkpoint (one file) for a later job.
		waitFor(t, "the hung items to stop and staged output but item 0's to go", 15*time.Second, func() (bool, error) {
			n, err := b.rdb.HLen(ctx, activeKey(j.ID)).Result()
			return n == 0 && env.staged(t, j.ID) == 1, err
		})
		j, _ = b.client.Get(ctx, j.ID)
		if j.State != StateCancelled || j.Result != nil || j.Progress.WorkItemsDone != 1 || j.Progress.WorkItemsTotal != 10 {
			t.Fatalf("job after cancel %+v", j)
		}
		if v := env.version(t); v != before {
			t.Fatalf("cancelled job moved the view from version %d to %d", before, v)
		}
		env.check(t, "view after cancel")
		if _, err := b.client.Cancel(ctx, j.ID); errs.CodeOf(err) != errs.CodeJobFinished {
			t.Fatalf("cancel of a cancelled job: %v, want CodeJobFinished", err)
		}
		evs := b.events(t, j.ID)
		if last := evs[len(evs)-1]; last.State != StateCancelled {
			t.Fatalf("events: %s", eventSummary(evs))
		}
		// The view is free again: the next refresh runs.
		h.off.Store(true)
		j2, err := b.client.Submit(ctx, env.view, refresh.Options{SourceTaskSize: 200})
		if err != nil {
			t.Fatal(err)
		}
		if j2 = b.waitState(t, j2.ID, StateDone); j2.Result.RowsAdded != 2000*env.perRow || j2.Result.ViewVersion != env.base+1 {
			t.Fatalf("next job result %+v", j2.Result)
		}
		env.check(t, "view after the next refresh", 2000)
	})
}

// hangAfterExpand expands items, then holds items >= from until their
// context ends (and reports each on hung), until off is set.
type hangAfterExpand struct {
	engine
	from int
	hung chan int
	off  atomic.Bool
}

func (h *hangAfterExpand) Expand(ctx context.Context, p *refresh.Plan, i int) (refresh.ItemResult, error) {
	r, err := h.engine.Expand(ctx, p, i)
	if err != nil || i < h.from || h.off.Load() {
		return r, err
	}
	h.hung <- i
	<-ctx.Done()
	return r, ctx.Err()
}

// TestScenarioDuplicateDelivery calls the task handlers directly, as asynq
// would on a redelivery: the second delivery of an item must neither
// expand again nor count again, and must hand the baton to the same
// successor; a second commit changes nothing.
func TestScenarioDuplicateDelivery(t *testing.T) {
	t.Parallel()
	runScenario(t, 9, func(t *testing.T, env *engineEnv) {
		b := setup(t, env.eng)
		s := b.newServer(t) // not started: the test is the only consumer
		ctx := context.Background()
		if err := s.st.heartbeat(ctx, s.id, []string{"default"}, time.Minute); err != nil {
			t.Fatal(err)
		}
		j, err := b.client.Submit(ctx, env.view, refresh.Options{SourceTaskSize: 3, Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		deliver := func(typ string, v any) error {
			payload, _ := jsonMarshal(v)
			return s.mux().ProcessTask(ctx, asynq.NewTask(typ, payload))
		}
		for range 2 {
			if err := deliver(TypePlan, PlanPayload{JobID: j.ID}); err != nil {
				t.Fatal(err)
			}
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
		item := func(i int) WorkItemPayload { return WorkItemPayload{JobID: j.ID, Index: i} }
		// Two concurrent deliveries and a late third one of item 0.
		var wg sync.WaitGroup
		errList := make([]error, 2)
		for k := range 2 {
			wg.Go(func() { errList[k] = deliver(TypeWorkItem, item(0)) })
		}
		wg.Wait()
		if err := errors.Join(errList...); err != nil {
			t.Fatal(err)
		}
		if err := deliver(TypeWorkItem, item(0)); err != nil {
			t.Fatal(err)
		}
		if n := b.eng.calls(j.ID, 0); n < 1 || n > 2 {
			t.Fatalf("item 0 expanded %d times", n)
		}
		got, _ := b.client.Get(ctx, j.ID)
		if p := got.Progress; p.WorkItemsDone != 1 || p.RowsRead != 3 || p.RowsWritten != 3*env.perRow {
			t.Fatalf("progress after duplicate deliveries = %+v", p)
		}
		if p := fmt.Sprint(pending()); p != fmt.Sprintf("[item:%s:1]", j.ID) {
			t.Fatalf("pending = %s", p)
		}
		for _, i := range []int{1, 1, 2, 2} {
			if err := deliver(TypeWorkItem, item(i)); err != nil {
				t.Fatal(err)
			}
		}
		for i := 1; i < 3; i++ {
			if n := b.eng.calls(j.ID, i); n != 1 {
				t.Fatalf("item %d expanded %d times", i, n)
			}
		}
		got, _ = b.client.Get(ctx, j.ID)
		if p := got.Progress; p.WorkItemsDone != 3 || p.RowsRead != 9 || p.RowsWritten != 9*env.perRow || p.MaxRunning != 1 {
			t.Fatalf("progress = %+v", p)
		}
		for range 2 {
			if err := deliver(TypeCommit, CommitPayload{JobID: j.ID}); err != nil {
				t.Fatal(err)
			}
		}
		got, _ = b.client.Get(ctx, j.ID)
		if got.State != StateDone || got.Result.RowsAdded != 9*env.perRow || got.Result.ViewVersion != env.base+1 {
			t.Fatalf("job %+v result %+v", got, got.Result)
		}
		env.check(t, "view", 9)
		// A delivery after the end changes nothing.
		if err := deliver(TypeWorkItem, item(1)); err != nil {
			t.Fatal(err)
		}
		if err := deliver(TypeCommit, CommitPayload{JobID: j.ID}); err != nil {
			t.Fatal(err)
		}
		if n := b.eng.calls(j.ID, 1); n != 1 {
			t.Fatalf("item 1 expanded %d times after the job ended", n)
		}
		env.check(t, "view after late deliveries", 9)
		if v := env.version(t); v != env.base+1 {
			t.Fatalf("view version %d", v)
		}
	})
}
