package service_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/internal/testenv"
)

func getJSON(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

// TestWorkerHealthFollowsRedis: a worker's /healthz and /readyz are 200
// while Redis answers; once Redis is gone /readyz fails at the next probe
// and /healthz fails after MVQ_HEALTH_TIMEOUT, naming redis.
func TestWorkerHealthFollowsRedis(t *testing.T) {
	r := testenv.StartRedis(t)
	e := &env{t: t, redisURL: r.URL(0), warehouse: testenv.Warehouse(t)}
	e.startProcess("worker", "MVQ_TEST_WORKER=1", "MVQ_CLUSTERS=default", "MVQ_METRICS_LISTEN=127.0.0.1:0", "MVQ_HEALTH_TIMEOUT=2s")
	api := "http://" + e.startProcess("api", "MVQ_TEST_API=1", "MVQ_LISTEN=127.0.0.1:0")
	addr, _ := os.ReadFile(e.workerReady[0])
	base := "http://" + string(addr)
	for _, p := range []string{"/healthz", "/readyz"} {
		if st, m := getJSON(t, base+p); st != 200 {
			t.Fatalf("%s with Redis up: %d %v", p, st, m)
		}
	}
	// Unauthenticated endpoints name the component, never Redis's address
	// or the warehouse's path (those go to the server log).
	redisAddr := r.Addr
	_, redisPort, _ := strings.Cut(redisAddr, ":")
	leaks := func(what string, body map[string]any) {
		t.Helper()
		raw, _ := json.Marshal(body)
		for _, s := range []string{redisAddr, ":" + redisPort, "127.0.0.1", "dial tcp", e.warehouse, strings.TrimPrefix(e.warehouse, "file://")} {
			if s != "" && s != ":" && strings.Contains(string(raw), s) {
				t.Errorf("%s shows %q: %s", what, s, raw)
			}
		}
	}
	r.Stop()
	down := time.Now()
	var apiBody map[string]any
	waitFor(t, 30*time.Second, "the API's /readyz to fail", func() bool {
		var st int
		st, apiBody = getJSON(t, api+"/readyz")
		return st == 503
	})
	if apiBody["error"] != "redis unreachable" {
		t.Errorf("API /readyz %v, want error \"redis unreachable\"", apiBody)
	}
	leaks("API /readyz", apiBody)
	var readyBody map[string]any
	waitFor(t, 30*time.Second, "/readyz to fail", func() bool {
		var st int
		st, readyBody = getJSON(t, base+"/readyz")
		return st == 503
	})
	leaks("worker /readyz", readyBody)
	var body map[string]any
	waitFor(t, 30*time.Second, "/healthz to fail", func() bool {
		var st int
		st, body = getJSON(t, base+"/healthz")
		return st == 503
	})
	// The timeout runs from the last good probe, at most one probe
	// interval (a quarter of it) before Redis stopped.
	if since := time.Since(down); since < 1500*time.Millisecond {
		t.Fatalf("/healthz failed %v after Redis stopped, well before MVQ_HEALTH_TIMEOUT (2s)", since)
	}
	deps, _ := body["dependencies"].(map[string]any)
	if s, _ := deps["redis"].(string); !strings.HasPrefix(s, "unreachable") || deps["warehouse"] != "ok" {
		t.Fatalf("/healthz body %v, want redis unreachable and the warehouse ok", body)
	}
	leaks("worker /healthz", body)
}
