package refresh

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/chunker"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/internal/corpus"
	lfile "github.com/mvq-dev/mvq/lance/file"
	"github.com/mvq-dev/mvq/table"
)

// The benchmark corpus: benchDocs documents of about benchDocBytes bytes
// of deterministic English-like text, chunked by a recursive chunker.
const (
	benchDocs     = 20000
	benchDocBytes = 2048
	benchSpec     = `{"chunker":"recursive","input_column":"body","output_column":"chunk","chunk_size":512,"chunk_overlap":64}`
)

func benchDoc(i int) string { return corpus.Doc(i, benchDocBytes) }

var benchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "body", Type: arrow.BinaryTypes.String},
}, nil)

// benchSource creates docs$corpus with the benchmark documents in one
// fragment and returns the bundle and the fragment's file.
func benchSource(b testing.TB) (*bundle, string) {
	b.Helper()
	dir := b.TempDir()
	ctx := context.Background()
	wh, err := table.OpenWarehouse(ctx, "file://"+dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { wh.Close() })
	cat := table.NewCatalog(wh, testDB(b), table.Options{Indexes: index.Maintenance()})
	if err := cat.CreateNamespace(ctx, []string{"docs"}, "", nil); err != nil {
		b.Fatal(err)
	}
	rb := array.NewRecordBuilder(memory.DefaultAllocator, benchSchema)
	defer rb.Release()
	for i := 0; i < benchDocs; i++ {
		rb.Field(0).(*array.Int64Builder).Append(int64(i))
		rb.Field(1).(*array.StringBuilder).Append(benchDoc(i))
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	rdr, _ := array.NewRecordReader(benchSchema, []arrow.RecordBatch{rec})
	_, m, err := cat.CreateTable(ctx, []string{"docs", "corpus"}, benchSchema, rdr, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	if len(m.Fragments) != 1 {
		b.Fatalf("corpus has %d fragments", len(m.Fragments))
	}
	return &bundle{ctx: ctx, cat: cat, e: NewEngine(cat)}, filepath.Join(dir, "docs", "corpus.lance", filepath.FromSlash(m.Fragments[0].Path))
}

func reportRates(b *testing.B, elapsed time.Duration, outRows int64) {
	secs := elapsed.Seconds()
	b.ReportMetric(float64(benchDocs)*float64(b.N)/secs, "source_rows/s")
	b.ReportMetric(float64(outRows)/secs, "output_rows/s")
}

// BenchmarkChunkerRefresh runs full refreshes of a chunker view over the
// corpus: plan, the items expanded by GOMAXPROCS goroutines (a worker
// pool), commit.
func BenchmarkChunkerRefresh(b *testing.B) {
	bb, _ := benchSource(b)
	workers := runtime.GOMAXPROCS(0)
	var outRows int64
	var elapsed time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		id := bb.create(b, fmt.Sprintf("chunks%d", i), CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$corpus"`, UDTFSpec: chunkerEntry(benchSpec)})
		b.StartTimer()
		start := time.Now()
		p := bb.plan(b, id, fmt.Sprintf("bench-%d", i), Options{})
		results := make([]ItemResult, len(p.Items))
		errs := make([]error, len(p.Items))
		next := make(chan int)
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for idx := range next {
					results[idx], errs[idx] = bb.e.Expand(bb.ctx, p, idx)
				}
			}()
		}
		for idx := range p.Items {
			next <- idx
		}
		close(next)
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		res, err := bb.e.Commit(bb.ctx, p, results)
		if err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(start)
		outRows += res.RowsAdded
	}
	reportRates(b, elapsed, outRows)
}

// BenchmarkChunkerPlainLoop is the baseline: the same chunker over the same
// Lance data file (the source table's one fragment), read with mvq's Lance
// file reader in batches of 16k rows and chunked in a plain loop on one
// goroutine.
func BenchmarkChunkerPlainLoop(b *testing.B) {
	_, path := benchSource(b)
	spec, err := chunker.Parse([]byte(benchSpec))
	if err != nil {
		b.Fatal(err)
	}
	ch, err := chunker.New(spec)
	if err != nil {
		b.Fatal(err)
	}
	var outRows int64
	start := time.Now()
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		st, err := f.Stat()
		if err != nil {
			b.Fatal(err)
		}
		r, err := lfile.Open(f, st.Size())
		if err != nil {
			b.Fatal(err)
		}
		var buf []string
		for lo := uint64(0); lo < r.NumRows(); lo += 1 << 14 {
			rec, err := r.Read(context.Background(), []int{1}, lo, min(lo+1<<14, r.NumRows()))
			if err != nil {
				b.Fatal(err)
			}
			body := rec.Column(0).(*array.String)
			for i := 0; i < body.Len(); i++ {
				buf = ch.Chunk(body.Value(i), buf[:0])
				outRows += int64(len(buf))
			}
			rec.Release()
		}
		f.Close()
	}
	reportRates(b, time.Since(start), outRows)
}
