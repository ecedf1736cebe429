package jobs

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/refresh"
)

// pendingJob submits a job that stays PENDING: its cluster has a live
// worker (by the registry) that takes nothing.
func pendingJob(t *testing.T) (*bundle, *Job) {
	t.Helper()
	fe := newFakeEngine()
	fe.addSource([]string{"v"}, 1)
	b := setup(t, fe)
	ctx := context.Background()
	if err := b.rdb.ZAdd(ctx, workersKey(refresh.DefaultCluster), redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "idle"}).Err(); err != nil {
		t.Fatal(err)
	}
	j, err := b.client.Submit(ctx, []string{"v"}, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b, j
}

// TestFirstEventIsStable: the create script writes no event; a reader
// that comes before the job's next event is given "submitted" with the id
// created_ms-0, and the next event writes that same event into the stream
// first, so a reader that comes later, or one that resumes from the id it
// was given, sees one history.
func TestFirstEventIsStable(t *testing.T) {
	b, j := pendingJob(t)
	ctx := context.Background()
	if n, err := b.rdb.Exists(ctx, eventsKey(j.ID)).Result(); err != nil || n != 0 {
		t.Fatalf("the create wrote the event stream: %d %v", n, err)
	}
	var early []Event
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := b.client.Events(wctx, j.ID, "", func(e Event) error { early = append(early, e); return nil })
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || len(early) != 1 {
		t.Fatalf("early reader: %v %+v", err, early)
	}
	first := early[0]
	if first.Message != "submitted" || first.State != StatePending || first.ID != firstEvent(j).ID || !first.Time.Equal(j.CreatedAt) {
		t.Fatalf("first event %+v, job created %v", first, j.CreatedAt)
	}
	if _, err := b.client.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	all := b.events(t, j.ID)
	if len(all) < 2 || all[0] != first || all[len(all)-1].State != StateCancelled {
		t.Fatalf("later reader: %s (first %+v)", eventSummary(all), first)
	}
	var resumed []Event
	if err := b.client.Events(ctx, j.ID, first.ID, func(e Event) error { resumed = append(resumed, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(resumed) != len(all)-1 || resumed[0].ID != all[1].ID {
		t.Fatalf("resumed after %s: %s", first.ID, eventSummary(resumed))
	}
}

// TestFirstEventOlderWorker: a reader given the first event from the
// record still reads every event a worker of an older version writes
// (no copy of the first event, ids that a Redis clock behind the API's
// puts below created_ms-0), the terminal one included.
func TestFirstEventOlderWorker(t *testing.T) {
	b, j := pendingJob(t)
	ctx := context.Background()
	got := make(chan Event, 8)
	done := make(chan error, 1)
	go func() {
		done <- b.client.Events(ctx, j.ID, "", func(e Event) error { got <- e; return nil })
	}()
	if e := <-got; e.Message != "submitted" {
		t.Fatalf("first: %+v", e)
	}
	for i, st := range []State{StateRunning, StateCancelled} {
		if err := b.rdb.XAdd(ctx, &redis.XAddArgs{Stream: eventsKey(j.ID), ID: fmt.Sprintf("%d-0", i+1),
			Values: []any{"type", "state", "state", string(st), "message", "older worker", "time", formatTime(time.Now())}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.rdb.HSet(ctx, jobKey(j.ID), fState, string(StateCancelled)).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the reader did not end on the older worker's terminal event")
	}
	close(got)
	var states []State
	for e := range got {
		states = append(states, e.State)
	}
	if len(states) != 2 || states[0] != StateRunning || states[1] != StateCancelled {
		t.Fatalf("events after the first: %v", states)
	}
}
