package jobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/refresh"
)

// TestFirstEventIsStable: the create script writes no event; a reader
// that comes before the job's next event is given "submitted" with the id
// created_ms-0, and the next event writes that same event into the stream
// first, so a reader that comes later, or one that resumes from the id it
// was given, sees one history.
func TestFirstEventIsStable(t *testing.T) {
	fe := newFakeEngine()
	fe.addSource([]string{"v"}, 1)
	b := setup(t, fe)
	ctx := context.Background()
	// A live worker that takes nothing: the job stays PENDING.
	if err := b.rdb.ZAdd(ctx, workersKey(refresh.DefaultCluster), redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "idle"}).Err(); err != nil {
		t.Fatal(err)
	}
	j, err := b.client.Submit(ctx, []string{"v"}, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.rdb.Exists(ctx, eventsKey(j.ID)).Result(); err != nil || n != 0 {
		t.Fatalf("the create wrote the event stream: %d %v", n, err)
	}
	var early []Event
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = b.client.Events(wctx, j.ID, "", func(e Event) error { early = append(early, e); return nil })
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
