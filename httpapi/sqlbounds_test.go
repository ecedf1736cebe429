package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/table"
)

// memoryBomb builds one string of about 1 GB inside a filter: under
// DuckDB's default memory_limit (80% of RAM) three at once killed the API.
const memoryBomb = "(SELECT length(string_agg(repeat('x', 1000000), '')) FROM range(1000)) > 0"

type answer struct {
	status int
	ctype  string
	body   []byte
}

// postRaw posts a JSON body; safe from any goroutine.
func postRaw(url, body string) (answer, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), b}, err
}

// TestMemoryBombOverHTTP: three concurrent memory-bomb filters from one
// reader, under a small query memory budget, each get a 400 problem
// naming the filter and the share they ran out of; the API keeps serving.
func TestMemoryBombOverHTTP(t *testing.T) {
	t.Parallel()
	c := setupAdmission(t, duck.Options{Threads: 1, Sessions: 4, MemoryBudget: 2 * duck.MinSessionMemory}, 30*time.Second)
	c.post("/v1/namespace/A/create", map[string]any{})
	if st, b := c.do("POST", "/v1/table/A$t/create", "application/vnd.apache.arrow.stream", arrowBody(t, []int64{1, 2, 3}, []string{"a", "b", "c"})); st != 200 {
		t.Fatalf("create: %d %s", st, b)
	}
	body, _ := json.Marshal(map[string]string{"filter": memoryBomb})
	var wg sync.WaitGroup
	answers := make([]answer, 3)
	errs := make([]error, 3)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = postRaw(c.url+"/v1/table/A$t/query", string(body))
		}()
	}
	wg.Wait()
	for i, a := range answers {
		if errs[i] != nil {
			t.Fatalf("bomb %d: %v", i, errs[i])
		}
		var m map[string]any
		_ = json.Unmarshal(a.body, &m)
		d, _ := m["detail"].(string)
		if a.status != 400 || a.ctype != "application/json" || !strings.HasPrefix(d, "filter: out of memory") || !strings.Contains(d, "MVQ_QUERY_MEMORY") {
			t.Fatalf("bomb %d: %d %s %s, want a 400 problem naming the filter and MVQ_QUERY_MEMORY", i, a.status, a.ctype, a.body)
		}
	}
	if st, b := c.do("POST", "/v1/table/A$t/count_rows", "application/json", []byte(`{"predicate": "id > 1"}`)); st != 200 || string(b) != "2" {
		t.Fatalf("count after the bombs: %d %s", st, b)
	}
}

// setupPrincipals is setupAdmission with tokens authentication: alice may
// do anything, reader only read namespace A. The engine shares its
// sessions out by principal, as the API process does.
func setupPrincipals(t *testing.T, opts duck.Options, wait time.Duration) (*admission, map[string]string) {
	t.Helper()
	toks := map[string]string{"alice": strings.Repeat("a", 40), "reader": strings.Repeat("r", 40)}
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	writeTokens(t, file, "tokens:\n"+
		"  - token: "+toks["alice"]+"\n    principal: alice\n    grants: [{namespace: '*', actions: [read, write, admin]}]\n"+
		"  - token: "+toks["reader"]+"\n    principal: reader\n    grants: [{namespace: A, actions: [read]}]\n")
	a, err := auth.New(context.Background(), auth.Config{Mode: auth.ModeTokens, TokensFile: file})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	wh, err := table.OpenWarehouse(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	opts.ShareKey = auth.PrincipalFrom
	db, err := duck.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	cat := table.NewCatalog(wh, db, table.Options{Indexes: index.Maintenance()})
	api := httpapi.New(httpapi.Config{Auth: a, Middleware: []gin.HandlerFunc{httpapi.QueryQueueWait(wait)}}, cat, nil)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); db.Close(); wh.Close(); a.Close() })
	return &admission{client: &client{t: t, url: srv.URL, dir: dir}, db: db}, toks
}

// TestOneReaderCannotTakeEverySQLSession: one reader throws four
// CPU-bound filters at once. It gets its share of the SQL sessions (two
// of four); its other two are 503 at once, naming the share, and
// alice's query, count_rows, update and delete on the same namespace
// answer normally while the reader's run.
func TestOneReaderCannotTakeEverySQLSession(t *testing.T) {
	t.Parallel()
	c, toks := setupPrincipals(t, duck.Options{Threads: 1, Sessions: 4, QueryTimeout: time.Minute}, 500*time.Millisecond)
	bearer := func(who string) []string { return []string{"Authorization", "Bearer " + toks[who]} }
	if st, b := c.do("POST", "/v1/namespace/A/create", "application/json", []byte(`{}`), bearer("alice")...); st != 200 {
		t.Fatalf("namespace: %d %s", st, b)
	}
	if st, b := c.do("POST", "/v1/table/A$t/create", "application/vnd.apache.arrow.stream", arrowBody(t, []int64{1, 2, 3}, []string{"a", "b", "c"}), bearer("alice")...); st != 200 {
		t.Fatalf("create: %d %s", st, b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const burn = `{"filter": "(SELECT sum(hash(range)) FROM range(20000000000)) > 0"}`
	refused := make(chan answer, 4)
	for range 4 {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", c.url+"/v1/table/A$t/query", strings.NewReader(burn))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+toks["reader"])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return // cancelled at the end of the test
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			refused <- answer{resp.StatusCode, resp.Header.Get("Content-Type"), b}
		}()
	}
	for range 2 {
		select {
		case a := <-refused:
			if a.status != 503 || !strings.Contains(string(a.body), "share") {
				t.Fatalf("a reader's filter over its share: %d %s, want 503 naming the share", a.status, a.body)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the reader's filters over its share were not refused")
		}
	}
	auth := bearer("alice")
	start := time.Now()
	if st, b := c.do("POST", "/v1/table/A$t/count_rows", "application/json", []byte(`{"predicate": "id > 1"}`), auth...); st != 200 || string(b) != "2" {
		t.Fatalf("alice's count_rows: %d %s", st, b)
	}
	if st, b := c.do("POST", "/v1/table/A$t/query", "application/json", []byte(`{"filter": "id = 2"}`), auth...); st != 200 {
		t.Fatalf("alice's query: %d %s", st, b)
	}
	if st, b := c.do("POST", "/v1/table/A$t/update", "application/json", []byte(`{"updates": [["name", "'z'"]], "predicate": "id = 3"}`), auth...); st != 200 {
		t.Fatalf("alice's update: %d %s", st, b)
	}
	if st, b := c.do("POST", "/v1/table/A$t/delete", "application/json", []byte(`{"predicate": "id = 1"}`), auth...); st != 200 {
		t.Fatalf("alice's delete: %d %s", st, b)
	}
	t.Logf("alice's four SQL requests took %s while the reader held its share", time.Since(start).Round(time.Millisecond))
	select {
	case a := <-refused:
		t.Fatalf("a reader's filter within its share ended early: %d %s", a.status, a.body)
	default:
	}
}

// TestSystemCatalogsOverHTTP: the catalog views and current_setting, which
// leaked settings and paths through conversion errors, are a 400 naming
// the field before anything runs.
func TestSystemCatalogsOverHTTP(t *testing.T) {
	t.Parallel()
	c := setupAdmission(t, duck.Options{Threads: 1}, time.Second)
	c.post("/v1/namespace/A/create", map[string]any{})
	if st, b := c.do("POST", "/v1/table/A$t/create", "application/vnd.apache.arrow.stream", arrowBody(t, []int64{1, 2, 3}, []string{"a", "b", "c"})); st != 200 {
		t.Fatalf("create: %d %s", st, b)
	}
	for _, tc := range []struct{ path, field, expr string }{
		{"query", "filter", "(SELECT setting FROM pg_catalog.pg_settings WHERE name = 'temp_directory')::INT > 0"},
		{"query", "filter", "current_setting('memory_limit')::INT > 0"},
		{"query", "filter", "(SELECT count(*) FROM pg_proc) > 0"},
		{"count_rows", "predicate", "(SELECT path FROM duckdb_databases LIMIT 1)::INT > 0"},
		{"delete", "predicate", "(SELECT count(*) FROM information_schema.tables) > 0"},
		{"update", "updates[0] (name)", "current_setting('threads')"},
	} {
		body := map[string]any{tc.field: tc.expr}
		if tc.path == "update" {
			body = map[string]any{"predicate": "id > 0", "updates": [][]string{{"name", tc.expr}}}
		}
		st, m := c.post("/v1/table/A$t/"+tc.path, body)
		c.want(st, m, 400, tc.field+":")
		if d, _ := m["detail"].(string); !strings.Contains(d, "not allowed in user SQL") {
			t.Fatalf("%s %q: %s", tc.path, tc.expr, d)
		}
	}
}
