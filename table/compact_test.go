package table

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mvq-dev/mvq/duck"
)

// content renders every row of the latest version, all columns, in table
// order.
func content(t *testing.T, tb *Table) []string {
	t.Helper()
	rdr, err := tb.Query(context.Background(), QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := duck.Collect(rdr)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		for i := 0; i < int(r.NumRows()); i++ {
			var parts []string
			for _, c := range r.Columns() {
				parts = append(parts, c.ValueStr(i))
			}
			out = append(out, strings.Join(parts, "|"))
		}
		r.Release()
	}
	return out
}

// smallFragments creates table id with one row per fragment for ids
// [0, n), except a fragment of big rows inserted after row at.
func smallFragments(t *testing.T, c *Catalog, id []string, n, at, big int) *Table {
	t.Helper()
	ctx := context.Background()
	tb, _, err := c.CreateTable(ctx, id, testSchema, rows(t, 0, 1), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i++ {
		if _, _, err := tb.Insert(ctx, rows(t, i, i+1), "append"); err != nil {
			t.Fatal(err)
		}
		if i == at {
			if _, _, err := tb.Insert(ctx, rows(t, 1000, 1000+big), "append"); err != nil {
				t.Fatal(err)
			}
		}
	}
	return tb
}

func TestCompact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	tb := smallFragments(t, c, []string{"small"}, 30, 11, 6)
	before := content(t, tb)
	m, err := tb.Load(ctx, 0)
	if err != nil || len(m.Fragments) != 31 {
		t.Fatalf("%d fragments before (%v)", len(m.Fragments), err)
	}
	// Too few small fragments for the threshold: nothing.
	if res, err := tb.Compact(ctx, CompactOptions{TargetRows: 10, MinFragments: 31}); err != nil || res.Version != 0 {
		t.Fatalf("compact under the threshold: %+v, %v", res, err)
	}
	res, err := tb.Compact(ctx, CompactOptions{TargetRows: 10, MinFragments: 4})
	if err != nil {
		t.Fatal(err)
	}
	// 12 one-row fragments, the 6-row one (not small), 18 one-row ones:
	// runs of 10+2 and 10+8 rows.
	want := CompactResult{Version: m.Version + 1, FragmentsBefore: 31, FragmentsAfter: 5, Merged: 30, Written: 4, Rows: 30}
	if res != want {
		t.Fatalf("compact: %+v, want %+v", res, want)
	}
	if got := content(t, tb); !slices.Equal(got, before) {
		t.Fatalf("content changed:\n got  %q\n want %q", got, before)
	}
	nm, err := tb.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, f := range nm.Fragments {
		sizes = append(sizes, f.Rows)
	}
	if fmt.Sprint(sizes) != "[10 2 6 10 8]" || nm.Operation != OperationCompact || nm.UUID != m.UUID {
		t.Fatalf("after compaction: fragment rows %v, operation %q, uuid %q", sizes, nm.Operation, nm.UUID)
	}
	merges, ok, err := nm.Compaction()
	if err != nil || !ok || len(merges) != 4 || len(merges[0].From) != 10 || merges[0].To != nm.Fragments[0].ID {
		t.Fatalf("merges %+v (%v, %v)", merges, ok, err)
	}
	// Nothing small is left to merge.
	if res, err := tb.Compact(ctx, CompactOptions{TargetRows: 10, MinFragments: 2}); err != nil || res.Version != 0 {
		t.Fatalf("second compaction: %+v, %v", res, err)
	}
	// Every version is still readable: the old files are not removed.
	if got := ids(t, tb, QueryOptions{Version: m.Version}); len(got) != 36 {
		t.Fatalf("old version reads %d rows", len(got))
	}
}

// TestCompactRebases: commits landing between compaction's writes and its
// commit are kept: an append is rebased on, and a run a delete rewrote is
// left out, so no row is lost or brought back.
func TestCompactRebases(t *testing.T) {
	// Not parallel: it sets compactBeforeCommit.
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	tb := smallFragments(t, c, []string{"race"}, 20, 9, 6)
	compactBeforeCommit = func() {
		if _, _, err := tb.Insert(ctx, rows(t, 20, 23), "append"); err != nil {
			t.Error(err)
		}
		if _, _, err := tb.Delete(ctx, "id = 15"); err != nil {
			t.Error(err)
		}
	}
	defer func() { compactBeforeCommit = nil }()
	res, err := tb.Compact(ctx, CompactOptions{TargetRows: 11, MinFragments: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Runs: ids 0-9 (merged) and 10-19 (changed by the delete, left out).
	if res.Version == 0 || res.Merged != 10 || res.Written != 1 {
		t.Fatalf("compact: %+v", res)
	}
	want := slices.Concat(seq(0, 10), seq(1000, 1006), seq(10, 15), seq(16, 23))
	if got := ids(t, tb, QueryOptions{}); !eq(got, want) {
		t.Fatalf("rows after the race:\n got  %v\n want %v", got, want)
	}
	// The file written for the run left out (10 rows, over 1 KB) was
	// removed; the only orphan is the empty file the delete wrote for the
	// one-row fragment it emptied.
	cl, err := tb.CleanupOrphans(ctx, 0)
	if err != nil || cl.Removed > 1 || cl.Bytes > 1000 {
		t.Fatalf("orphans after compaction: %+v, %v", cl, err)
	}
}

// TestCompactConcurrentAppends races compactions against appends for
// real: every appended row is in the final version, in append order.
func TestCompactConcurrentAppends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	tb := smallFragments(t, c, []string{"busy"}, 10, -1, 0)
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := 10; i < 60; i++ {
			if _, _, err := tb.Insert(ctx, rows(t, i, i+1), "append"); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	compactions := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		res, err := tb.Compact(ctx, CompactOptions{TargetRows: 8, MinFragments: 2})
		if err != nil {
			t.Fatal(err)
		}
		if res.Version != 0 {
			compactions++
		}
	}
	wg.Wait()
	if got := ids(t, tb, QueryOptions{}); !eq(got, seq(0, 60)) {
		t.Fatalf("rows: %v", got)
	}
	if compactions == 0 {
		t.Fatal("no compaction committed")
	}
	m, _ := tb.Load(ctx, 0)
	raw, _ := json.Marshal(m.Fragments)
	t.Logf("%d compactions; %d fragments at the end: %s", compactions, len(m.Fragments), raw[:min(len(raw), 200)])
}
