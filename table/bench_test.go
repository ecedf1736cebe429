package table

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

const benchRows = 1_000_000

// benchRecords builds 1M rows (int64, double, ~200-byte string) in 64k
// batches.
func benchRecords(tb testing.TB) []arrow.RecordBatch {
	pad := strings.Repeat("lorem ipsum dolor sit amet ", 8)[:190]
	var out []arrow.RecordBatch
	for start := 0; start < benchRows; start += 1 << 16 {
		n := min(1<<16, benchRows-start)
		b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
		for i := start; i < start+n; i++ {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			b.Field(1).(*array.Float64Builder).Append(float64(i) * 0.5)
			b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("%s%010d", pad, i))
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return out
}

func recordReader(tb testing.TB, recs []arrow.RecordBatch) array.RecordReader {
	r, err := array.NewRecordReader(testSchema, recs)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// rawWrite writes the rows as one Parquet file with arrow-go, with the
// same writer properties the table uses.
func rawWrite(tb testing.TB, c *Catalog, path string, recs []arrow.RecordBatch) {
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	props, aprops := c.writerProps()
	fw, err := pqarrow.NewFileWriter(testSchema, f, props, aprops)
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

func rawRead(tb testing.TB, path string) int64 {
	pf, err := file.OpenParquetFile(path, false, file.WithReadProps(parquet.NewReaderProperties(memory.DefaultAllocator)))
	if err != nil {
		tb.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{Parallel: true, BatchSize: 1 << 16}, memory.DefaultAllocator)
	if err != nil {
		tb.Fatal(err)
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer rr.Release()
	var n int64
	for rr.Next() {
		n += rr.RecordBatch().NumRows()
	}
	return n
}

func tableScan(tb testing.TB, t *Table) int64 {
	m, err := t.Load(context.Background(), 0)
	if err != nil {
		tb.Fatal(err)
	}
	rdr, err := t.Scan(context.Background(), m, ScanOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	defer rdr.Release()
	var n int64
	for rdr.Next() {
		n += rdr.RecordBatch().NumRows()
	}
	if err := rdr.Err(); err != nil {
		tb.Fatal(err)
	}
	return n
}

// BenchmarkWriteScan1M: the table path (fragments + manifest commit, and a
// scan of the version) next to one Parquet file written and read with
// arrow-go, in the same run. Ratios above 1 mean the table path is faster.
func BenchmarkWriteScan1M(b *testing.B) {
	recs := benchRecords(b)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	var rawW, tabW, rawR, tabR time.Duration
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		c := newCatalog(b, dir, Options{})
		raw := filepath.Join(dir, "raw.parquet")

		t0 := time.Now()
		rawWrite(b, c, raw, recs)
		rawW += time.Since(t0)

		t0 = time.Now()
		tb, _, err := c.CreateTable(context.Background(), []string{"bench"}, testSchema, recordReader(b, recs), "", nil)
		if err != nil {
			b.Fatal(err)
		}
		tabW += time.Since(t0)

		t0 = time.Now()
		if n := rawRead(b, raw); n != benchRows {
			b.Fatalf("raw read %d rows", n)
		}
		rawR += time.Since(t0)

		t0 = time.Now()
		if n := tableScan(b, tb); n != benchRows {
			b.Fatalf("table scan %d rows", n)
		}
		tabR += time.Since(t0)
	}
	rate := func(d time.Duration) float64 { return float64(benchRows) * float64(b.N) / d.Seconds() }
	b.ReportMetric(rate(rawW), "raw_write_rows/s")
	b.ReportMetric(rate(tabW), "table_write_rows/s")
	b.ReportMetric(rate(rawR), "raw_read_rows/s")
	b.ReportMetric(rate(tabR), "table_scan_rows/s")
	b.ReportMetric(rawW.Seconds()/tabW.Seconds(), "write_ratio")
	b.ReportMetric(rawR.Seconds()/tabR.Seconds(), "scan_ratio")
}

// BenchmarkUpdate1Pct: updating 1% of the rows that live in one fragment
// next to updating 1% spread over every fragment, on the same 1M-row table
// (8 fragments of 128k rows). The cost follows the fragments touched.
func BenchmarkUpdate1Pct(b *testing.B) {
	recs := benchRecords(b)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	c := newCatalog(b, b.TempDir(), Options{})
	tb, m, err := c.CreateTable(context.Background(), []string{"bench"}, testSchema, recordReader(b, recs), "", nil)
	if err != nil {
		b.Fatal(err)
	}
	frags := len(m.Fragments)
	var local, spread time.Duration
	var touchedLocal, touchedSpread int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before, _ := tb.Load(context.Background(), 0)
		t0 := time.Now()
		after, n, err := tb.Update(context.Background(), "id < 10000", [][2]string{{"score", "score + 1"}})
		if err != nil || n != 10000 {
			b.Fatalf("local update: %d %v", n, err)
		}
		local += time.Since(t0)
		touchedLocal = changedFragments(before, after)

		before = after
		t0 = time.Now()
		after, n, err = tb.Update(context.Background(), "id % 100 = 0", [][2]string{{"score", "score + 1"}})
		if err != nil || n != 10000 {
			b.Fatalf("spread update: %d %v", n, err)
		}
		spread += time.Since(t0)
		touchedSpread = changedFragments(before, after)
	}
	b.ReportMetric(float64(frags), "fragments")
	b.ReportMetric(float64(touchedLocal), "local_fragments_touched")
	b.ReportMetric(float64(touchedSpread), "spread_fragments_touched")
	b.ReportMetric(local.Seconds()/float64(b.N)*1000, "local_update_ms")
	b.ReportMetric(spread.Seconds()/float64(b.N)*1000, "spread_update_ms")
	b.ReportMetric(local.Seconds()/spread.Seconds(), "local/spread_ratio")
}

func changedFragments(before, after *Manifest) int {
	old := map[string]bool{}
	for _, f := range before.Fragments {
		old[f.Path] = true
	}
	n := 0
	for _, f := range after.Fragments {
		if !old[f.Path] {
			n++
		}
	}
	return n
}
