package refresh

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/table"
)

var mergeBenchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64},
	{Name: "name", Type: arrow.BinaryTypes.String},
}, nil)

// mergeBenchRows is the source size: MVQ_BENCH_ROWS, default 1M.
func mergeBenchRows(b *testing.B) int64 {
	if v := os.Getenv("MVQ_BENCH_ROWS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 10000 {
			b.Fatalf("MVQ_BENCH_ROWS=%q: want an integer >= 10000", v)
		}
		return n
	}
	return 1_000_000
}

// mergeBenchRecords makes rows for ids (name "<tag><id>", score id/2) in
// batches of 64k.
func mergeBenchRecords(ids []int64, tag string) array.RecordReader {
	var recs []arrow.RecordBatch
	for start := 0; start < len(ids); start += 1 << 16 {
		b := array.NewRecordBuilder(memory.DefaultAllocator, mergeBenchSchema)
		for _, id := range ids[start:min(start+1<<16, len(ids))] {
			b.Field(0).(*array.Int64Builder).Append(id)
			b.Field(1).(*array.Float64Builder).Append(float64(id) / 2)
			b.Field(2).(*array.StringBuilder).Append(tag + strconv.FormatInt(id, 10))
		}
		recs = append(recs, b.NewRecordBatch())
		b.Release()
	}
	rdr, _ := array.NewRecordReader(mergeBenchSchema, recs)
	for _, r := range recs {
		r.Release()
	}
	return rdr
}

func idRange(from, to, step int64) []int64 {
	var out []int64
	for i := from; i < to; i += step {
		out = append(out, i)
	}
	return out
}

// BenchmarkMergeInsert1PctRefresh: a CDC-style merge_insert of 1% of the
// rows of a 1M-row table (MVQ_BENCH_ROWS) in fragments of 64k rows —
// 0.9% updates spread over the newest tenth of the table, 0.1% new
// rows — then the incremental refresh of a query view over it. Baselines
// from the same run: a plain insert of as many rows and an update of the
// same rows (on a twin table), and a full refresh of the view. The results
// are checked: counts, the merged values, and the view equal to the
// source's query.
func BenchmarkMergeInsert1PctRefresh(b *testing.B) {
	n := mergeBenchRows(b)
	upd := n * 9 / 1000
	ins := n / 1000
	// Updates: every 10th id of the newest tenth, upd of them.
	updIDs := idRange(n-upd*10, n, 10)
	newIDs := idRange(n, n+ins, 1)
	var tMerge, tInsert, tUpdate, tFull, tInc time.Duration
	var touched, frags int
	var incRead, fullRead int64
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		bb := setup(b, table.Options{MaxRowsPerFragment: 1 << 16})
		all := idRange(0, n, 1)
		src, _, err := bb.cat.CreateTable(bb.ctx, []string{"docs", "src"}, mergeBenchSchema, mergeBenchRecords(all, "n"), "", nil)
		if err != nil {
			b.Fatal(err)
		}
		twin, _, err := bb.cat.CreateTable(bb.ctx, []string{"docs", "twin"}, mergeBenchSchema, mergeBenchRecords(all, "n"), "", nil)
		if err != nil {
			b.Fatal(err)
		}
		view := bb.create(b, "v", CreateRequest{Kind: "query", SourceQuery: `SELECT id, score * 2 AS s2, name FROM "docs$src" WHERE score >= 0`})
		b.StartTimer()

		t0 := time.Now()
		p, res := bb.refresh(b, view, fmt.Sprintf("full-%d", i), Options{})
		tFull += time.Since(t0)
		if res.Mode != ModeFull || res.RowsAdded != n {
			b.Fatalf("full refresh: %+v", res)
		}
		fullRead = itemRows(p)

		in := mergeBenchRecords(append(append([]int64(nil), updIDs...), newIDs...), "m")
		before, _ := src.Load(bb.ctx, 0)
		t0 = time.Now()
		after, r, err := src.MergeInsert(bb.ctx, in, table.MergeOptions{On: []string{"id"}, WhenMatchedUpdateAll: true, WhenNotMatchedInsertAll: true})
		tMerge += time.Since(t0)
		in.Release()
		if err != nil || r.Updated != upd || r.Inserted != ins || after.Version != before.Version+1 {
			b.Fatalf("merge_insert: %+v %v", r, err)
		}
		touched, frags = r.FragmentsRewritten, len(before.Fragments)

		plain := mergeBenchRecords(idRange(2*n, 2*n+upd+ins, 1), "p")
		t0 = time.Now()
		if _, k, err := twin.Insert(bb.ctx, plain, ""); err != nil || k != upd+ins {
			b.Fatalf("insert: %d %v", k, err)
		}
		tInsert += time.Since(t0)
		plain.Release()
		t0 = time.Now()
		_, k, err := twin.Update(bb.ctx, fmt.Sprintf("id >= %d AND id < %d AND id %% 10 = %d", n-upd*10, n, (n-upd*10)%10), [][2]string{{"name", "'u' || id"}})
		tUpdate += time.Since(t0)
		if err != nil || k != upd {
			b.Fatalf("update: %d %v", k, err)
		}

		t0 = time.Now()
		p, res = bb.refresh(b, view, fmt.Sprintf("inc-%d", i), Options{})
		tInc += time.Since(t0)
		incRead = itemRows(p)
		if res.Mode != ModeIncremental || res.RowsAdded-res.RowsRemoved != ins {
			b.Fatalf("incremental refresh: %+v", res)
		}
		b.StopTimer()
		checkMergeBenchView(b, bb, src, view, n+ins, upd+ins)
		b.StartTimer()
	}
	per := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(b.N) }
	b.ReportMetric(float64(n), "source_rows")
	b.ReportMetric(float64(touched), "fragments_rewritten")
	b.ReportMetric(float64(frags), "fragments")
	b.ReportMetric(per(tMerge), "merge_insert_ms")
	b.ReportMetric(per(tInsert), "insert_same_rows_ms")
	b.ReportMetric(per(tUpdate), "update_1pct_ms")
	b.ReportMetric(per(tInc), "incremental_refresh_ms")
	b.ReportMetric(per(tFull), "full_refresh_ms")
	b.ReportMetric(float64(incRead), "incremental_rows_read")
	b.ReportMetric(float64(fullRead), "full_rows_read")
	b.ReportMetric(tMerge.Seconds()/tInsert.Seconds(), "merge/insert")
	b.ReportMetric(tMerge.Seconds()/tUpdate.Seconds(), "merge/update")
	b.ReportMetric(tInc.Seconds()/tFull.Seconds(), "incremental/full")
}

// itemRows is the source rows a plan's items read.
func itemRows(p *Plan) int64 {
	var n int64
	for _, it := range p.Items {
		n += it.Rows
	}
	return n
}

// checkMergeBenchView compares the view with its query recomputed over
// the source: row counts, the merged rows, and s2 = 2*score = id.
func checkMergeBenchView(b *testing.B, bb *bundle, src *table.Table, view []string, rows, merged int64) {
	b.Helper()
	vt, err := bb.cat.OpenTable(bb.ctx, view)
	if err != nil {
		b.Fatal(err)
	}
	count := func(t *table.Table, pred string) int64 {
		n, err := t.CountRows(bb.ctx, 0, pred)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	if got := count(vt, ""); got != rows || count(src, "") != rows {
		b.Fatalf("view has %d rows, source %d, want %d", got, count(src, ""), rows)
	}
	if got, s := count(vt, "name LIKE 'm%'"), count(src, "name LIKE 'm%'"); got != merged || s != merged {
		b.Fatalf("view has %d merged rows, source %d, want %d", got, s, merged)
	}
	if got, want := count(vt, "s2 <> id"), int64(0); got != want {
		b.Fatalf("%d view rows with s2 <> id", got)
	}
}
