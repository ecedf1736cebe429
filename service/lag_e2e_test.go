package service_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTargetLagEndToEnd: a view created with target_lag 2s, an API and two
// worker processes (each with a scheduler): a burst of inserts is one
// refresh (or two) with cause target_lag, and the view's lag, sampled from
// its status all along, stays within the target; a suspended view follows
// no insert, and its resume catches it up with one refresh. Bad values
// and combinations are 400s naming the field.
func TestTargetLagEndToEnd(t *testing.T) {
	e := start(t, 2, "default")
	e.post("/v1/namespace/s/create", `{}`, nil)
	if st := e.post("/v1/table/s$t/create", docs(0, 10), nil); st != 200 {
		t.Fatalf("create source: %d", st)
	}
	sum := sha256.Sum256([]byte(spec))
	create := func(view string, extra map[string]any) (int, map[string]any) {
		req := map[string]any{
			"kind":          "chunker",
			"source_query":  `SELECT id, body FROM "s$t" WHERE lang = 'en'`,
			"output_schema": "",
			"udtf_spec": map[string]any{"kind": "chunker", "udtf": base64.StdEncoding.EncodeToString([]byte(spec)),
				"udtf_sha": hex.EncodeToString(sum[:]), "udtf_name": "fixed", "udtf_version": "1"},
		}
		for k, v := range extra {
			req[k] = v
		}
		var r map[string]any
		return e.post("/v1/materialized_view/"+view+"/create", req, &r), r
	}
	for _, bad := range []map[string]any{
		{"target_lag": ""}, {"target_lag": "0s"}, {"target_lag": "500ms"}, {"target_lag": "soon"},
		{"target_lag": 60}, {"target_lag": "9000h"},
		{"target_lag": "5m", "auto_refresh": true}, {"target_lag": "5m", "refresh_every": "1h"},
	} {
		if code, r := create("s$bad", bad); code != 400 || !strings.Contains(fmt.Sprint(r["detail"]), "target_lag") {
			t.Fatalf("create with %v: %d %v", bad, code, r)
		}
	}
	if code := e.post("/v1/table/s$bad/exists", `{}`, nil); code != 404 {
		t.Fatalf("a refused create left s$bad: %d", code)
	}
	if code, r := create("s$v", map[string]any{"target_lag": "2s"}); code != 201 {
		t.Fatalf("create s$v: %d %v", code, r)
	}
	status := func() map[string]any {
		t.Helper()
		var st map[string]any
		if code := e.getJSON("/v1/materialized_view/s$v/status", &st); code != 200 {
			t.Fatalf("status: %d %v", code, st)
		}
		return st
	}
	settled := func(what string) []map[string]any {
		t.Helper()
		var js []map[string]any
		waitFor(t, 60*time.Second, what, func() bool {
			if fmt.Sprint(e.viewRows("s$v")) != fmt.Sprint(e.expected("s$t", -1)) {
				return false
			}
			js = e.viewJobs("s$v")
			for _, j := range js {
				if s := j["state"]; s == "PENDING" || s == "RUNNING" {
					return false
				}
			}
			return true
		})
		return js
	}
	before := len(settled("the create's refresh"))
	if st := status(); st["target_lag"] != "2s" || st["suspended"] != false || st["auto_refresh"] != false {
		t.Fatalf("status: %v", st)
	}

	// A burst of inserts; the lag sampled from the status until the view
	// has them all.
	const inserts = 4
	maxLag := 0.0
	sample := func() bool {
		st := status()
		lag, err := st["lag_seconds"].(json.Number).Float64()
		if err != nil {
			t.Fatalf("lag_seconds: %v", st["lag_seconds"])
		}
		maxLag = max(maxLag, lag)
		return st["stale"] == false
	}
	for i := range inserts {
		e.post("/v1/table/s$t/insert", docs(10+2*i, 12+2*i), nil)
		sample()
	}
	waitFor(t, 60*time.Second, "the view to catch up with the burst", sample)
	js := settled("the burst's refresh")
	lagJobs := 0
	for _, j := range js[:len(js)-before] {
		if j["cause"] != "target_lag" || j["state"] != "DONE" {
			t.Fatalf("job %v: cause %v state %v, want target_lag DONE", j["job_id"], j["cause"], j["state"])
		}
		lagJobs++
	}
	t.Logf("%d inserts: %d refreshes; max lag %.3fs (target 2s)", inserts, lagJobs, maxLag)
	if lagJobs < 1 || lagJobs > 2 {
		t.Fatalf("%d refreshes for a burst of %d inserts, want 1 (2 when one lands during the first)", lagJobs, inserts)
	}
	// 1 s of slack for a refresh that overruns its estimate on a loaded
	// machine (quiet runs: 1.2-1.5s).
	if maxLag > 3 {
		t.Fatalf("the view lagged %.3fs behind its source, target 2s (+1s slack)", maxLag)
	}

	// refresh_settings: strict, named errors.
	for _, tc := range []struct {
		body  string
		code  int
		field string
	}{
		{`{"target_lag": "100ms"}`, 400, "target_lag"},
		{`{"target_lag": 5}`, 400, "target_lag"},
		{`{"target_lag": "2s", "refresh_every": "1h"}`, 400, "target_lag"},
	} {
		var prob map[string]any
		if code := e.post("/v1/materialized_view/s$v/refresh_settings", tc.body, &prob); code != tc.code || !strings.Contains(fmt.Sprint(prob["detail"]), tc.field) {
			t.Fatalf("refresh_settings %s: %d %v, want %d naming %s", tc.body, code, prob, tc.code, tc.field)
		}
	}
	if code, r := create("s$auto", map[string]any{"auto_refresh": true, "with_no_data": true}); code != 201 {
		t.Fatalf("create s$auto: %d %v", code, r)
	}
	var prob map[string]any
	if code := e.post("/v1/materialized_view/s$auto/refresh_settings", `{"target_lag": "5m"}`, &prob); code != 400 || !strings.Contains(fmt.Sprint(prob["detail"]), "auto_refresh") {
		t.Fatalf("target_lag on an auto_refresh view: %d %v", code, prob)
	}

	// Suspended: inserts start nothing, for well over the target lag and a
	// scheduler poll.
	var r map[string]any
	if code := e.post("/v1/materialized_view/s$v/suspend", `{}`, &r); code != 200 || r["suspended"] != true {
		t.Fatalf("suspend: %d %v", code, r)
	}
	if st := status(); st["suspended"] != true || st["target_lag"] != "2s" {
		t.Fatalf("status when suspended: %v", st)
	}
	n := len(e.viewJobs("s$v"))
	e.post("/v1/table/s$t/insert", docs(20, 23), nil)
	e.post("/v1/table/s$t/insert", docs(23, 25), nil)
	for until := time.Now().Add(4 * time.Second); time.Now().Before(until); time.Sleep(100 * time.Millisecond) {
		if js := e.viewJobs("s$v"); len(js) != n {
			t.Fatalf("a suspended view got a job: %v", js[0])
		}
	}
	if st := status(); st["stale"] != true || st["lag_versions"] != json.Number("2") {
		t.Fatalf("suspended view after two inserts: %v", st)
	}
	// Resumed: one catch-up refresh.
	r = nil
	if code := e.post("/v1/materialized_view/s$v/resume", `{}`, &r); code != 200 || r["suspended"] != false || r["job_id"] == nil {
		t.Fatalf("resume: %d %v", code, r)
	}
	js = settled("the resume's catch-up")
	if len(js) != n+1 || js[0]["cause"] != "resume" || js[0]["job_id"] != r["job_id"] {
		t.Fatalf("jobs after the resume: %d (want %d), newest %v", len(js), n+1, js[0])
	}
	if st := status(); st["suspended"] != false || st["stale"] != false {
		t.Fatalf("status after the resume: %v", st)
	}
	// Not a view, no such view.
	if code := e.post("/v1/materialized_view/s$t/suspend", `{}`, nil); code != 400 {
		t.Fatalf("suspend a table: %d", code)
	}
	if code := e.post("/v1/materialized_view/s$nope/resume", `{}`, nil); code != 404 {
		t.Fatalf("resume a missing view: %d", code)
	}
	// Stopped: the view keeps no target lag.
	r = nil
	if code := e.post("/v1/materialized_view/s$v/refresh_settings", `{"target_lag": ""}`, &r); code != 200 || len(r) != 0 {
		t.Fatalf("stop the target lag: %d %v", code, r)
	}
	if st := status(); st["target_lag"] != nil {
		t.Fatalf("status after stopping: %v", st)
	}
}
