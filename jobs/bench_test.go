package jobs

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/refresh"
)

// BenchmarkCancelLatency: the time from calling Cancel to the context
// of the job's running work item being cancelled (the canceller's
// pub/sub), over 20 cancels; a worker in this process. Target: <= 50 ms.
// Every cancelled job is checked CANCELLED with its item stopped.
func BenchmarkCancelLatency(b *testing.B) {
	fe := newFakeEngine()
	view := []string{"v"}
	bn := setup(b, fe)
	running := make(chan struct{}, 1)
	stopped := make(chan time.Time, 1)
	bn.eng.beforeExpand = func(ctx context.Context, _ *refresh.Plan, _ int) error {
		running <- struct{}{}
		<-ctx.Done()
		stopped <- time.Now()
		return ctx.Err()
	}
	// Cancelled jobs commit nothing: every job has these 10 rows, one item.
	fe.addSource(view, 10)
	bn.startServer(b)
	ctx := context.Background()
	const rounds = 20
	for it := 0; it < b.N; it++ {
		var lat []time.Duration
		for range rounds {
			j, err := bn.client.Submit(ctx, view, refresh.Options{SourceTaskSize: 10})
			if err != nil {
				b.Fatal(err)
			}
			select {
			case <-running:
			case <-time.After(30 * time.Second):
				b.Fatal("the work item did not start")
			}
			t0 := time.Now()
			if _, err := bn.client.Cancel(ctx, j.ID); err != nil {
				b.Fatal(err)
			}
			select {
			case t := <-stopped:
				if t.Before(t0) {
					b.Fatal("the work item stopped before the cancel")
				}
				lat = append(lat, t.Sub(t0))
			case <-time.After(30 * time.Second):
				b.Fatal("the running work item was not cancelled")
			}
			if got, err := bn.client.Get(ctx, j.ID); err != nil || got.State != StateCancelled {
				b.Fatalf("cancelled job: %+v %v", got, err)
			}
		}
		slices.Sort(lat)
		med, worst := lat[len(lat)/2], lat[len(lat)-1]
		b.Logf("run %d: cancel reached the running work item in median %.2f ms, max %.2f ms over %d cancels (target <= 50 ms)",
			it, float64(med.Microseconds())/1000, float64(worst.Microseconds())/1000, rounds)
		b.ReportMetric(float64(med.Microseconds())/1000, "cancel_median_ms")
		b.ReportMetric(float64(worst.Microseconds())/1000, "cancel_max_ms")
	}
}
