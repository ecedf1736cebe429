package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/jobs"
)

// fakePools is a PoolAdmin over a fixed set of pools; like asynq, it
// refuses to set the state a pool already has.
type fakePools struct {
	pools []jobs.Pool
	calls []string
}

func (f *fakePools) Pools(context.Context) ([]jobs.Pool, error) {
	return append([]jobs.Pool(nil), f.pools...), nil
}

func (f *fakePools) SetPaused(_ context.Context, cluster string, paused bool) error {
	for i := range f.pools {
		if f.pools[i].Cluster == cluster {
			if f.pools[i].Paused == paused {
				return errors.New("already in that state")
			}
			f.pools[i].Paused = paused
			f.calls = append(f.calls, cluster+" "+map[bool]string{true: "pause", false: "resume"}[paused])
			return nil
		}
	}
	return errors.New("no such queue")
}

// TestPoolRoutes: the pools are listed and paused or resumed with admin on
// the whole catalog; a pause of a paused pool answers it unchanged, an
// unknown cluster is not found, and a namespace admin is refused.
func TestPoolRoutes(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(tokens, []byte(`tokens:
  - token: root-admin-token-0001
    principal: ops
    grants:
      - namespace: "*"
        actions: [read, write, refresh, admin]
  - token: web-admin-token-0001
    principal: web
    grants:
      - namespace: "web"
        actions: [read, write, refresh, admin]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(context.Background(), auth.Config{Mode: auth.ModeTokens, TokensFile: tokens})
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakePools{pools: []jobs.Pool{
		{Cluster: "default", Queue: jobs.QueueName("default"), Pending: 3, LiveWorkers: 1,
			Workers: []jobs.PoolWorker{{Host: "w1", PID: 7, Concurrency: 8, Busy: 2, Status: "active"}}},
		{Cluster: "gpu", Queue: jobs.QueueName("gpu"), Workers: []jobs.PoolWorker{}},
	}}
	h := New(Config{Auth: a}, nil, &ViewRoutes{Pools: fake}).Handler()
	do := func(tok, method, path string) (int, string) {
		t.Helper()
		req := httptest.NewRequest(method, path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}

	code, body := do("root-admin-token-0001", http.MethodGet, "/v1/admin/pools")
	var list struct{ Pools []jobs.Pool }
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil || len(list.Pools) != 2 ||
		list.Pools[0].Pending != 3 || list.Pools[0].Workers[0].Concurrency != 8 || list.Pools[0].Workers[0].Busy != 2 {
		t.Fatalf("list: %d %s", code, body)
	}
	for _, c := range []struct {
		path   string
		status int
		paused bool
		calls  string
	}{
		{"/v1/admin/pools/gpu/pause", 200, true, "gpu pause"},
		{"/v1/admin/pools/gpu/pause", 200, true, "gpu pause"}, // already paused: no second call
		{"/v1/admin/pools/gpu/resume", 200, false, "gpu pause,gpu resume"},
		{"/v1/admin/pools/gpu/resume", 200, false, "gpu pause,gpu resume"},
		{"/v1/admin/pools/nope/pause", 404, false, "gpu pause,gpu resume"},
	} {
		code, body := do("root-admin-token-0001", http.MethodPost, c.path)
		var p jobs.Pool
		_ = json.Unmarshal([]byte(body), &p)
		if code != c.status || (code == 200 && (p.Cluster != "gpu" || p.Paused != c.paused)) || strings.Join(fake.calls, ",") != c.calls {
			t.Fatalf("POST %s: %d %s (calls %v)", c.path, code, body, fake.calls)
		}
		if code == 404 && !strings.Contains(body, `known: [default gpu]`) {
			t.Fatalf("POST %s: %s", c.path, body)
		}
	}
	// A namespace's admin does not see or pause the pools.
	for _, r := range [][2]string{{http.MethodGet, "/v1/admin/pools"}, {http.MethodPost, "/v1/admin/pools/gpu/pause"}} {
		if code, body := do("web-admin-token-0001", r[0], r[1]); code != http.StatusForbidden {
			t.Fatalf("%s %s as a namespace admin: %d %s", r[0], r[1], code, body)
		}
	}
	if code, _ := do("", http.MethodGet, "/v1/admin/pools"); code != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", code)
	}
	// Without a pool reader (no view layer's ClusterStats) there is no route.
	h2 := New(Config{}, nil, &ViewRoutes{}).Handler()
	w := httptest.NewRecorder()
	h2.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/admin/pools", nil))
	if w.Code != http.StatusNotFound {
		t.Fatalf("without Pools: %d", w.Code)
	}
}
