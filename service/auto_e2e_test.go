package service_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// createAutoView creates a chunker view over source with auto_refresh and
// its initial refresh.
func (e *env) createAutoView(view, source string) string {
	e.t.Helper()
	sum := sha256.Sum256([]byte(spec))
	req := map[string]any{
		"kind":          "chunker",
		"source_query":  `SELECT id, body FROM "` + source + `" WHERE lang = 'en'`,
		"output_schema": "",
		"udtf_spec": map[string]any{"kind": "chunker", "udtf": base64.StdEncoding.EncodeToString([]byte(spec)),
			"udtf_sha": hex.EncodeToString(sum[:]), "udtf_name": "fixed", "udtf_version": "1"},
		"auto_refresh": true,
	}
	var r map[string]any
	if st := e.post("/v1/materialized_view/"+view+"/create", req, &r); st != 201 {
		e.t.Fatalf("create view: %d %v", st, r)
	}
	return r["job_id"].(string)
}

// viewJobs lists a view's jobs, newest first.
func (e *env) viewJobs(view string) []map[string]any {
	e.t.Helper()
	var r struct {
		Jobs []map[string]any `json:"jobs"`
	}
	if st := e.post("/v1/jobs/list", map[string]any{"view": view, "limit": 1000}, &r); st != 200 {
		e.t.Fatalf("list jobs: %d", st)
	}
	return r.Jobs
}

// TestAutoRefreshEndToEnd: a view created with auto_refresh follows its
// source's inserts, updates, deletes and restores without a refresh
// request, in a separate API and worker process; its jobs say why they
// ran.
func TestAutoRefreshEndToEnd(t *testing.T) {
	e := start(t, 1, "default")
	e.post("/v1/namespace/docs/create", `{}`, nil)
	if st := e.post("/v1/table/docs$articles/create", docs(0, 20), nil); st != 200 {
		t.Fatalf("create source: %d", st)
	}
	first := e.mustDone(e.createAutoView("docs$chunks", "docs$articles"))
	if first["cause"] != "api" {
		t.Fatalf("the create's refresh has cause %v, want api", first["cause"])
	}
	e.assertView("docs$chunks", "docs$articles", -1)

	caughtUp := func(what string) {
		t.Helper()
		var got, want string
		waitFor(t, 60*time.Second, "the view to follow "+what, func() bool {
			got, want = fmt.Sprint(e.viewRows("docs$chunks")), fmt.Sprint(e.expected("docs$articles", -1))
			return got == want
		})
	}
	e.post("/v1/table/docs$articles/insert", docs(20, 25), nil)
	caughtUp("an insert")
	e.post("/v1/table/docs$articles/update", map[string]any{"predicate": "id = 7", "updates": [][]string{{"body", "'brand new words here now'"}}}, nil)
	caughtUp("an update")
	var del map[string]any
	e.post("/v1/table/docs$articles/delete", map[string]any{"predicate": "id IN (3, 21)"}, &del)
	caughtUp("a delete")
	e.post("/v1/table/docs$articles/restore", map[string]any{"version": 2}, nil)
	caughtUp("a restore")

	var auto int
	for _, j := range e.viewJobs("docs$chunks") {
		if j["cause"] != "auto" {
			continue
		}
		auto++
		trig, _ := j["trigger"].(map[string]any)
		if trig["source"] != "docs$articles" || num(trig["version"]) < 2 {
			t.Fatalf("auto job %v has trigger %v", j["job_id"], j["trigger"])
		}
	}
	if auto == 0 {
		t.Fatal("no job with cause auto")
	}
}

// getJSON GETs path and decodes the answer.
func (e *env) getJSON(path string, out any) int {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.api+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		e.t.Fatalf("GET %s: %d: %v", path, resp.StatusCode, err)
	}
	return resp.StatusCode
}

// TestViewLineageEndToEnd: views over views, their status and list, drops
// and deregisters refused while views read a table (and cascading).
func TestViewLineageEndToEnd(t *testing.T) {
	e := start(t, 1, "default")
	for _, ns := range []string{"a", "b"} {
		e.post("/v1/namespace/"+ns+"/create", `{}`, nil)
	}
	if st := e.post("/v1/table/a$t/create", docs(0, 20), nil); st != 200 {
		t.Fatalf("create source: %d", st)
	}
	e.mustDone(e.createAutoView("b$v", "a$t"))
	var r map[string]any
	if st := e.post("/v1/materialized_view/b$w/create", map[string]any{"kind": "query", "source_query": `SELECT id, chunk FROM "b$v"`,
		"output_schema": "", "auto_refresh": true}, &r); st != 201 {
		t.Fatalf("create b$w: %d %v", st, r)
	}
	e.mustDone(r["job_id"].(string))
	if st := e.post("/v1/materialized_view/b$m/create", map[string]any{"kind": "query", "source_query": `SELECT id FROM "a$t"`,
		"output_schema": "", "with_no_data": true}, &r); st != 201 {
		t.Fatalf("create b$m: %d %v", st, r)
	}

	// Fresh, with its lineage; b$m was never refreshed: stale by every
	// version of its source.
	var st map[string]any
	if code := e.getJSON("/v1/materialized_view/b$v/status", &st); code != 200 {
		t.Fatalf("status: %d %v", code, st)
	}
	src := st["sources"].([]any)[0].(map[string]any)
	if st["stale"] != false || src["table"] != "a$t" || num(src["refreshed_version"]) != 1 || fmt.Sprint(st["downstream"]) != "[b$w]" ||
		st["last_job"].(map[string]any)["state"] != "DONE" || st["kind"] != "chunker" || st["auto_refresh"] != true {
		t.Fatalf("status of b$v: %v", st)
	}
	e.post("/v1/table/a$t/insert", docs(20, 22), nil)
	e.getJSON("/v1/materialized_view/b$m/status", &st)
	if st["stale"] != true || num(st["lag_versions"]) != 2 || st["last_job"] != nil {
		t.Fatalf("status of b$m: %v", st)
	}
	if lag, _ := st["lag_seconds"].(json.Number).Float64(); lag <= 0 {
		t.Fatalf("lag_seconds of b$m: %v", st["lag_seconds"])
	}
	// The auto-refreshed chain catches up; the describe of a view carries
	// its status.
	waitFor(t, 60*time.Second, "b$w to refresh from the insert", func() bool {
		e.getJSON("/v1/materialized_view/b$w/status", &st)
		return st["stale"] == false && num(st["sources"].([]any)[0].(map[string]any)["refreshed_version"]) >= 3
	})
	var desc map[string]any
	e.post("/v1/table/b$v/describe", `{}`, &desc)
	if mv, _ := desc["materialized_view"].(map[string]any); mv == nil || mv["stale"] != false {
		t.Fatalf("describe of b$v: %v", desc["materialized_view"])
	}

	// Paged list of the namespace's views.
	var page struct {
		Views     []map[string]any `json:"views"`
		PageToken string           `json:"page_token"`
	}
	if code := e.post("/v1/materialized_view/list", map[string]any{"namespace": "b", "limit": 2}, &page); code != 200 || len(page.Views) != 2 || page.PageToken == "" {
		t.Fatalf("list page 1: %d %v", code, page)
	}
	names := []string{page.Views[0]["view"].(string), page.Views[1]["view"].(string)}
	token := page.PageToken
	page.Views, page.PageToken = nil, ""
	e.post("/v1/materialized_view/list", map[string]any{"namespace": "b", "limit": 2, "page_token": token}, &page)
	if len(page.Views) != 1 || page.PageToken != "" {
		t.Fatalf("list page 2: %v", page)
	}
	if names = append(names, page.Views[0]["view"].(string)); fmt.Sprint(names) != "[b$m b$v b$w]" {
		t.Fatalf("listed %v", names)
	}
	if code := e.post("/v1/materialized_view/list", `{}`, nil); code != 400 {
		t.Fatalf("list without namespace: %d", code)
	}

	// A table views read is not dropped without cascade.
	var prob map[string]any
	if code := e.post("/v1/table/a$t/drop", `{}`, &prob); code != 409 || !strings.Contains(fmt.Sprint(prob["detail"]), "b$m, b$v") {
		t.Fatalf("drop a read table: %d %v", code, prob)
	}
	if code := e.post("/v1/table/a$t/drop", `{"context": {"cascade": "maybe"}}`, nil); code != 400 {
		t.Fatalf("drop with a bad cascade: %d", code)
	}

	// Nor is its namespace, cascading, while views outside it read it.
	if code := e.post("/v1/namespace/a/drop", `{"behavior": "CASCADE"}`, &prob); code != 409 || !strings.Contains(fmt.Sprint(prob["detail"]), "b$m, b$v, b$w") {
		t.Fatalf("drop namespace a under views: %d %v", code, prob)
	}
	if code := e.post("/v1/table/a$t/exists", `{}`, nil); code != 200 {
		t.Fatalf("a$t after a refused namespace drop: %d", code)
	}
	// Nor deregistered (the same rule as drop; a view whose source is
	// gone is what an Iceberg table's DROP notification leaves:
	// TestIcebergSourceEndToEnd).
	if code := e.post("/v1/table/a$t/deregister", `{}`, &prob); code != 409 || !strings.Contains(fmt.Sprint(prob["detail"]), "b$m, b$v") {
		t.Fatalf("deregister a read table: %d %v", code, prob)
	}
	if code := e.post("/v1/table/a$t/deregister", `{"properties": {"cascade": "maybe"}}`, nil); code != 400 {
		t.Fatalf("deregister with a bad cascade: %d", code)
	}
	if code := e.post("/v1/table/a$t/exists", `{}`, nil); code != 200 {
		t.Fatalf("a$t after a refused deregister: %d", code)
	}
	// A cascading deregister takes the views that read it, and theirs.
	if code := e.post("/v1/table/a$t/deregister", `{"context": {"cascade": "true"}}`, &prob); code != 200 || prob["location"] == nil {
		t.Fatalf("cascading deregister: %d %v", code, prob)
	}
	for _, v := range []string{"a$t", "b$m", "b$v", "b$w"} {
		if code := e.post("/v1/table/"+v+"/exists", `{}`, nil); code != 404 {
			t.Fatalf("%s after the cascading deregister: %d", v, code)
		}
	}

	// Cascade: the drop takes the views that read the table, and theirs.
	if st := e.post("/v1/table/a$u/create", docs(0, 5), nil); st != 200 {
		t.Fatalf("create a$u: %d", st)
	}
	e.mustDone(e.createAutoView("b$x", "a$u"))
	if code := e.post("/v1/materialized_view/b$y/create", map[string]any{"kind": "query", "source_query": `SELECT id, chunk FROM "b$x"`,
		"output_schema": "", "with_no_data": true}, nil); code != 201 {
		t.Fatalf("create b$y: %d", code)
	}
	if code := e.post("/v1/table/a$u/drop", `{"cascade": true}`, &prob); code != 200 {
		t.Fatalf("cascading drop: %d %v", code, prob)
	}
	for _, v := range []string{"b$x", "b$y"} {
		if code := e.post("/v1/table/"+v+"/exists", `{}`, nil); code != 404 {
			t.Fatalf("%s after the cascading drop: %d", v, code)
		}
	}

	// A namespace drop follows the same rule: views outside it that read
	// its tables (here b$p, and b$r through it) are a 409, a view inside
	// is not; with cascade they go too.
	e.post("/v1/namespace/a/create", `{}`, nil)
	e.post("/v1/namespace/a$sub/create", `{}`, nil)
	if st := e.post("/v1/table/a$sub$s/create", docs(0, 3), nil); st != 200 {
		t.Fatalf("create a$sub$s: %d", st)
	}
	for _, vw := range [][2]string{{"b$p", "a$sub$s"}, {"b$r", "b$p"}, {"a$q", "a$sub$s"}} {
		if code := e.post("/v1/materialized_view/"+vw[0]+"/create", map[string]any{"kind": "query", "source_query": `SELECT id FROM "` + vw[1] + `"`,
			"output_schema": "", "with_no_data": true}, &prob); code != 201 {
			t.Fatalf("create %s: %d %v", vw[0], code, prob)
		}
	}
	if code := e.post("/v1/namespace/a/drop", `{"behavior": "CASCADE"}`, &prob); code != 409 || !strings.Contains(fmt.Sprint(prob["detail"]), ": b$p, b$r;") {
		t.Fatalf("drop namespace a under b$p: %d %v", code, prob)
	}
	if code := e.post("/v1/namespace/a/drop", `{"behavior": "CASCADE", "context": {"cascade": "yes"}}`, nil); code != 400 {
		t.Fatalf("drop namespace a with a bad cascade: %d", code)
	}
	if code := e.post("/v1/namespace/a/drop", `{"behavior": "CASCADE", "context": {"cascade": "true"}}`, &prob); code != 200 {
		t.Fatalf("cascading namespace drop: %d %v", code, prob)
	}
	for _, v := range []string{"b$p", "b$r", "a$q", "a$sub$s"} {
		if code := e.post("/v1/table/"+v+"/exists", `{}`, nil); code != 404 {
			t.Fatalf("%s after the cascading namespace drop: %d", v, code)
		}
	}
}
