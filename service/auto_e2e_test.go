package service_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
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
