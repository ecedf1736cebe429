package jobs

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// TestSubmitBatchConcurrent: many concurrent submitters (their create
// scripts group-committed in pipelines, createbatch.go), a third of them
// to a cluster no worker serves, after the scripts were flushed from
// Redis (the first pipeline meets NOSCRIPT): every accepted job is
// recorded exactly once, PENDING with its plan task queued, every caller
// gets its own answer, and each refused caller its own 400 with nothing
// recorded.
func TestSubmitBatchConcurrent(t *testing.T) {
	fe := newFakeEngine()
	const views = 8
	for i := range views {
		fe.addSource([]string{fmt.Sprintf("bv%d", i)}, 10)
	}
	b := setup(t, fe)
	ctx := context.Background()
	exp := time.Now().Add(time.Hour).UnixMilli()
	if err := b.rdb.ZAdd(ctx, workersKey("default"), redis.Z{Score: float64(exp), Member: "test-idle"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 48, 25
	type answer struct {
		i   int
		id  string
		err error
	}
	answers := make(chan answer, goroutines*each)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for k := range each {
				i := g*each + k
				opts := refresh.Options{MaxRowsPerFragment: 1000 + i}
				if i%3 == 0 {
					opts.Cluster = "nobody-serves-this"
				}
				j, err := b.client.Submit(ctx, []string{fmt.Sprintf("bv%d", i%views)}, opts)
				a := answer{i: i, err: err}
				if j != nil {
					a.id = j.ID
					if j.Coalesced || j.State != StatePending || j.Request.MaxRowsPerFragment != 1000+i {
						a.err = fmt.Errorf("answer of submit %d: %+v", i, j)
					}
				}
				answers <- a
			}
		})
	}
	wg.Wait()
	close(answers)
	ids := map[string]int{}
	for a := range answers {
		if a.i%3 == 0 {
			if table.ErrorCode(a.err) != table.CodeInvalidInput || a.id != "" {
				t.Fatalf("submit %d to a cluster nobody serves: %q %v, want a 400", a.i, a.id, a.err)
			}
			continue
		}
		if a.err != nil {
			t.Fatalf("submit %d: %v", a.i, a.err)
		}
		if _, dup := ids[a.id]; dup {
			t.Fatalf("job id %s answered twice", a.id)
		}
		ids[a.id] = a.i
	}
	if want := goroutines * each * 2 / 3; len(ids) != want {
		t.Fatalf("%d jobs accepted, want %d", len(ids), want)
	}
	recorded, err := b.rdb.ZRange(ctx, allJobsKey, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(recorded) != len(ids) {
		t.Fatalf("%d jobs recorded, %d accepted", len(recorded), len(ids))
	}
	for _, id := range recorded {
		i, ok := ids[id]
		if !ok {
			t.Fatalf("job %s recorded, never answered", id)
		}
		j, err := b.client.Get(ctx, id)
		if err != nil || j.State != StatePending || j.Request.MaxRowsPerFragment != 1000+i {
			t.Fatalf("job %s of submit %d: %+v %v", id, i, j, err)
		}
		if n, err := b.rdb.Exists(ctx, asynqTaskKey(QueueName("default"), "plan:"+id)).Result(); err != nil || n != 1 {
			t.Fatalf("job %s has no plan task (%v)", id, err)
		}
	}
	if n, err := b.rdb.LLen(ctx, asynqPendingKey(QueueName("default"))).Result(); err != nil || n != int64(len(ids)) {
		t.Fatalf("%d plan tasks pending, want %d (%v)", n, len(ids), err)
	}
}

// TestCreateBatchCancelledCaller: a caller whose context is done before
// it queues sends nothing; one whose context ends while its call is queued
// still gets the definite answer (the job recorded or not).
func TestCreateBatchCancelledCaller(t *testing.T) {
	fe := newFakeEngine()
	view := []string{"cv"}
	fe.addSource(view, 10)
	b := setup(t, fe)
	ctx := context.Background()
	exp := time.Now().Add(time.Hour).UnixMilli()
	if err := b.rdb.ZAdd(ctx, workersKey("default"), redis.Z{Score: float64(exp), Member: "test-idle"}).Err(); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.client.creates.run(done, b.rdb, []string{"x"}, nil); err != context.Canceled {
		t.Fatalf("cancelled caller: %v, want context.Canceled", err)
	}
	j, err := b.client.Submit(ctx, view, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.rdb.ZCard(ctx, allJobsKey).Result(); err != nil || n != 1 {
		t.Fatalf("%d jobs recorded, want 1 (%s) (%v)", n, j.ID, err)
	}
}
