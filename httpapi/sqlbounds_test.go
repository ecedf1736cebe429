package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/duck"
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
