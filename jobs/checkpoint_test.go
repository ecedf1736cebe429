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

// TestCheckpointReuse: the finished items of a failed job, of a cancelled
// job and, when they check out, of a job whose staged files were damaged
// are reused by the next refresh, which says so (progress, events) and
// commits what a refresh from scratch commits. One warehouse, one Redis
// database: each step refreshes a new source fragment of 10 rows (5
// items of 2 rows, one at a time).
func TestCheckpointReuse(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 10)
	b := setup(t, w.eng)
	b.startServer(t)
	ctx := context.Background()

	// User code fails on item 3: items 0-2 are reused, 3 and 4 expanded.
	j1 := failedAfter(t, b, w, 3, ckptOpts())
	if n := w.staged(t, j1.ID); n != 3 {
		t.Fatalf("failed job left %d staged files, want the 3 of its finished items", n)
	}
	j2 := refreshDone(t, b, w, ckptOpts())
	if j2.Progress.WorkItemsReused != 3 || j2.Progress.WorkItemsDone != 5 {
		t.Fatalf("after a failure: progress %+v, want 3 of 5 items reused", j2.Progress)
	}
	if got := fmt.Sprint(expandedItems(b, j2.ID, 5)); got != "[3 4]" {
		t.Fatalf("after a failure: expanded items %s, want [3 4]", got)
	}
	if n := reusedEvents(t, b, j2.ID, j1.ID); n != 3 {
		t.Fatalf("%d events say an item was reused from %s, want 3", n, j1.ID)
	}
	if j2.Result.RowsAdded != 30 {
		t.Fatalf("result %+v, want 30 rows added", j2.Result)
	}
	eqRows(t, "view after reusing a failed job's items", w.rows(t), want(10))
	// The reused output was copied: the view holds the second job's files.
	if n := w.staged(t, j2.ID); n != 5 {
		t.Fatalf("second job has %d staged files, want 5", n)
	}

	// Cancelled while item 2 runs: items 0 and 1 are reused.
	w.insert(t, 10)
	hung := make(chan string, 1)
	b.eng.mu.Lock()
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
	b.eng.mu.Unlock()
	j3, err := b.client.Submit(ctx, w.view, ckptOpts())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-hung:
	case <-time.After(30 * time.Second):
		t.Fatal("item 2 never started")
	}
	if _, err := b.client.Cancel(ctx, j3.ID); err != nil {
		t.Fatal(err)
	}
	j3 = b.waitState(t, j3.ID, StateCancelled)
	if j3.Progress.WorkItemsDone != 2 {
		t.Fatalf("cancelled job: %d items done, want 2", j3.Progress.WorkItemsDone)
	}
	b.eng.mu.Lock()
	b.eng.beforeExpand = nil
	b.eng.mu.Unlock()
	j4 := refreshDone(t, b, w, ckptOpts())
	if j4.Progress.WorkItemsReused != 2 {
		t.Fatalf("after a cancel: progress %+v, want 2 items reused", j4.Progress)
	}
	if got := fmt.Sprint(expandedItems(b, j4.ID, 5)); got != "[2 3 4]" {
		t.Fatalf("after a cancel: expanded items %s, want [2 3 4]", got)
	}
	eqRows(t, "view after reusing a cancelled job's items", w.rows(t), want(10, 10))

	// A checkpoint whose file was changed or removed is not trusted: item
	// 0's file is truncated, item 2's removed; only item 1 is reused.
	w.insert(t, 10)
	j5 := failedAfter(t, b, w, 3, ckptOpts())
	tb, err := w.cat.OpenTable(ctx, w.view)
	if err != nil {
		t.Fatal(err)
	}
	wh := w.cat.Warehouse()
	// An item's file k is data/_staging-{job}-{item}-{k}-{run}.EXT.
	staged := func(item int) string {
		t.Helper()
		prefix := tb.Key(fmt.Sprintf("data/_staging-%s-%d-0", j5.ID, item))
		ents, err := wh.List(ctx, prefix)
		if err != nil || len(ents) != 1 {
			t.Fatalf("staged files of item %d: %v (%v)", item, ents, err)
		}
		return prefix + ents[0].Name
	}
	f0 := staged(0)
	data, err := wh.Read(ctx, f0)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Write(ctx, f0, data[:len(data)/2]); err != nil {
		t.Fatal(err)
	}
	if err := wh.Delete(ctx, staged(2)); err != nil {
		t.Fatal(err)
	}
	j6 := refreshDone(t, b, w, ckptOpts())
	if j6.Progress.WorkItemsReused != 1 {
		t.Fatalf("after damage: progress %+v, want only item 1 reused", j6.Progress)
	}
	if got := fmt.Sprint(expandedItems(b, j6.ID, 5)); got != "[0 2 3 4]" {
		t.Fatalf("after damage: expanded items %s, want [0 2 3 4]", got)
	}
	eqRows(t, "view after reusing what checked out", w.rows(t), want(10, 10, 10))
}

// TestCheckpointNotReusedAndCollected: after a failed job, a refresh with
// another manifest, over a newer source version (whose first items cover
// the same rows) or with other file options reuses nothing and commits
// the right rows; the janitor keeps a failed job's checkpointed files
// while its item results are recorded and removes them once they expired.
func TestCheckpointNotReusedAndCollected(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 10)
	b := setup(t, w.eng)
	b.startServer(t)
	ctx := context.Background()
	batches := []int{}
	for _, tc := range []struct {
		name   string
		change func(o *refresh.Options) // after the failure
		insert int                      // rows inserted after the failure
	}{
		{"manifest", func(o *refresh.Options) { o.Manifest = `{"env_vars": {"TAG": "other"}}` }, 0},
		{"source version", func(*refresh.Options) {}, 4},
		{"max_rows_per_fragment", func(o *refresh.Options) { o.MaxRowsPerFragment = 4 }, 0},
	} {
		if len(batches) > 0 {
			w.insert(t, 10)
		}
		batches = append(batches, 10)
		failedAfter(t, b, w, 3, ckptOpts())
		o := ckptOpts()
		tc.change(&o)
		if tc.insert > 0 {
			w.insert(t, tc.insert)
			batches = append(batches, tc.insert)
		}
		j := refreshDone(t, b, w, o)
		if j.Progress.WorkItemsReused != 0 {
			t.Fatalf("%s: progress %+v: items reused after the change", tc.name, j.Progress)
		}
		items := int(j.Progress.WorkItemsTotal)
		if got := len(expandedItems(b, j.ID, items)); got != items {
			t.Fatalf("%s: expanded %d of %d items", tc.name, got, items)
		}
		eqRows(t, tc.name, w.rows(t), want(batches...))
	}

	w.insert(t, 10)
	batches = append(batches, 10)
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
	j2 := refreshDone(t, b, w, ckptOpts())
	if j2.Progress.WorkItemsReused != 0 {
		t.Fatalf("after collection: progress %+v, want nothing reused", j2.Progress)
	}
	eqRows(t, "view after collection", w.rows(t), want(batches...))
}
