package file

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// benchTables are the workloads the write benchmarks and the size check
// share: typical scalar columns, and embeddings with their text.
func benchTables(tb testing.TB) map[string][]arrow.RecordBatch {
	rng := rand.New(rand.NewSource(42))
	mem := memory.DefaultAllocator
	scalars := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "price", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "qty", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "category", Type: arrow.BinaryTypes.String},
		{Name: "title", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	cats := []string{"books", "music", "garden", "toys", "kitchen", "sports", "electronics", "clothing"}
	words := []string{"the", "quick", "lance", "format", "vector", "table", "writer", "river", "stone", "blue", "data", "page"}
	var sc []arrow.RecordBatch
	id := 0
	for b := 0; b < 5; b++ {
		rb := array.NewRecordBuilder(mem, scalars)
		for i := 0; i < 40000; i++ {
			rb.Field(0).(*array.Int64Builder).Append(int64(id))
			rb.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + int64(id)*1_000_003))
			if i%17 == 0 {
				rb.Field(2).AppendNull()
			} else {
				rb.Field(2).(*array.Float64Builder).Append(float64(rng.Intn(100000)) / 100)
			}
			if i%11 == 0 {
				rb.Field(3).AppendNull()
			} else {
				rb.Field(3).(*array.Int32Builder).Append(int32(rng.Intn(500)))
			}
			rb.Field(4).(*array.BooleanBuilder).Append(rng.Intn(4) == 0)
			rb.Field(5).(*array.StringBuilder).Append(cats[rng.Intn(len(cats))])
			if i%23 == 0 {
				rb.Field(6).AppendNull()
			} else {
				n := 3 + rng.Intn(8)
				var buf bytes.Buffer
				for k := 0; k < n; k++ {
					buf.WriteString(words[rng.Intn(len(words))])
					buf.WriteByte(' ')
				}
				fmt.Fprintf(&buf, "#%d", rng.Intn(1000000))
				rb.Field(6).(*array.StringBuilder).Append(buf.String())
			}
			id++
		}
		sc = append(sc, rb.NewRecordBatch())
		rb.Release()
	}
	vecs := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "text", Type: arrow.BinaryTypes.String},
		{Name: "embedding", Type: arrow.FixedSizeListOf(768, arrow.PrimitiveTypes.Float32)},
	}, nil)
	var vc []arrow.RecordBatch
	id = 0
	for b := 0; b < 4; b++ {
		rb := array.NewRecordBuilder(mem, vecs)
		for i := 0; i < 5000; i++ {
			rb.Field(0).(*array.Int64Builder).Append(int64(id))
			var buf bytes.Buffer
			for k := 0; k < 40+rng.Intn(80); k++ {
				buf.WriteString(words[rng.Intn(len(words))])
				buf.WriteByte(' ')
			}
			rb.Field(1).(*array.StringBuilder).Append(buf.String())
			fb := rb.Field(2).(*array.FixedSizeListBuilder)
			fb.Append(true)
			vb := fb.ValueBuilder().(*array.Float32Builder)
			for k := 0; k < 768; k++ {
				vb.Append(float32(rng.NormFloat64()))
			}
			id++
		}
		vc = append(vc, rb.NewRecordBatch())
		rb.Release()
	}
	return map[string][]arrow.RecordBatch{"scalars": sc, "vectors": vc}
}

func writeLance(tb testing.TB, w io.Writer, recs []arrow.RecordBatch) {
	lw, err := NewWriter(w, testFields(tb, recs[0].Schema()), WriterOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range recs {
		if err := lw.Write(r); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := lw.Close(); err != nil {
		tb.Fatal(err)
	}
}

// writeParquet writes recs the way mvq's table package does: Snappy,
// 64Ki-row row groups, page index, stored Arrow schema, buffered writes.
func writeParquet(tb testing.TB, w io.Writer, recs []arrow.RecordBatch) {
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithMaxRowGroupLength(65536),
		parquet.WithPageIndexEnabled(true),
	)
	fw, err := pqarrow.NewFileWriter(recs[0].Schema(), w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range recs {
		if err := fw.WriteBuffered(r); err != nil {
			tb.Fatal(err)
		}
	}
	if err := fw.Close(); err != nil {
		tb.Fatal(err)
	}
}

func inputBytes(recs []arrow.RecordBatch) int64 {
	var n int64
	for _, r := range recs {
		for _, c := range r.Columns() {
			for _, b := range c.Data().Buffers() {
				if b != nil {
					n += int64(b.Len())
				}
			}
			for _, ch := range c.Data().Children() {
				for _, b := range ch.Buffers() {
					if b != nil {
						n += int64(b.Len())
					}
				}
			}
		}
	}
	return n
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// BenchmarkWrite21VsParquet writes the same batches as a Lance 2.1 file and
// as mvq's Parquet, alternating, and reports each throughput and the ratio
// (lance/parquet above 1 means the Lance writer is faster).
func BenchmarkWrite21VsParquet(b *testing.B) {
	tables := benchTables(b)
	for _, name := range []string{"scalars", "vectors"} {
		recs := tables[name]
		in := inputBytes(recs)
		b.Run(name, func(b *testing.B) {
			var tl, tp time.Duration
			var sl, sp int64
			for i := 0; i < b.N; i++ {
				cw := &countWriter{}
				t0 := time.Now()
				writeLance(b, cw, recs)
				tl += time.Since(t0)
				sl = cw.n
				cw = &countWriter{}
				t0 = time.Now()
				writeParquet(b, cw, recs)
				tp += time.Since(t0)
				sp = cw.n
			}
			mbps := func(d time.Duration) float64 { return float64(in) * float64(b.N) / d.Seconds() / 1e6 }
			b.ReportMetric(mbps(tl), "lance-MB/s")
			b.ReportMetric(mbps(tp), "parquet-MB/s")
			b.ReportMetric(tp.Seconds()/tl.Seconds(), "lance/parquet-speed")
			b.ReportMetric(float64(sl)/float64(sp), "lance/parquet-size")
		})
	}
}
