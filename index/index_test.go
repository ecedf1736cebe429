package index_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/vector"
)

// newCatalog opens a catalog over a fresh warehouse with namespace ns.
// scanOnly and unmaintained are the catalog Indexes of a process that
// reads without selecting rows by index, and of one whose commits do not
// maintain indexes.
var (
	scanOnly     = table.Indexes{Maintain: index.Maintain, KeyIndex: index.KeyIndexFor}
	unmaintained = table.Indexes{Select: index.Select, KeyIndex: index.KeyIndexFor}
)

func newCatalog(t testing.TB, opts table.Options) *table.Catalog {
	t.Helper()
	return newCatalogAt(t, t.TempDir(), opts)
}

// newCatalogAt is newCatalog on a warehouse in folder root.
func newCatalogAt(t testing.TB, root string, opts table.Options) *table.Catalog {
	t.Helper()
	opts.Indexes = index.Maintenance()
	cat := openCatalog(t, root, opts)
	if err := cat.CreateNamespace(context.Background(), []string{"ns"}, "", nil); err != nil {
		t.Fatal(err)
	}
	return cat
}

// openCatalog opens a catalog over the file:// warehouse at root with
// opts as given (no index maintenance unless opts has it).
func openCatalog(t testing.TB, root string, opts table.Options) *table.Catalog {
	t.Helper()
	ctx := context.Background()
	wh, err := table.OpenWarehouse(ctx, "file://"+root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	db, err := duck.Open(duck.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return table.NewCatalog(wh, db, opts)
}

var scalarSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "k", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// scalarRows builds rows from..to: id (sorted, so fragments hold ranges),
// k (0..19, some null), f (halves, some null and NaN), s (cat-0..cat-9).
func scalarRows(from, to int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, scalarSchema)
	defer b.Release()
	for i := from; i < to; i++ {
		r := rand.New(rand.NewPCG(7, uint64(i)))
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%17 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.Int32Builder).Append(int32(r.IntN(20)))
		}
		switch {
		case i%23 == 0:
			b.Field(2).AppendNull()
		case i%29 == 0:
			b.Field(2).(*array.Float64Builder).Append(math.NaN())
		default:
			b.Field(2).(*array.Float64Builder).Append(float64(r.IntN(200)-100) / 2)
		}
		if i%31 == 0 {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.StringBuilder).Append(fmt.Sprintf("cat-%d", r.IntN(10)))
		}
	}
	return b.NewRecordBatch()
}

func reader(rec arrow.RecordBatch) array.RecordReader {
	rdr, _ := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	return rdr
}

// rowsOf answers a query's rows as text, in order.
func rowsOf(t testing.TB, tb *table.Table, filter string, limit int64) []string {
	t.Helper()
	rdr, err := tb.Query(context.Background(), table.QueryOptions{Filter: filter, RowAddr: true, Limit: limit})
	if err != nil {
		t.Fatalf("%s: %v", filter, err)
	}
	defer rdr.Release()
	var out []string
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			var parts []string
			for c := 0; c < int(rec.NumCols()); c++ {
				parts = append(parts, rec.Column(c).ValueStr(i))
			}
			out = append(out, strings.Join(parts, "|"))
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatalf("%s: %v", filter, err)
	}
	return out
}

func randomFilter(r *rand.Rand) string {
	leaf := func() string {
		switch r.IntN(11) {
		case 0:
			return fmt.Sprintf("k = %d", r.IntN(22))
		case 1:
			return fmt.Sprintf("k IN (%d, %d, %d)", r.IntN(22), r.IntN(22), r.IntN(22))
		case 2:
			return fmt.Sprintf("id BETWEEN %d AND %d", r.IntN(12000), r.IntN(12000))
		case 3:
			return fmt.Sprintf("id %s %d", []string{"<", "<=", ">", ">="}[r.IntN(4)], r.IntN(12000))
		case 4:
			return fmt.Sprintf("%d %s id", r.IntN(12000), []string{"<", "<=", ">", ">="}[r.IntN(4)])
		case 5:
			return fmt.Sprintf("s = 'cat-%d'", r.IntN(11))
		case 6:
			return fmt.Sprintf("s IN ('cat-%d', 'cat-%d')", r.IntN(11), r.IntN(11))
		case 7:
			return fmt.Sprintf("f %s %s", []string{"<", "<=", ">", ">=", "="}[r.IntN(5)], []string{"0", "2.5", "-10", "1e1", "49.5"}[r.IntN(5)])
		case 8:
			return fmt.Sprintf("id %% %d = 0", 2+r.IntN(5)) // not indexable
		case 9:
			return fmt.Sprintf("s > 'cat-%d'", r.IntN(10))
		default:
			return "k IS NULL"
		}
	}
	switch r.IntN(4) {
	case 0:
		return leaf()
	case 1:
		return leaf() + " AND " + leaf()
	case 2:
		return "(" + leaf() + " OR " + leaf() + ") AND " + leaf()
	default:
		return leaf() + " OR " + leaf()
	}
}

// TestScalarIndexAnswersEqualUnindexed runs random filters over a table
// with BTREE indexes on id and f, a BITMAP on k and a BTREE on s, through
// the indexed path and with no selector, and wants the same rows in the
// same order. The table has a fragment appended after the build and a
// fragment rewritten by a delete (both read unindexed). It also checks
// that selective filters do narrow the read.
func TestScalarIndexAnswersEqualUnindexed(t *testing.T) {
	ctx := context.Background()
	cat := newCatalog(t, table.Options{MaxRowsPerFragment: 1000, RowGroupRows: 250})
	rec := scalarRows(0, 10000)
	defer rec.Release()
	tb, _, err := cat.CreateTable(ctx, []string{"ns", "s"}, scalarSchema, reader(rec), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range []index.Spec{{Column: "id", Type: "BTREE"}, {Column: "k", Type: "BITMAP"}, {Column: "f", Type: "btree"}, {Column: "s", Type: "BTREE"}} {
		if _, err := index.Create(ctx, tb, sp); err != nil {
			t.Fatalf("create %v: %v", sp, err)
		}
	}
	// Commits by a process that does not maintain indexes: the new
	// fragments stay uncovered.
	tb.Catalog().UseIndexes(unmaintained)
	more := scalarRows(10000, 12000)
	defer more.Release()
	if _, _, err := tb.Insert(ctx, reader(more), ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Delete(ctx, "id = 4321"); err != nil {
		t.Fatal(err)
	}
	tb.Catalog().UseIndexes(index.Maintenance())
	m, err := tb.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	im, err := index.Load(ctx, tb, "id_idx")
	if err != nil {
		t.Fatal(err)
	}
	if ix, unix := im.Coverage(m); ix != 9000 || unix != 2999 {
		t.Fatalf("coverage: %d indexed, %d not; want 9000 and 2999 (two fragments appended, one given a deletion file)", ix, unix)
	}
	schema, _ := m.ArrowSchema()
	sel, err := index.Select(ctx, tb, m, schema, "id = 123")
	if err != nil || sel == nil {
		t.Fatalf("select id = 123: %v %v", sel, err)
	}
	if frags := sel.Fragments(m); len(frags) != 4 || sel[m.Fragments[0].ID] == nil || len(sel[m.Fragments[0].ID]) != 1 {
		// fragment 0 holds id 123 (one row); the appended and the
		// rewritten fragments are read whole.
		t.Fatalf("select id = 123 reads %d fragments: %v", len(frags), sel)
	}
	r := rand.New(rand.NewPCG(1, 2))
	const n = 150
	narrowed := 0
	for i := 0; i < n; i++ {
		filter := randomFilter(r)
		if s, _ := index.Select(ctx, tb, m, schema, filter); s != nil {
			narrowed++
		}
		limit := int64(0)
		if i%5 == 0 {
			limit = 7
		}
		with := rowsOf(t, tb, filter, limit)
		tb.Catalog().UseIndexes(scanOnly)
		without := rowsOf(t, tb, filter, limit)
		tb.Catalog().UseIndexes(index.Maintenance())
		if strings.Join(with, "\n") != strings.Join(without, "\n") {
			t.Fatalf("filter %q: %d rows with the index, %d without", filter, len(with), len(without))
		}
		cw, err := tb.CountRows(ctx, 0, filter)
		if err != nil || cw != int64(len(without)) && limit == 0 {
			t.Fatalf("count_rows %q: %d (%v), want %d", filter, cw, err, len(without))
		}
	}
	if narrowed < n/3 {
		t.Fatalf("only %d of %d filters were narrowed by an index", narrowed, n)
	}
	// Extend covers the new fragments; the answers stay the same.
	if added, err := index.Extend(ctx, tb, "id_idx"); err != nil || added != 3 {
		t.Fatalf("extend: %d %v, want 3 fragments (2 appended, 1 given a deletion file)", added, err)
	}
	im, _ = index.Load(ctx, tb, "id_idx")
	if ix, unix := im.Coverage(m); ix != 11999 || unix != 0 {
		t.Fatalf("coverage after extend: %d / %d", ix, unix)
	}
	if got := rowsOf(t, tb, "id >= 11990 OR id = 4321 OR id = 4322", 0); len(got) != 11 {
		t.Fatalf("after extend: %d rows, want 11", len(got))
	}
	// The fragment given a deletion file is covered as its live rows, by a
	// file of its own: an index file built before the delete would place
	// every row after the deleted one at the wrong offset.
	for _, filter := range []string{"id = 4500", "id = 4322", "id BETWEEN 4300 AND 4330", "id = 4999", "k = 3 AND id > 4000 AND id < 5000"} {
		with := rowsOf(t, tb, filter, 0)
		tb.Catalog().UseIndexes(scanOnly)
		without := rowsOf(t, tb, filter, 0)
		tb.Catalog().UseIndexes(index.Maintenance())
		if len(with) == 0 || strings.Join(with, "\n") != strings.Join(without, "\n") {
			t.Fatalf("after extend, filter %q: %v with the index, %v without", filter, with, without)
		}
	}
	// Drop: the index is gone and queries read unindexed.
	if err := index.Drop(ctx, tb, "id_idx"); err != nil {
		t.Fatal(err)
	}
	if _, err := index.Load(ctx, tb, "id_idx"); errs.CodeOf(err) != errs.CodeTableIndexNotFound {
		t.Fatalf("load after drop: %v", err)
	}
	if err := index.Drop(ctx, tb, "id_idx"); errs.CodeOf(err) != errs.CodeTableIndexNotFound {
		t.Fatalf("drop again: %v", err)
	}
	if got := rowsOf(t, tb, "id = 5", 0); len(got) != 1 {
		t.Fatalf("after drop: %v", got)
	}
}

// TestCreateErrors: bad columns, types and parameters are refused by name.
func TestCreateErrors(t *testing.T) {
	ctx := context.Background()
	cat := newCatalog(t, table.Options{})
	rec := scalarRows(0, 10)
	defer rec.Release()
	tb, _, err := cat.CreateTable(ctx, []string{"ns", "s"}, scalarSchema, reader(rec), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		spec index.Spec
		code errs.Code
		want string
	}{
		{index.Spec{Column: "nope", Type: "BTREE"}, errs.CodeTableColumnNotFound, "column"},
		{index.Spec{Column: "id", Type: "SORTED"}, errs.CodeInvalidInput, "index_type"},
		{index.Spec{Column: "id", Type: "IVF_PQ"}, errs.CodeInvalidInput, "vector column"},
		{index.Spec{Column: "id", Type: "IVF_HNSW_SQ"}, errs.CodeInvalidInput, "index_type"},
		{index.Spec{Column: "id", Type: "IVF_FLAT"}, errs.CodeInvalidInput, "vector column"},
		{index.Spec{Column: "id", Type: "INVERTED"}, errs.CodeInvalidInput, "string column"},
		{index.Spec{Column: "id", Type: "BTREE", Metric: "l2"}, errs.CodeInvalidInput, "distance_type"},
		{index.Spec{Column: "id", Type: "BTREE", Name: "../x"}, errs.CodeInvalidInput, "name"},
		{index.Spec{Column: "", Type: "BTREE"}, errs.CodeInvalidInput, "column"},
	} {
		_, err := index.Create(ctx, tb, c.spec)
		if errs.CodeOf(err) != c.code || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want code %d naming %s", c.spec, err, c.code, c.want)
		}
	}
	if ms, err := index.List(ctx, tb); err != nil || len(ms) != 0 {
		t.Fatalf("failed creates left indexes: %v %v", ms, err)
	}
}

// clustered answers n vectors of dim around 64 random centres.
func clustered(n, dim int, seed uint64) ([][]float32, [][]float32) {
	r := rand.New(rand.NewPCG(seed, 1))
	centres := make([][]float32, 64)
	for i := range centres {
		centres[i] = make([]float32, dim)
		for d := range centres[i] {
			centres[i][d] = float32(r.NormFloat64())
		}
	}
	gen := func(count int) [][]float32 {
		out := make([][]float32, count)
		for i := range out {
			c := centres[r.IntN(len(centres))]
			v := make([]float32, dim)
			for d := range v {
				v[d] = c[d] + float32(r.NormFloat64()*0.35)
			}
			out[i] = v
		}
		return out
	}
	return gen(n), gen(100)
}

func vectorTable(t testing.TB, cat *table.Catalog, name string, vs [][]float32) *table.Table {
	t.Helper()
	dim := len(vs[0])
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "emb", Type: arrow.FixedSizeListOf(int32(dim), arrow.PrimitiveTypes.Float32), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	fb := b.Field(1).(*array.FixedSizeListBuilder)
	vb := fb.ValueBuilder().(*array.Float32Builder)
	for i, v := range vs {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		fb.Append(true)
		vb.AppendValues(v, nil)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	tb, _, err := cat.CreateTable(context.Background(), []string{"ns", name}, schema, reader(rec), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func ids(t testing.TB, rec arrow.RecordBatch) []int64 {
	t.Helper()
	defer rec.Release()
	return append([]int64(nil), rec.Column(0).(*array.Int64).Int64Values()...)
}

// Recall answers the mean recall@k of approximate against exact id lists.
func Recall(exact, approx [][]int64) float64 {
	var sum float64
	for i := range exact {
		want := map[int64]bool{}
		for _, x := range exact[i] {
			want[x] = true
		}
		hit := 0
		for _, x := range approx[i] {
			if want[x] {
				hit++
			}
		}
		sum += float64(hit) / float64(max(len(exact[i]), 1))
	}
	return sum / float64(len(exact))
}

// TestIVFFlatRecallAndFilters: an IVF_FLAT index finds ≥ 95% of the exact
// 10 nearest at the default nprobes, every probe answer is exact
// distances, a prefilter answers only matching rows (k of them) and a
// postfilter a subset of the unfiltered answer.
func TestIVFFlatRecallAndFilters(t *testing.T) {
	ctx := context.Background()
	cat := newCatalog(t, table.Options{MaxRowsPerFragment: 2500})
	data, queries := clustered(10000, 32, 3)
	tb := vectorTable(t, cat, "v", data)
	im, err := index.Create(ctx, tb, index.Spec{Column: "emb", Type: "IVF_FLAT"})
	if err != nil {
		t.Fatal(err)
	}
	if im.Params.Partitions != 100 || im.Metric != "l2" {
		t.Fatalf("defaults: %+v", im)
	}
	again, err := index.Create(ctx, tb, index.Spec{Column: "emb", Type: "IVF_FLAT"})
	if err != nil {
		t.Fatal(err)
	}
	if again.UUID == im.UUID {
		t.Fatal("create again kept the uuid")
	}
	im = again
	var exact, approx, one [][]int64
	for _, q := range queries {
		rec, err := vector.Search(ctx, tb, vector.Query{Vector: q, K: 10, Columns: []string{"id"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		exact = append(exact, ids(t, rec))
		p, err := index.NewProbe(ctx, tb, im, q, 0)
		if err != nil {
			t.Fatal(err)
		}
		rec, err = vector.Search(ctx, tb, vector.Query{Vector: q, K: 10, Columns: []string{"id"}, Index: p, Refine: 2}, nil)
		if err != nil {
			t.Fatal(err)
		}
		approx = append(approx, ids(t, rec))
		p1, _ := index.NewProbe(ctx, tb, im, q, 1)
		rec, err = vector.Search(ctx, tb, vector.Query{Vector: q, K: 10, Columns: []string{"id"}, Index: p1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		one = append(one, ids(t, rec))
	}
	if r := Recall(exact, approx); r < 0.95 {
		t.Fatalf("recall@10 at nprobes %d: %.3f", index.DefaultNProbes, r)
	}
	if r1, r := Recall(exact, one), Recall(exact, approx); r1 > r {
		t.Fatalf("nprobes 1 recall %.3f above nprobes 20's %.3f", r1, r)
	}
	// Filters.
	q := queries[0]
	p, _ := index.NewProbe(ctx, tb, im, q, 0)
	rec, err := vector.Search(ctx, tb, vector.Query{Vector: q, K: 10, Columns: []string{"id"}, Index: p, Filter: "id % 2 = 0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pre := ids(t, rec)
	if len(pre) != 10 {
		t.Fatalf("prefilter: %d rows", len(pre))
	}
	for _, id := range pre {
		if id%2 != 0 {
			t.Fatalf("prefilter answered id %d", id)
		}
	}
	rec, err = vector.Search(ctx, tb, vector.Query{Vector: q, K: 10, Columns: []string{"id"}, Index: p, Filter: "id % 2 = 0", Postfilter: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	post := ids(t, rec)
	unfiltered := approx[0]
	var want []int64
	for _, id := range unfiltered {
		if id%2 == 0 {
			want = append(want, id)
		}
	}
	if fmt.Sprint(post) != fmt.Sprint(want) {
		t.Fatalf("postfilter: %v, want %v (the even ids of %v)", post, want, unfiltered)
	}
	// Rows appended after the build are searched exactly: a copy of the
	// query vector is found first.
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "emb", Type: arrow.FixedSizeListOf(32, arrow.PrimitiveTypes.Float32), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	b.Field(0).(*array.Int64Builder).Append(-1)
	b.Field(1).(*array.FixedSizeListBuilder).Append(true)
	b.Field(1).(*array.FixedSizeListBuilder).ValueBuilder().(*array.Float32Builder).AppendValues(q, nil)
	nr := b.NewRecordBatch()
	b.Release()
	tb.Catalog().UseIndexes(unmaintained)
	_, _, err = tb.Insert(ctx, reader(nr), "")
	tb.Catalog().UseIndexes(index.Maintenance())
	if err != nil {
		t.Fatal(err)
	}
	nr.Release()
	rec, err = vector.Search(ctx, tb, vector.Query{Vector: q, K: 3, Columns: []string{"id"}, Index: p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, rec); got[0] != -1 {
		t.Fatalf("appended row not found first: %v", got)
	}
}

// TestInvertedMatchesBruteForce: BM25 answers of the INVERTED index equal
// a brute-force scoring of every row (same ids, same order, same scores),
// including rows appended after the build, with OR and AND, and with a
// prefilter.
func TestInvertedMatchesBruteForce(t *testing.T) {
	ctx := context.Background()
	cat := newCatalog(t, table.Options{MaxRowsPerFragment: 300})
	words := strings.Fields("apple banana cherry date elder fig grape honeydew kiwi lemon mango nectarine olive peach quince raspberry strawberry tangerine ugli vanilla watermelon")
	r := rand.New(rand.NewPCG(5, 5))
	doc := func() *string {
		if r.IntN(40) == 0 {
			return nil
		}
		n := 1 + r.IntN(12)
		var ws []string
		for range n {
			// Zipf-ish: low indexes are common.
			w := words[int(math.Floor(math.Pow(r.Float64(), 2.5)*float64(len(words))))]
			if r.IntN(5) == 0 {
				w = strings.ToUpper(w[:1]) + w[1:] + ","
			}
			ws = append(ws, w)
		}
		s := strings.Join(ws, " ")
		return &s
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "body", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	var corpus []*string
	build := func(from, to int) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		for i := from; i < to; i++ {
			d := doc()
			corpus = append(corpus, d)
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			if d == nil {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.StringBuilder).Append(*d)
			}
		}
		return b.NewRecordBatch()
	}
	rec := build(0, 2000)
	tb, _, err := cat.CreateTable(ctx, []string{"ns", "docs"}, schema, reader(rec), "", nil)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := index.Create(ctx, tb, index.Spec{Column: "body", Type: "FTS"}); err != nil {
		t.Fatal(err)
	}
	rec = build(2000, 2400)
	tb.Catalog().UseIndexes(unmaintained) // the appended rows stay uncovered
	_, _, err = tb.Insert(ctx, reader(rec), "")
	tb.Catalog().UseIndexes(index.Maintenance())
	if err != nil {
		t.Fatal(err)
	}
	rec.Release()

	brute := func(text string, and bool, keep func(int) bool, k int) ([]int64, []float64) {
		return bruteBM25(corpus, text, and, keep, k)
	}
	all := func(int) bool { return true }
	for _, c := range []struct {
		text   string
		and    bool
		filter string
		keep   func(int) bool
	}{
		{"apple", false, "", all},
		{"Cherry banana", false, "", all},
		{"cherry, BANANA", true, "", all},
		{"watermelon vanilla fig", false, "", all},
		{"apple banana", false, "id >= 1000 AND id < 2200", func(i int) bool { return i >= 1000 && i < 2200 }},
		{"zzz", false, "", all},
		{"", false, "", all},
	} {
		got, err := index.SearchText(ctx, tb, index.FTSQuery{Text: c.text, And: c.and, Filter: c.filter, K: 25, Columns: []string{"id"}})
		if err != nil {
			t.Fatalf("%q: %v", c.text, err)
		}
		gotIDs := append([]int64(nil), got.Column(0).(*array.Int64).Int64Values()...)
		gotScores := got.Column(1).(*array.Float32).Float32Values()
		wantIDs, wantScores := brute(c.text, c.and, c.keep, 25)
		if fmt.Sprint(gotIDs) != fmt.Sprint(wantIDs) {
			t.Fatalf("%q (and %v, filter %q): ids %v, brute force %v", c.text, c.and, c.filter, gotIDs, wantIDs)
		}
		for i := range gotScores {
			if math.Abs(float64(gotScores[i])-wantScores[i]) > 1e-4*math.Max(1, wantScores[i]) {
				t.Fatalf("%q: score %d = %v, brute force %v", c.text, i, gotScores[i], wantScores[i])
			}
		}
		got.Release()
	}
	if _, err := index.SearchText(ctx, tb, index.FTSQuery{Column: "id", Text: "x"}); errs.CodeOf(err) != errs.CodeInvalidInput {
		t.Fatalf("search a column without an index: %v", err)
	}
}

// bruteBM25 scores every row of corpus (nil: null) against text with
// BM25 and answers the k best (ties: row order).
func bruteBM25(corpus []*string, text string, and bool, keep func(i int) bool, k int) ([]int64, []float64) {
	terms := map[string]bool{}
	var order []string // query terms, first occurrence order
	for _, w := range index.Tokenize(text) {
		if !terms[w] {
			order = append(order, w)
		}
		terms[w] = true
	}
	var docs, total float64
	df := map[string]float64{}
	toks := make([][]string, len(corpus))
	for i, d := range corpus {
		if d == nil {
			continue
		}
		toks[i] = index.Tokenize(*d)
		docs++
		total += float64(len(toks[i]))
		seen := map[string]bool{}
		for _, w := range toks[i] {
			if terms[w] && !seen[w] {
				seen[w] = true
				df[w]++
			}
		}
	}
	type res struct {
		id    int64
		score float64
	}
	var out []res
	for i := range corpus {
		if toks[i] == nil || !keep(i) {
			continue
		}
		tf := map[string]float64{}
		for _, w := range toks[i] {
			if terms[w] {
				tf[w]++
			}
		}
		if len(tf) == 0 || and && len(tf) < len(terms) {
			continue
		}
		var s float64
		k1, b := index.BM25K1, index.BM25B
		for _, w := range order {
			f, ok := tf[w]
			if !ok {
				continue
			}
			idf := math.Log(1 + (docs-df[w]+0.5)/(df[w]+0.5))
			s += idf * f * (k1 + 1) / (f + k1*(1-b+b*float64(len(toks[i]))/(total/docs)))
		}
		out = append(out, res{int64(i), s})
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].score > out[b].score })
	out = out[:min(k, len(out))]
	var idsOut []int64
	var scores []float64
	for _, x := range out {
		idsOut = append(idsOut, x.id)
		scores = append(scores, x.score)
	}
	return idsOut, scores
}
