package table

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/table/internal/records"
)

// BenchmarkMergeMatchGoVsDuckDB: the match step of a merge_insert — which
// rows of the table's key column (1M int64 keys, in fragments of 128k)
// have a key among 10k input keys — as the Go hash join MergeInsert uses
// (index the input, probe with each fragment's keys) and as a DuckDB
// join of each fragment with the input, in the same run. Both must find
// the same 9k matches.
func BenchmarkMergeMatchGoVsDuckDB(b *testing.B) {
	const rows, fragRows, inputRows = 1_000_000, 1 << 17, 10_000
	mk := func(name string, vals []int64) arrow.RecordBatch {
		s := arrow.NewSchema([]arrow.Field{{Name: name, Type: arrow.PrimitiveTypes.Int64}}, nil)
		bld := array.NewInt64Builder(memory.DefaultAllocator)
		bld.AppendValues(vals, nil)
		a := bld.NewArray()
		bld.Release()
		defer a.Release()
		return array.NewRecordBatch(s, []arrow.Array{a}, int64(len(vals)))
	}
	var frags []arrow.RecordBatch
	for start := int64(0); start < rows; start += fragRows {
		vals := make([]int64, 0, fragRows)
		for k := start; k < min(start+fragRows, rows); k++ {
			vals = append(vals, k)
		}
		frags = append(frags, mk("k", vals))
	}
	// 9k existing keys spread over the table, 1k new ones.
	var in []int64
	for i := range int64(9000) {
		in = append(in, i*111)
	}
	for i := range int64(1000) {
		in = append(in, rows+i)
	}
	input := mk("k", in)
	defer func() {
		for _, f := range frags {
			f.Release()
		}
		input.Release()
	}()
	db := testDB(b)
	ctx := context.Background()
	var tGo, tDuck time.Duration
	for b.Loop() {
		t0 := time.Now()
		index := make(map[string]int32, inputRows)
		var buf []byte
		cols := []arrow.Array{input.Column(0)}
		for i := range inputRows {
			buf, _ = records.AppendKey(buf[:0], cols, i)
			index[string(buf)] = int32(i)
		}
		goHits := 0
		for _, f := range frags {
			kc := []arrow.Array{f.Column(0)}
			for i := range int(f.NumRows()) {
				buf, _ = records.AppendKey(buf[:0], kc, i)
				if _, ok := index[string(buf)]; ok {
					goHits++
				}
			}
		}
		tGo += time.Since(t0)

		t0 = time.Now()
		duckHits := 0
		for _, f := range frags {
			f.Retain()
			input.Retain()
			tr, _ := array.NewRecordReader(f.Schema(), []arrow.RecordBatch{f})
			sr, _ := array.NewRecordReader(input.Schema(), []arrow.RecordBatch{input})
			f.Release()
			input.Release()
			rdr, err := db.Query(ctx, map[string]array.RecordReader{"target": tr, "source": sr},
				"SELECT target.k FROM target JOIN source ON target.k = source.k")
			if err != nil {
				b.Fatal(err)
			}
			recs, err := duck.Collect(rdr)
			tr.Release()
			sr.Release()
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range recs {
				duckHits += int(r.NumRows())
				r.Release()
			}
		}
		tDuck += time.Since(t0)
		if goHits != 9000 || duckHits != 9000 {
			b.Fatalf("matches: go %d, duckdb %d, want 9000", goHits, duckHits)
		}
	}
	b.ReportMetric(tGo.Seconds()*1000/float64(b.N), "go_hash_ms")
	b.ReportMetric(tDuck.Seconds()*1000/float64(b.N), "duckdb_join_ms")
	b.ReportMetric(tDuck.Seconds()/tGo.Seconds(), "duckdb/go")
}
