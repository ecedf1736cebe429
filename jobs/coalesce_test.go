package jobs

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// TestCoalesceBurst: 3,000 identical refresh requests while the view's
// first job runs cost two jobs: the running one and one PENDING job that
// every later request joins (Coalesced). Requests with other options
// queue their own job. All end DONE, in order, with every row once.
func TestCoalesceBurst(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"v"}
	fe.addSource(view, 10)
	b := setup(t, fe)
	release := make(chan struct{})
	started := make(chan struct{}, 16)
	b.eng.beforeExpand = func(ctx context.Context, _ *refresh.Plan, _ int) error {
		started <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b.startServer(t)
	ctx := context.Background()
	first, err := b.client.Submit(ctx, view, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the first job did not start")
	}
	fe.addSource(view, 10)
	const burst = 3000
	var mu sync.Mutex
	ids := map[string]int{}
	joined := 0
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			for i := g; i < burst; i += 16 {
				j, err := b.client.Submit(ctx, view, refresh.Options{})
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				ids[j.ID]++
				if j.Coalesced {
					joined++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[first.ID] != 0 || joined != burst-1 {
		t.Fatalf("burst of %d: jobs %v, %d joined; want one new job joined by all but its creator", burst, ids, joined)
	}
	var second string
	for id := range ids {
		second = id
	}
	if j, _ := b.client.Get(ctx, second); j.State != StatePending {
		t.Fatalf("second job is %s", j.State)
	}
	other, err := b.client.Submit(ctx, view, refresh.Options{Concurrency: 3})
	if err != nil || other.Coalesced || other.ID == second {
		t.Fatalf("different options joined: %+v %v", other, err)
	}
	close(release)
	for _, id := range []string{first.ID, second, other.ID} {
		b.waitState(t, id, StateDone)
	}
	d1, _ := b.client.Get(ctx, first.ID)
	d2, _ := b.client.Get(ctx, second)
	if d1.Result.RowsAdded != 20 || d2.Result.RowsAdded != 20 || !d1.FinishedAt.Before(*d2.StartedAt) {
		t.Fatalf("first %+v, second %+v", d1.Result, d2.Result)
	}
	if v, rows := fe.state(view); rows != 40 {
		t.Fatalf("view v%d has %d rows, want 40", v, rows)
	}
	// Once the second job has started, the same request makes a new job.
	again, err := b.client.Submit(ctx, view, refresh.Options{})
	if err != nil || again.Coalesced || again.ID == second {
		t.Fatalf("request after the job started joined it: %+v %v", again, err)
	}
}

// TestJoinAgeOfOlderRecord: a PENDING job's age for a join is its record's
// created_ms; a record written before created_ms existed is aged by its
// score among the cluster's unfinished jobs. A young one is joined, an
// old one (its plan may be lost) is not. The first Submit of a queue puts
// it in asynq's set of all queues.
func TestJoinAgeOfOlderRecord(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"v"}
	fe.addSource(view, 10)
	b := setup(t, fe)
	ctx := context.Background()
	if err := b.client.st.heartbeat(ctx, "placeholder", []string{"default"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	j1, err := b.client.Submit(ctx, view, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := b.rdb.SIsMember(ctx, asynqAllQueues, QueueName("default")).Result(); err != nil || !ok {
		t.Fatalf("queue %s not in %s: %v %v", QueueName("default"), asynqAllQueues, ok, err)
	}
	if err := b.rdb.HDel(ctx, jobKey(j1.ID), fCreatedMs).Err(); err != nil {
		t.Fatal(err)
	}
	j2, err := b.client.Submit(ctx, view, refresh.Options{})
	if err != nil || !j2.Coalesced || j2.ID != j1.ID {
		t.Fatalf("a young record without created_ms was not joined: %+v %v", j2, err)
	}
	old := time.Now().Add(-2 * lostPlanAge)
	if err := b.rdb.ZAdd(ctx, liveJobsKey("default"), redis.Z{Score: float64(old.UnixMilli()), Member: j1.ID}).Err(); err != nil {
		t.Fatal(err)
	}
	j3, err := b.client.Submit(ctx, view, refresh.Options{})
	if err != nil || j3.Coalesced || j3.ID == j1.ID {
		t.Fatalf("an old record without created_ms was joined: %+v %v", j3, err)
	}
	createRunTwice(t, b, view)
}

// createRunTwice: go-redis runs the create script again after a read
// timeout, so a second run of one create must not write the job over or
// queue its plan task twice. With a fingerprint the second run finds its
// own id in the view's pending index and answers created; without one it
// finds the record. A join answers the joined job's id and creation time
// with this request's options. (Part of TestJoinAgeOfOlderRecord: the
// package's tests have a bounded number of Redis databases.)
func createRunTwice(t *testing.T, b *bundle, view []string) {
	t.Helper()
	ctx := context.Background()
	opts := refresh.Options{Cluster: "default", Concurrency: 3}
	mk := func(fp string) newJob {
		id, _ := uuid.NewV7()
		now := time.Now().UTC()
		j := &Job{ID: id.String(), Type: JobTypeRefresh, View: table.JoinID(view), State: StatePending, CreatedAt: now,
			Request: opts, Cluster: "default", Cause: CauseAPI, viewID: view}
		return newJob{job: j, request: []byte(`{"concurrency":3}`), fingerprint: fp, freshID: true}
	}
	queued := func() int64 {
		n, err := b.rdb.LLen(ctx, asynqPendingKey(QueueName("default"))).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, fp := range []string{"fp-twice", ""} {
		n := mk(fp)
		before := queued()
		var outs []createOutcome
		for range 2 {
			task, err := NewPlanTask(n.job.ID, "default", nil)
			if err != nil {
				t.Fatal(err)
			}
			out, _, err := enqueuePlan(ctx, b.client.st, b.client.enq, n, task, 0)
			if err != nil {
				t.Fatal(err)
			}
			outs = append(outs, out)
		}
		want := jobCreated
		if fp == "" {
			want = jobIDTaken
		}
		if outs[0] != jobCreated || outs[1] != want {
			t.Fatalf("fingerprint %q: outcomes %v, want created then %v", fp, outs, want)
		}
		if got := queued() - before; got != 1 {
			t.Fatalf("fingerprint %q: %d plan tasks queued, want 1", fp, got)
		}
		if n, err := b.rdb.LLen(ctx, viewQueueKey(view)).Result(); err != nil || n < 1 {
			t.Fatalf("view queue: %d %v", n, err)
		}
	}
	first := mk("fp-join")
	task, _ := NewPlanTask(first.job.ID, "default", nil)
	if out, _, err := enqueuePlan(ctx, b.client.st, b.client.enq, first, task, 0); err != nil || out != jobCreated {
		t.Fatalf("first: %v %v", out, err)
	}
	second := mk("fp-join")
	task, _ = NewPlanTask(second.job.ID, "default", nil)
	out, joined, err := enqueuePlan(ctx, b.client.st, b.client.enq, second, task, 0)
	if err != nil || out != jobJoined {
		t.Fatalf("second: %v %v", out, err)
	}
	if joined.ID != first.job.ID || joined.State != StatePending || !joined.CreatedAt.Equal(first.job.CreatedAt.Truncate(time.Millisecond)) ||
		joined.Request.Concurrency != 3 || joined.View != table.JoinID(view) || joined.Cluster != "default" {
		t.Fatalf("joined %+v, want job %s created %s", joined, first.job.ID, first.job.CreatedAt)
	}
	if ok, err := b.rdb.Exists(ctx, jobKey(second.job.ID)).Result(); err != nil || ok != 0 {
		t.Fatalf("a join wrote its own record: %d %v", ok, err)
	}
}
