package service_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/jobs"
)

const (
	opsToken = "e2e-ops-admin-token-0123456789"
	devToken = "e2e-dev-token-0123456789"
)

// TestPoolPauseResume drives the operations page's API against a real API
// process and a worker serving the pools default and gpu, on a real Redis:
// a pause shows in GET /v1/admin/pools and in asynq's own view of the
// queue, a worker takes no task of a paused pool while it still serves the
// other, and a resume lets the waiting job run. Pause and resume are
// idempotent, even before asynq has seen a task of the pool; an unknown
// cluster is a 404 problem; a principal without admin on the catalog is
// refused with a 403.
func TestPoolPauseResume(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(file, []byte("tokens:\n"+
		"  - {token: "+opsToken+", principal: ops, grants: [{namespace: \"*\", actions: [read, write, refresh, admin]}]}\n"+
		"  - {token: "+devToken+", principal: dev, grants: [{namespace: \"*\", actions: [read, write, refresh]}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := startAPI(t, 1, "default,gpu", "MVQ_AUTH=tokens", "MVQ_AUTH_TOKENS_FILE="+file, "MVQ_CLUSTERS=default,gpu")
	e.token = opsToken
	opt, err := asynq.ParseRedisURI(e.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspector(opt)
	defer insp.Close()

	call := func(token, method, path string) (int, http.Header, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, e.api+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	pools := func() map[string]jobs.Pool {
		t.Helper()
		code, _, body := call(opsToken, http.MethodGet, "/v1/admin/pools")
		var list struct{ Pools []jobs.Pool }
		if err := json.Unmarshal(body, &list); code != http.StatusOK || err != nil {
			t.Fatalf("GET /v1/admin/pools: %d %s", code, body)
		}
		out := map[string]jobs.Pool{}
		for _, p := range list.Pools {
			out[p.Cluster] = p
		}
		return out
	}
	setPaused := func(cluster, verb string, want bool) {
		t.Helper()
		code, _, body := call(opsToken, http.MethodPost, "/v1/admin/pools/"+cluster+"/"+verb)
		var p jobs.Pool
		if err := json.Unmarshal(body, &p); code != http.StatusOK || err != nil || p.Cluster != cluster || p.Paused != want {
			t.Fatalf("POST %s %s: %d %s", cluster, verb, code, body)
		}
		if got := pools(); got[cluster].Paused != want || got["default"].Paused {
			t.Fatalf("after %s %s, GET says %+v", verb, cluster, got)
		}
	}
	// asynqPaused is asynq's own word on the queue (known once a task of
	// the pool was enqueued).
	asynqPaused := func(cluster string) bool {
		t.Helper()
		info, err := insp.GetQueueInfo(jobs.QueueName(cluster))
		if err != nil {
			t.Fatalf("asynq queue %s: %v", cluster, err)
		}
		return info.Paused
	}

	waitFor(t, 30*time.Second, "the gpu pool's worker", func() bool {
		p, ok := pools()["gpu"]
		return ok && len(p.Workers) == 1 && !p.Paused
	})
	// Paused before asynq has seen any task of the pool, twice.
	setPaused("gpu", "pause", true)
	setPaused("gpu", "pause", true)

	if st := e.post("/v1/namespace/docs/create", `{}`, nil); st != 200 {
		t.Fatalf("namespace create: %d", st)
	}
	if st := e.post("/v1/table/docs$articles/create", docs(0, 20), nil); st != 200 {
		t.Fatalf("create source: %d", st)
	}
	e.createChunkerView("docs$on_gpu", "docs$articles")
	e.createChunkerView("docs$on_default", "docs$articles")
	held := e.refresh("docs$on_gpu", map[string]any{"cluster": "gpu"})
	if !asynqPaused("gpu") {
		t.Fatal("asynq does not see the gpu queue paused")
	}
	// The same worker serves default meanwhile: a job there runs to its
	// end, so the worker polled its queues all along and left gpu's task.
	e.mustDone(e.refresh("docs$on_default", map[string]any{"cluster": "default"}))
	if j := e.job(held); j["state"] != "PENDING" {
		t.Fatalf("the job of the paused pool: %v", j)
	}
	if info, err := insp.GetQueueInfo(jobs.QueueName("gpu")); err != nil || info.Pending != 1 || info.Active != 0 {
		t.Fatalf("gpu queue while paused: %+v %v", info, err)
	}
	if p := pools()["gpu"]; p.Pending != 1 || !p.Paused {
		t.Fatalf("GET while paused: %+v", p)
	}

	// A principal without admin on the catalog neither reads nor pauses.
	for _, r := range [][2]string{{http.MethodGet, "/v1/admin/pools"}, {http.MethodPost, "/v1/admin/pools/gpu/resume"}} {
		code, h, body := call(devToken, r[0], r[1])
		var p httpapi.Problem
		if err := json.Unmarshal(body, &p); code != http.StatusForbidden || err != nil || p.Status != http.StatusForbidden ||
			!strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Fatalf("%s %s without admin: %d %s", r[0], r[1], code, body)
		}
	}
	if !asynqPaused("gpu") {
		t.Fatal("a refused resume resumed the pool")
	}

	setPaused("gpu", "resume", false)
	if asynqPaused("gpu") {
		t.Fatal("asynq still sees the gpu queue paused")
	}
	setPaused("gpu", "resume", false)
	e.mustDone(held)

	// An unknown cluster is a 404 problem naming it and the known ones.
	for _, verb := range []string{"pause", "resume"} {
		code, h, body := call(opsToken, http.MethodPost, "/v1/admin/pools/nope/"+verb)
		var p httpapi.Problem
		if err := json.Unmarshal(body, &p); code != http.StatusNotFound || err != nil || p.Status != http.StatusNotFound ||
			!strings.Contains(p.Detail, `"nope"`) || !strings.Contains(p.Detail, "default gpu") ||
			!strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Fatalf("%s of an unknown cluster: %d %s", verb, code, body)
		}
	}
}
