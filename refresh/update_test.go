package refresh

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/table"
)

// updateSourceRows is the size of the one source fragment the one-row
// update tests and benchmark edit.
const updateSourceRows = 3000

// updateSource creates the source as one fragment of updateSourceRows
// articles (ids 1..n, bodies of 2 to 4 chunks of fixed4), a chunker view
// over it, refreshed once.
func updateSource(t testing.TB) (*bundle, *table.Table, []string) {
	t.Helper()
	b := setup(t, table.Options{})
	rows := make([]article, updateSourceRows)
	for i := range rows {
		id := int64(i + 1)
		rows[i] = article{id, fmt.Sprint("title ", id), "en", strings.Repeat(fmt.Sprintf("%04d", id%10000), 2+int(id%3))}
	}
	src := b.source(t, rows)
	if m, err := src.Load(b.ctx, 0); err != nil || len(m.Fragments) != 1 {
		t.Fatalf("source: %v, %v", m, err)
	}
	id := b.chunkerView(t, "chunks")
	b.refresh(t, id, "j1", Options{})
	return b, src, id
}

// TestOneRowUpdateReexpandsOneRow: updating one row of a 3,000-row source
// fragment (a deletion file and a one-row fragment) makes the next
// chunker refresh read exactly that row: one work item of one row, the
// old row's chunks removed by position, and a view equal to a full
// recompute.
func TestOneRowUpdateReexpandsOneRow(t *testing.T) {
	t.Parallel()
	b, src, id := updateSource(t)
	m, n, err := src.Update(b.ctx, "id = 1500", [][2]string{{"body", "'edited body'"}})
	if err != nil || n != 1 {
		t.Fatalf("update: %d, %v", n, err)
	}
	if len(m.Fragments) != 2 || m.Fragments[0].DeletedRows != 1 || m.Fragments[1].Rows != 1 {
		t.Fatalf("source after update: %+v", m.Fragments)
	}
	p := b.plan(t, id, "j2", Options{})
	var rows int64
	for _, it := range p.Items {
		rows += it.Rows
	}
	if p.Mode != ModeIncremental || len(p.Items) != 1 || rows != 1 || len(p.RemovedSourceFragments) != 0 ||
		fmt.Sprint(p.RemovedSourceRows) != "[{0 [1499 1500]}]" {
		t.Fatalf("plan: mode %s, %d items of %d rows, removed fragments %v, removed rows %v", p.Mode, len(p.Items), rows, p.RemovedSourceFragments, p.RemovedSourceRows)
	}
	results := b.expandAll(t, p)
	if results[0].RowsRead != 1 {
		t.Fatalf("expand read %d source rows", results[0].RowsRead)
	}
	res, err := b.e.Commit(b.ctx, p, results)
	if err != nil {
		t.Fatal(err)
	}
	// Body "15001500" (2 chunks) became "edited body" (3 chunks).
	eqResult(t, res, Result{Mode: ModeIncremental, SourceVersion: 2, ViewVersion: 3, RowsAdded: 3, RowsRemoved: 2})
	got, want := b.rows(t, id), b.fresh(t, "fresh")
	if !slices.Equal(got, want) {
		t.Fatalf("view after the incremental refresh (%d rows) differs from a full one (%d rows)", len(got), len(want))
	}
	if tail := got[len(got)-3:]; fmt.Sprint(tail) != "[1:0|0|1500|edit 1:0|1|1500|ed b 1:0|2|1500|ody]" {
		t.Fatalf("the updated row's chunks: %v", tail)
	}
}

// BenchmarkOneRowUpdateRefresh: one-row update in a 3,000-row fragment →
// the next chunker refresh reads N source rows (N, target exactly 1), and
// its time (plan, expand, commit) against a full refresh of that fragment.
func BenchmarkOneRowUpdateRefresh(b *testing.B) {
	var incr, full time.Duration
	var read int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		bb, src, id := updateSource(b)
		if _, _, err := src.Update(bb.ctx, "id = 1500", [][2]string{{"body", fmt.Sprintf("'edited %d'", i)}}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		p := bb.plan(b, id, fmt.Sprint("u", i), Options{})
		results := bb.expandAll(b, p)
		if _, err := bb.e.Commit(bb.ctx, p, results); err != nil {
			b.Fatal(err)
		}
		incr += time.Since(start)
		b.StopTimer()
		read = 0
		for _, r := range results {
			read += r.RowsRead
		}
		fid := bb.chunkerView(b, "full")
		start = time.Now()
		bb.refresh(b, fid, "full", Options{})
		full += time.Since(start)
	}
	b.ReportMetric(float64(read), "source_rows_read")
	b.ReportMetric(incr.Seconds()/full.Seconds(), "time_vs_full")
	b.Logf("one-row update in a %d-row fragment: the next chunker refresh read %d source rows (target 1) in %v, %.3f× a full refresh of the fragment (%v)",
		updateSourceRows, read, incr/time.Duration(b.N), incr.Seconds()/full.Seconds(), full/time.Duration(b.N))
}
