package httpapi_test

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRefreshFromBranch drives real refresh jobs (real Redis, a real
// worker) over a source with a branch: a refresh from the branch after
// refreshes from main is a full recompute and sees the branch's rows only;
// the next one from the same branch is incremental; going back to main is
// full again; the status measures lag on the branch refreshed from, and
// says so when that branch is gone; an unknown or badly named src_branch
// is a 4xx naming it.
func TestRefreshFromBranch(t *testing.T) {
	c := setupSpec(t).client
	c.expect(200, "/v1/namespace/docs/create", `{}`)
	c.expect(200, "/v1/table/docs$src/create", `[{"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 3, "name": "c"}]`)
	job := c.expect(201, "/v1/materialized_view/docs$v/create", map[string]any{"kind": "query", "source_query": `SELECT id, name FROM "docs$src"`, "output_schema": ""})["job_id"].(string)
	c.waitDone(job)
	c.expect(200, "/v1/table/docs$src/branches/create", `{"name": "dev"}`)
	if st, out := c.do("POST", "/v1/table/docs$src/insert?branch=dev", "application/json", []byte(`[{"id": 10, "name": "x"}, {"id": 11, "name": "y"}]`)); st != 200 {
		t.Fatalf("insert on dev: %d %s", st, out)
	}
	c.expect(200, "/v1/table/docs$src/insert", `[{"id": 4, "name": "d"}]`) // main only

	refresh := func(body string) map[string]any {
		t.Helper()
		id := c.expect(202, "/v1/materialized_view/docs$v/refresh", body)["job_id"].(string)
		return c.waitDone(id)
	}
	rows := func() int {
		t.Helper()
		st, out := c.do("POST", "/v1/table/docs$v/count_rows", "application/json", []byte(`{}`))
		n, err := strconv.Atoi(string(out))
		if st != 200 || err != nil {
			t.Fatalf("count view: %d %s", st, out)
		}
		return n
	}

	res := refresh(`{"src_branch": "dev"}`)
	if res["mode"] != "full" || rows() != 5 {
		t.Fatalf("first refresh from dev: %v, %d rows (want full, 5)", res, rows())
	}
	st, m := c.getJSON("/v1/materialized_view/docs$v/status")
	src := m["sources"].([]any)[0].(map[string]any)
	if st != 200 || src["branch"] != "dev" || m["stale"] != false {
		t.Fatalf("status after a dev refresh: %d %v", st, m)
	}
	if st, out := c.do("POST", "/v1/table/docs$src/insert?branch=dev", "application/json", []byte(`[{"id": 12, "name": "z"}]`)); st != 200 {
		t.Fatalf("insert on dev: %d %s", st, out)
	}
	if _, m = c.getJSON("/v1/materialized_view/docs$v/status"); m["stale"] != true || m["lag_versions"] != 1.0 {
		t.Fatalf("status after a dev commit: %v", m)
	}
	res = refresh(`{"src_branch": "dev"}`)
	if res["mode"] != "incremental" || res["rows_added"] != 1.0 || rows() != 6 {
		t.Fatalf("second refresh from dev: %v, %d rows (want incremental, +1, 6)", res, rows())
	}
	res = refresh(`{}`)
	if res["mode"] != "full" || rows() != 4 {
		t.Fatalf("back to main: %v, %d rows (want full, 4)", res, rows())
	}
	res = refresh(`{"src_branch": "dev", "src_version": 2}`)
	if res["mode"] != "full" || res["source_version"] != 2.0 || rows() != 5 {
		t.Fatalf("dev at v2: %v, %d rows (want full, 5)", res, rows())
	}

	for body, want := range map[string]string{
		`{"src_branch": "nope"}`:                   `no branch \"nope\"`,
		`{"src_branch": "a/b"}`:                    "src_branch",
		`{"src_branch": "dev", "src_version": 99}`: "no version 99 on branch",
	} {
		st, out := c.do("POST", "/v1/materialized_view/docs$v/refresh", "application/json", []byte(body))
		if st/100 != 4 || !strings.Contains(string(out), want) {
			t.Errorf("refresh %s: %d %s, want a 4xx naming %s", body, st, out, want)
		}
	}

	c.expect(200, "/v1/table/docs$src/branches/delete", `{"name": "dev"}`)
	if _, m = c.getJSON("/v1/materialized_view/docs$v/status"); m["stale"] != true || !strings.Contains(m["problem"].(string), "dev") {
		t.Fatalf("status after its branch is gone: %v", m)
	}
	// A branch of the same name created again is another line: full.
	c.expect(200, "/v1/table/docs$src/branches/create", `{"name": "dev"}`)
	res = refresh(`{"src_branch": "dev"}`)
	if res["mode"] != "full" || rows() != 4 {
		t.Fatalf("refresh from dev created again: %v, %d rows (want full, 4)", res, rows())
	}
	// Main was never touched by the branch.
	if st, out := c.do("POST", "/v1/table/docs$src/count_rows", "application/json", []byte(`{}`)); st != 200 || string(out) != "4" {
		t.Fatalf("main: %d %s", st, out)
	}
}

// waitDone waits for job id to finish and returns its result; a job that
// did not end DONE fails the test.
func (c *client) waitDone(id string) map[string]any {
	c.t.Helper()
	var m map[string]any
	waitFor(c.t, 120*time.Second, "job "+id, func() bool {
		_, m = c.getJSON("/v1/job/" + id)
		s := m["state"]
		return s == "DONE" || s == "FAILED" || s == "CANCELLED"
	})
	if m["state"] != "DONE" {
		c.t.Fatalf("job %s: %v", id, m)
	}
	res, _ := m["result"].(map[string]any)
	return res
}
