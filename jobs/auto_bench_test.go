package jobs

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/refresh"
)

// BenchmarkAutoRefreshLatency: the time from a small source commit (one
// row) to the auto_refresh view holding it (its committed watermark at the
// new source version), over 50 commits (MVQ_BENCH_AUTO_COMMITS), with no
// minimum interval between automatic refreshes (MVQ_AUTO_REFRESH_MIN_INTERVAL=0)
// — the commit hook, the job record, the queue, plan, expand and commit,
// a worker in this process on a real Redis. Target: p50 <= 100 ms.
// Baselines from the same run: the commit itself, and a manual refresh
// round trip (Submit, then the same wait) of one small commit. The view is
// checked to hold exactly the source's rows after each phase.
func BenchmarkAutoRefreshLatency(b *testing.B) {
	commits := 50
	if s := os.Getenv("MVQ_BENCH_AUTO_COMMITS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2 {
			b.Fatalf("MVQ_BENCH_AUTO_COMMITS=%q: want an integer >= 2", s)
		}
		commits = n
	}
	ctx := context.Background()
	w := newWarehouse(b, 100)
	bn := setup(b, w.eng)
	bn.client.auto = AutoConfig{MinInterval: -1}.withDefaults()
	if err := bn.client.RegisterView(ctx, w.view, srcID, true); err != nil {
		b.Fatal(err)
	}
	bn.startServer(b)
	c := &chain{warehouse: w}
	j, err := bn.client.Submit(ctx, w.view, refresh.Options{})
	if err != nil {
		b.Fatal(err)
	}
	bn.waitTerminalB(b, j.ID)

	// visible waits until the view's committed watermark reaches source
	// version v.
	visible := func(v uint64) {
		deadline := time.Now().Add(60 * time.Second)
		for {
			vw, err := w.eng.View(ctx, w.view)
			if err != nil {
				b.Fatal(err)
			}
			if vw.Watermark != nil && vw.Watermark.SourceVersion >= v {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("the view did not reach source version %d", v)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	check := func(what string) {
		if got, want := c.chunks(b, w.view), expected(w.next); !slices.Equal(got, want) {
			b.Fatalf("after %s the view has %d rows, want %d", what, len(got), len(want))
		}
	}
	pct := func(d []time.Duration, p float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(float64(len(s))*p))].Microseconds()) / 1000
	}

	for it := 0; it < b.N; it++ {
		// Automatic: the hook submits, nothing else does.
		w.cat.OnCommit(bn.client.CommitHook())
		var auto, commit []time.Duration
		for range commits {
			t0 := time.Now()
			m, _, err := w.src.Insert(ctx, w.batch(b, 1), "append")
			if err != nil {
				b.Fatal(err)
			}
			commit = append(commit, time.Since(t0))
			visible(m.Version)
			auto = append(auto, time.Since(t0))
		}
		w.cat.OnCommit(nil)
		check("the automatic refreshes")
		// Where the time goes: queued (created to started) and run
		// (started to finished) of the automatic jobs.
		js, _, err := bn.client.List(ctx, ListFilter{View: w.view, Limit: MaxListLimit})
		if err != nil {
			b.Fatal(err)
		}
		var queued, ran []time.Duration
		for _, j := range js {
			if j.Cause == CauseAuto && j.StartedAt != nil && j.FinishedAt != nil {
				queued = append(queued, j.StartedAt.Sub(j.CreatedAt))
				ran = append(ran, j.FinishedAt.Sub(*j.StartedAt))
			}
		}
		if len(queued) == 0 {
			b.Fatal("no automatic job ran")
		}

		// Baseline: the same commits refreshed by hand.
		manualN := max(commits/5, 2)
		var manual []time.Duration
		for range manualN {
			t0 := time.Now()
			m, _, err := w.src.Insert(ctx, w.batch(b, 1), "append")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := bn.client.Submit(ctx, w.view, refresh.Options{}); err != nil {
				b.Fatal(err)
			}
			visible(m.Version)
			manual = append(manual, time.Since(t0))
		}
		check("the manual refreshes")

		p50, p99 := pct(auto, 0.50), pct(auto, 0.99)
		c50, m50 := pct(commit, 0.50), pct(manual, 0.50)
		b.Logf("run %d: commit to auto-refreshed view visible: p50 %.1f ms, p99 %.1f ms over %d one-row commits (target p50 <= 100 ms); "+
			"baselines: the commit alone p50 %.1f ms, commit + manual refresh round trip p50 %.1f ms over %d (auto/manual %.2fx)",
			it, p50, p99, commits, c50, m50, manualN, p50/m50)
		b.Logf("run %d: %d automatic jobs: queued p50 %.1f ms, ran p50 %.1f ms", it, len(queued), pct(queued, 0.5), pct(ran, 0.5))
		b.ReportMetric(p50, "auto_p50_ms")
		b.ReportMetric(p99, "auto_p99_ms")
		b.ReportMetric(c50, "commit_p50_ms")
		b.ReportMetric(m50, "manual_p50_ms")
	}
}

// waitTerminalB waits until job id ends DONE.
func (b *bundle) waitTerminalB(tb testing.TB, id string) {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		j, err := b.client.Get(context.Background(), id)
		if err != nil {
			tb.Fatal(err)
		}
		if Terminal(j.State) {
			if j.State != StateDone {
				tb.Fatalf("job %s is %s: %+v", id, j.State, j.Failure)
			}
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("job %s did not end", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
