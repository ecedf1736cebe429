package index_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/vector"
)

// Sizes: MVQ_BENCH_INDEX_ROWS (scalar filter and view refresh, default
// 400000), MVQ_BENCH_VECTORS (default 50000 × 128 dims), MVQ_BENCH_FTS_DOCS
// (default 50000).
func benchSize(env string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(env)); err == nil && v > 0 {
		return v
	}
	return def
}

var benchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "k", Type: arrow.PrimitiveTypes.Int32},
	{Name: "payload", Type: arrow.BinaryTypes.String},
}, nil)

// benchRows: id sorted, k uniform in 0..9999, a 40-byte payload.
func benchRows(from, to int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, benchSchema)
	defer b.Release()
	r := rand.New(rand.NewPCG(11, uint64(from)))
	for i := from; i < to; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.Int32Builder).Append(int32(r.IntN(10000)))
		b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("payload-%032d", i))
	}
	return b.NewRecordBatch()
}

// timeQuery runs filter and answers its rows as text and the time taken.
func timeQuery(b *testing.B, tb *table.Table, filter string) ([]string, time.Duration) {
	start := time.Now()
	rows := rowsOf(b, tb, filter, 0)
	return rows, time.Since(start)
}

// BenchmarkScalarFilter: filtered queries with a BTREE index (on id,
// sorted: fragments pruned) and a BITMAP index (on k, scattered: rows
// narrowed) against the same queries unindexed, in the same run. Each
// answer is checked equal.
func BenchmarkScalarFilter(b *testing.B) {
	ctx := context.Background()
	n := benchSize("MVQ_BENCH_INDEX_ROWS", 400000)
	cat := newCatalog(b, table.Options{})
	rec := benchRows(0, n)
	tb, _, err := cat.CreateTable(ctx, []string{"ns", "t"}, benchSchema, reader(rec), "", nil)
	rec.Release()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if _, err := index.Create(ctx, tb, index.Spec{Column: "id", Type: "BTREE"}); err != nil {
		b.Fatal(err)
	}
	btreeBuild := time.Since(start)
	start = time.Now()
	if _, err := index.Create(ctx, tb, index.Spec{Column: "k", Type: "BITMAP"}); err != nil {
		b.Fatal(err)
	}
	bitmapBuild := time.Since(start)
	filters := []string{fmt.Sprintf("id BETWEEN %d AND %d", n/2, n/2+100), "k = 4242", "k IN (1, 2, 3) AND payload LIKE 'payload-%'"}
	with := make([]time.Duration, len(filters))
	without := make([]time.Duration, len(filters))
	for b.Loop() {
		for i, f := range filters {
			got, d := timeQuery(b, tb, f)
			with[i] += d
			tb.Catalog().UseIndexes(scanOnly)
			want, d := timeQuery(b, tb, f)
			tb.Catalog().UseIndexes(index.Maintenance())
			without[i] += d
			if strings.Join(got, "\n") != strings.Join(want, "\n") || len(got) == 0 {
				b.Fatalf("%s: %d rows with the index, %d without", f, len(got), len(want))
			}
		}
	}
	b.Logf("scalar filter over %d rows (BTREE build %v, BITMAP build %v):", n, btreeBuild.Round(time.Millisecond), bitmapBuild.Round(time.Millisecond))
	for i, f := range filters {
		ratio := float64(without[i]) / float64(with[i])
		b.Logf("  %-45q indexed %8v  unindexed %8v  speed-up %.1f×", f, (with[i] / time.Duration(b.N)).Round(time.Microsecond), (without[i] / time.Duration(b.N)).Round(time.Microsecond), ratio)
		b.ReportMetric(ratio, fmt.Sprintf("speedup_q%d", i+1))
	}
}

// BenchmarkVectorIVF: nearest-10 queries through an IVF_FLAT index at the
// default nprobes against exact search over the same table, in the same
// run; recall@10 is measured against the exact answers and must be at
// least 0.95.
func BenchmarkVectorIVF(b *testing.B) {
	ctx := context.Background()
	n := benchSize("MVQ_BENCH_VECTORS", 50000)
	cat := newCatalog(b, table.Options{})
	data, queries := clustered(n, 128, 9)
	tb := vectorTable(b, cat, "v", data)
	start := time.Now()
	im, err := index.Create(ctx, tb, index.Spec{Column: "emb", Type: "IVF_FLAT"})
	if err != nil {
		b.Fatal(err)
	}
	build := time.Since(start)
	// Warm the decoded-vector cache both paths share.
	if _, err := vector.Search(ctx, tb, vector.Query{Vector: queries[0], Columns: []string{"id"}}, nil); err != nil {
		b.Fatal(err)
	}
	var exactT, ivfT time.Duration
	var exact, approx [][]int64
	for b.Loop() {
		exact, approx = exact[:0], approx[:0]
		for _, q := range queries {
			s := time.Now()
			rec, err := vector.Search(ctx, tb, vector.Query{Vector: q, K: 10, Columns: []string{"id"}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			exactT += time.Since(s)
			exact = append(exact, ids(b, rec))
			s = time.Now()
			p, err := index.NewProbe(ctx, tb, im, q, 0)
			if err != nil {
				b.Fatal(err)
			}
			rec, err = vector.Search(ctx, tb, vector.Query{Vector: q, K: 10, Columns: []string{"id"}, Index: p}, nil)
			if err != nil {
				b.Fatal(err)
			}
			ivfT += time.Since(s)
			approx = append(approx, ids(b, rec))
		}
	}
	recall := Recall(exact, approx)
	per := time.Duration(b.N * len(queries))
	b.Logf("vector kNN over %d × 128 (IVF_FLAT %d partitions, nprobes %d, build %v): exact %v/query, IVF %v/query, speed-up %.1f×, recall@10 %.3f",
		n, im.Params.Partitions, index.DefaultNProbes, build.Round(time.Millisecond), (exactT / per).Round(time.Microsecond), (ivfT / per).Round(time.Microsecond), float64(exactT)/float64(ivfT), recall)
	b.ReportMetric(float64(exactT)/float64(ivfT), "speedup")
	b.ReportMetric(recall, "recall@10")
	if recall < 0.95 {
		b.Fatalf("recall@10 %.3f < 0.95", recall)
	}
	// IVF_PQ over the same table and queries: each fragment shortlists
	// k × refine_factor rows by their codes, ranked exactly.
	start = time.Now()
	pq, err := index.Create(ctx, tb, index.Spec{Name: "emb_pq", Column: "emb", Type: "IVF_PQ"})
	if err != nil {
		b.Fatal(err)
	}
	pqBuild := time.Since(start)
	const refine = 20
	var pqT time.Duration
	var pqIDs [][]int64
	for range b.N {
		pqIDs = pqIDs[:0]
		for _, q := range queries {
			s := time.Now()
			p, err := index.NewProbe(ctx, tb, pq, q, 0)
			if err != nil {
				b.Fatal(err)
			}
			p.Shortlist(10 * refine)
			rec, err := vector.Search(ctx, tb, vector.Query{Vector: q, K: 10, Columns: []string{"id"}, Index: p, Refine: refine}, nil)
			if err != nil {
				b.Fatal(err)
			}
			pqT += time.Since(s)
			pqIDs = append(pqIDs, ids(b, rec))
		}
	}
	pqRecall := Recall(exact, pqIDs)
	b.Logf("IVF_PQ (%d sub-vectors × %d bits, refine_factor %d, build %v): %v/query, speed-up over exact %.1f×, recall@10 %.3f",
		pq.Params.SubVectors, pq.Params.Bits, refine, pqBuild.Round(time.Millisecond), (pqT / per).Round(time.Microsecond), float64(exactT)/float64(pqT), pqRecall)
	b.ReportMetric(float64(exactT)/float64(pqT), "pq_speedup")
	b.ReportMetric(pqRecall, "pq_recall@10")
	if pqRecall < 0.95 {
		b.Fatalf("IVF_PQ recall@10 %.3f < 0.95", pqRecall)
	}
}

// BenchmarkFTS: BM25 full-text queries through an INVERTED index; the
// first query's answer is checked against a brute-force scoring.
func BenchmarkFTS(b *testing.B) {
	ctx := context.Background()
	n := benchSize("MVQ_BENCH_FTS_DOCS", 50000)
	cat := newCatalog(b, table.Options{})
	corpus := make([]*string, n)
	r := rand.New(rand.NewPCG(3, 3))
	vocab := make([]string, 5000)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%d", i)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "body", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	for i := range corpus {
		var ws []string
		for range 20 + r.IntN(60) {
			x := r.Float64()
			ws = append(ws, vocab[int(x*x*x*float64(len(vocab)))])
		}
		s := strings.Join(ws, " ")
		corpus[i] = &s
		bld.Field(0).(*array.Int64Builder).Append(int64(i))
		bld.Field(1).(*array.StringBuilder).Append(s)
	}
	rec := bld.NewRecordBatch()
	bld.Release()
	tb, _, err := cat.CreateTable(ctx, []string{"ns", "docs"}, schema, reader(rec), "", nil)
	rec.Release()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if _, err := index.Create(ctx, tb, index.Spec{Column: "body", Type: "INVERTED"}); err != nil {
		b.Fatal(err)
	}
	build := time.Since(start)
	queries := []string{"w1 w20", "w300 w4000 w7", "w2500", "w10 w11 w12 w13"}
	got, err := index.SearchText(ctx, tb, index.FTSQuery{Text: queries[0], K: 10, Columns: []string{"id"}})
	if err != nil {
		b.Fatal(err)
	}
	wantIDs, _ := bruteBM25(corpus, queries[0], false, func(int) bool { return true }, 10)
	if gotIDs := ids(b, got); fmt.Sprint(gotIDs) != fmt.Sprint(wantIDs) {
		b.Fatalf("FTS %q: %v, brute force %v", queries[0], gotIDs, wantIDs)
	}
	var elapsed time.Duration
	for b.Loop() {
		for _, q := range queries {
			s := time.Now()
			rec, err := index.SearchText(ctx, tb, index.FTSQuery{Text: q, K: 10, Columns: []string{"id"}})
			if err != nil {
				b.Fatal(err)
			}
			elapsed += time.Since(s)
			rec.Release()
		}
	}
	bs := time.Now()
	bruteBM25(corpus, queries[1], false, func(int) bool { return true }, 10)
	brute := time.Since(bs)
	per := elapsed / time.Duration(b.N*len(queries))
	b.Logf("full-text BM25 over %d docs (INVERTED build %v): %v/query; brute-force scoring of one query in Go %v (%.1f×)", n, build.Round(time.Millisecond), per.Round(time.Microsecond), brute.Round(time.Microsecond), float64(brute)/float64(per))
	b.ReportMetric(float64(per.Microseconds()), "us/query")
}

// BenchmarkViewRefreshIndex: the cost an index on a view adds to its
// refresh. Two identical views over one source, one with a BTREE index;
// each round appends 1% of the source and refreshes both; the indexed
// view's refresh includes extending its index to the new fragments (the
// commit's index maintenance).
func BenchmarkViewRefreshIndex(b *testing.B) {
	ctx := context.Background()
	n := benchSize("MVQ_BENCH_INDEX_ROWS", 400000)
	cat := newCatalog(b, table.Options{})
	rec := benchRows(0, n)
	src, _, err := cat.CreateTable(ctx, []string{"ns", "src"}, benchSchema, reader(rec), "", nil)
	rec.Release()
	if err != nil {
		b.Fatal(err)
	}
	e := refresh.NewEngine(cat)
	b.Cleanup(func() { _ = e.Close() })
	plain, indexed := []string{"ns", "plain"}, []string{"ns", "indexed"}
	for _, id := range [][]string{plain, indexed} {
		if _, err := e.CreateView(ctx, id, refresh.CreateRequest{Kind: "query", SourceQuery: `SELECT id, k, payload FROM "ns$src" WHERE k % 2 = 0`}); err != nil {
			b.Fatal(err)
		}
		refreshView(b, e, id, "first-"+id[1])
	}
	vt, err := cat.OpenTable(ctx, indexed)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := index.Create(ctx, vt, index.Spec{Column: "k", Type: "BTREE"}); err != nil {
		b.Fatal(err)
	}
	var plainT, indexedT time.Duration
	next := n
	round := 0
	for b.Loop() {
		add := benchRows(next, next+n/100)
		next += n / 100
		if _, _, err := src.Insert(ctx, reader(add), ""); err != nil {
			b.Fatal(err)
		}
		add.Release()
		s := time.Now()
		refreshView(b, e, plain, fmt.Sprintf("p%d", round))
		plainT += time.Since(s)
		s = time.Now()
		refreshView(b, e, indexed, fmt.Sprintf("i%d", round))
		indexedT += time.Since(s)
		round++
	}
	vm, _ := vt.Load(ctx, 0)
	im, _ := index.Load(ctx, vt, "k_idx")
	if ix, unix := im.Coverage(vm); unix != 0 {
		b.Fatalf("indexed view: %d rows unindexed after refresh (%d indexed)", unix, ix)
	}
	b.Logf("incremental refresh of a view after a 1%% append to %d rows: without index %v, with a BTREE index %v (%.2f×)",
		n, (plainT / time.Duration(b.N)).Round(time.Millisecond), (indexedT / time.Duration(b.N)).Round(time.Millisecond), float64(indexedT)/float64(plainT))
	b.ReportMetric(float64(indexedT)/float64(plainT), "cost_ratio")
}

// BenchmarkMergeInsertUseIndex: a CDC-style merge_insert of 1% of the
// rows of a table (MVQ_BENCH_ROWS, default 1M, fragments of 64k, a BTREE
// index on the key) — 0.9% updates spread over the newest tenth, 0.1%
// new rows — with use_index (matches looked up in the index) against
// the same merge on a twin table by scanning the key column, in the same
// run. Both must update and insert the same rows.
func BenchmarkMergeInsertUseIndex(b *testing.B) {
	ctx := context.Background()
	n := benchSize("MVQ_BENCH_ROWS", 1_000_000)
	upd, ins := n*9/1000, n/1000
	var keys []int64
	for id := n - upd*10; id < n; id += 10 {
		keys = append(keys, int64(id))
	}
	for id := n; id < n+ins; id++ {
		keys = append(keys, int64(id))
	}
	var tIndex, tScan time.Duration
	var indexed, frags int
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		cat := newCatalog(b, table.Options{MaxRowsPerFragment: 1 << 16})
		mk := func(name string) *table.Table {
			rec := benchRows(0, n)
			defer rec.Release()
			tb, _, err := cat.CreateTable(ctx, []string{"ns", name}, benchSchema, reader(rec), "", nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := index.Create(ctx, tb, index.Spec{Column: "id", Type: "BTREE"}); err != nil {
				b.Fatal(err)
			}
			return tb
		}
		withIdx, scan := mk("with"), mk("scan")
		m, _ := withIdx.Load(ctx, 0)
		frags = len(m.Fragments)
		input := func() array.RecordReader {
			bl := array.NewRecordBuilder(memory.DefaultAllocator, benchSchema)
			defer bl.Release()
			for _, k := range keys {
				bl.Field(0).(*array.Int64Builder).Append(k)
				bl.Field(1).(*array.Int32Builder).Append(int32(k % 7))
				bl.Field(2).(*array.StringBuilder).Append("merged")
			}
			rec := bl.NewRecordBatch()
			defer rec.Release()
			return reader(rec)
		}
		o := table.MergeOptions{On: []string{"id"}, WhenMatchedUpdateAll: true, WhenNotMatchedInsertAll: true}
		b.StartTimer()
		run := func(tb *table.Table, use bool) (table.MergeResult, time.Duration) {
			rdr := input()
			defer rdr.Release()
			o.UseIndex = use
			start := time.Now()
			_, r, err := tb.MergeInsert(ctx, rdr, o)
			d := time.Since(start)
			if err != nil || r.Updated != int64(upd) || r.Inserted != int64(ins) {
				b.Fatalf("merge_insert (use_index %v): %+v %v", use, r, err)
			}
			return r, d
		}
		// Alternate which goes first, so neither always meets a warmer cache.
		var ri, rs table.MergeResult
		var di, ds time.Duration
		if i%2 == 0 {
			ri, di = run(withIdx, true)
			rs, ds = run(scan, false)
		} else {
			rs, ds = run(scan, false)
			ri, di = run(withIdx, true)
		}
		tIndex += di
		tScan += ds
		indexed = ri.FragmentsIndexed
		if rs.FragmentsIndexed != 0 || ri.FragmentsRewritten != rs.FragmentsRewritten {
			b.Fatalf("use_index %+v, scan %+v", ri, rs)
		}
	}
	per := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(b.N) }
	b.Logf("merge_insert of %d keys into %d rows (%d fragments): use_index %.1f ms (%d fragments matched through the index), scan %.1f ms, speed-up %.2f×",
		len(keys), n, frags, per(tIndex), indexed, per(tScan), tScan.Seconds()/tIndex.Seconds())
	b.ReportMetric(per(tIndex), "use_index_ms")
	b.ReportMetric(per(tScan), "scan_ms")
	b.ReportMetric(tScan.Seconds()/tIndex.Seconds(), "speedup")
}
