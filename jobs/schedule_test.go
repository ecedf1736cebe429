package jobs

import (
	"context"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// schedulers returns n schedulers, each over a client with its own Redis
// connection (as n processes would have), polling every poll.
func (b *bundle) schedulers(t *testing.T, n int, poll time.Duration) []*Scheduler {
	t.Helper()
	opt := b.rdb.Options()
	var out []*Scheduler
	for range n {
		rdb := redis.NewClient(&redis.Options{Addr: opt.Addr, DB: opt.DB})
		t.Cleanup(func() { rdb.Close() })
		c := newClient(rdb, b.conn, b.eng, AutoRefresh(AutoConfig{MinInterval: -1}))
		t.Cleanup(func() { c.Close() })
		out = append(out, c.NewScheduler(SchedulerConfig{Interval: poll}))
	}
	return out
}

func TestParseRefreshEvery(t *testing.T) {
	for _, ok := range []string{"1s", "90s", "15m", "1h30m", "8760h"} {
		if _, err := ParseRefreshEvery(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "0", "0s", "-5m", "999ms", "5", "five minutes", "1e9h", "9000h"} {
		if d, err := ParseRefreshEvery(bad); err == nil {
			t.Errorf("%q accepted as %v", bad, d)
		}
	}
}

// Three schedulers over one Redis, each with its own connection, poll the
// same schedule concurrently at every step of a simulated timeline: each
// period of the view fires exactly once in all, at its due time. Changing
// the period moves the next fire; forgetting the view (its drop) ends the
// schedule.
func TestSchedulerFiresOncePerPeriodAcrossInstances(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 5)
	b := setup(t, w.eng)
	ctx := context.Background()
	if err := b.client.RegisterView(ctx, w.view, srcID, false); err != nil {
		t.Fatal(err)
	}
	b.startServer(t)
	scheds := b.schedulers(t, 3, time.Hour) // driven by hand
	const every = time.Second
	if err := b.client.SetSchedule(ctx, w.view, every); err != nil {
		t.Fatal(err)
	}
	s, err := b.client.Schedule(ctx, w.view)
	if err != nil || s == nil || s.Every != every {
		t.Fatalf("schedule %+v (%v)", s, err)
	}
	first := s.Next

	// pass runs one concurrent poll of every scheduler at now.
	pass := func(now time.Time) []Fire {
		var mu sync.Mutex
		var wg sync.WaitGroup
		var all []Fire
		for _, sc := range scheds {
			wg.Go(func() {
				fs, err := sc.Pass(ctx, now)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				all = append(all, fs...)
				mu.Unlock()
			})
		}
		wg.Wait()
		return all
	}
	var fires []Fire
	for now := first.Add(-200 * time.Millisecond); !now.After(first.Add(4*every + 500*time.Millisecond)); now = now.Add(50 * time.Millisecond) {
		fires = append(fires, pass(now)...)
	}
	var dues []time.Duration
	for _, f := range fires {
		if table.JoinID(f.View) != table.JoinID(w.view) || f.Err != nil {
			t.Fatalf("fire %+v", f)
		}
		dues = append(dues, f.Due.Sub(first))
	}
	sort.Slice(dues, func(i, j int) bool { return dues[i] < dues[j] })
	if want := []time.Duration{0, every, 2 * every, 3 * every, 4 * every}; !slices.Equal(dues, want) {
		t.Fatalf("fired at %v after the first due time, want %v (once per period)", dues, want)
	}
	// The first fire submitted a job with cause schedule (the later ones
	// joined it while it was pending, or submitted their own).
	if fires[0].Job == nil || fires[0].Job.Cause != CauseSchedule || fires[0].Job.Trigger != nil {
		t.Fatalf("first fire's job: %+v", fires[0].Job)
	}

	// A pool down for many periods fires once when it is back, then keeps
	// the period from then.
	late := first.Add(20 * every)
	if fs := pass(late); len(fs) != 1 {
		t.Fatalf("after missed periods: %d fires, want 1", len(fs))
	}
	if fs := pass(late.Add(every - 100*time.Millisecond)); len(fs) != 0 {
		t.Fatalf("before the next period: %d fires", len(fs))
	}
	if fs := pass(late.Add(every)); len(fs) != 1 {
		t.Fatalf("at the next period: %d fires, want 1", len(fs))
	}

	// A new period takes effect at once: the next fire is one new period
	// from the change.
	if err := b.client.SetSchedule(ctx, w.view, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	s, _ = b.client.Schedule(ctx, w.view)
	if s == nil || s.Every != 10*time.Second || time.Until(s.Next) < 9*time.Second {
		t.Fatalf("changed schedule %+v", s)
	}
	if fs := pass(s.Next.Add(-time.Second)); len(fs) != 0 {
		t.Fatalf("fired before the new period: %+v", fs)
	}
	if fs := pass(s.Next); len(fs) != 1 {
		t.Fatalf("at the new period: %d fires, want 1", len(fs))
	}
	// Cleared: no more fires.
	if err := b.client.SetSchedule(ctx, w.view, 0); err != nil {
		t.Fatal(err)
	}
	if s, _ := b.client.Schedule(ctx, w.view); s != nil {
		t.Fatalf("cleared schedule: %+v", s)
	}
	if fs := pass(time.Now().Add(time.Hour)); len(fs) != 0 {
		t.Fatalf("a cleared schedule fired: %+v", fs)
	}
	// Set again, then the view dropped (forgotten): it leaves the set.
	if err := b.client.SetSchedule(ctx, w.view, every); err != nil {
		t.Fatal(err)
	}
	if err := b.client.ForgetView(ctx, w.view); err != nil {
		t.Fatal(err)
	}
	if fs := pass(time.Now().Add(time.Hour)); len(fs) != 0 {
		t.Fatalf("a dropped view's schedule fired: %+v", fs)
	}
	if n, err := b.rdb.ZCard(ctx, RedisKey("sched")).Result(); err != nil || n != 0 {
		t.Fatalf("schedule set holds %d views (%v)", n, err)
	}
	if err := b.client.SetSchedule(ctx, w.view, every); errs.CodeOf(err) != errs.CodeTableNotFound {
		t.Fatalf("schedule of an unregistered view: %v", err)
	}
}

// Three running schedulers refresh a view whose source nobody announces
// changes of (no commit hook): the first scheduled refresh fills it, the
// next picks up a write, every job has cause schedule, and no period
// fired twice.
func TestScheduledRefreshWithoutChangeSignals(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 10)
	b := setup(t, w.eng)
	ctx := context.Background()
	if err := b.client.RegisterView(ctx, w.view, srcID, false); err != nil {
		t.Fatal(err)
	}
	b.startServer(t)
	const every = time.Second
	start := time.Now()
	if err := b.client.SetSchedule(ctx, w.view, every); err != nil {
		t.Fatal(err)
	}
	for _, s := range b.schedulers(t, 3, 50*time.Millisecond) {
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Stop(context.Background()) })
	}
	c := &chain{warehouse: w}
	waitFor(t, "a scheduled refresh to fill the view", 30*time.Second, func() (bool, error) {
		return slices.Equal(c.chunks(t, w.view), expected(10)), nil
	})
	w.insert(t, 3) // no hook: only the schedule sees it
	waitFor(t, "a scheduled refresh to pick up the write", 30*time.Second, func() (bool, error) {
		return slices.Equal(c.chunks(t, w.view), expected(13)), nil
	})
	js, _, err := b.client.List(ctx, ListFilter{View: w.view, Limit: MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		if j.Cause != CauseSchedule || j.Trigger != nil {
			t.Fatalf("job %s: cause %q trigger %+v, want schedule and none", j.ID, j.Cause, j.Trigger)
		}
	}
	// At most one job a period (a period fired twice adds one, unless it
	// joined a pending job: the exact claim count is the test above).
	if periods := int(time.Since(start)/every) + 1; len(js) < 2 || len(js) > periods {
		t.Fatalf("%d scheduled jobs in %d periods, want 2..%d", len(js), periods, periods)
	}
}
