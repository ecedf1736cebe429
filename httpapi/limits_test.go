package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/internal/testenv"
	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// limitsServer is the API over a real warehouse and (with views) a real
// redis-server, its *httpapi.Server at hand.
type limitsServer struct {
	*client
	api       *httpapi.Server
	rdb       *redis.Client
	streamRdb *redis.Client
}

// setupLimits serves cfg; with views, the view layer on its own
// redis-server with an idle worker (jobs stay PENDING), job event streams
// on a pool of their own, and the given stream caps.
func setupLimits(t *testing.T, cfg httpapi.Config, views bool, maxStreams, maxPerPrincipal int, opts ...jobs.ClientOption) *limitsServer {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	wh, err := table.OpenWarehouse(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	db, err := duck.Open(duck.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	cat := table.NewCatalog(wh, db, table.Options{MaxRowsPerFragment: 1 << 20, Indexes: index.Maintenance()})
	ls := &limitsServer{client: &client{t: t, dir: dir}}
	var v httpapi.Views
	var cleanup []func()
	if views {
		r := testenv.StartRedis(t)
		ls.rdb = redis.NewClient(&redis.Options{Addr: r.Addr})
		ls.streamRdb = redis.NewClient(&redis.Options{Addr: r.Addr, PoolSize: 8})
		eng := refresh.NewEngine(cat)
		jc := jobs.NewClient(ls.rdb, asynq.RedisClientOpt{Addr: r.Addr}, eng, append(opts, jobs.EventsRedis(ls.streamRdb))...)
		hb := jobs.NewHeartbeater(ls.rdb, "idle-worker", []string{"default"}, jobs.HeartbeaterConfig{TTL: time.Hour}, nil)
		if err := hb.Start(ctx); err != nil {
			t.Fatal(err)
		}
		routes := &httpapi.ViewRoutes{Engine: eng, Jobs: jc, Catalog: cat, MaxStreams: maxStreams, MaxStreamsPerPrincipal: maxPerPrincipal}
		v = routes
		cleanup = append(cleanup, func() { _ = hb.Stop(ctx); jc.Close(); ls.rdb.Close(); ls.streamRdb.Close() })
	}
	ls.api = httpapi.New(cfg, cat, v)
	srv := httptest.NewServer(ls.api.Handler())
	ls.url = srv.URL
	t.Cleanup(func() {
		srv.Close()
		for _, f := range cleanup {
			f()
		}
		db.Close()
		wh.Close()
		if cfg.Auth != nil {
			cfg.Auth.Close()
		}
	})
	return ls
}

// problemOf decodes a problem body and checks its fields.
func problemOf(t *testing.T, st int, b []byte, want int, inDetail ...string) map[string]any {
	t.Helper()
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if st != want {
		t.Fatalf("status %d, want %d: %s", st, want, b)
	}
	d, _ := m["detail"].(string)
	for _, s := range inDetail {
		if !strings.Contains(d, s) {
			t.Fatalf("detail %q does not name %q", d, s)
		}
	}
	if m["type"] == nil || m["title"] == nil || m["status"] == nil {
		t.Fatalf("not a problem body: %s", b)
	}
	return m
}

// chunked is a body of n bytes without a declared length: the server
// learns its size only by reading it.
type chunked struct{ r io.Reader }

func (c chunked) Read(p []byte) (int, error) { return c.r.Read(p) }

// TestJSONRouteBodyLimit: a JSON control route takes at most the small
// JSON limit, the record routes the large one. The attack: a 200 MB query
// body was read whole, checked, decoded and copied (the API went from
// 0.29 to 1.45 GB); here a 16 MiB one, declared or not, is a 413 naming
// the limit, having cost the API a small fraction of its size.
func TestJSONRouteBodyLimit(t *testing.T) {
	// Not parallel: the allocation bound reads the process-wide counter.
	const jsonLimit = 64 << 10
	ls := setupLimits(t, httpapi.Config{MaxBodyBytes: 32 << 20, MaxJSONBodyBytes: jsonLimit}, false, 0, 0)
	c := ls.client
	if st, out := c.do("POST", "/v1/table/t/create", "application/json", []byte(`[{"id":1,"name":"a"}]`)); st != 200 {
		t.Fatalf("create: %d %s", st, out)
	}
	filter := `{"filter":"name = '` + strings.Repeat("x", 16<<20) + `'"}`
	for _, declared := range []bool{true, false} {
		var body io.Reader = strings.NewReader(filter)
		if !declared {
			body = chunked{body}
		}
		req, _ := http.NewRequest("POST", c.url+"/v1/table/t/query", body)
		req.Header.Set("Content-Type", "application/json")
		before := allocatedBytes()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		alloc := allocatedBytes() - before
		problemOf(t, resp.StatusCode, out, 413, fmt.Sprint(jsonLimit), "MVQ_MAX_JSON_BODY_BYTES")
		t.Logf("16 MiB query body (length declared: %v): 413, %d KiB allocated", declared, alloc>>10)
		if alloc > 8<<20 {
			t.Errorf("a refused 16 MiB body allocated %d MiB", alloc>>20)
		}
	}
	// A record body larger than the JSON limit is fine on a record route.
	ids := make([]int64, 20000)
	names := make([]string, len(ids))
	for i := range ids {
		ids[i], names[i] = int64(i), strings.Repeat("n", 8)
	}
	ipcBody := arrowBody(t, ids, names)
	if len(ipcBody) <= jsonLimit {
		t.Fatalf("IPC body of %d bytes is not over the JSON limit", len(ipcBody))
	}
	if st, out := c.do("POST", "/v1/table/t/insert", "application/vnd.apache.arrow.stream", ipcBody); st != 200 {
		t.Fatalf("insert of %d bytes: %d %s", len(ipcBody), st, out)
	}
	// JSON rows are a record body too (decoded as they arrive).
	rows := []byte(`[` + strings.Repeat(`{"id":1,"name":"abcdefgh"},`, 5000) + `{"id":2,"name":null}]`)
	if st, out := c.do("POST", "/v1/table/t/insert", "application/json", rows); st != 200 {
		t.Fatalf("insert of %d bytes of JSON rows: %d %s", len(rows), st, out)
	}
	// An Iceberg notification may carry a whole metadata.json inline: its
	// route takes the record routes' limit, not the control bodies'.
	note := []byte(`{"notification_type":"UPDATE","payload":{"table_name":"x","timestamp":1,"table_uuid":"u","metadata_location":"file:///nowhere/x.json","metadata":"` + strings.Repeat("m", 2*jsonLimit) + `"}}`)
	st, out := c.do("POST", "/api/catalog/v1/mvq/namespaces/n/tables/x/notifications", "application/json", note)
	t.Logf("notification of %d bytes: %d %s", len(note), st, out)
	if st == 413 || st == 404 || st >= 500 { // read whole, it reaches the decoder
		t.Fatalf("notification of %d bytes: %d %s, want it read whole", len(note), st, out)
	}
}

// TestTrickledBodyIsCut: a body that trickles in (one byte every 50 ms,
// unauthenticated) loses its connection at the body deadline instead of
// holding it indefinitely (the server had only a header timeout).
func TestTrickledBodyIsCut(t *testing.T) {
	t.Parallel()
	ls := setupLimits(t, httpapi.Config{BodyReadTimeout: 300 * time.Millisecond, BodyMinBytesPerSecond: 1024}, false, 0, 0)
	conn, err := net.Dial("tcp", strings.TrimPrefix(ls.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/table/t/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the trickled body still holds its connection after %s", time.Since(start))
		}
		t.Logf("connection closed after %s: %v", time.Since(start), err)
	} else {
		out, _ := io.ReadAll(resp.Body)
		problemOf(t, resp.StatusCode, out, 408, "MVQ_BODY_READ_TIMEOUT")
		t.Logf("408 after %s", time.Since(start))
	}
	// A body that arrives in time is not cut, whatever its pace.
	st, m := ls.post("/v1/namespace/n/create", `{}`)
	if st != 200 {
		t.Fatalf("namespace create: %d %v", st, m)
	}
}

// TestIdempotencyRecordsBounded: 4xx answers are not kept, and a
// principal keeps at most its cap of records (every keyed request was
// kept 24 h, refused ones included).
func TestIdempotencyRecordsBounded(t *testing.T) {
	t.Parallel()
	ls := setupLimits(t, httpapi.Config{}, true, 0, 0, jobs.IdempotencyMaxKeys(5))
	ctx := context.Background()
	records := func() int {
		keys, err := ls.rdb.Keys(ctx, jobs.RedisKey("idem:*")).Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	for i := range 20 {
		st, b, _ := ls.postH("/v1/table/nosuch$t/create", `[{"id":1}]`, "Idempotency-Key", fmt.Sprintf("bad-%d", i))
		if st != 404 {
			t.Fatalf("create in a missing namespace: %d %s", st, b)
		}
	}
	if n := records(); n != 0 {
		t.Fatalf("%d records kept for 20 refused requests", n)
	}
	for i := range 20 {
		st, b, _ := ls.postH(fmt.Sprintf("/v1/table/t%d/create", i), `[{"id":1}]`, "Idempotency-Key", fmt.Sprintf("ok-%d", i))
		if st != 200 {
			t.Fatalf("create: %d %s", st, b)
		}
	}
	if n := records(); n != 5 {
		t.Fatalf("%d records kept for 20 requests, want the cap of 5", n)
	}
	// The newest keys still replay.
	st, _, h := ls.postH("/v1/table/t19/create", `[{"id":1}]`, "Idempotency-Key", "ok-19")
	if st != 200 || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("newest key: %d replayed=%q", st, h.Get("Idempotent-Replayed"))
	}
}

// TestEventStreamCaps: job event streams are capped per principal and in
// all (429 with Retry-After beyond), and they read Redis through their own
// pool (300 streams from one reader had stalled other tenants' job reads
// and refreshes on the shared one).
func TestEventStreamCaps(t *testing.T) {
	t.Parallel()
	ls := setupLimits(t, httpapi.Config{Auth: jwtAuth(t)}, true, 5, 3)
	root := bearer(mint(t, jwtSecret, "root", time.Hour, grant("*", auth.Read, auth.Write, auth.Refresh, auth.Admin)))
	for _, step := range []struct {
		path string
		body any
	}{
		{"/v1/namespace/docs/create", `{}`},
		{"/v1/table/docs$src/create", `[{"id": 1, "body": "a b c d e f g"}]`},
	} {
		if st, m := ls.post(step.path, step.body, root...); st != 200 {
			t.Fatalf("%s: %d %v", step.path, st, m)
		}
	}
	if st, m := ls.post("/v1/materialized_view/docs$v/create", chunkerView(), root...); st != 201 {
		t.Fatalf("view: %d %v", st, m)
	}
	st, m := ls.post("/v1/materialized_view/docs$v/refresh", `{}`, root...)
	if st != 202 {
		t.Fatalf("refresh: %d %v", st, m)
	}
	job, _ := m["job_id"].(string)
	tok := func(sub string) []string { return bearer(mint(t, jwtSecret, sub, time.Hour, grant("docs", auth.Read))) }
	var open []*http.Response
	defer func() {
		for _, r := range open {
			r.Body.Close()
		}
	}()
	follow := func(sub string) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", ls.url+"/v1/job/"+job+"/events", nil)
		h := tok(sub)
		req.Header.Set(h[0], h[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == 200 {
			open = append(open, resp)
			return resp, nil
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b
	}
	for range 3 {
		if r, b := follow("alice"); r.StatusCode != 200 {
			t.Fatalf("alice's stream: %d %s", r.StatusCode, b)
		}
	}
	r, b := follow("alice")
	problemOf(t, r.StatusCode, b, 429, "alice", "MVQ_MAX_EVENT_STREAMS_PER_PRINCIPAL")
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	for range 2 {
		if r, b := follow("bob"); r.StatusCode != 200 {
			t.Fatalf("bob's stream: %d %s", r.StatusCode, b)
		}
	}
	r, b = follow("carol")
	problemOf(t, r.StatusCode, b, 429, "MVQ_MAX_EVENT_STREAMS")
	// The streams block on their own pool, not on the one job reads use.
	deadline := time.Now().Add(10 * time.Second)
	for ls.streamRdb.PoolStats().TotalConns == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no stream read went through the streams' pool")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st, _ := ls.do("GET", "/v1/job/"+job, "", nil, tok("carol")...); st != 200 {
		t.Fatalf("carol's job read while the streams are full: %d", st)
	}
	// A closed stream gives its slot back.
	open[0].Body.Close()
	open = open[1:]
	for {
		r, b := follow("alice")
		if r.StatusCode == 200 {
			break
		}
		if r.StatusCode != 429 || time.Now().After(deadline) {
			t.Fatalf("alice after closing a stream: %d %s", r.StatusCode, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSpoolBudget: spooled results share a memory budget, with a share per
// principal; past it they spill to their temporary files, and every
// client still gets its whole result (240 slow readers of a 12 MB result
// had taken the API to 3 GB, 64 MiB each allowed).
func TestSpoolBudget(t *testing.T) {
	t.Parallel()
	const budget, share = 1 << 20, 256 << 10
	ls := setupLimits(t, httpapi.Config{SpoolBudgetBytes: budget, SpoolPrincipalBytes: share}, false, 0, 0)
	ids := make([]int64, 40000)
	names := make([]string, len(ids))
	for i := range ids {
		ids[i], names[i] = int64(i), strings.Repeat("s", 40)
	}
	if st, out := ls.do("POST", "/v1/table/t/create", "application/vnd.apache.arrow.stream", arrowBody(t, ids, names)); st != 200 {
		t.Fatalf("create: %d %s", st, out)
	}
	const readers = 8
	var wg sync.WaitGroup
	resps := make([]*http.Response, readers)
	errs := make([]error, readers)
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", ls.url+"/v1/table/t/query", strings.NewReader(`{"filter":"id >= 0","limit":1000000}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/vnd.apache.arrow.stream")
			resps[i], errs[i] = http.DefaultClient.Do(req) // headers only: a slow reader
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
		if resps[i].StatusCode != 200 {
			b, _ := io.ReadAll(resps[i].Body)
			t.Fatalf("query %d: %d %s", i, resps[i].StatusCode, b)
		}
	}
	peak := ls.api.SpoolMemoryPeak()
	t.Logf("%d slow readers of a %d-row result: spool memory peak %d KiB (share %d KiB, budget %d KiB)", readers, len(ids), peak>>10, share>>10, budget>>10)
	if peak > share {
		t.Errorf("spool memory peaked at %d bytes, over the principal's share of %d", peak, share)
	}
	var size int
	for _, r := range resps {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		rows := ipcRows(t, b)
		if rows != len(ids) {
			t.Fatalf("a spilled result has %d rows, want %d", rows, len(ids))
		}
		size = len(b)
	}
	if readers*size <= share {
		t.Fatalf("results of %d bytes do not exceed the share: the test proves nothing", size)
	}
	deadline := time.Now().Add(10 * time.Second)
	for ls.api.SpoolMemoryInUse() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of spool memory still held after every result was read", ls.api.SpoolMemoryInUse())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ipcRows counts the rows of an Arrow IPC stream.
func ipcRows(t *testing.T, b []byte) int {
	t.Helper()
	r, err := ipc.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	n := 0
	for r.Next() {
		n += int(r.RecordBatch().NumRows())
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}
