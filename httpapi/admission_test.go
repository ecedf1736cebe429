package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/table"
)

type admission struct {
	*client
	db *duck.DB
}

// setupAdmission serves the API the way service.Serve does: write
// deadlines per write, a bounded queue wait, WriteTimeout on the server.
func setupAdmission(t *testing.T, opts duck.Options, wait time.Duration) *admission {
	t.Helper()
	dir := t.TempDir()
	wh, err := table.OpenWarehouse(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	db, err := duck.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	cat := table.NewCatalog(wh, db, table.Options{Indexes: index.Maintenance()})
	api := httpapi.New(httpapi.Config{Middleware: []gin.HandlerFunc{httpapi.WriteDeadlines(20 * time.Second), httpapi.QueryQueueWait(wait)}}, cat, nil)
	srv := httptest.NewUnstartedServer(api.Handler())
	srv.Config.WriteTimeout = 20 * time.Second
	srv.Config.ReadHeaderTimeout = 10 * time.Second
	srv.Start()
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); db.Close(); wh.Close() })
	return &admission{client: &client{t: t, url: srv.URL, dir: dir}, db: db}
}

// bigBody is an Arrow stream of n rows (id, 100-byte text).
func bigBody(t *testing.T, n int) []byte {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	pad := strings.Repeat("x", 92)
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("%08d", i) + pad)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return buf.Bytes()
}

// TestSlowReadersDoNotBlockSQL: four clients reading a filtered query's
// 20 MB result at about 4 KB/s hold every session the engine has, were
// sessions held while clients read; filter, count, delete and update on
// another table still answer promptly.
func TestSlowReadersDoNotBlockSQL(t *testing.T) {
	t.Parallel()
	c := setupAdmission(t, duck.Options{Threads: 1, Sessions: 4}, 2*time.Second)
	c.post("/v1/namespace/docs/create", map[string]any{})
	if st, b := c.do("POST", "/v1/table/docs$big/create", "application/vnd.apache.arrow.stream", bigBody(t, 200_000)); st != 200 {
		t.Fatalf("create big: %d %s", st, b)
	}
	if st, b := c.do("POST", "/v1/table/docs$small/create", "application/vnd.apache.arrow.stream", arrowBody(t, []int64{1, 2, 3, 4}, []string{"a", "b", "c", "d"})); st != 200 {
		t.Fatalf("create small: %d %s", st, b)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{}, 4)
	var wg sync.WaitGroup
	var mu sync.Mutex
	read := make([]int, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "POST", c.url+"/v1/table/docs$big/query", strings.NewReader(`{"filter": "id >= 0"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/vnd.apache.arrow.stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("slow reader %d: %v", i, err)
				started <- struct{}{}
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("slow reader %d: status %d", i, resp.StatusCode)
			}
			started <- struct{}{}
			buf := make([]byte, 1024)
			for ctx.Err() == nil {
				n, err := resp.Body.Read(buf)
				mu.Lock()
				read[i] += n
				mu.Unlock()
				if err != nil {
					return
				}
				select { // a slow client: about 4 KB/s
				case <-ctx.Done():
				case <-time.After(250 * time.Millisecond):
				}
			}
		}()
	}
	for i := 0; i < 4; i++ {
		select {
		case <-started:
		case <-time.After(120 * time.Second):
			t.Fatal("slow readers did not get their headers")
		}
	}

	timed := func(name string, f func()) time.Duration {
		start := time.Now()
		f()
		d := time.Since(start)
		t.Logf("%s with 4 slow readers: %s", name, d.Round(time.Millisecond))
		if d > 15*time.Second {
			t.Errorf("%s took %s", name, d)
		}
		return d
	}
	timed("query with filter", func() {
		st, b := c.do("POST", "/v1/table/docs$small/query", "application/json", []byte(`{"filter": "id > 2"}`), "Accept", "application/json")
		if st != 200 || !strings.Contains(string(b), `"id":3`) || !strings.Contains(string(b), `"id":4`) || strings.Contains(string(b), `"id":1`) {
			t.Fatalf("query: %d %s", st, b)
		}
	})
	timed("count_rows with predicate", func() {
		st, b := c.do("POST", "/v1/table/docs$small/count_rows", "application/json", []byte(`{"predicate": "id > 1"}`))
		if st != 200 || string(b) != "3" {
			t.Fatalf("count: %d %s", st, b)
		}
	})
	timed("update", func() {
		st, m := c.post("/v1/table/docs$small/update", map[string]any{"predicate": "id = 2", "updates": [][]string{{"name", "'B'"}}})
		c.want(st, m, 200, "")
	})
	timed("delete", func() {
		st, m := c.post("/v1/table/docs$small/delete", map[string]any{"predicate": "id = 1"})
		c.want(st, m, 200, "")
	})
	st, b := c.do("POST", "/v1/table/docs$small/count_rows", "application/json", []byte(`{}`))
	if st != 200 || string(b) != "3" {
		t.Fatalf("count after delete: %d %s", st, b)
	}
	mu.Lock()
	for i, n := range read {
		if n >= 20_000_000 {
			t.Errorf("reader %d already read everything (%d bytes): the test proves nothing", i, n)
		}
	}
	t.Logf("slow readers had read %v bytes", read)
	mu.Unlock()
	cancel()
	wg.Wait()
}

// TestBusyIs503AndReadyzSaturated: with every session held, a query waits
// the queue wait and gets 503 "Slow down" with Retry-After; /readyz says
// saturated; once the session is free both recover.
func TestBusyIs503AndReadyzSaturated(t *testing.T) {
	t.Parallel()
	c := setupAdmission(t, duck.Options{Threads: 1, Sessions: 1}, 100*time.Millisecond)
	c.post("/v1/namespace/docs/create", map[string]any{})
	if st, b := c.do("POST", "/v1/table/docs$small/create", "application/vnd.apache.arrow.stream", arrowBody(t, []int64{1, 2, 3}, []string{"a", "b", "c"})); st != 200 {
		t.Fatalf("create: %d %s", st, b)
	}
	held, err := c.db.Query(context.Background(), nil, "SELECT 1")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/table/docs$small/query", "/v1/table/docs$small/count_rows", "/v1/table/docs$small/delete"} {
		body := `{"filter": "id > 1"}`
		if !strings.HasSuffix(path, "query") {
			body = `{"predicate": "id > 1"}`
		}
		req, _ := http.NewRequest("POST", c.url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var p map[string]any
		_ = json.Unmarshal(b, &p)
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || resp.Header.Get("Content-Type") != "application/json" ||
			p["title"] != "Slow down" || !strings.Contains(fmt.Sprint(p["detail"]), "busy") {
			t.Fatalf("%s: %d Retry-After=%q %s", path, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
	}
	resp, err := http.Get(c.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(rb), "saturated") || !strings.Contains(string(rb), "busy") {
		t.Fatalf("readyz while saturated: %d %s", resp.StatusCode, rb)
	}
	held.Release()
	st, b := c.do("GET", "/readyz", "", nil)
	if st != 200 {
		t.Fatalf("readyz after release: %d %s", st, b)
	}
	st, b = c.do("POST", "/v1/table/docs$small/count_rows", "application/json", []byte(`{"predicate": "id > 1"}`))
	if st != 200 || string(b) != "2" {
		t.Fatalf("count after release: %d %s", st, b)
	}
}

// TestQueryTimeoutOverHTTP: a filter that runs past MVQ_QUERY_TIMEOUT is
// interrupted and answered 503 naming the setting; the engine serves the
// next query.
func TestQueryTimeoutOverHTTP(t *testing.T) {
	t.Parallel()
	c := setupAdmission(t, duck.Options{Threads: 1, QueryTimeout: 500 * time.Millisecond}, time.Second)
	c.post("/v1/namespace/docs/create", map[string]any{})
	if st, b := c.do("POST", "/v1/table/docs$small/create", "application/vnd.apache.arrow.stream", arrowBody(t, []int64{1, 2, 3}, []string{"a", "b", "c"})); st != 200 {
		t.Fatalf("create: %d %s", st, b)
	}
	start := time.Now()
	req, _ := http.NewRequest("POST", c.url+"/v1/table/docs$small/query",
		strings.NewReader(`{"filter": "id IN (SELECT a.range FROM range(100000000) a, range(100000) b WHERE a.range * b.range = -1)"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), "MVQ_QUERY_TIMEOUT") {
		t.Fatalf("slow filter: %d %s", resp.StatusCode, b)
	}
	t.Logf("interrupted after %s", time.Since(start).Round(time.Millisecond))
	st, out := c.do("POST", "/v1/table/docs$small/count_rows", "application/json", []byte(`{"predicate": "id > 1"}`))
	if st != 200 || string(out) != "2" {
		t.Fatalf("count after timeout: %d %s", st, out)
	}
}

// TestSmugglingOverHTTP: statement smuggling in a filter, predicate or
// update expression is a 400 naming the field.
func TestSmugglingOverHTTP(t *testing.T) {
	t.Parallel()
	c := setupAdmission(t, duck.Options{Threads: 1}, time.Second)
	c.post("/v1/namespace/docs/create", map[string]any{})
	if st, b := c.do("POST", "/v1/table/docs$small/create", "application/vnd.apache.arrow.stream", arrowBody(t, []int64{1, 2, 3}, []string{"a", "b", "c"})); st != 200 {
		t.Fatalf("create: %d %s", st, b)
	}
	for _, tc := range []struct{ path, field, expr string }{
		{"query", "filter", "id > 0 --x\r) OR (true"},
		{"query", "filter", "id > 0) ; CREATE MACRO lower(x) AS 'pwned' ; SELECT (1"},
		{"query", "filter", "(SELECT count(*) FROM query('SELECT 1')) > 0"},
		{"count_rows", "predicate", "getvariable('x') IS NULL"},
		{"delete", "predicate", "id IN (SELECT * FROM query_table('docs$small'))"},
		{"delete", "predicate", "1 FROM t"},
		{"update", "updates[0] (name)", "name, id"},
	} {
		body := map[string]any{tc.field: tc.expr}
		if tc.path == "update" {
			body = map[string]any{"updates": [][]string{{"name", tc.expr}}}
		}
		st, m := c.post("/v1/table/docs$small/"+tc.path, body)
		c.want(st, m, 400, tc.field+":")
	}
	st, b := c.do("POST", "/v1/table/docs$small/count_rows", "application/json", []byte(`{"predicate": "lower(name) = 'a'"}`))
	if st != 200 || string(b) != "1" {
		t.Fatalf("count: %d %s", st, b)
	}
}
