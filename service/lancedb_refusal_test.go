package service_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
)

// TestLanceDBRetriesRefusedCommits re-measures what docs/conformance.md
// says of LanceDB 0.31 (MVQ_TEST_LANCEDB_REFUSALS=1; about 20 s a
// status): a proxy in front of mvq answers every version/create of a
// LanceDB add with one status and spec error code, and LanceDB, instead
// of failing the add with that answer, retries it as a commit conflict
// and has not returned after the window. When a LanceDB upgrade makes a
// status final, this fails for it: answer mvq's refusals with it and
// update the docs.
func TestLanceDBRetriesRefusedCommits(t *testing.T) {
	if os.Getenv("MVQ_TEST_LANCEDB_REFUSALS") != "1" {
		t.Skip("MVQ_TEST_LANCEDB_REFUSALS=1 re-measures LanceDB's handling of refused commits (minutes)")
	}
	o := oracle.Need(t)
	e := startWithTokens(t, 0)
	e.lancedb(o, "create", "docs", "articles", "0", "10")
	target, _ := url.Parse(e.api)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var status, code, attempts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/version/create") {
			proxy.ServeHTTP(w, r)
			return
		}
		attempts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(status.Load()))
		fmt.Fprintf(w, `{"type":"/errors/x","title":"refused","status":%d,"detail":"refused by the test","error":"refused by the test","code":%d}`, status.Load(), code.Load())
	}))
	defer srv.Close()
	dir, err := oracle.Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]int64{{400, 13}, {400, 19}, {404, 11}, {406, 0}, {409, 14}, {422, 20}, {500, 18}, {503, 17}} {
		status.Store(c[0])
		code.Store(c[1])
		attempts.Store(0)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, "node", filepath.Join(dir, "namespace.mjs"), "add", srv.URL, e.token, "docs", "articles", "10", "12").CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if !timedOut || attempts.Load() < 3 {
			t.Errorf("status %d code %d: LanceDB returned (%v: %.300s) after %d attempts; docs/conformance.md says it retries", c[0], c[1], err, out, attempts.Load())
		}
	}
}
