package vector

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/table"
)

// vecTable creates a table (id int64, tag utf8, emb fixed_size_list<float32>[dim])
// of n rows in fragments of per rows; row i's vector is vec(i). Row 3 has a
// null vector.
func vecTable(t testing.TB, n, per, dim int, vec func(i int) []float32) *table.Table {
	t.Helper()
	return vecTableOpts(t, n, dim, vec, table.Options{MaxRowsPerFragment: per})
}

func vecTableOpts(t testing.TB, n, dim int, vec func(i int) []float32, opts table.Options) *table.Table {
	t.Helper()
	ctx := context.Background()
	wh, err := table.OpenWarehouse(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	db, err := duck.Open(duck.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cat := table.NewCatalog(wh, db, opts)
	if err := cat.CreateNamespace(ctx, []string{"ns"}, "", nil); err != nil {
		t.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "tag", Type: arrow.BinaryTypes.String},
		{Name: "emb", Type: arrow.FixedSizeListOf(int32(dim), arrow.PrimitiveTypes.Float32), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	fb := b.Field(2).(*array.FixedSizeListBuilder)
	vb := fb.ValueBuilder().(*array.Float32Builder)
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append([]string{"a", "b"}[i%2])
		if i == 3 {
			fb.AppendNull()
			continue
		}
		fb.Append(true)
		vb.AppendValues(vec(i), nil)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, _ := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	tb, _, err := cat.CreateTable(ctx, []string{"ns", "v"}, schema, rdr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func randVec(seed uint64, dim int) func(int) []float32 {
	return func(i int) []float32 {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		v := make([]float32, dim)
		for k := range v {
			v[k] = r.Float32()*2 - 1
		}
		return v
	}
}

// brute answers the ids of the k nearest rows by a plain loop in float64.
func brute(n int, vec func(int) []float32, q []float32, k int, metric string, keep func(int) bool) []int64 {
	type cand struct {
		d  float64
		id int
	}
	var all []cand
	for i := 0; i < n; i++ {
		if i == 3 || !keep(i) {
			continue
		}
		v := vec(i)
		var dd, dot, xx, qq float64
		for j := range v {
			d := float64(v[j] - q[j])
			dd += d * d
			dot += float64(v[j]) * float64(q[j])
			xx += float64(v[j]) * float64(v[j])
			qq += float64(q[j]) * float64(q[j])
		}
		switch metric {
		case Dot:
			dd = 1 - dot
		case Cosine:
			dd = 1 - dot/math.Sqrt(xx*qq)
		}
		all = append(all, cand{dd, i})
	}
	sort.SliceStable(all, func(a, b int) bool { return all[a].d < all[b].d })
	var out []int64
	for _, c := range all[:min(k, len(all))] {
		out = append(out, int64(c.id))
	}
	return out
}

func ids(t *testing.T, rec arrow.RecordBatch) []int64 {
	t.Helper()
	if rec.Schema().Field(0).Name != "id" {
		t.Fatalf("schema %s", rec.Schema())
	}
	return slices.Clone(rec.Column(0).(*array.Int64).Int64Values())
}

func TestSearchMatchesBruteForce(t *testing.T) {
	const n, dim = 500, 16
	vec := randVec(7, dim)
	tb := vecTable(t, n, 64, dim, vec)
	q := randVec(99, dim)(0)
	ctx := context.Background()
	for _, metric := range []string{L2, Cosine, Dot} {
		for _, filter := range []string{"", "tag = 'b'"} {
			rec, err := Search(ctx, tb, Query{Vector: q, K: 7, Metric: metric, Filter: filter}, nil)
			if err != nil {
				t.Fatal(err)
			}
			keep := func(i int) bool { return filter == "" || i%2 == 1 }
			if got, want := ids(t, rec), brute(n, vec, q, 7, metric, keep); !slices.Equal(got, want) {
				t.Errorf("%s %q: got %v, want %v", metric, filter, got, want)
			}
			d := rec.Column(int(rec.NumCols()) - 1).(*array.Float32).Float32Values()
			if !slices.IsSorted(d) || rec.Schema().Field(int(rec.NumCols())-1).Name != DistanceColumn {
				t.Errorf("%s: distances %v not nearest first", metric, d)
			}
			rec.Release()
		}
	}
	// The query vector itself is at distance 0 from its row.
	rec, err := Search(ctx, tb, Query{Vector: vec(42), K: 1, Columns: []string{"id", "tag"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if got := ids(t, rec); !slices.Equal(got, []int64{42}) || rec.NumCols() != 3 || rec.Column(2).(*array.Float32).Value(0) != 0 {
		t.Fatalf("self: %v", rec)
	}
}

// TestSearchReadsHitRows: a data file larger than one request
// (wholeFileBytes) with many row groups; the hits' rows are read back
// from the row groups that hold them, in hit order, column by column.
func TestSearchReadsHitRows(t *testing.T) {
	const n, dim, k = 12000, 128, 60
	vec := randVec(11, dim)
	tb := vecTableOpts(t, n, dim, vec, table.Options{MaxRowsPerFragment: 9000, RowGroupRows: 1000})
	q := randVec(12, dim)(0)
	want := brute(n, vec, q, k, L2, func(int) bool { return true })
	ctx := context.Background()
	for _, cols := range [][]string{nil, {"tag", "emb", "id"}, {"emb"}} {
		rec, err := Search(ctx, tb, Query{Vector: q, K: k, Columns: cols, RowAddr: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sch := rec.Schema()
		col := func(name string) arrow.Array { return rec.Column(sch.FieldIndices(name)[0]) }
		addrs := col("_rowaddr").(*array.Uint64).Uint64Values()
		ids := make([]int64, len(addrs))
		for i, a := range addrs { // fragments hold 9000 rows
			ids[i] = int64(a>>32)*9000 + int64(uint32(a))
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("%v: rows %v, want %v", cols, ids, want)
		}
		if cols == nil || len(cols) == 3 {
			idc, tag := col("id").(*array.Int64), col("tag").(*array.String)
			for i, id := range want {
				if idc.Value(i) != id || tag.Value(i) != []string{"a", "b"}[id%2] {
					t.Fatalf("%v: hit %d is id %d tag %q, want %d", cols, i, idc.Value(i), tag.Value(i), id)
				}
			}
		}
		emb := col("emb").(*array.FixedSizeList)
		vals := emb.ListValues().(*array.Float32).Float32Values()
		for i, id := range want {
			if !slices.Equal(vals[i*dim:(i+1)*dim], vec(int(id))) {
				t.Fatalf("%v: hit %d vector is not row %d's", cols, i, id)
			}
		}
		rec.Release()
	}
}

func TestSearchRefusals(t *testing.T) {
	tb := vecTable(t, 10, 10, 4, randVec(1, 4))
	ctx := context.Background()
	for _, c := range []struct {
		q    Query
		want string
	}{
		{Query{Vector: []float32{1, 2, 3}}, "3 dimensions"},
		{Query{Vector: []float32{1, 2, 3, 4}, Column: "tag"}, "not a vector column"},
		{Query{Vector: []float32{1, 2, 3, 4}, Column: "nope"}, "not found"},
		{Query{Vector: []float32{1, 2, 3, 4}, Metric: "hamming"}, "distance_type"},
		{Query{Vector: []float32{1, 2, 3, 4}, K: -1}, "k:"},
		{Query{Vector: []float32{1, 2, 3, 4}, Filter: "nope = 1"}, "filter"},
	} {
		_, err := Search(ctx, tb, c.q, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.want, err)
		}
	}
}
