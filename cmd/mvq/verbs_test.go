package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCLIRowVerbsAndViewShow: table update and delete change rows as one
// version each; view show tells the lag (versions and seconds), the
// schedule set with --refresh-every and changed with view schedule, and
// the last job; after a refresh the view is fresh and holds exactly the
// rows left. mvq dev's banner names every address it serves.
func TestCLIRowVerbsAndViewShow(t *testing.T) {
	d := startDev(t, "")
	for _, want := range []string{"API        " + d.url, "console    " + d.url + "/ui/", "metrics    " + d.url + "/metrics", "redis      redis://127.0.0.1:"} {
		if !strings.Contains(d.log.String(), want) {
			t.Fatalf("mvq dev banner lacks %q:\n%s", want, d.log.String())
		}
	}
	d.ok(t, "ns", "create", "docs")
	d.ok(t, "table", "create", "docs$a", "--from", writeFile(t, "a.ndjson",
		`{"id": 1, "lang": "en", "body": "one"}`+"\n"+`{"id": 2, "lang": "en", "body": "two"}`+"\n"+`{"id": 3, "lang": "en", "body": "three"}`+"\n"))
	// Errors a user fixes with another command name it.
	src := writeFile(t, "b.ndjson", `{"id": 1}`)
	if r := d.mvq(t, nil, "table", "create", "nope$t", "--from", src); r.code != 1 || !strings.Contains(r.stderr, "mvq ns create NAMESPACE") {
		t.Fatalf("create in a missing namespace: %+v", r)
	}
	if r := d.mvq(t, nil, "table", "create", "docs$a", "--from", src); r.code != 1 || !strings.Contains(r.stderr, "--mode overwrite replaces it") {
		t.Fatalf("create of an existing table: %+v", r)
	}
	if r := d.mvq(t, nil, "ns", "create", "docs"); r.code != 1 || !strings.Contains(r.stderr, "--exist-ok") {
		t.Fatalf("create of an existing namespace: %+v", r)
	}
	job := strings.TrimSpace(d.ok(t, "view", "create", "docs$en", "--query", `SELECT id, body FROM "docs$a" WHERE lang = 'en'`, "--refresh-every", "15m"))
	d.ok(t, "jobs", "watch", job)

	if out := d.ok(t, "table", "update", "docs$a", "--set", "lang='fr'", "--set", "body = upper(body)", "--where", "id = 1"); !strings.Contains(out, "updated 1 rows of docs$a: version 2") {
		t.Fatalf("update: %q", out)
	}
	if out := d.ok(t, "table", "delete", "docs$a", "--where", "id = 2"); !strings.Contains(out, "deleted 1 rows of docs$a: version 3") {
		t.Fatalf("delete: %q", out)
	}
	if r := d.mvq(t, nil, "table", "update", "docs$a", "--set", "nocolumn"); r.code != 2 || !strings.Contains(r.stderr, "COLUMN=EXPRESSION") {
		t.Fatalf("update without =: %+v", r)
	}
	if r := d.mvq(t, nil, "table", "update", "docs$a", "--set", "missing=1"); r.code != 1 || !strings.Contains(r.stderr, "missing") {
		t.Fatalf("update of a missing column: %+v", r)
	}

	// docs/en is docs$en: a form a shell leaves alone unquoted.
	if out := d.ok(t, "view", "show", "docs/en"); !strings.Contains(out, "docs$a at version 3") {
		t.Fatalf("view show docs/en:\n%s", out)
	}
	show := d.ok(t, "view", "show", "docs$en")
	for _, re := range []string{`(?m)^kind\s+query$`, `(?m)^source\s+docs\$a at version 3, refreshed from 1$`,
		`(?m)^lag\s+2 versions, \d+s behind$`, `(?m)^refreshes\s+on request \(mvq refresh\), and every 15m0s \(next `,
		`(?m)^last job\s+` + job + ` DONE \(api\)$`, `(?m)^query\s+SELECT id, body FROM "docs\$a" WHERE lang = 'en'$`} {
		if !regexp.MustCompile(re).MatchString(show) {
			t.Fatalf("view show lacks %s:\n%s", re, show)
		}
	}
	var st struct {
		Status struct {
			LagVersions int     `json:"lag_versions"`
			LagSeconds  float64 `json:"lag_seconds"`
		} `json:"status"`
		Definition struct {
			Kind string `json:"kind"`
		} `json:"definition"`
	}
	if err := json.Unmarshal([]byte(d.ok(t, "view", "show", "docs$en", "-o", "json")), &st); err != nil || st.Status.LagVersions != 2 || st.Status.LagSeconds <= 0 || st.Definition.Kind != "query" {
		t.Fatalf("view show -o json: %+v %v", st, err)
	}

	d.ok(t, "refresh", "docs$en", "--wait")
	d.ok(t, "view", "schedule", "docs$en", "--refresh-every", "off")
	show = d.ok(t, "view", "show", "docs$en")
	if !regexp.MustCompile(`(?m)^lag\s+fresh$`).MatchString(show) || strings.Contains(show, "every") {
		t.Fatalf("view show after a refresh and schedule off:\n%s", show)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(d.ok(t, "query", "docs$en")), &rows); err != nil || len(rows) != 1 || rows[0]["body"] != "three" {
		t.Fatalf("view rows after update and delete: %v %v", rows, err)
	}
	if r := d.mvq(t, nil, "view", "schedule", "docs$en", "--refresh-every", "500ms"); r.code != 1 || !strings.Contains(r.stderr, "refresh_every") {
		t.Fatalf("a schedule below the minimum: %+v", r)
	}

	// A target lag, then suspended and resumed; view ls shows the lag in
	// time and how the view refreshes.
	if r := d.mvq(t, nil, "view", "schedule", "docs$en", "--target-lag", "5m", "--refresh-every", "1h"); r.code != 2 {
		t.Fatalf("view schedule with both flags: %+v", r)
	}
	if r := d.mvq(t, nil, "view", "schedule", "docs$en", "--target-lag", "100ms"); r.code != 1 || !strings.Contains(r.stderr, "target_lag") {
		t.Fatalf("a target lag below the minimum: %+v", r)
	}
	if out := d.ok(t, "view", "schedule", "docs$en", "--target-lag", "5m"); !strings.Contains(out, "target lag 5m") {
		t.Fatalf("view schedule --target-lag: %q", out)
	}
	if out := d.ok(t, "view", "suspend", "docs$en"); !strings.Contains(out, "suspended") {
		t.Fatalf("view suspend: %q", out)
	}
	show = d.ok(t, "view", "show", "docs$en")
	if !regexp.MustCompile(`(?m)^refreshes\s+on request \(mvq refresh\), and within 5m0s of its source's commits \(target lag\); suspended \(mvq view resume\)$`).MatchString(show) {
		t.Fatalf("view show with a target lag, suspended:\n%s", show)
	}
	d.ok(t, "table", "insert", "docs$a", "--from", writeFile(t, "c.ndjson", `{"id": 4, "lang": "en", "body": "four"}`+"\n"))
	ls := d.ok(t, "view", "ls", "docs")
	if !regexp.MustCompile(`(?m)^docs\$en\s.*\s1 behind\s+DONE\s+\d+s\s+target 5m, suspended\s*$`).MatchString(ls) {
		t.Fatalf("view ls with a target lag, suspended:\n%s", ls)
	}
	job = strings.TrimSpace(d.ok(t, "view", "resume", "docs$en"))
	if out := d.ok(t, "jobs", "show", job, "-o", "json"); !strings.Contains(out, `"cause": "resume"`) && !strings.Contains(out, `"cause":"resume"`) {
		t.Fatalf("the resume's job: %s", out)
	}
	d.ok(t, "jobs", "watch", job)
	if out := d.ok(t, "view", "resume", "docs$en"); !strings.Contains(out, "resumed") {
		t.Fatalf("resume of a fresh view: %q", out)
	}
}

// TestDemoUsesTheRunningServer: with an mvq dev answering at MVQ_URL, mvq
// demo works through it, so its view and job are the server's (view ls
// shows the job DONE); with none, it runs a server of its own on the
// warehouse and keeps the job where a later mvq dev there finds it.
func TestDemoUsesTheRunningServer(t *testing.T) {
	d := startDev(t, "")
	r := d.mvq(t, nil, "demo")
	if r.code != 0 || !strings.Contains(r.stdout, "using the mvq API at "+d.url) {
		t.Fatalf("demo against a running dev: %+v", r)
	}
	if out := d.ok(t, "view", "ls", "demo"); !regexp.MustCompile(`demo\$article_chunks\s+chunker\s+demo\$articles\s.*yes\s+DONE`).MatchString(out) {
		t.Fatalf("view ls after the demo:\n%s", out)
	}

	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed: a demo of its own keeps its jobs in memory")
	}
	wh := filepath.Join(t.TempDir(), "wh")
	own := mvqCmd([]string{"MVQ_URL=http://127.0.0.1:1"}, "demo", "-warehouse", "file://"+wh)
	out, err := own.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "no mvq API answers at http://127.0.0.1:1") {
		t.Fatalf("demo of its own: %v\n%s", err, out)
	}
	d2 := startDev(t, wh)
	if out := d2.ok(t, "view", "ls", "demo"); !regexp.MustCompile(`demo\$article_chunks\s+chunker.*DONE`).MatchString(out) {
		t.Fatalf("view ls on the demo's warehouse:\n%s", out)
	}
}
