package service_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/internal/testenv"
	"github.com/mvq-dev/mvq/service"
)

// TestS3RefreshEndToEnd (make test-s3): the API and two worker processes
// on an S3 warehouse (SeaweedFS) pass the conditional-write probe, and a
// refresh split over both workers ends DONE with exactly the right rows.
func TestS3RefreshEndToEnd(t *testing.T) {
	if !testenv.S3Mode() {
		t.Skip("S3 mode only: make test-s3")
	}
	r, db := testenv.SharedRedis(t)
	e := &env{t: t, redisURL: r.URL(db), warehouse: testenv.Warehouse(t)}
	if !strings.HasPrefix(e.warehouse, "s3://") {
		t.Fatalf("warehouse %s is not on S3", e.warehouse)
	}
	e.startWorker("default")
	e.startWorker("default")
	e.api = "http://" + e.startProcess("api", "MVQ_TEST_API=1", "MVQ_LISTEN=127.0.0.1:0")
	if st := e.post("/v1/table/src/create", docs(0, 200), nil); st != 200 {
		t.Fatalf("create source: %d", st)
	}
	e.createChunkerView("v", "src")
	e.mustDone(e.refresh("v", `{"source_task_size": 10, "concurrency": 4}`))
	e.assertView("v", "src", -1)
	// An incremental refresh after an append commits a second version.
	if st := e.post("/v1/table/src/insert", docs(200, 260), nil); st != 200 {
		t.Fatalf("insert: %d", st)
	}
	e.mustDone(e.refresh("v", `{"source_task_size": 10}`))
	e.assertView("v", "src", -1)
}

// TestS3StoreWithoutConditionalWritesRefused: the worker refuses to start
// on a store that accepts a second create of the same object, and says
// why. The store is a stand-in (no real S3 that ignores If-None-Match
// runs here): it answers every PUT and DELETE with success.
func TestS3StoreWithoutConditionalWritesRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodPut {
			w.Header().Set("ETag", `"0"`)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	q := url.Values{"endpoint": {srv.URL}, "use_path_style": {"true"}, "region": {"us-east-1"}}
	env := map[string]string{"MVQ_WAREHOUSE": "s3://b/p?" + q.Encode(), "MVQ_REDIS_URL": "redis://127.0.0.1:1/0",
		"MVQ_METRICS_LISTEN": "127.0.0.1:0", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y", "AWS_EC2_METADATA_DISABLED": "true"}
	for k, v := range env {
		t.Setenv(k, v)
	}
	cfg, err := service.LoadConfig("worker", nil, os.Getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = service.RunWorker(ctx, cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "does not honour conditional writes") || !strings.Contains(err.Error(), "If-None-Match") {
		t.Fatalf("worker on a store without conditional writes: %v", err)
	}
}
