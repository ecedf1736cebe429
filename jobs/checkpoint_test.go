package jobs

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/refresh"
)

// These tests run refreshes through the real engine and a real worker on
// a real redis-server: a first job stops after some of its work items
// finished (user code failing on the next one, or a cancel), and a later
// job takes over the finished items' output (checkpoints) when, and only
// when, nothing its output depends on changed.

// failFrom makes Expand of items >= from fail permanently, as user code
// failing on a row would.
func failFrom(from int) func(context.Context, *refresh.Plan, int) error {
	return func(_ context.Context, _ *refresh.Plan, i int) error {
		if i >= from {
			return errs.Errorf(errs.CodeInvalidInput, "user code failed on item %d", i)
		}
		return nil
	}
}

// ckptOpts: 10 source rows in items of 2 rows, one at a time (5 items).
func ckptOpts() refresh.Options { return refresh.Options{SourceTaskSize: 2, Concurrency: 1} }

// failedAfter submits a refresh whose items from k on fail, and waits for
// it to fail: items 0..k-1 are done.
func failedAfter(t *testing.T, b *bundle, w *warehouse, k int, o refresh.Options) *Job {
	t.Helper()
	b.eng.mu.Lock()
	b.eng.beforeExpand = failFrom(k)
	b.eng.mu.Unlock()
	j, err := b.client.Submit(context.Background(), w.view, o)
	if err != nil {
		t.Fatal(err)
	}
	j = b.waitState(t, j.ID, StateFailed)
	if j.Progress.WorkItemsDone != int64(k) {
		t.Fatalf("failed job: %d items done, want %d", j.Progress.WorkItemsDone, k)
	}
	b.eng.mu.Lock()
	b.eng.beforeExpand = nil
	b.eng.mu.Unlock()
	return j
}

// refreshDone submits a refresh and waits for it to be DONE.
func refreshDone(t *testing.T, b *bundle, w *warehouse, o refresh.Options) *Job {
	t.Helper()
	j, err := b.client.Submit(context.Background(), w.view, o)
	if err != nil {
		t.Fatal(err)
	}
	return b.waitState(t, j.ID, StateDone)
}

// expandedItems lists the items of job that the engine expanded.
func expandedItems(b *bundle, job string, n int) []int {
	var out []int
	for i := range n {
		if b.eng.calls(job, i) > 0 {
			out = append(out, i)
		}
	}
	return out
}

// reusedEvents counts job's progress events that say an item was reused
// from job from.
func reusedEvents(t *testing.T, b *bundle, job, from string) int {
	t.Helper()
	n := 0
	for _, e := range b.events(t, job) {
		if e.Type == EventProgress && strings.HasSuffix(e.Message, " reused from job "+from) {
			n++
		}
	}
	return n
}

// TestCheckpointReuseAfterFailure: a job whose user code fails on item 3
// of 5 keeps the output of items 0-2; the next refresh reuses exactly
// those, expands only items 3 and 4, says so (progress, events), and
// commits what a refresh from scratch commits.
func TestCheckpointReuseAfterFailure(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 10)
	b := setup(t, w.eng)
	b.startServer(t)
	j1 := failedAfter(t, b, w, 3, ckptOpts())
	if n := w.staged(t, j1.ID); n != 3 {
		t.Fatalf("failed job left %d staged files, want the 3 of its finished items", n)
	}
	j2 := refreshDone(t, b, w, ckptOpts())
	if j2.Progress.WorkItemsReused != 3 || j2.Progress.WorkItemsDone != 5 {
		t.Fatalf("second job progress %+v, want 3 of 5 items reused", j2.Progress)
	}
	if got := fmt.Sprint(expandedItems(b, j2.ID, 5)); got != "[3 4]" {
		t.Fatalf("second job expanded items %s, want [3 4]", got)
	}
	if n := reusedEvents(t, b, j2.ID, j1.ID); n != 3 {
		t.Fatalf("%d events say an item was reused from %s, want 3", n, j1.ID)
	}
	if j2.Result.RowsAdded != 30 {
		t.Fatalf("result %+v, want 30 rows added", j2.Result)
	}
	eqRows(t, "view after the reusing refresh", w.rows(t), want(10))
	// The reused output was copied: the view holds the second job's files.
	if n := w.staged(t, j2.ID); n != 5 {
		t.Fatalf("second job has %d staged files, want 5", n)
	}
}

// TestCheckpointReuseAfterCancel: a job cancelled while item 2 runs keeps
// items 0 and 1; the next refresh reuses exactly those.
func TestCheckpointReuseAfterCancel(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 10)
	b := setup(t, w.eng)
	b.startServer(t)
	hung := make(chan string, 1)
	b.eng.beforeExpand = func(ctx context.Context, p *refresh.Plan, i int) error {
		if i != 2 {
			return nil
		}
		select {
		case hung <- p.JobID:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	}
	j1, err := b.client.Submit(context.Background(), w.view, ckptOpts())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-hung:
	case <-time.After(30 * time.Second):
		t.Fatal("item 2 never started")
	}
	if _, err := b.client.Cancel(context.Background(), j1.ID); err != nil {
		t.Fatal(err)
	}
	j1 = b.waitState(t, j1.ID, StateCancelled)
	if j1.Progress.WorkItemsDone != 2 {
		t.Fatalf("cancelled job: %d items done, want 2", j1.Progress.WorkItemsDone)
	}
	b.eng.mu.Lock()
	b.eng.beforeExpand = nil
	b.eng.mu.Unlock()
	j2 := refreshDone(t, b, w, ckptOpts())
	if j2.Progress.WorkItemsReused != 2 {
		t.Fatalf("second job progress %+v, want 2 items reused", j2.Progress)
	}
	if got := fmt.Sprint(expandedItems(b, j2.ID, 5)); got != "[2 3 4]" {
		t.Fatalf("second job expanded items %s, want [2 3 4]", got)
	}
	eqRows(t, "view after the reusing refresh", w.rows(t), want(10))
}

// TestCheckpointNotReusedAfterChange: after a failed job, a refresh with
// another manifest, or over a newer source version (whose first items
// cover the same rows), or with other file options reuses nothing and
// commits the right rows.
func TestCheckpointNotReusedAfterChange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, w *warehouse, o *refresh.Options)
		want   []string
	}{
		{"manifest", func(_ *testing.T, _ *warehouse, o *refresh.Options) {
			o.Manifest = `{"env_vars": {"TAG": "other"}}`
		}, want(10)},
		{"source version", func(t *testing.T, w *warehouse, _ *refresh.Options) { w.insert(t, 4) }, want(10, 4)},
		{"max_rows_per_fragment", func(_ *testing.T, _ *warehouse, o *refresh.Options) { o.MaxRowsPerFragment = 4 }, want(10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWarehouse(t, 10)
			b := setup(t, w.eng)
			b.startServer(t)
			failedAfter(t, b, w, 3, ckptOpts())
			o := ckptOpts()
			tc.change(t, w, &o)
			j2 := refreshDone(t, b, w, o)
			if j2.Progress.WorkItemsReused != 0 {
				t.Fatalf("progress %+v: reused items after a change of %s", j2.Progress, tc.name)
			}
			items := int(j2.Progress.WorkItemsTotal)
			if got := len(expandedItems(b, j2.ID, items)); got != items {
				t.Fatalf("expanded %d of %d items", got, items)
			}
			eqRows(t, "view", w.rows(t), tc.want)
		})
	}
}

// TestCheckpointCorruptFallsBack: a checkpoint whose file was changed or
// removed is not trusted: that item is expanded again, the others reused.
func TestCheckpointCorruptFallsBack(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 10)
	b := setup(t, w.eng)
	b.startServer(t)
	ctx := context.Background()
	j1 := failedAfter(t, b, w, 3, ckptOpts())
	tb, err := w.cat.OpenTable(ctx, w.view)
	if err != nil {
		t.Fatal(err)
	}
	wh := w.cat.Warehouse()
	// Item 0's file truncated, item 2's removed.
	f0 := tb.Key("data/_staging-" + j1.ID + "-0-0.parquet")
	data, err := wh.Read(ctx, f0)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Write(ctx, f0, data[:len(data)/2]); err != nil {
		t.Fatal(err)
	}
	if err := wh.Delete(ctx, tb.Key("data/_staging-"+j1.ID+"-2-0.parquet")); err != nil {
		t.Fatal(err)
	}
	j2 := refreshDone(t, b, w, ckptOpts())
	if j2.Progress.WorkItemsReused != 1 {
		t.Fatalf("progress %+v, want only item 1 reused", j2.Progress)
	}
	if got := fmt.Sprint(expandedItems(b, j2.ID, 5)); got != "[0 2 3 4]" {
		t.Fatalf("expanded items %s, want [0 2 3 4]", got)
	}
	eqRows(t, "view", w.rows(t), want(10))
}

// TestCheckpointGarbageCollected: the janitor keeps a failed job's
// checkpointed files while its item results are recorded, and removes
// them once they expired.
func TestCheckpointGarbageCollected(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 10)
	b := setup(t, w.eng)
	b.startServer(t)
	ctx := context.Background()
	j1 := failedAfter(t, b, w, 3, ckptOpts())
	jan := newJanitor(b.client.st, "w1", JanitorConfig{Catalog: w.cat, OrphanGrace: time.Nanosecond}, testLogger)
	if _, err := jan.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if n := w.staged(t, j1.ID); n != 3 {
		t.Fatalf("after a janitor pass the failed job has %d staged files, want its 3 checkpoints", n)
	}
	// The results expire (DispatchRetention): the files go.
	if err := b.rdb.Del(ctx, resultsKey(j1.ID)).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := jan.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if n := w.staged(t, j1.ID); n != 0 {
		t.Fatalf("after the results expired the failed job has %d staged files, want 0", n)
	}
	// With neither records nor files, the next refresh computes everything.
	j2 := refreshDone(t, b, w, ckptOpts())
	if j2.Progress.WorkItemsReused != 0 {
		t.Fatalf("progress %+v, want nothing reused", j2.Progress)
	}
	eqRows(t, "view", w.rows(t), want(10))
}
