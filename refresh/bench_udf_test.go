package refresh

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/arrowjson"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/udf"
)

// udfDocs is the number of documents the user-code benchmarks read.
const udfDocs = 4000

// udfSource creates docs$corpus with udfDocs benchmark documents in
// fragments of per rows, on an engine with runtimes rt.
func udfSource(b *testing.B, rt string, per, n int) *bundle {
	b.Helper()
	bd := setup(b, table.Options{MaxRowsPerFragment: per})
	dir, _ := filepath.Abs(".")
	reg, err := udf.Parse([]byte(rt), dir)
	if err != nil {
		b.Fatal(err)
	}
	bd.e = NewEngineWith(bd.cat, EngineOptions{Runtimes: reg})
	b.Cleanup(func() { bd.e.Close() })
	rb := array.NewRecordBuilder(memory.DefaultAllocator, benchSchema)
	defer rb.Release()
	for i := 0; i < n; i++ {
		rb.Field(0).(*array.Int64Builder).Append(int64(i))
		rb.Field(1).(*array.StringBuilder).Append(benchDoc(i))
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	rdr, _ := array.NewRecordReader(benchSchema, []arrow.RecordBatch{rec})
	if _, _, err := bd.cat.CreateTable(bd.ctx, []string{"docs", "corpus"}, benchSchema, rdr, "", nil); err != nil {
		b.Fatal(err)
	}
	return bd
}

func udfColumn(name, runtime, out, kind string) AddColumnEntry {
	return AddColumnEntry{Name: name, VirtualColumn: &VirtualColumnEntry{InputColumns: []string{"body"},
		Outputs: []VirtualOutput{{Column: name, StructField: out, DataType: typ(kind)}},
		UDF:     base64.StdEncoding.EncodeToString([]byte(`{"runtime": "` + runtime + `"}`)), UDFName: runtime, UDFVersion: "1"}}
}

func fixedList(n int64) arrowjson.DataType {
	return arrowjson.DataType{Type: "fixed_size_list", Length: &n, Fields: []arrowjson.Field{{Name: "item", Type: typ("float32"), Nullable: true}}}
}

// runJob plans, expands (items spread over engines, each running
// perEngine items at once) and commits one job.
func runJob(b *testing.B, bd *bundle, engines []*Engine, perEngine int, id []string, job string, opts Options) Result {
	b.Helper()
	if err := bd.e.Prepare(bd.ctx, id, &opts); err != nil {
		b.Fatal(err)
	}
	p, err := bd.e.Plan(bd.ctx, id, job, opts)
	if err != nil {
		b.Fatal(err)
	}
	results := make([]ItemResult, len(p.Items))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for _, e := range engines {
		for range perEngine {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					r, err := e.Expand(bd.ctx, p, i)
					if err != nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
					results[i] = r
				}
			}()
		}
	}
	for i := range p.Items {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	res, err := bd.e.Commit(bd.ctx, p, results)
	if err != nil {
		b.Fatal(err)
	}
	return res
}

// BenchmarkExecRuntimeOverhead: the cost per row of running user code in
// an exec runtime (a Python subprocess over NDJSON computing a length),
// against the built-in chunker over the same documents in the same run.
func BenchmarkExecRuntimeOverhead(b *testing.B) {
	const rt = "runtimes:\n  length:\n    kind: exec\n    command: [\"python3\", \"testdata/length.py\"]\n    protocol: ndjson\n    timeout: 60s\n    max_batch_rows: 512\n"
	var chunkDur, execDur time.Duration
	for i := 0; i < b.N; i++ {
		bd := udfSource(b, rt, 1<<20, udfDocs)
		id := bd.create(b, "chunks", CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$corpus"`, UDTFSpec: chunkerEntry(benchSpec)})
		start := time.Now()
		runJob(b, bd, []*Engine{bd.e}, 1, id, fmt.Sprintf("c%d", i), Options{SourceTaskSize: udfDocs})
		chunkDur += time.Since(start)
		if _, _, err := bd.e.AddColumns(bd.ctx, []string{"docs", "corpus"}, []AddColumnEntry{udfColumn("n", "length", "n", "int64")}); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		res := runJob(b, bd, []*Engine{bd.e}, 1, []string{"docs", "corpus"}, fmt.Sprintf("x%d", i), Options{Backfill: &BackfillOptions{Column: "n", CheckpointSize: udfDocs}})
		execDur += time.Since(start)
		if res.RowsUpdated != udfDocs {
			b.Fatalf("backfill %+v", res)
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N*udfDocs) }
	b.ReportMetric(per(chunkDur), "chunker-ns/row")
	b.ReportMetric(per(execDur), "exec-ns/row")
	b.ReportMetric(per(execDur)/per(chunkDur), "exec/chunker")
}

// BenchmarkHTTPRuntimeScaling: an embeddings endpoint answering after
// 20 ms; a backfill spread over 1, 2 and 4 workers (each an engine with
// its own udf.Manager, whose max_in_flight (2) bounds its requests, as a
// worker process's does; items of 125 rows, two requests of 4 rows in
// flight per item). Latency-bound work should scale with workers.
func BenchmarkHTTPRuntimeScaling(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		time.Sleep(20 * time.Millisecond)
		var sb strings.Builder
		sb.WriteString(`{"data":[`)
		for i := range req.Input {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"index":%d,"embedding":[%d,1,0,0]}`, i, len(req.Input[i])%7)
		}
		sb.WriteString("]}")
		w.Write([]byte(sb.String()))
	}))
	defer srv.Close()
	rt := fmt.Sprintf("runtimes:\n  embed:\n    kind: http\n    url: %s\n    protocol: openai-embeddings\n    dimensions: 4\n    timeout: 10s\n    max_batch_rows: 4\n    max_in_flight: 2\n", srv.URL)
	rate := map[int]float64{}
	for _, workers := range []int{1, 2, 4} {
		var dur time.Duration
		var rows int64
		for i := 0; i < b.N; i++ {
			bd := udfSource(b, rt, 125, 2000)
			dir, _ := filepath.Abs(".")
			engines := []*Engine{bd.e}
			for w := 1; w < workers; w++ {
				reg, _ := udf.Parse([]byte(rt), dir)
				e := NewEngineWith(bd.cat, EngineOptions{Runtimes: reg})
				defer e.Close()
				engines = append(engines, e)
			}
			emb := AddColumnEntry{Name: "vec", VirtualColumn: &VirtualColumnEntry{InputColumns: []string{"body"},
				Outputs: []VirtualOutput{{Column: "vec", StructField: "embedding", DataType: fixedList(4)}},
				UDF:     base64.StdEncoding.EncodeToString([]byte(`{"runtime": "embed"}`)), UDFName: "e", UDFVersion: "1"}}
			if _, _, err := bd.e.AddColumns(bd.ctx, []string{"docs", "corpus"}, []AddColumnEntry{emb}); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			res := runJob(b, bd, engines, 1, []string{"docs", "corpus"}, fmt.Sprintf("h%d", i), Options{SourceTaskSize: 125, IntraApplierConcurrency: 2, Backfill: &BackfillOptions{Column: "vec", CommitGranularity: 1}})
			dur += time.Since(start)
			rows += res.RowsUpdated
		}
		rate[workers] = float64(rows) / dur.Seconds()
		b.ReportMetric(rate[workers], fmt.Sprintf("rows/s-%dw", workers))
	}
	b.ReportMetric(rate[4]/rate[1], "scaling-4w/1w")
}
