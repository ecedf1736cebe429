package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/refresh"
)

// TestReadGroupFresh: requests arriving while a read runs never get that
// read's answer (it may predate them): they share the next read, which
// starts when it ends; a request arriving before the next read starts
// joins it; a waiter that goes away leaves the others their answer.
func TestReadGroupFresh(t *testing.T) {
	var g readGroup
	var state atomic.Int64
	state.Store(1)
	var reads atomic.Int64
	started := make(chan int64, 4)
	release := make(chan struct{})
	read := func(context.Context) ([]byte, error) {
		reads.Add(1)
		v := state.Load() // what the read sees: the state when it starts
		started <- v
		<-release
		return []byte(fmt.Sprint(v)), nil
	}
	ctx := context.Background()
	type res struct {
		b   string
		err error
	}
	call := func(ctx context.Context) chan res {
		ch := make(chan res, 1)
		go func() {
			b, err := g.do(ctx, "job", read)
			ch <- res{string(b), err}
		}()
		return ch
	}
	waitStart := func(want int64) {
		select {
		case v := <-started:
			if v != want {
				t.Fatalf("read started seeing %d, want %d", v, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no read started")
		}
	}
	queued := func(n int) { // n requests wait on the next read
		deadline := time.Now().Add(10 * time.Second)
		for {
			g.mu.Lock()
			s := g.m["job"]
			ok := s != nil && s.next != nil && s.next.n == n
			g.mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("no read queued")
			}
			time.Sleep(time.Millisecond)
		}
	}
	a := call(ctx)
	waitStart(1) // the first read runs, having seen state 1
	state.Store(2)
	b1 := call(ctx)
	queued(1)
	b2 := call(ctx)
	gone, leave := context.WithCancel(ctx)
	b3 := call(gone)
	queued(3) // b1, b2, b3 wait on the next read
	leave()
	if r := <-b3; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("a waiter that went away: %+v", r)
	}
	release <- struct{}{}
	if r := <-a; r.b != "1" || r.err != nil {
		t.Fatalf("first request: %+v", r)
	}
	waitStart(2) // the next read starts after the first ends
	release <- struct{}{}
	for _, ch := range []chan res{b1, b2} {
		if r := <-ch; r.b != "2" || r.err != nil {
			t.Fatalf("a request that arrived after the change got %+v, want 2", r)
		}
	}
	if n := reads.Load(); n != 2 {
		t.Fatalf("%d reads, want 2", n)
	}
	g.mu.Lock()
	left := len(g.m)
	g.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d idle keys kept", left)
	}
}

// TestGetJSONAfterChange: with many clients polling a job (their reads
// coalesced), a read made after the job changed state never answers the
// older state, and the JSON is what Get's job encodes to.
func TestGetJSONAfterChange(t *testing.T) {
	fe := newFakeEngine()
	view := []string{"gv"}
	fe.addSource(view, 10)
	b := setup(t, fe)
	ctx := context.Background()
	registerIdleWorker(t, b)
	for round := range 20 {
		j, err := b.client.Submit(ctx, view, refresh.Options{MaxRowsPerFragment: 1000 + round})
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		errc := make(chan error, 16)
		for range 16 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := b.client.GetJSON(ctx, j.ID); err != nil {
						errc <- err
						return
					}
				}
			})
		}
		if _, err := b.client.Cancel(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		got, err := b.client.GetJSON(ctx, j.ID)
		close(stop)
		wg.Wait()
		close(errc)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		var seen Job
		if err := json.Unmarshal(got, &seen); err != nil || seen.State != StateCancelled {
			t.Fatalf("round %d: read after the cancel answered %s (%v)", round, got, err)
		}
		want, err := b.client.Get(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if wb, _ := json.Marshal(want); string(wb) != string(got) {
			t.Fatalf("GetJSON %s, Get encodes to %s", got, wb)
		}
	}
	if _, err := b.client.GetJSON(ctx, "no-such-job"); err == nil {
		t.Fatal("unknown job read")
	}
}

// TestJobViewRemembered: JobView answers a job's view, then answers it
// without Redis (the record deleted behind its back still gives the
// view, while Get says the job is gone); an unknown job is not found.
func TestJobViewRemembered(t *testing.T) {
	fe := newFakeEngine()
	view := []string{"ns", "jv"}
	fe.addSource(view, 10)
	b := setup(t, fe)
	ctx := context.Background()
	registerIdleWorker(t, b)
	j, err := b.client.Submit(ctx, view, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.client.JobView(ctx, j.ID)
	if err != nil || !slices.Equal(got, view) {
		t.Fatalf("JobView: %v %v", got, err)
	}
	got[0] = "changed by the caller"
	if err := b.rdb.Del(ctx, jobKey(j.ID)).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := b.client.JobView(ctx, j.ID); err != nil || !slices.Equal(got, view) {
		t.Fatalf("JobView from memory: %v %v", got, err)
	}
	if _, err := b.client.Get(ctx, j.ID); errs.CodeOf(err) != errs.CodeJobNotFound {
		t.Fatalf("Get of the deleted record: %v", err)
	}
	if _, err := b.client.JobView(ctx, "no-such-job"); errs.CodeOf(err) != errs.CodeJobNotFound {
		t.Fatalf("JobView of an unknown job: %v", err)
	}
}

// registerIdleWorker makes cluster "default" look served by a live worker
// that takes no tasks, so submitted jobs stay PENDING.
func registerIdleWorker(t *testing.T, b *bundle) {
	t.Helper()
	exp := time.Now().Add(time.Hour).UnixMilli()
	if err := b.rdb.ZAdd(context.Background(), workersKey("default"), redis.Z{Score: float64(exp), Member: "test-idle"}).Err(); err != nil {
		t.Fatal(err)
	}
}
