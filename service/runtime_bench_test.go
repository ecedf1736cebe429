package service_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/arrowjson"
	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/udf"
)

// BenchmarkHTTPRuntimeWorkers: a backfill of an embedding virtual column
// over 4,000 documents (fragments of 125 rows, committed one by one)
// through an OpenAI-compatible endpoint answering after 20 ms, with 1, 2
// and 4 worker processes (this test binary re-executed, one task slot and
// one core each, max_in_flight 2 per process, batches of 4 rows). The work
// is latency-bound, so rows/s should grow with the processes (target
// ≥ 3.5× from 1 to 4); every row must get its embedding.
func BenchmarkHTTPRuntimeWorkers(b *testing.B) {
	const docs, per = 4000, 125
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
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
	rtFile := filepath.Join(b.TempDir(), "runtimes.yaml")
	if err := os.WriteFile(rtFile, []byte(rt), 0o600); err != nil {
		b.Fatal(err)
	}
	b.Setenv("MVQ_RUNTIMES_FILE", rtFile) // the worker processes inherit it
	reg, err := udf.Parse([]byte(rt), filepath.Dir(rtFile))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	o := newOrchestratorWith(b, 1, false)
	db, err := duck.Open(duck.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	cat := table.NewCatalog(o.cat.Warehouse(), db, table.Options{MaxRowsPerFragment: per, Indexes: index.Maintenance()})
	eng := refresh.NewEngineWith(cat, refresh.EngineOptions{Runtimes: reg})
	defer eng.Close()
	client := jobs.NewClient(o.rdb, o.conn, eng)
	defer client.Close()
	dim := int64(4)
	vec := refresh.AddColumnEntry{Name: "vec", VirtualColumn: &refresh.VirtualColumnEntry{InputColumns: []string{"body"},
		Outputs: []refresh.VirtualOutput{{Column: "vec", StructField: "embedding", DataType: arrowjson.DataType{Type: "fixed_size_list", Length: &dim,
			Fields: []arrowjson.Field{{Name: "item", Type: arrowjson.DataType{Type: "float32"}, Nullable: true}}}}},
		UDF: base64.StdEncoding.EncodeToString([]byte(`{"runtime": "embed"}`)), UDFName: "e", UDFVersion: "1"}}
	// The janitor (a pass as each worker starts) would compact the 125-row
	// fragments, the backfill's work items: this holds its lock.
	lock := jobs.RedisKey("lock:janitor")
	if err := o.rdb.Set(ctx, lock, "benchmark", 0).Err(); err != nil {
		b.Fatal(err)
	}
	defer o.rdb.Del(ctx, lock)
	rate := map[int]float64{}
	for it := 0; it < b.N; it++ {
		for _, n := range []int{1, 2, 4} {
			id := []string{fmt.Sprintf("emb%d_%d", it, n)}
			if _, _, err := cat.CreateTable(ctx, id, benchSchema, docsReader(0, docs), "", nil); err != nil {
				b.Fatal(err)
			}
			if _, _, err := eng.AddColumns(ctx, id, []refresh.AddColumnEntry{vec}); err != nil {
				b.Fatal(err)
			}
			stop := o.startWorkers(b, n)
			t0 := time.Now()
			j, err := client.Submit(ctx, id, refresh.Options{Concurrency: 2 * n, SourceTaskSize: per, IntraApplierConcurrency: 2,
				Backfill: &refresh.BackfillOptions{Column: "vec", CommitGranularity: 1}})
			if err != nil {
				stop()
				b.Fatal(err)
			}
			j = waitJob(b, ctx, client, j.ID)
			d := time.Since(t0)
			stop()
			if j.State != jobs.StateDone || j.Result == nil || j.Result.RowsUpdated != docs {
				b.Fatalf("%d workers: job %s %+v, result %+v", n, j.State, j.Failure, j.Result)
			}
			left, err := cat.OpenTable(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if nulls, err := left.CountRows(ctx, 0, "vec IS NULL"); err != nil || nulls != 0 {
				b.Fatalf("%d workers: %d rows without an embedding (%v)", n, nulls, err)
			}
			rate[n] += docs / d.Seconds() / float64(b.N)
			b.Logf("%d worker processes: %d rows in %v, %.0f rows/s", n, docs, d.Round(time.Millisecond), docs/d.Seconds())
		}
	}
	for _, n := range []int{1, 2, 4} {
		b.ReportMetric(rate[n], fmt.Sprintf("rows/s-%dw", n))
	}
	b.ReportMetric(rate[4]/rate[1], "scaling-4w/1w")
}
