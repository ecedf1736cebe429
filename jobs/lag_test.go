package jobs

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/errs"
)

func TestParseTargetLag(t *testing.T) {
	for _, ok := range []string{"1s", "2s", "5m", "1h30m", "8784h"} {
		if _, err := ParseTargetLag(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "0", "0s", "-5m", "999ms", "5", "5 minutes", "1e9h", "9000h"} {
		if d, err := ParseTargetLag(bad); err == nil {
			t.Errorf("%q accepted as %v", bad, d)
		}
	}
}

// A target-lag deadline is claimed once however many schedulers poll it
// concurrently, not before one poll interval ahead of it, and it is set
// by the first unseen change only: later changes before the fire do not
// move it. Setting refresh_every replaces the target lag and the other
// way round; suspend drops a pending deadline.
func TestTargetLagDeadlineFiresOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 5)
	b := setup(t, w.eng)
	ctx := context.Background()
	if err := b.client.RegisterView(ctx, w.view, srcID, false); err != nil {
		t.Fatal(err)
	}
	b.startServer(t)
	const poll = 200 * time.Millisecond
	scheds := b.schedulers(t, 3, poll) // driven by hand
	const lag = 10 * time.Second
	// Set on a view never refreshed: it is behind at once, so the deadline
	// counts from the source's first commit.
	if err := b.client.SetTargetLag(ctx, w.view, lag, true); err != nil {
		t.Fatal(err)
	}
	s, err := b.client.Schedule(ctx, w.view)
	if err != nil || s == nil || s.TargetLag != lag || s.Every != 0 || s.Next.IsZero() {
		t.Fatalf("schedule %+v (%v)", s, err)
	}
	if s.Next.After(time.Now().Add(lag)) || s.Next.Before(time.Now().Add(-time.Minute)) {
		t.Fatalf("deadline %v, want within the lag of the source's commit", s.Next)
	}
	// A later change leaves the first deadline.
	b.client.markLag(ctx, w.view, time.Now().Add(time.Hour))
	if s2, _ := b.client.Schedule(ctx, w.view); s2 == nil || !s2.Next.Equal(s.Next) {
		t.Fatalf("a later change moved the deadline: %+v, was %v", s2, s.Next)
	}
	deadline := s.Next

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
	if fs := pass(deadline.Add(-poll - 50*time.Millisecond)); len(fs) != 0 {
		t.Fatalf("fired more than a poll before the deadline: %+v", fs)
	}
	var fires []Fire
	for now := deadline.Add(-poll); !now.After(deadline.Add(time.Second)); now = now.Add(50 * time.Millisecond) {
		fires = append(fires, pass(now)...)
	}
	if len(fires) != 1 || !fires[0].Lag || fires[0].Err != nil || fires[0].Job == nil || fires[0].Job.Cause != CauseTargetLag {
		t.Fatalf("fires %+v, want one target_lag job", fires)
	}
	b.waitTerminal(t, fires[0].Job.ID)
	// Claimed: no deadline until the next change.
	if s, _ := b.client.Schedule(ctx, w.view); s == nil || !s.Next.IsZero() {
		t.Fatalf("after the fire: %+v", s)
	}
	// A deadline of a view that caught up meanwhile fires no job.
	b.client.markLag(ctx, w.view, time.Now().Add(-lag))
	fs := pass(time.Now())
	if len(fs) != 1 || !fs[0].Fresh || fs[0].Job != nil {
		t.Fatalf("a caught-up view's deadline: %+v", fs)
	}

	// refresh_every replaces the target lag, and back.
	if err := b.client.SetSchedule(ctx, w.view, time.Hour); err != nil {
		t.Fatal(err)
	}
	if s, _ := b.client.Schedule(ctx, w.view); s == nil || s.TargetLag != 0 || s.Every != time.Hour {
		t.Fatalf("after refresh_every: %+v", s)
	}
	if err := b.client.SetTargetLag(ctx, w.view, lag, true); err != nil {
		t.Fatal(err)
	}
	if s, _ := b.client.Schedule(ctx, w.view); s == nil || s.TargetLag != lag || s.Every != 0 || !s.Next.IsZero() {
		t.Fatalf("after target_lag: %+v", s)
	}
	// Suspended: a change sets no deadline, a pending one is dropped.
	b.client.markLag(ctx, w.view, time.Now())
	if err := b.client.Suspend(ctx, w.view); err != nil {
		t.Fatal(err)
	}
	b.client.markLag(ctx, w.view, time.Now())
	if s, _ := b.client.Schedule(ctx, w.view); s == nil || !s.Suspended || !s.Next.IsZero() {
		t.Fatalf("suspended: %+v", s)
	}
	if fs := pass(time.Now().Add(time.Hour)); len(fs) != 0 {
		t.Fatalf("a suspended view fired: %+v", fs)
	}
	if j, err := b.client.SubmitAuto(ctx, w.view, CauseSchedule, nil); j != nil || err != nil {
		t.Fatalf("an automatic job of a suspended view: %+v (%v)", j, err)
	}
	// Fresh when resumed: no catch-up job.
	if j, err := b.client.Resume(ctx, w.view); j != nil || err != nil {
		t.Fatalf("resume of a fresh view: %+v (%v)", j, err)
	}
	// An auto_refresh view suspended while its source changes: resumed, it
	// catches up with one job; a view never suspended gets none.
	if err := b.client.RegisterView(ctx, w.view, srcID, true); err != nil {
		t.Fatal(err)
	}
	if err := b.client.Suspend(ctx, w.view); err != nil {
		t.Fatal(err)
	}
	w.insert(t, 2)
	if _, err := b.client.Changed(ctx, srcID, w.version(t), CauseAuto); err != nil {
		t.Fatal(err)
	}
	if js, _, _ := b.client.List(ctx, ListFilter{View: w.view, Limit: MaxListLimit}); len(js) != 1 {
		t.Fatalf("%d jobs after a change of a suspended auto_refresh view, want 1 (the target lag's)", len(js))
	}
	j, err := b.client.Resume(ctx, w.view)
	if err != nil || j == nil || j.Cause != CauseResume {
		t.Fatalf("resume of a suspended auto_refresh view behind its source: %+v (%v)", j, err)
	}
	b.waitTerminal(t, j.ID)
	w.insert(t, 1)
	if j, err := b.client.Resume(ctx, w.view); j != nil || err != nil {
		t.Fatalf("resume of a view not suspended: %+v (%v)", j, err)
	}
	if err := b.client.SetTargetLag(ctx, []string{"docs", "nope"}, lag, true); errs.CodeOf(err) != errs.CodeTableNotFound {
		t.Fatalf("target lag of an unregistered view: %v", err)
	}
	if err := b.client.Suspend(ctx, []string{"docs", "nope"}); errs.CodeOf(err) != errs.CodeTableNotFound {
		t.Fatalf("suspend of an unregistered view: %v", err)
	}
}

// A view with target_lag 2s, its source's commits announced by the commit
// hook, two running schedulers: a burst of commits is one refresh (not one
// per commit), the view's lag measured all along stays within the target,
// an unchanged source causes no refresh, a suspended view follows no
// commit, and a resume catches it up with one refresh.
// lagSlack is how far past its target a view may lag in these tests before
// they fail: the time a refresh on a loaded machine may overrun its
// estimate.
const lagSlack = 1.0

func TestTargetLagRefreshesWithinTarget(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 10)
	b := setup(t, w.eng)
	ctx := context.Background()
	if err := b.client.RegisterView(ctx, w.view, srcID, false); err != nil {
		t.Fatal(err)
	}
	w.cat.OnCommit(b.client.CommitHook())
	t.Cleanup(func() { w.cat.OnCommit(nil) })
	b.startServer(t)
	const lag = 2 * time.Second
	scheds := b.schedulers(t, 2, 100*time.Millisecond)
	for _, s := range scheds {
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Stop(context.Background()) })
	}
	c := &chain{warehouse: w}
	// Set on a view never refreshed: the target lag fills it.
	if err := b.client.SetTargetLag(ctx, w.view, lag, true); err != nil {
		t.Fatal(err)
	}
	idle := func(what string, n int64) []*Job {
		t.Helper()
		var js []*Job
		waitFor(t, what, 30*time.Second, func() (bool, error) {
			if !slices.Equal(c.chunks(t, w.view), expected(n)) {
				return false, nil
			}
			var err error
			js, _, err = b.client.List(ctx, ListFilter{View: w.view, Limit: MaxListLimit})
			for _, j := range js {
				if !Terminal(j.State) {
					return false, err
				}
			}
			return true, err
		})
		return js
	}
	before := len(idle("the target lag to fill the view", 10))

	// A burst of commits: the lag, sampled until the view has them all,
	// stays within the target.
	const commits = 5
	var maxLag float64
	sample := func() bool {
		f, err := w.eng.Freshness(ctx, w.view, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		maxLag = max(maxLag, f.LagSeconds)
		return !f.Stale
	}
	t0 := time.Now()
	for range commits {
		w.insert(t, 2)
		sample()
	}
	deadline := time.Now().Add(30 * time.Second)
	for !sample() {
		if time.Now().After(deadline) {
			t.Fatal("the view did not catch up with the burst")
		}
		time.Sleep(20 * time.Millisecond)
	}
	js := idle("the burst's refresh to finish", 10+2*commits)
	var burst []*Job
	for _, j := range js[:len(js)-before] {
		if j.Cause != CauseTargetLag || j.State != StateDone {
			t.Fatalf("job %s: cause %s state %s", j.ID, j.Cause, j.State)
		}
		burst = append(burst, j)
	}
	for _, j := range burst {
		t.Logf("job %s: submitted %v after the first commit, committed %v after its submit", j.ID,
			j.CreatedAt.Sub(t0).Round(time.Millisecond), j.FinishedAt.Sub(j.CreatedAt).Round(time.Millisecond))
	}
	t.Logf("%d commits: %d refreshes; max lag %.3fs (target %v)", commits, len(burst), maxLag, lag)
	if len(burst) < 1 || len(burst) > 2 {
		t.Fatalf("%d refreshes for a burst of %d commits, want 1 (2 when a commit lands during the first)", len(burst), commits)
	}
	// The deadline leaves room for the refresh as recent jobs took it; on
	// a loaded machine one may take longer than that estimate, which the
	// slack allows for (quiet runs stay within the target: 1.5-1.8s).
	if maxLag > lag.Seconds()+lagSlack {
		t.Fatalf("the view lagged %.3fs behind its source, target %v (+%.1fs slack)", maxLag, lag, lagSlack)
	}

	// Unchanged source: nothing pending, nothing fires.
	if s, _ := b.client.Schedule(ctx, w.view); s == nil || !s.Next.IsZero() {
		t.Fatalf("a deadline with an unchanged source: %+v", s)
	}
	if fs, err := scheds[0].Pass(ctx, time.Now().Add(time.Hour)); err != nil || len(fs) != 0 {
		t.Fatalf("fires with an unchanged source: %+v (%v)", fs, err)
	}

	// Suspended: commits set no deadline and start no job.
	if err := b.client.Suspend(ctx, w.view); err != nil {
		t.Fatal(err)
	}
	n := len(js)
	for range 3 {
		w.insert(t, 1)
	}
	if s, _ := b.client.Schedule(ctx, w.view); s == nil || !s.Suspended || !s.Next.IsZero() {
		t.Fatalf("suspended view after commits: %+v", s)
	}
	if fs, err := scheds[0].Pass(ctx, time.Now().Add(time.Hour)); err != nil || len(fs) != 0 {
		t.Fatalf("fires of a suspended view: %+v (%v)", fs, err)
	}
	if js, _, _ := b.client.List(ctx, ListFilter{View: w.view, Limit: MaxListLimit}); len(js) != n {
		t.Fatalf("%d jobs after commits to a suspended view, want %d", len(js), n)
	}
	// Resumed: one catch-up refresh.
	j, err := b.client.Resume(ctx, w.view)
	if err != nil || j == nil || j.Cause != CauseResume {
		t.Fatalf("resume: %+v (%v)", j, err)
	}
	js = idle("the resume to catch the view up", 10+2*commits+3)
	if len(js) != n+1 {
		t.Fatalf("%d jobs after the resume, want %d", len(js), n+1)
	}
	if s, _ := b.client.Schedule(ctx, w.view); s != nil && (s.Suspended || !s.Next.IsZero()) {
		t.Fatalf("after the resume: %+v", s)
	}
}
