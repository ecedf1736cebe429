package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/internal/testenv"
	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// setupViews serves the API with the view layer on a real redis-server
// (its own), with a worker registered for "default" that processes
// nothing, so submitted jobs stay PENDING.
func setupViews(t *testing.T, maxPending int) (*client, *redis.Client) {
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
	cat := table.NewCatalog(wh, db, table.Options{Indexes: index.Maintenance()})
	r := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	eng := refresh.NewEngine(cat)
	jc := jobs.NewClient(rdb, asynq.RedisClientOpt{Addr: r.Addr}, eng, jobs.MaxPendingJobs(maxPending))
	hb := jobs.NewHeartbeater(rdb, "idle-worker", []string{"default"}, jobs.HeartbeaterConfig{TTL: time.Hour}, nil)
	if err := hb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Config{}, cat, &httpapi.ViewRoutes{Engine: eng, Jobs: jc, Catalog: cat}).Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = hb.Stop(ctx)
		jc.Close()
		rdb.Close()
		db.Close()
		wh.Close()
	})
	return &client{t: t, url: srv.URL, dir: dir}, rdb
}

const chunkSpec = `{"chunker": "fixed", "input_column": "body", "output_column": "chunk", "chunk_size": 5, "chunk_overlap": 1, "unit": "words"}`

func chunkerView() map[string]any {
	sum := sha256.Sum256([]byte(chunkSpec))
	return map[string]any{
		"kind": "chunker", "source_query": `SELECT id, body FROM "docs$src"`, "output_schema": "",
		"udtf_spec": map[string]any{"kind": "chunker", "udtf": base64.StdEncoding.EncodeToString([]byte(chunkSpec)),
			"udtf_sha": hex.EncodeToString(sum[:]), "udtf_name": "fixed", "udtf_version": "1"},
		"with_no_data": true,
	}
}

func (c *client) source() {
	c.t.Helper()
	c.expect(200, "/v1/namespace/docs/create", `{}`)
	c.expect(200, "/v1/table/docs$src/create", `[{"id": 1, "body": "a b c d e f g"}, {"id": 2, "body": "h i"}]`)
}

func (c *client) expect(want int, path string, body any) map[string]any {
	c.t.Helper()
	st, m := c.post(path, body)
	if st != want {
		c.t.Fatalf("status %d, want %d: %v", st, want, m)
	}
	return m
}

// postH posts JSON and returns the status, body and headers.
func (c *client) postH(path, body string, hdr ...string) (int, string, http.Header) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestIdempotentTableCreate(t *testing.T) {
	c, _ := setupViews(t, 0)
	c.expect(200, "/v1/namespace/docs/create", `{}`)
	body := `[{"id": 1, "body": "x"}]`
	st1, b1, _ := c.postH("/v1/table/docs$t/create", body, "Idempotency-Key", "k-1")
	st2, b2, h2 := c.postH("/v1/table/docs$t/create", body, "Idempotency-Key", "k-1")
	if st1 != 200 || st2 != 200 || b1 != b2 || h2.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("first %d %s, replay %d %s %v", st1, b1, st2, b2, h2)
	}
	// Without the key the same request really runs again: the table exists.
	if st, b, _ := c.postH("/v1/table/docs$t/create", body); st != 409 {
		t.Fatalf("create without key: %d %s", st, b)
	}
	// The same key for another request: 422.
	if st, b, _ := c.postH("/v1/table/docs$t/create", `[{"id": 2, "body": "y"}]`, "Idempotency-Key", "k-1"); st != 422 || !strings.Contains(b, "different request") {
		t.Fatalf("reused key: %d %s", st, b)
	}
	if st, b, _ := c.postH("/v1/table/docs$t/create?mode=overwrite", body, "Idempotency-Key", "k-1"); st != 422 {
		t.Fatalf("reused key, other query: %d %s", st, b)
	}
	for _, bad := range [][]string{{"Idempotency-Key", strings.Repeat("k", 256)}, {"Idempotency-Key", ""}, {"Idempotency-Key", "a", "Idempotency-Key", "b"}} {
		if st, b, _ := c.postH("/v1/table/docs$u/create", body, bad...); st != 400 || !strings.Contains(b, "Idempotency-Key") {
			t.Fatalf("bad key %q: %d %s", bad, st, b)
		}
	}
	// A 4xx answer is not stored (it changed nothing): the retry runs
	// again and is refused again.
	st3, b3, _ := c.postH("/v1/table/nosuch$t/create", body, "Idempotency-Key", "k-2")
	st4, b4, h4 := c.postH("/v1/table/nosuch$t/create", body, "Idempotency-Key", "k-2")
	if st3 != 404 || st4 != 404 || b3 != b4 || h4.Get("Idempotent-Replayed") != "" || h4.Get("Content-Type") != "application/json" {
		t.Fatalf("404 with a key: %d %s / %d %s", st3, b3, st4, b4)
	}
}

// TestIdempotencyKeyWithoutRedis: with no view layer there is no store,
// and the header is refused rather than ignored.
func TestIdempotencyKeyWithoutRedis(t *testing.T) {
	c := setup(t, httpapi.Config{})
	c.expect(200, "/v1/namespace/docs/create", `{}`)
	if st, b, _ := c.postH("/v1/table/docs$t/create", `[{"id": 1}]`, "Idempotency-Key", "k"); st != 400 || !strings.Contains(b, "Idempotency-Key") {
		t.Fatalf("%d %s", st, b)
	}
	if st, b, _ := c.postH("/v1/table/docs$t/create", `[{"id": 1}]`); st != 200 {
		t.Fatalf("%d %s", st, b)
	}
}

// TestRefreshIdempotencyAndBacklog: a repeated refresh with a key returns
// the first job; at MaxPendingJobs a refresh and a view create (with data)
// are 503 with Retry-After, record nothing, and a refused key runs when
// retried after the backlog frees. Every accepted job id is in jobs/list,
// and nothing else.
func TestRefreshIdempotencyAndBacklog(t *testing.T) {
	c, rdb := setupViews(t, 2)
	c.source()
	c.expect(201, "/v1/materialized_view/docs$v/create", chunkerView())
	// Each key gets its own options: identical ones would join the
	// PENDING job (coalescing), which the backlog does not refuse.
	refreshWith := func(key, body string) (int, map[string]any, http.Header) {
		var hdr []string
		if key != "" {
			hdr = []string{"Idempotency-Key", key}
		}
		st, b, h := c.postH("/v1/materialized_view/docs$v/refresh", body, hdr...)
		var m map[string]any
		_ = json.Unmarshal([]byte(b), &m)
		return st, m, h
	}
	refresh := func(key string) (int, map[string]any, http.Header) { return refreshWith(key, `{}`) }
	st, a1, _ := refresh("A")
	st2, a2, h2 := refresh("A")
	if st != 202 || st2 != 202 || a1["job_id"] != a2["job_id"] || h2.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("refresh A: %d %v, again %d %v", st, a1, st2, a2)
	}
	st, b1, _ := refreshWith("", `{"concurrency":2}`)
	if st != 202 {
		t.Fatalf("second job %d %v", st, b1)
	}
	accepted := []any{a1["job_id"], b1["job_id"]}
	// Full: 503 with Retry-After, for a plain refresh, a keyed one and a
	// view create with its initial refresh.
	for _, key := range []string{"", "B"} {
		st, m, h := refreshWith(key, `{"concurrency":3}`)
		if st != 503 || h.Get("Retry-After") != "5" {
			t.Fatalf("refresh over the backlog (key %q): %d %v %v", key, st, m, h)
		}
	}
	// A request identical to a PENDING job joins it, full backlog or not.
	if st, m, _ := c.postH("/v1/materialized_view/docs$v/refresh", `{"concurrency":2}`); st != 202 || m == "" {
		t.Fatalf("identical refresh over the backlog: %d %s", st, m)
	} else if !strings.Contains(m, `"coalesced":true`) || !strings.Contains(m, b1["job_id"].(string)) {
		t.Fatalf("identical refresh over the backlog did not join job %v: %s", b1["job_id"], m)
	}
	vc := chunkerView()
	vc["with_no_data"] = false
	b, _ := json.Marshal(vc)
	if st, body, h := c.postH("/v1/materialized_view/docs$w/create", string(b)); st != 503 || h.Get("Retry-After") != "5" {
		t.Fatalf("view create over the backlog: %d %s", st, body)
	}
	if st, m := c.post("/v1/table/docs$w/exists", `{}`); st != 404 {
		t.Fatalf("a refused view create left the view: %d %v", st, m)
	}
	// Free one slot; key B, refused before, now runs.
	c.expect(200, "/v1/jobs/cancel", map[string]any{"job_id": a1["job_id"]})
	st, bB, _ := refreshWith("B", `{"concurrency":3}`)
	if st != 202 {
		t.Fatalf("refresh B after the backlog freed: %d %v", st, bB)
	}
	accepted = append(accepted, bB["job_id"])
	_, list := c.post("/v1/jobs/list", map[string]any{})
	var got []any
	for _, j := range list["jobs"].([]any) {
		got = append(got, j.(map[string]any)["job_id"])
	}
	if len(got) != 3 {
		t.Fatalf("jobs recorded %v, accepted %v", got, accepted)
	}
	for _, id := range accepted {
		found := false
		for _, g := range got {
			found = found || g == id
		}
		if !found {
			t.Fatalf("accepted job %v missing from %v", id, got)
		}
	}
	if n, _ := rdb.ZCard(context.Background(), jobs.RedisKey("cluster:default:unfinished")).Result(); n != 2 {
		t.Fatalf("backlog %d, want 2", n)
	}
}

// TestDropCancelsViewJobs: dropping a view (table drop) and cascading a
// namespace drop cancel the views' queued jobs.
func TestDropCancelsViewJobs(t *testing.T) {
	c, rdb := setupViews(t, 0)
	c.source()
	c.expect(201, "/v1/materialized_view/docs$v/create", chunkerView())
	j1 := c.expect(202, "/v1/materialized_view/docs$v/refresh", `{}`)["job_id"].(string)
	j2 := c.expect(202, "/v1/materialized_view/docs$v/refresh", `{}`)["job_id"].(string)
	c.expect(200, "/v1/table/docs$v/drop", `{}`)
	for _, id := range []string{j1, j2} {
		st, m := c.getJSON("/v1/job/" + id)
		if st != 200 || m["state"] != "CANCELLED" {
			t.Fatalf("job %s after drop: %d %v", id, st, m)
		}
	}
	if n, _ := rdb.Exists(context.Background(), jobs.RedisKey("view:docs/v:queue")).Result(); n != 0 {
		t.Fatal("the dropped view's FIFO remains")
	}
	c.expect(200, "/v1/namespace/docs$sub/create", `{}`)
	vc := chunkerView()
	c.expect(201, "/v1/materialized_view/docs$sub$v/create", vc)
	j3 := c.expect(202, "/v1/materialized_view/docs$sub$v/refresh", `{}`)["job_id"].(string)
	c.expect(200, "/v1/namespace/docs/drop", `{"behavior": "cascade"}`)
	if st, m := c.getJSON("/v1/job/" + j3); st != 200 || m["state"] != "CANCELLED" {
		t.Fatalf("job after the namespace drop: %d %v", st, m)
	}
}

func (c *client) getJSON(path string) (int, map[string]any) {
	c.t.Helper()
	st, b := c.do(http.MethodGet, path, "", nil)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return st, m
}
