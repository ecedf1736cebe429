package service_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/jobs"
)

const embedDim = 16

// embedText is the test's embedding model: a normalized bag of words,
// each word hashed to one of embedDim buckets. Deterministic, and texts
// sharing words are near.
func embedText(s string) []float32 {
	v := make([]float32, embedDim)
	for _, w := range strings.Fields(strings.ToLower(s)) {
		h := fnv.New32a()
		h.Write([]byte(w))
		v[h.Sum32()%embedDim]++
	}
	var n float64
	for _, x := range v {
		n += float64(x * x)
	}
	if n > 0 {
		for i := range v {
			v[i] /= float32(math.Sqrt(n))
		}
	}
	return v
}

// embedServer is an OpenAI-compatible embeddings endpoint over embedText,
// answering after delay; texts counts the inputs it embedded.
func embedServer(t *testing.T, delay time.Duration, texts *atomic.Int64) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model      string   `json:"model"`
			Input      []string `json:"input"`
			Dimensions int      `json:"dimensions"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Dimensions != embedDim {
			http.Error(w, "bad request", 400)
			return
		}
		time.Sleep(delay)
		texts.Add(int64(len(req.Input)))
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		out := struct {
			Data []item `json:"data"`
		}{}
		for i, s := range req.Input {
			out.Data = append(out.Data, item{i, embedText(s)})
		}
		json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// withRuntimes declares an "embed" runtime on url for the processes the
// test starts.
func withRuntimes(t *testing.T, url string, batch int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runtimes.yaml")
	yaml := fmt.Sprintf("runtimes:\n  embed:\n    kind: http\n    url: %s/v1/embeddings\n    protocol: openai-embeddings\n    model: bag-of-words\n    dimensions: %d\n    timeout: 10s\n    max_batch_rows: %d\n    max_in_flight: 4\n", url, embedDim, batch)
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MVQ_RUNTIMES_FILE", path)
}

// embeddingColumn is an add_columns request for vector column vec over
// input column in, by the embed runtime.
func embeddingColumn(in string, extra map[string]any) map[string]any {
	vc := map[string]any{
		"input_columns": []string{in},
		"outputs": []map[string]any{{"column": "vec", "struct_field": "embedding", "nullable": true,
			"data_type": map[string]any{"type": "fixed_size_list", "length": embedDim,
				"fields": []map[string]any{{"name": "item", "type": map[string]any{"type": "float32"}, "nullable": true}}}}},
		"image": "", "udf": base64.StdEncoding.EncodeToString([]byte(`{"runtime": "embed"}`)),
		"udf_name": "bag-of-words", "udf_version": "1", "udf_backend": "mvq.runtime/v1",
	}
	for k, v := range extra {
		vc[k] = v
	}
	return map[string]any{"new_columns": []map[string]any{{"name": "embedding", "virtual_column": vc}}}
}

func vecJSON(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// TestPipelineChunkEmbedSearch: source documents → a chunker view with an
// embedding virtual column (an OpenAI-compatible HTTP endpoint) → one
// refresh makes chunks and their embeddings → a vector query finds the
// chunk nearest to a question.
func TestPipelineChunkEmbedSearch(t *testing.T) {
	var texts atomic.Int64
	srv := embedServer(t, 0, &texts)
	withRuntimes(t, srv.URL, 8)
	e := start(t, 1, "default")
	e.post("/v1/namespace/docs/create", `{}`, nil)
	src := []map[string]any{
		{"id": 1, "lang": "en", "body": "the quick brown fox jumps over the lazy dog near the river bank"},
		{"id": 2, "lang": "en", "body": "stock markets rallied as investors cheered strong quarterly earnings reports today"},
		{"id": 3, "lang": "en", "body": "a recipe for bread needs flour water salt and yeast plus patience"},
		{"id": 4, "lang": "de", "body": "flour water salt"},
	}
	if st := e.post("/v1/table/docs$src/create", src, nil); st != 200 {
		t.Fatalf("create source: %d", st)
	}
	e.createChunkerView("docs$chunks", "docs$src")
	var r map[string]any
	if st := e.post("/v1/table/docs$chunks/add_columns", embeddingColumn("chunk", nil), &r); st != 200 {
		t.Fatalf("add_columns: %d %v", st, r)
	}
	j := e.mustDone(e.refresh("docs$chunks", `{}`))
	var rows []map[string]any
	e.post("/v1/table/docs$chunks/query", map[string]any{"filter": "vec IS NULL"}, &rows)
	if len(rows) != 0 {
		t.Fatalf("rows without an embedding after the refresh: %v", rows)
	}
	e.post("/v1/table/docs$chunks/query", map[string]any{}, &rows)
	if int64(len(rows)) != texts.Load() || len(rows) < 9 {
		t.Fatalf("%d chunks, %d texts embedded (job %v)", len(rows), texts.Load(), j["result"])
	}
	e.post("/v1/table/docs$chunks/query", map[string]any{"vector": vecJSON(embedText("how much flour and water and salt")), "k": 2,
		"distance_type": "cosine", "columns": map[string]any{"column_names": []string{"id", "chunk"}}}, &rows)
	if len(rows) != 2 || num(rows[0]["id"]) != 3 || rows[0]["chunk"] != "needs flour water salt and" {
		t.Fatalf("nearest chunks: %v", rows)
	}
	if d, _ := strconv.ParseFloat(fmt.Sprint(rows[0]["_distance"]), 64); d >= 0.5 {
		t.Fatalf("distance %v", rows[0]["_distance"])
	}
}

// TestBackfillKilledMidwayResumes: a backfill committing every fragment
// is SIGKILLed with its worker after some commits; the other worker runs
// the item again, which computes only the fragments not committed, and
// the job ends DONE with every row filled.
func TestBackfillKilledMidwayResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a worker process")
	}
	var texts atomic.Int64
	srv := embedServer(t, 150*time.Millisecond, &texts)
	withRuntimes(t, srv.URL, 5)
	e := start(t, 2, "default")
	e.post("/v1/table/src/create", docs(0, 20), nil)
	for k := 1; k < 8; k++ { // 8 fragments of 20 rows
		if st := e.post("/v1/table/src/insert", docs(k*20, k*20+20), nil); st != 200 {
			t.Fatalf("insert: %d", st)
		}
	}
	const total = 160
	if st := e.post("/v1/table/src/add_columns", embeddingColumn("body", nil), nil); st != 200 {
		t.Fatalf("add_columns: %d", st)
	}
	var r map[string]any
	if st := e.post("/v1/table/src/backfill_column", `{"column": "vec", "task_size": 1000, "commit_granularity": 1}`, &r); st != 202 {
		t.Fatalf("backfill: %d %v", st, r)
	}
	id := r["job_id"].(string)
	opt, _ := redis.ParseURL(e.redisURL)
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	filled := func() int {
		var rows []map[string]any
		e.post("/v1/table/src/query", map[string]any{"filter": "vec IS NOT NULL", "columns": map[string]any{"column_names": []string{"id"}}}, &rows)
		return len(rows)
	}
	waitFor(t, 60*time.Second, "two committed fragments", func() bool { return filled() >= 40 })
	holder := ""
	waitFor(t, 10*time.Second, "the worker running the item", func() bool {
		// The item runs in its own task or in place, in the plan's.
		held, _ := rdb.HGetAll(ctx, jobs.RedisKey("job:"+id+":holders")).Result()
		for _, w := range []string{held["item:"+id+":0"], held["plan:"+id]} {
			if w != "" {
				holder = w
				return true
			}
		}
		return false
	})
	parts := strings.Split(holder, ":")
	pid, _ := strconv.Atoi(parts[len(parts)-2])
	victim := -1
	for i, w := range e.workers {
		if w.Process.Pid == pid {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("holder %q is no worker of the test", holder)
	}
	before := filled()
	if before >= total {
		t.Fatal("the backfill finished before the kill; the test proves nothing")
	}
	e.workers[victim].Process.Signal(syscall.SIGKILL)
	e.workers[victim].Wait()
	j := e.mustDone(id)
	if got := filled(); got != total {
		t.Fatalf("%d of %d rows filled after the resumed backfill", got, total)
	}
	res := j["result"].(map[string]any)
	if updated := num(res["rows_updated"]); updated <= 0 || updated > total-int64(before)+20 {
		t.Fatalf("the resumed item computed %d rows; %d were committed before the kill", updated, before)
	}
	t.Logf("killed after %d of %d rows were committed; the retry computed %v; %d texts embedded in all", before, total, res["rows_updated"], texts.Load())
}
