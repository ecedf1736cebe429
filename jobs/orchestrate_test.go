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
	if err := b.rdb.HSet(ctx, jobKey(j1.ID), fCreated, formatTime(old), fCreatedMs, old.UnixMilli()).Err(); err != nil {
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
