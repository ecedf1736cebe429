package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/internal/testenv"
	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/udf"
)

// userCodeServer serves the API with the view layer and a real worker
// whose engine runs the exec runtimes of runtimesDoc (real subprocesses).
func userCodeServer(t *testing.T, runtimesDoc string) *client {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	wh, err := table.OpenWarehouse(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	db, err := duck.Open(duck.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := udf.Parse([]byte(runtimesDoc), dir)
	if err != nil {
		t.Fatal(err)
	}
	cat := table.NewCatalog(wh, db, table.Options{Indexes: index.Maintenance()})
	r := testenv.StartRedis(t)
	conn := asynq.RedisClientOpt{Addr: r.Addr}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	eng := refresh.NewEngineWith(cat, refresh.EngineOptions{Runtimes: reg})
	srv, err := jobs.NewServer(jobs.ServerConfig{Redis: conn, RDB: rdb, Engine: eng, Concurrency: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	jc := jobs.NewClient(rdb, conn, eng)
	api := httptest.NewServer(httpapi.New(httpapi.Config{}, cat, &httpapi.ViewRoutes{Engine: eng, Jobs: jc, Catalog: cat}).Handler())
	t.Cleanup(func() {
		api.Close()
		srv.Shutdown()
		jc.Close()
		rdb.Close()
		_ = eng.Close()
		db.Close()
		wh.Close()
	})
	return &client{t: t, url: api.URL, dir: dir}
}

// udtfView is the create body of a udtf view over docs$src running runtime
// rt with the stored manifest (none when "").
func udtfView(t *testing.T, rt, manifest string) map[string]any {
	doc := fmt.Sprintf(`{"runtime": %q}`, rt)
	sum := sha256.Sum256([]byte(doc))
	schema, err := table.EncodeSchema(arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil))
	if err != nil {
		t.Fatal(err)
	}
	spec := map[string]any{"kind": "udtf", "udtf": base64.StdEncoding.EncodeToString([]byte(doc)), "udtf_sha": hex.EncodeToString(sum[:]),
		"udtf_name": rt, "udtf_version": "1"}
	if manifest != "" {
		spec["manifest"] = manifest
	}
	return map[string]any{"kind": "udtf", "source_query": `SELECT id, body FROM "docs$src"`, "output_schema": schema, "udtf_spec": spec, "with_no_data": true}
}

// userScript writes a table UDF over NDJSON to dir: it appends a line to
// starts when it starts and, unless it hangs, dumps its environment to
// dump and answers {"n": 1} per row.
func userScript(t *testing.T, dir string, hang bool) string {
	body := `echo start >> "$2"
env > "$1.tmp" && mv "$1.tmp" "$1"
while IFS= read -r line; do
  case "$line" in
    *'"__end"'*) printf '{"__end": true}\n' ;;
    *) printf '{"n": 1}\n' ;;
  esac
done
`
	name := "envdump.sh"
	if hang {
		body = "echo start >> \"$2\"\nexec sleep 3600\n"
		name = "hang.sh"
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRefreshEnvVarsOnlyWhatTheRuntimeAllows reproduces the code
// execution of issue 21 item 1: a refresh's manifest with PYTHONWARNINGS
// and BROWSER (or BASH_ENV, LD_PRELOAD) reached the worker's subprocess.
// Now every route a manifest comes by answers 400 naming the field, and a
// subprocess sees only the names its runtime allows.
func TestRefreshEnvVarsOnlyWhatTheRuntimeAllows(t *testing.T) {
	tmp := t.TempDir()
	dump, starts := filepath.Join(tmp, "env"), filepath.Join(tmp, "starts")
	script := userScript(t, tmp, false)
	c := userCodeServer(t, fmt.Sprintf("runtimes:\n  envdump:\n    kind: exec\n    command: [sh, %q, %q, %q]\n    protocol: ndjson\n    timeout: 20s\n    allowed_env: [ALLOWED_ONE]\n", script, dump, starts))
	c.expect(200, "/v1/namespace/docs/create", `{}`)
	c.expect(200, "/v1/table/docs$src/create", `[{"id": 1, "body": "a b"}, {"id": 2, "body": "c"}]`)

	manifest := func(env map[string]string) string {
		b, _ := json.Marshal(map[string]any{"env_vars": env})
		return string(b)
	}
	attack := map[string]string{"PYTHONWARNINGS": "ignore::antigravity.x::0", "BROWSER": "/bin/sh -c 'touch " + filepath.Join(tmp, "pwned") + "' #%s"}

	// A view stored with the attack is refused.
	st, m := c.post("/v1/materialized_view/docs$bad/create", udtfView(t, "envdump", manifest(map[string]string{"LD_PRELOAD": "/tmp/evil.so"})))
	c.want(st, m, 400, "udtf_spec.manifest.env_vars.LD_PRELOAD: ")
	st, m = c.post("/v1/materialized_view/docs$bad/create", udtfView(t, "envdump", manifest(attack)))
	c.want(st, m, 400, "udtf_spec.manifest.env_vars.BROWSER: ")

	c.expect(201, "/v1/materialized_view/docs$v/create", udtfView(t, "envdump", ""))
	for env, field := range map[string]string{
		manifest(attack): "manifest.env_vars.BROWSER: ",
		manifest(map[string]string{"BASH_ENV": "/tmp/x"}):         "manifest.env_vars.BASH_ENV: ",
		manifest(map[string]string{"LD_PRELOAD": "/tmp/evil.so"}): "manifest.env_vars.LD_PRELOAD: ",
		manifest(map[string]string{"SOMETHING_ELSE": "x"}):        "manifest.env_vars.SOMETHING_ELSE: runtime envdump does not allow it",
		manifest(map[string]string{"ALLOWED_ONE": "a\x00b"}):      "manifest.env_vars.ALLOWED_ONE: value holds a NUL",
		`{"mvq": {"timeout": "8760h"}}`:                           "manifest.mvq.timeout: ",
		`{"mvq": {"max_in_flight": 1024}}`:                        "manifest.mvq.max_in_flight: 1024 is above",
	} {
		st, m := c.post("/v1/materialized_view/docs$v/refresh", map[string]any{"manifest": env})
		c.want(st, m, 400, field)
	}

	// add_columns and backfill_column take the same path.
	vc := func(manifest string) map[string]any {
		v := map[string]any{"input_columns": []string{"body"}, "outputs": []any{map[string]any{"column": "x", "struct_field": "n", "data_type": map[string]any{"type": "int64"}}},
			"udf": base64.StdEncoding.EncodeToString([]byte(`{"runtime": "envdump"}`)), "udf_name": "x", "udf_version": "1"}
		if manifest != "" {
			v["manifest"] = manifest
		}
		return map[string]any{"new_columns": []any{map[string]any{"name": "x", "virtual_column": v}}}
	}
	st, m = c.post("/v1/table/docs$src/add_columns", vc(manifest(map[string]string{"PYTHONPATH": "/tmp"})))
	c.want(st, m, 400, "new_columns[0].virtual_column.manifest.env_vars.PYTHONPATH: ")
	c.expect(200, "/v1/table/docs$src/add_columns", vc(""))
	st, m = c.post("/v1/table/docs$src/backfill_column", map[string]any{"column": "x", "manifest": manifest(attack)})
	c.want(st, m, 400, "manifest.env_vars.BROWSER: ")
	if _, err := os.Stat(starts); !os.IsNotExist(err) {
		t.Fatalf("a refused request started user code (%v)", err)
	}

	// An allowed name reaches the subprocess, and nothing else does.
	job := c.expect(202, "/v1/materialized_view/docs$v/refresh", map[string]any{"manifest": manifest(map[string]string{"ALLOWED_ONE": "yes"})})["job_id"].(string)
	c.waitDone(job)
	got, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "\nALLOWED_ONE=yes\n") && !strings.HasPrefix(string(got), "ALLOWED_ONE=yes\n") {
		t.Fatalf("the allowed name did not reach the process:\n%s", got)
	}
	for _, name := range []string{"PYTHONWARNINGS", "BROWSER", "BASH_ENV", "LD_PRELOAD", "PYTHONPATH", "SOMETHING_ELSE"} {
		if strings.Contains(string(got), name+"=") {
			t.Errorf("the process got %s", name)
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, "pwned")); err == nil {
		t.Fatal("the attack ran")
	}
}

// TestRuntimeTimeoutFailsTheJobOnceNamingIt reproduces issue 21 item 21:
// a runtime that never answers was retried by the orchestrator 5 times
// and the job said only "internal error". Now the job fails after one
// attempt, saying which runtime did not answer within which timeout.
func TestRuntimeTimeoutFailsTheJobOnceNamingIt(t *testing.T) {
	tmp := t.TempDir()
	starts := filepath.Join(tmp, "starts")
	script := userScript(t, tmp, true)
	c := userCodeServer(t, fmt.Sprintf("runtimes:\n  stuck:\n    kind: exec\n    command: [sh, %q, %q, %q]\n    protocol: ndjson\n    timeout: 2s\n", script, filepath.Join(tmp, "env"), starts))
	c.expect(200, "/v1/namespace/docs/create", `{}`)
	c.expect(200, "/v1/table/docs$src/create", `[{"id": 1, "body": "a b"}]`)
	c.expect(201, "/v1/materialized_view/docs$v/create", udtfView(t, "stuck", ""))
	job := c.expect(202, "/v1/materialized_view/docs$v/refresh", `{}`)["job_id"].(string)
	var m map[string]any
	waitFor(t, 120*time.Second, "job "+job, func() bool {
		_, m = c.getJSON("/v1/job/" + job)
		return m["state"] == "FAILED" || m["state"] == "DONE" || m["state"] == "CANCELLED"
	})
	f, _ := m["failure"].(map[string]any)
	msg, _ := f["message"].(string)
	if m["state"] != "FAILED" || !strings.Contains(msg, "runtime stuck: no answer within the timeout of 2s") || f["retryable"] != false {
		t.Fatalf("job %v, want FAILED naming runtime stuck and its 2s timeout, not retryable", m)
	}
	got, _ := os.ReadFile(starts)
	if n := strings.Count(string(got), "start"); n != 1 {
		t.Fatalf("the runtime was started %d times, want once (no retry of a timeout)", n)
	}
}
