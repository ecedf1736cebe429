package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// txnServer is the real router over a real warehouse (dir), DuckDB and
// Redis with a worker in-process and auto-refresh wired as the service
// wires it (the catalog's commit hook submits jobs).
type txnServer struct {
	*authServer
	dir string
}

func startTxnServer(t *testing.T, a auth.Authenticator) *txnServer {
	t.Helper()
	dir := t.TempDir()
	wh, err := table.OpenWarehouse(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	db, err := duck.Open(duck.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	cat := table.NewCatalog(wh, db, table.Options{MaxRowsPerFragment: 4, Indexes: index.Maintenance()})
	r := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	eng := refresh.NewEngine(cat)
	jc := jobs.NewClient(rdb, asynq.RedisClientOpt{Addr: r.Addr}, eng)
	cat.OnCommit(jc.CommitHook())
	worker, err := jobs.NewServer(jobs.ServerConfig{Redis: asynq.RedisClientOpt{Addr: r.Addr}, RDB: rdb, Engine: eng, Concurrency: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Auth: a}, cat, &httpapi.ViewRoutes{Engine: eng, Jobs: jc, Catalog: cat}).Handler())
	t.Cleanup(func() {
		srv.Close()
		cat.OnCommit(nil)
		worker.Shutdown()
		jc.Close()
		rdb.Close()
		_ = eng.Close()
		db.Close()
		wh.Close()
		if a != nil {
			a.Close()
		}
	})
	return &txnServer{authServer: &authServer{t: t, url: srv.URL}, dir: dir}
}

func body(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBatchOverHTTP: batch-create and batch-commit publish every table's
// version or none, transactions describe and alter, and every error is a
// 4xx naming the field.
func TestBatchOverHTTP(t *testing.T) {
	s := startTxnServer(t, nil)
	mustStatus(t, s.do("POST", "/v1/namespace/docs/create", `{}`), 200)
	for _, name := range []string{"a", "b"} {
		mustStatus(t, s.do("POST", "/v1/table/docs$"+name+"/create", `[{"id": 1}, {"id": 2}, {"id": 3}, {"id": 4}, {"id": 5}, {"id": 6}, {"id": 7}, {"id": 8}, {"id": 9}, {"id": 10}]`), 200)
	}
	// Fragments of 4 rows: each staged version drops the first one.
	count := func(name string) float64 {
		r := s.do("POST", "/v1/table/docs$"+name+"/count_rows", `{}`)
		mustStatus(t, r, 200)
		var n float64
		_ = json.Unmarshal(r.body, &n)
		return n
	}

	ea, eb := stageOnLine(t, s.dir, "docs", "a", "", "a2"), stageOnLine(t, s.dir, "docs", "b", "", "b2")
	r := s.do("POST", "/v1/table/version/batch-create", body(t, map[string]any{"entries": []any{eb, ea}}))
	mustStatus(t, r, 200)
	txn, _ := r.json["transaction_id"].(string)
	vs, _ := r.json["versions"].([]any)
	if txn == "" || len(vs) != 2 || vs[0].(map[string]any)["version"] != 2.0 {
		t.Fatalf("batch-create: %s", r.body)
	}
	if count("a") != 6 || count("b") != 6 {
		t.Fatalf("after the batch: a has %v rows, b %v", count("a"), count("b"))
	}
	r = s.do("POST", "/v1/transaction/"+txn+"/describe", `{}`)
	mustStatus(t, r, 200)
	props, _ := r.json["properties"].(map[string]any)
	if r.json["status"] != "Succeeded" || props["mvq.tables"] != "docs$a@2,docs$b@2" {
		t.Fatalf("describe: %s", r.body)
	}

	// The same versions again: 409 before anything is written.
	r = s.do("POST", "/v1/table/version/batch-create", body(t, map[string]any{"entries": []any{ea, eb}}))
	mustStatus(t, r, 409)

	// A batch losing on its second table leaves its first untouched.
	ea3 := stageOnLine(t, s.dir, "docs", "a", "", "a3")
	eb3 := stageOnLine(t, s.dir, "docs", "b", "", "b3")
	mustStatus(t, s.do("POST", "/v1/table/docs$b/insert", `[{"id": 11}]`), 200) // takes b's version 3
	r = s.do("POST", "/v1/table/batch-commit", body(t, map[string]any{"operations": []any{
		map[string]any{"create_table_version": ea3}, map[string]any{"create_table_version": eb3}}}))
	mustStatus(t, r, 409)
	if msg := r.json["error"].(string); !strings.Contains(msg, "operations[1].create_table_version") || !strings.Contains(msg, "already exists") {
		t.Fatalf("conflict names: %s", r.body)
	}
	if count("a") != 6 {
		t.Fatalf("a losing batch changed a: %v rows", count("a"))
	}

	// batch-commit succeeds on fresh staging.
	eb4 := stageOnLine(t, s.dir, "docs", "b", "", "b4")
	r = s.do("POST", "/v1/table/batch-commit", body(t, map[string]any{"operations": []any{
		map[string]any{"create_table_version": ea3}, map[string]any{"create_table_version": eb4}}}))
	mustStatus(t, r, 200)
	res, _ := r.json["results"].([]any)
	if len(res) != 2 || res[1].(map[string]any)["create_table_version"].(map[string]any)["version"].(map[string]any)["version"] != 4.0 {
		t.Fatalf("batch-commit: %s", r.body)
	}

	// Alter: properties all or nothing, a committed batch cannot be
	// cancelled.
	r = s.do("POST", "/v1/transaction/"+txn+"/alter", `{"actions": [{"setPropertyAction": {"key": "owner", "value": "etl"}}]}`)
	mustStatus(t, r, 200)
	if r.json["properties"].(map[string]any)["owner"] != "etl" {
		t.Fatalf("alter: %s", r.body)
	}
	r = s.do("POST", "/v1/transaction/"+txn+"/alter", `{"actions": [{"setPropertyAction": {"key": "x", "value": "1"}}, {"setPropertyAction": {"key": "owner", "value": "y", "mode": "FAIL"}}]}`)
	mustStatus(t, r, 409)
	r = s.do("POST", "/v1/transaction/"+txn+"/describe", `{}`)
	if p := r.json["properties"].(map[string]any); p["x"] != nil || p["owner"] != "etl" {
		t.Fatalf("a failed alter applied something: %s", r.body)
	}
	mustStatus(t, s.do("POST", "/v1/transaction/"+txn+"/alter", `{"actions": [{"setStatusAction": {"status": "canceled"}}]}`), 409)
	mustStatus(t, s.do("POST", "/v1/transaction/"+txn+"/alter", `{"actions": [{"setStatusAction": {"status": "SUCCEEDED"}}]}`), 200)

	// Hostile and wrong input: 4xx naming the field.
	missing := "0190d5a4-0000-7000-8000-000000000000"
	ea4 := stageOnLine(t, s.dir, "docs", "a", "", "a4")
	for _, c := range []struct {
		path, body string
		status     int
		field      string
	}{
		{"/v1/table/version/batch-create", `{}`, 400, "entries"},
		{"/v1/table/version/batch-create", `{"entries": []}`, 400, "entries"},
		{"/v1/table/version/batch-create", `{"entries": [{"version": 2, "manifest_path": "x"}]}`, 400, "entries[0].id"},
		{"/v1/table/version/batch-create", `{"entries": [{"id": ["docs", "a"], "manifest_path": "x"}]}`, 400, "entries[0].version"},
		{"/v1/table/version/batch-create", `{"entries": [{"id": ["docs", "a"], "version": -1, "manifest_path": "x"}]}`, 400, "entries[0].version"},
		{"/v1/table/version/batch-create", `{"entries": [{"id": ["docs", "a"], "version": 9}]}`, 400, "entries[0].manifest_path"},
		{"/v1/table/version/batch-create", `{"entries": [{"id": ["docs", "a"], "version": 9, "manifest_path": "x", "branch": "dev"}]}`, 404, "entries[0].branch"},
		{"/v1/table/version/batch-create", `{"entries": [{"id": ["docs", "a"], "version": 9, "manifest_path": "x", "branch": "a/b"}]}`, 400, "entries[0].branch"},
		{"/v1/table/version/batch-create", `{"entries": [{"id": ["docs", "a"], "version": 9, "manifest_path": "x", "bogus": 1}]}`, 400, "bogus"},
		{"/v1/table/version/batch-create", `{"entries": [{"id": ["docs", ".."], "version": 9, "manifest_path": "x"}]}`, 400, "entries[0].id[1]"},
		{"/v1/table/version/batch-create", `{"entries": [{"id": ["docs", "nope"], "version": 2, "manifest_path": "x"}]}`, 404, "entries[0]"},
		{"/v1/table/version/batch-create", `{"entries": [{"id": ["docs", "a"], "version": 1, "manifest_path": "x"}]}`, 409, "entries[0]"},
		{"/v1/table/version/batch-create", `{"entries": [{"id": ["docs", "a"], "version": 4, "manifest_path": "../../etc/passwd"}]}`, 400, "entries[0]: manifest_path"},
		{"/v1/table/version/batch-create", `{"entries": [{"id": ["docs", "a"], "version": 4, "manifest_path": "` + ea4["manifest_path"].(string) + `", "manifest_size": 1}]}`, 400, "entries[0].manifest_size"},
		{"/v1/table/batch-commit", `{}`, 400, "operations"},
		{"/v1/table/batch-commit", `{"operations": [{}]}`, 400, "operations[0]"},
		{"/v1/table/version/batch-create", `{"entries": [{"id": ["docs", "a"], "version": 4, "manifest_path": "` + ea4["manifest_path"].(string) + `", "e_tag": "\"1\""}]}`, 409, "entries[0].e_tag"},
		{"/v1/table/batch-commit", `{"operations": [{"declare_table": {"id": ["docs", "c"], "location": "/elsewhere"}}]}`, 400, "operations[0].declare_table.location"},
		{"/v1/table/batch-commit", `{"operations": [{"declare_table": {"id": ["docs", "c"], "vend_credentials": true}}]}`, 406, "operations[0].declare_table.vend_credentials"},
		{"/v1/table/batch-commit", `{"operations": [{"declare_table": {"id": ["docs", "a"]}}]}`, 409, "operations[0].declare_table"},
		{"/v1/table/batch-commit", `{"operations": [{"deregister_table": {}}]}`, 400, "operations[0].deregister_table.id"},
		{"/v1/table/batch-commit", `{"operations": [{"deregister_table": {"id": ["docs", "nope"]}}]}`, 404, "operations[0].deregister_table"},
		{"/v1/table/batch-commit", `{"operations": [{"delete_table_versions": {"id": ["docs", "a"]}}]}`, 400, "operations[0].delete_table_versions.ranges"},
		{"/v1/table/batch-commit", `{"operations": [{"delete_table_versions": {"id": ["docs", "a"], "ranges": [{"start_version": 0, "end_version": -1}]}}]}`, 400, "operations[0].delete_table_versions: ranges[0]"},
		{"/v1/table/batch-commit", `{"operations": [{"delete_table_versions": {"id": ["docs", "a"], "ranges": [{"start_version": 0}]}}]}`, 400, "operations[0].delete_table_versions.ranges[0]"},
		{"/v1/table/batch-commit", `{"operations": [{"declare_table": {"id": ["docs", "c"]}}, {"deregister_table": {"id": ["docs", "c"]}}]}`, 400, "operations[1]"},
		{"/v1/table/batch-commit", `{"operations": [{"create_table_version": {"id": ["docs", "a"], "version": 4, "manifest_path": "x"}, "deregister_table": {"id": ["docs", "a"]}}]}`, 400, "operations[0]: exactly one"},
		{"/v1/table/batch-commit", `{"operations": [{"create_table_version": {"id": ["docs", "a"], "version": 4, "manifest_path": "x", "identity": {"api_key": "k"}}}]}`, 400, "operations[0].create_table_version.identity"},
		{"/v1/transaction/" + missing + "/describe", `{}`, 404, missing},
		{"/v1/transaction/not-a-uuid/describe", `{}`, 404, "not-a-uuid"},
		{"/v1/transaction/a$b/describe", `{}`, 400, "id"},
		{"/v1/transaction/" + txn + "/describe", `{"id": ["other"]}`, 400, "id"},
		{"/v1/transaction/" + missing + "/alter", `{"actions": [{"setStatusAction": {"status": "Canceled"}}]}`, 404, missing},
		{"/v1/transaction/" + txn + "/alter", `{}`, 400, "actions"},
		{"/v1/transaction/" + txn + "/alter", `{"actions": [{}]}`, 400, "actions[0]"},
		{"/v1/transaction/" + txn + "/alter", `{"actions": [{"setStatusAction": {"status": "Done"}}]}`, 400, "actions[0].setStatusAction.status"},
		{"/v1/transaction/" + txn + "/alter", `{"actions": [{"setStatusAction": {}}]}`, 400, "actions[0].setStatusAction.status"},
		{"/v1/transaction/" + txn + "/alter", `{"actions": [{"setPropertyAction": {"key": "k"}}]}`, 400, "actions[0].setPropertyAction.value"},
		{"/v1/transaction/" + txn + "/alter", `{"actions": [{"setPropertyAction": {"key": "mvq.tables", "value": "x"}}]}`, 400, "actions[0].setPropertyAction.key"},
		{"/v1/transaction/" + txn + "/alter", `{"actions": [{"setPropertyAction": {"key": "k", "value": "v", "mode": "sometimes"}}]}`, 400, "actions[0].setPropertyAction.mode"},
		{"/v1/transaction/" + txn + "/alter", `{"actions": [{"unsetPropertyAction": {"key": "absent", "mode": "fail"}}]}`, 409, "actions[0].unsetPropertyAction.key"},
	} {
		r := s.do("POST", c.path, c.body)
		msg, _ := r.json["error"].(string)
		if r.status != c.status || !strings.Contains(msg, c.field) {
			t.Errorf("POST %s %s: %d %s, want %d naming %q", c.path, c.body, r.status, r.body, c.status, c.field)
		}
	}
	if count("a") != 2 || count("b") != 3 {
		t.Fatalf("refused requests changed tables: a %v, b %v", count("a"), count("b"))
	}
}

// TestBatchAuthEveryTable: a batch needs write on every table it names,
// not only the first; describe needs read and alter write on every table
// of the transaction.
func TestBatchAuthEveryTable(t *testing.T) {
	s := startTxnServer(t, jwtAuth(t))
	all := []auth.Action{auth.Read, auth.Write, auth.Refresh, auth.Admin}
	root := bearer(mint(t, jwtSecret, "root", time.Hour, grant("*", all...)))
	for _, ns := range []string{"team_a", "team_b"} {
		mustStatus(t, s.do("POST", "/v1/namespace/"+ns+"/create", `{}`, root...), 200)
		mustStatus(t, s.do("POST", "/v1/table/"+ns+"$t/create", `[{"id": 1}, {"id": 2}, {"id": 3}, {"id": 4}, {"id": 5}]`, root...), 200)
	}
	onlyA := bearer(mint(t, jwtSecret, "alice", time.Hour, grant("team_a", all...), grant("team_b", auth.Read)))
	ea, eb := stageOnLine(t, s.dir, "team_a", "t", "", "x"), stageOnLine(t, s.dir, "team_b", "t", "", "x")
	batch := body(t, map[string]any{"entries": []any{ea, eb}})
	r := s.do("POST", "/v1/table/version/batch-create", batch, onlyA...)
	if r.status != 403 || !strings.Contains(r.json["error"].(string), "team_b$t") {
		t.Fatalf("batch with write on the first table only: %d %s", r.status, r.body)
	}
	r = s.do("POST", "/v1/table/batch-commit", body(t, map[string]any{"operations": []any{map[string]any{"create_table_version": ea}, map[string]any{"create_table_version": eb}}}), onlyA...)
	if r.status != 403 || !strings.Contains(r.json["error"].(string), "team_b$t") {
		t.Fatalf("batch-commit with write on the first table only: %d %s", r.status, r.body)
	}
	mustStatus(t, s.do("POST", "/v1/table/version/batch-create", batch), 401)
	r = s.do("POST", "/v1/table/version/batch-create", batch, root...)
	mustStatus(t, r, 200)
	txn := r.json["transaction_id"].(string)
	// alice may read both tables: describe yes, alter no.
	mustStatus(t, s.do("POST", "/v1/transaction/"+txn+"/describe", `{}`, onlyA...), 200)
	r = s.do("POST", "/v1/transaction/"+txn+"/alter", `{"actions": [{"setPropertyAction": {"key": "k", "value": "v"}}]}`, onlyA...)
	if r.status != 403 || !strings.Contains(r.json["error"].(string), "team_b$t") {
		t.Fatalf("alter without write on team_b: %d %s", r.status, r.body)
	}
	bob := bearer(mint(t, jwtSecret, "bob", time.Hour, grant("team_a", all...)))
	mustStatus(t, s.do("POST", "/v1/transaction/"+txn+"/describe", `{}`, bob...), 403)
	mustStatus(t, s.do("POST", "/v1/transaction/"+txn+"/alter", `{"actions": [{"setPropertyAction": {"key": "k", "value": "v"}}]}`, root...), 200)
}

// TestBatchNeedsTheSingleRoutesGrant: a batch operation needs the grant
// its single route needs. A principal with read and write on team_a (no
// admin) may not deregister a table or delete its versions through
// batch-commit, as it may not through deregister and version/delete; the
// table keeps every version. An admin may.
func TestBatchNeedsTheSingleRoutesGrant(t *testing.T) {
	s := startTxnServer(t, jwtAuth(t))
	all := []auth.Action{auth.Read, auth.Write, auth.Refresh, auth.Admin}
	root := bearer(mint(t, jwtSecret, "root", time.Hour, grant("*", all...)))
	mustStatus(t, s.do("POST", "/v1/namespace/team_a/create", `{}`, root...), 200)
	mustStatus(t, s.do("POST", "/v1/table/team_a$t/create", `[{"id": 1}]`, root...), 200)
	mustStatus(t, s.do("POST", "/v1/table/team_a$t/insert", `[{"id": 2}]`, root...), 200)
	writer := bearer(mint(t, jwtSecret, "writer", time.Hour, grant("team_a", auth.Read, auth.Write)))
	admin := bearer(mint(t, jwtSecret, "alice", time.Hour, grant("team_a", all...)))

	// The single routes: 403 for the writer.
	mustStatus(t, s.do("POST", "/v1/table/team_a$t/deregister", `{}`, writer...), 403)
	mustStatus(t, s.do("POST", "/v1/table/team_a$t/version/delete", `{"ranges": [{"start_version": 1, "end_version": 1}]}`, writer...), 403)
	// The same through batch-commit: 403 too, naming the table.
	for _, op := range []map[string]any{
		{"deregister_table": map[string]any{"id": []string{"team_a", "t"}}},
		{"delete_table_versions": map[string]any{"id": []string{"team_a", "t"}, "ranges": []any{map[string]any{"start_version": 1, "end_version": 1}}}},
	} {
		r := s.do("POST", "/v1/table/batch-commit", body(t, map[string]any{"operations": []any{op}}), writer...)
		if r.status != 403 || !strings.Contains(fmt.Sprint(r.json["error"]), "admin") || !strings.Contains(fmt.Sprint(r.json["error"]), "team_a$t") {
			t.Fatalf("batch-commit %v as a writer: %d %s", op, r.status, r.body)
		}
	}
	r := s.do("POST", "/v1/table/team_a$t/version/list", `{}`, root...)
	mustStatus(t, r, 200)
	if n := len(r.json["versions"].([]any)); n != 2 {
		t.Fatalf("after the refused batches the table has %d versions, want 2: %s", n, r.body)
	}
	// An admin of team_a may, as on the single routes.
	r = s.do("POST", "/v1/table/batch-commit", body(t, map[string]any{"operations": []any{
		map[string]any{"delete_table_versions": map[string]any{"id": []string{"team_a", "t"}, "ranges": []any{map[string]any{"start_version": 1, "end_version": 1}}}},
	}}), admin...)
	mustStatus(t, r, 200)
	r = s.do("POST", "/v1/table/batch-commit", body(t, map[string]any{"operations": []any{
		map[string]any{"deregister_table": map[string]any{"id": []string{"team_a", "t"}}},
	}}), admin...)
	mustStatus(t, r, 200)
	mustStatus(t, s.do("POST", "/v1/table/team_a$t/exists", `{}`, root...), 404)
}

// TestBatchRefreshesViews: views over tables committed through a batch
// are refreshed automatically once the batch is committed, and read the
// batch's versions.
func TestBatchRefreshesViews(t *testing.T) {
	s := startTxnServer(t, nil)
	mustStatus(t, s.do("POST", "/v1/namespace/docs/create", `{}`), 200)
	for _, name := range []string{"a", "b"} {
		mustStatus(t, s.do("POST", "/v1/table/docs$"+name+"/create", `[{"id": 1}, {"id": 2}, {"id": 3}, {"id": 4}, {"id": 5}, {"id": 6}, {"id": 7}]`), 200)
		r := s.do("POST", "/v1/materialized_view/docs$v"+name+"/create", body(t, map[string]any{"kind": "query", "source_query": `SELECT id FROM "docs$` + name + `" WHERE id > 1`, "output_schema": "", "auto_refresh": true}))
		mustStatus(t, r, 201)
		job := r.json["job_id"].(string)
		waitFor(t, 60*time.Second, "the first refresh of v"+name, func() bool { return s.do("GET", "/v1/job/"+job, ``).json["state"] == "DONE" })
	}
	viewRows := func(name string) float64 {
		r := s.do("POST", "/v1/table/docs$v"+name+"/count_rows", `{}`)
		mustStatus(t, r, 200)
		var n float64
		_ = json.Unmarshal(r.body, &n)
		return n
	}
	if viewRows("a") != 6 || viewRows("b") != 6 {
		t.Fatalf("views before: %v %v", viewRows("a"), viewRows("b"))
	}
	// Version 2 of each source drops its first fragment (ids 1..4).
	r := s.do("POST", "/v1/table/version/batch-create", body(t, map[string]any{"entries": []any{stageOnLine(t, s.dir, "docs", "a", "", "a2"), stageOnLine(t, s.dir, "docs", "b", "", "b2")}}))
	mustStatus(t, r, 200)
	for _, name := range []string{"a", "b"} {
		waitFor(t, 60*time.Second, "v"+name+" to follow the batch", func() bool {
			st := s.do("GET", "/v1/materialized_view/docs$v"+name+"/status", ``)
			src, _ := st.json["sources"].([]any)
			if len(src) == 0 {
				return false
			}
			return src[0].(map[string]any)["refreshed_version"] == 2.0 && viewRows(name) == 3
		})
		var auto bool
		r := s.do("POST", "/v1/jobs/list", body(t, map[string]any{"view": "docs$v" + name}))
		for _, j := range r.json["jobs"].([]any) {
			j := j.(map[string]any)
			if trig, _ := j["trigger"].(map[string]any); j["cause"] == "auto" && trig["version"] == 2.0 && trig["source"] == "docs$"+name {
				auto = true
			}
		}
		if !auto {
			t.Fatalf("v%s: no automatic job triggered by version 2: %s", name, r.body)
		}
	}
	// A batch deregister of a table views read is refused as a drop is,
	// naming them, and cannot cascade; nothing of the batch applies.
	r = s.do("POST", "/v1/table/batch-commit", body(t, map[string]any{"operations": []any{
		map[string]any{"declare_table": map[string]any{"id": []string{"docs", "c"}}},
		map[string]any{"deregister_table": map[string]any{"id": []string{"docs", "a"}}},
	}}))
	mustStatus(t, r, 409)
	if !strings.Contains(string(r.body), "docs$va") || !strings.Contains(string(r.body), "operations[1].deregister_table") {
		t.Fatalf("batch deregister of a read table: %s", r.body)
	}
	r = s.do("POST", "/v1/table/batch-commit", body(t, map[string]any{"operations": []any{
		map[string]any{"deregister_table": map[string]any{"id": []string{"docs", "a"}, "context": map[string]string{"cascade": "true"}}},
	}}))
	mustStatus(t, r, 400)
	if !strings.Contains(string(r.body), "context.cascade") {
		t.Fatalf("batch deregister with cascade: %s", r.body)
	}
	mustStatus(t, s.do("POST", "/v1/table/docs$a/describe", `{}`), 200)
	mustStatus(t, s.do("POST", "/v1/table/docs$c/describe", `{}`), 404)
}

// txnConformance drives version/batch-create, batch-commit and
// transaction describe/alter through the spec validator (TestSpecConformance
// calls it), with success and error cases, on tables of its own.
func txnConformance(t *testing.T, sc *specClient) {
	t.Helper()
	const arrowStream = "application/vnd.apache.arrow.stream"
	for _, name := range []string{"ta", "tb"} {
		st, out := sc.send("POST", "/v1/table/docs$"+name+"/create", arrowStream, arrowBody(t, []int64{1, 2, 3, 4, 5, 6}, []string{"a", "b", "c", "d", "e", "f"}), checkBoth)
		sc.expect("create "+name, st, string(out), 200)
	}
	ea, eb := stageOnLine(t, sc.dir, "docs", "ta", "", "a2"), stageOnLine(t, sc.dir, "docs", "tb", "", "b2")
	st, m := sc.j("/v1/table/version/batch-create", map[string]any{"entries": []any{ea, eb}})
	sc.expect("batch-create", st, m, 200)
	txn, _ := m["transaction_id"].(string)
	st, m = sc.j("/v1/table/version/batch-create", map[string]any{"entries": []any{ea, eb}})
	sc.expect("batch-create of existing versions", st, m, 409)
	st, m = sc.j("/v1/table/version/batch-create", map[string]any{"entries": []any{map[string]any{"id": []string{"docs", "nope"}, "version": 2, "manifest_path": "x"}}})
	sc.expect("batch-create on a missing table", st, m, 404)
	st, m = sc.j("/v1/table/version/batch-create", map[string]any{"entries": []any{}})
	sc.expect("batch-create of nothing", st, m, 400)

	ea3, eb3 := stageOnLine(t, sc.dir, "docs", "ta", "", "a3"), stageOnLine(t, sc.dir, "docs", "tb", "", "b3")
	st, m = sc.j("/v1/table/batch-commit", map[string]any{"operations": []any{map[string]any{"create_table_version": ea3}, map[string]any{"create_table_version": eb3}}})
	sc.expect("batch-commit", st, m, 200)
	st, m = sc.j("/v1/table/batch-commit", map[string]any{"operations": []any{map[string]any{"create_table_version": ea3}}})
	sc.expect("batch-commit of an existing version", st, m, 409)
	// Every operation kind in one batch, and a batch that fails on its
	// last operation applying none.
	ea4 := stageOnLine(t, sc.dir, "docs", "ta", "", "a4")
	st, m = sc.j("/v1/table/batch-commit", map[string]any{"operations": []any{
		map[string]any{"declare_table": map[string]any{"id": []string{"docs", "tc"}, "properties": map[string]string{"k": "v"}}},
		map[string]any{"create_table_version": ea4},
		map[string]any{"delete_table_versions": map[string]any{"id": []string{"docs", "tb"}, "ranges": []any{map[string]any{"start_version": 1, "end_version": 2}}}},
	}})
	sc.expect("batch-commit of declare, version and delete", st, m, 200)
	if r, _ := m["results"].([]any); len(r) != 3 || r[2].(map[string]any)["delete_table_versions"].(map[string]any)["deleted_count"] != 1.0 {
		t.Fatalf("batch-commit results %v", m)
	}
	st, m = sc.j("/v1/table/batch-commit", map[string]any{"operations": []any{
		map[string]any{"deregister_table": map[string]any{"id": []string{"docs", "ta"}}},
		map[string]any{"declare_table": map[string]any{"id": []string{"docs", "tc"}}},
	}})
	sc.expect("batch-commit declaring a declared table", st, m, 409)
	st, m = sc.j("/v1/table/docs$ta/describe", map[string]any{})
	sc.expect("the table a failed batch would deregister", st, m, 200)
	st, m = sc.j("/v1/table/batch-commit", map[string]any{"operations": []any{map[string]any{"deregister_table": map[string]any{"id": []string{"docs", "tb"}}}}})
	sc.expect("batch-commit of a deregister", st, m, 200)
	st, m = sc.j("/v1/table/docs$tb/describe", map[string]any{})
	sc.expect("a table a batch deregistered", st, m, 404)
	st, m = sc.j("/v1/table/batch-commit", map[string]any{"operations": []any{map[string]any{"create_table_version": map[string]any{"id": []string{"docs", "nope"}, "version": 2, "manifest_path": "x"}}}})
	sc.expect("batch-commit on a missing table", st, m, 404)

	st, m = sc.j("/v1/transaction/"+txn+"/describe", map[string]any{})
	sc.expect("transaction describe", st, m, 200)
	if m["status"] != "Succeeded" {
		t.Fatalf("transaction describe: %v", m)
	}
	st, m = sc.j("/v1/transaction/0190d5a4-0000-7000-8000-000000000000/describe", map[string]any{})
	sc.expect("transaction describe missing", st, m, 404)
	st, m = sc.j("/v1/transaction/"+txn+"/describe", map[string]any{"id": []string{"x"}})
	sc.expect("transaction describe disagreeing id", st, m, 400)
	st, m = sc.j("/v1/transaction/"+txn+"/alter", map[string]any{"actions": []any{map[string]any{"setPropertyAction": map[string]any{"key": "owner", "value": "etl", "mode": "overwrite"}}}})
	sc.expect("transaction alter", st, m, 200)
	st, m = sc.j("/v1/transaction/"+txn+"/alter", map[string]any{"actions": []any{map[string]any{"setStatusAction": map[string]any{"status": "Canceled"}}}})
	sc.expect("transaction alter: cancel a committed one", st, m, 409)
	st, m = sc.j("/v1/transaction/"+txn+"/alter", map[string]any{"actions": []any{map[string]any{"unsetPropertyAction": map[string]any{"key": "owner", "mode": "Fail"}}, map[string]any{"setPropertyAction": map[string]any{"key": "mvq.x", "value": "1"}}}})
	sc.expect("transaction alter of a reserved key", st, m, 400)
	st, m = sc.j("/v1/transaction/0190d5a4-0000-7000-8000-000000000000/alter", map[string]any{"actions": []any{map[string]any{"setStatusAction": map[string]any{"status": "Canceled"}}}})
	sc.expect("transaction alter missing", st, m, 404)

	st, m = sc.j("/v1/table/docs$ta/drop", map[string]any{})
	sc.expect("drop ta", st, m, 200)
}
