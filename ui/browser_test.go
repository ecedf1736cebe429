package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/service"
)

const token = "console-test-token"

// chromium finds Debian's chromium (or another Chrome). Outside CI a
// machine without one skips the test; in CI (.ci/run installs it) a
// missing browser fails it.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed: .ci/run installs it (apt-get install -y chromium)")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium; .ci/run installs it): the jobs console test needs a real browser")
	return ""
}

// startDev runs mvq dev in this process with token authentication and
// returns its base URL.
func startDev(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens:\n  - token: "+token+"\n    principal: alice\n    grants:\n      - namespace: \"*\"\n        actions: [read, write, refresh, admin]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := service.LoadConfig("mvq dev", nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.Warehouse = "file://" + filepath.Join(dir, "warehouse")
	cfg.Auth = auth.Config{Mode: auth.ModeTokens, TokensFile: tokens}
	cfg.LogLevel = "warn"
	cfg.TraceURLTemplate = "http://tempo.invalid/explore?trace={trace_id}"
	service.SetupLogging(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	errc := make(chan error, 1)
	go func() { errc <- service.RunDev(ctx, cfg, func(d service.DevAddrs) { addr <- d.API }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-errc:
		case <-time.After(30 * time.Second):
			t.Error("mvq dev did not stop")
		}
	})
	select {
	case a := <-addr:
		return "http://" + a
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(2 * time.Minute):
		t.Fatal("mvq dev did not start")
	}
	return ""
}

func post(t *testing.T, base, path, ctype, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
	}
}

// refreshID starts a refresh of view through the API and returns its job id.
func refreshID(t *testing.T, base, view string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/materialized_view/"+view+"/refresh", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var j struct {
		JobID string `json:"job_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("refresh %s: %d %v", view, resp.StatusCode, err)
	}
	return j.JobID
}

// jobState reads a job's state through the API.
func jobState(t *testing.T, base, id string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/job/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var j struct {
		State string `json:"state"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
		t.Fatal(err)
	}
	return j.State
}

// TestConsoleInBrowser opens the jobs console in headless Chromium, pastes
// a token, starts a refresh and watches it reach DONE on the page, then
// cancels a running one, and saves a screenshot.
func TestConsoleInBrowser(t *testing.T) {
	exe := chromium(t)
	base := startDev(t)
	post(t, base, "/v1/namespace/web/create", "application/json", `{}`)
	var rows bytes.Buffer
	rows.WriteString("[")
	for i := range 400 {
		if i > 0 {
			rows.WriteString(",")
		}
		fmt.Fprintf(&rows, `{"id": %d, "body": "%s"}`, i, strings.Repeat("word ", 20))
	}
	rows.WriteString("]")
	post(t, base, "/v1/table/web$docs/create", "application/json", rows.String())
	view := `{"kind": "query", "source_query": "SELECT id, body FROM \"web$docs\"", "output_schema": "", "with_no_data": true}`
	post(t, base, "/v1/materialized_view/web$fast/create", "application/json", view)
	// The slow view reads 6,000 rows, one work item each: long enough to be
	// seen RUNNING and cancelled from the page however fast items run.
	rows.Reset()
	rows.WriteString("[")
	for i := range 6000 {
		if i > 0 {
			rows.WriteString(",")
		}
		fmt.Fprintf(&rows, `{"id": %d, "body": "w%d"}`, i, i)
	}
	rows.WriteString("]")
	post(t, base, "/v1/table/web$many/create", "application/json", rows.String())
	post(t, base, "/v1/materialized_view/web$slow/create", "application/json", strings.Replace(view, `web$docs`, `web$many`, 1))
	// A view in a child namespace, and one that is dropped while the page is open.
	post(t, base, "/v1/namespace/web$sub/create", "application/json", `{}`)
	post(t, base, "/v1/materialized_view/web$sub$nested/create", "application/json", view)
	post(t, base, "/v1/materialized_view/web$gone/create", "application/json", view)
	// The nested view keeps a target lag, suspended.
	post(t, base, "/v1/materialized_view/web$sub$nested/refresh_settings", "application/json", `{"target_lag": "5m"}`)
	post(t, base, "/v1/materialized_view/web$sub$nested/suspend", "application/json", `{}`)

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	var consoleErrs bytes.Buffer
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithErrorf(func(f string, a ...any) { fmt.Fprintf(&consoleErrs, f+"\n", a...) }))
	defer cancelCtx()
	// The first call starts the browser, on a context without a deadline.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	fail := func(what string, err error) {
		t.Helper()
		html, _ := chromedp.Run(ctx, chromedp.OuterHTML("body"))
		t.Fatalf("%s: %v\npage: %s\nbrowser errors: %s", what, err, html, consoleErrs.String())
	}
	step := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := chromedp.Do(sctx, steps...); err != nil {
			fail(what, err)
		}
	}
	// shoot keeps a screenshot under MVQ_CONSOLE_SHOTS (a folder), to look at the page.
	shoot := func(name string) {
		t.Helper()
		dir := os.Getenv("MVQ_CONSOLE_SHOTS")
		if dir == "" {
			return
		}
		b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			fail("screenshot "+name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			fail("text of "+sel, err)
		}
		return v
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			fail(expr, err)
		}
		return v
	}

	// Without a token the page says what to do.
	step("open the console", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible("#error"))
	if errText := text("#error"); !strings.Contains(errText, "paste a valid token") {
		t.Fatalf("error without a token: %q", errText)
	}
	// Paste the token: it is kept for this tab.
	step("use a token", chromedp.SendKeys("#token", token), chromedp.Click("#save-token"), chromedp.WaitNotVisible("#error"))
	if stored := eval(`sessionStorage.getItem('mvq.token')`); stored != token {
		t.Fatalf("sessionStorage token %q", stored)
	}
	// The views list comes from the catalog, walked from the root: views
	// that never had a job show, with their kind, source and schedule.
	step("views from the catalog",
		chromedp.WaitVisible(`#views tr[data-view="web$slow"]`),
		chromedp.WaitVisible(`#views tr[data-view="web$sub$nested"]`),
		chromedp.WaitVisible(`#views tr[data-view="web$gone"]`))
	rowText := func(view string) string {
		t.Helper()
		return eval(`[...document.querySelector('#views tr[data-view="` + view + `"]').cells].map(c => c.textContent).join(' | ')`)
	}
	if r := rowText("web$fast"); !strings.Contains(r, "| query |") || !strings.Contains(r, "web$docs v0/1") || !strings.Contains(r, "| manual |") || !strings.Contains(r, "no jobs") {
		t.Fatalf("web$fast before any refresh: %s", r)
	}
	// Lag in time, the target lag and the suspension.
	if r := rowText("web$sub$nested"); !regexp.MustCompile(`\| 1 version, [0-9.]+ (ms|s) \|`).MatchString(r) || !strings.Contains(r, "| within 5m0s suspended |") {
		t.Fatalf("web$sub$nested with a target lag, suspended: %s", r)
	}
	shoot("views-before")
	// A dropped view leaves the list.
	post(t, base, "/v1/table/web$gone/drop", "application/json", `{}`)
	step("reload", chromedp.Reload(), chromedp.WaitVisible(`#views tr[data-view="web$fast"]`))
	if got := eval(`[...document.querySelectorAll('#views tbody tr')].map(r => r.dataset.view).join(',')`); got != "web$fast,web$slow,web$sub$nested" {
		t.Fatalf("views after dropping web$gone: %s", got)
	}
	// Start a refresh from the page and watch it reach DONE there.
	step("refresh web$fast from the page",
		chromedp.SendKeys("#refresh-view", "web$fast"),
		chromedp.Click("#refresh-btn"),
		chromedp.WaitVisible("#job-page"),
		chromedp.WaitVisible("#job-state.state-DONE"),
	)
	// The result comes with the job record the page reads after the last event.
	dctx, cancelD := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelD()
	if _, err := chromedp.Run(dctx, chromedp.Poll[bool](`document.getElementById('job-result').textContent.includes('view_version')`)); err != nil {
		fail("wait for the result", err)
	}
	jobURL := eval(`location.href`)
	state, progress, result := text("#job-state"), text("#job-progress-text"), text("#job-result")
	if !strings.Contains(jobURL, "#/job/") || state != "DONE" || !strings.Contains(progress, "1 / 1 work items") || !strings.Contains(result, `"view_version": 2`) {
		t.Fatalf("job page: url %s state %q progress %q result %q", jobURL, state, progress, result)
	}
	// Milestones with times, the work item events collapsed into a count,
	// duration, throughput and cause.
	if m := eval(`[...document.querySelectorAll('#job-milestones li strong')].map(e => e.textContent).join('|')`); m != "submitted|started|planned 1 work items|committing|done" {
		t.Fatalf("milestones: %q", m)
	}
	if n, items := eval(`String(document.querySelectorAll('#job-events li').length)`), text("#job-items-count"); n != "0" || items != "1 work item event" {
		t.Fatalf("work item events: %s listed, summary %q", n, items)
	}
	step("expand the work item events", chromedp.Click("#job-items-count"), chromedp.WaitVisible("#job-events li"))
	if dur, rate, cause := text("#job-duration"), text("#job-rate"), text("#job-cause"); dur == "—" || dur == "" || !strings.Contains(rate, "rows/s read") || cause != "api" {
		t.Fatalf("duration %q rate %q cause %q", dur, rate, cause)
	}
	shoot("job-done")
	// The job page is in the URL: a reload shows it again.
	step("reload the job page", chromedp.Reload(), chromedp.WaitVisible("#job-state.state-DONE"), chromedp.WaitVisible("#job-milestones li"))
	traceHref := eval(`document.getElementById('job-trace').href`)
	if !strings.HasPrefix(traceHref, "http://tempo.invalid/explore?trace=") || len(traceHref) < len("http://tempo.invalid/explore?trace=")+32 {
		t.Fatalf("trace link %q", traceHref)
	}

	// A long refresh (one source row per work item, one item at a time),
	// started through the API (the page's button uses the default options),
	// opened from the page's jobs list and cancelled there while it runs.
	// Hash changes are same-document navigations: no load event to wait for.
	eval(`location.hash = '#/'`)
	step("back to the list", chromedp.WaitVisible("#list-page"))
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/materialized_view/web$slow/refresh", strings.NewReader(`{"source_task_size": 1, "concurrency": 1}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("slow refresh: %v %v", resp, err)
	}
	resp.Body.Close()
	// The list re-renders as events arrive, so a row found by one call may
	// be gone by the next: find and click it in one script.
	step("the running job in the list", chromedp.WaitVisible(`#jobs tr[data-state="RUNNING"]`))
	octx, cancelO := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelO()
	if _, err := chromedp.Run(octx, chromedp.Poll[bool](`(() => { const r = document.querySelector('#jobs tr[data-state="RUNNING"]'); if (!r) return false; r.click(); return true; })()`)); err != nil {
		fail("open the running job from the list", err)
	}
	step("the job page", chromedp.WaitVisible("#job-page"))
	pctx, cancelP := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelP()
	if _, err := chromedp.Run(pctx, chromedp.Poll[bool](`document.getElementById('job-phase').textContent === 'expanding'`)); err != nil {
		fail("wait for expanding", err)
	}
	step("cancel it", chromedp.Click("#cancel-btn"), chromedp.WaitVisible("#job-state.state-CANCELLED"))
	if st := text("#job-state"); st != "CANCELLED" {
		t.Fatalf("after cancel: %q", st)
	}
	if items := text("#job-items-count"); !strings.HasSuffix(items, "work item events") && !strings.HasSuffix(items, "work item event") {
		t.Fatalf("slow job's work item events: %q", items)
	}
	if m := eval(`[...document.querySelectorAll('#job-milestones li strong')].map(e => e.textContent).join('|')`); !strings.HasPrefix(m, "submitted|started|planned 6000 work items") || !strings.HasSuffix(m, "cancelled") {
		t.Fatalf("slow job's milestones: %q", m)
	}
	eval(`location.hash = '#/'`)
	step("the list shows both",
		chromedp.WaitVisible(`#jobs tr[data-state="CANCELLED"]`),
		chromedp.WaitVisible(`#views tr[data-view="web$fast"]`),
	)
	if listStates := eval(`[...document.querySelectorAll('#jobs tbody tr')].map(r => r.dataset.state).join(',')`); listStates != "CANCELLED,DONE" {
		t.Fatalf("jobs list states (newest first): %q", listStates)
	}
	// Job ids show their random tail (a UUIDv7 begins with its time): the
	// two jobs, a few seconds apart, read differently.
	ids := eval(`[...document.querySelectorAll('#jobs tbody tr')].map(r => r.dataset.jobId.slice(-12) === r.querySelector('code').textContent.slice(1) ? r.querySelector('code').textContent : 'bad:' + r.dataset.jobId).join(',')`)
	if parts := strings.Split(ids, ","); len(parts) != 2 || parts[0] == parts[1] || strings.Contains(ids, "bad:") || !strings.HasPrefix(parts[0], "…") {
		t.Fatalf("job ids in the list: %q", ids)
	}
	// The views list shows each view's newest job and lag.
	step("web$fast's last job", chromedp.WaitVisible(`#views tr[data-view="web$slow"] .view-last-job .state-CANCELLED`))
	if r := rowText("web$fast"); !strings.Contains(r, "DONE") || !strings.Contains(r, "| fresh |") || !strings.Contains(r, "web$docs v1/1") {
		t.Fatalf("web$fast after its refresh: %s", r)
	}
	shoot("views-after")
	// Retry the cancelled job: a new job with the same request.
	step("open the cancelled job", chromedp.Click(`#jobs tr[data-state="CANCELLED"]`), chromedp.WaitVisible("#job-state.state-CANCELLED"))
	cancelledID := text("#job-id")
	step("retry it", chromedp.Click("#retry-btn"))
	rctx, cancelR := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelR()
	if _, err := chromedp.Run(rctx, chromedp.Poll[bool](`document.getElementById('job-id').textContent !== '`+cancelledID+`' && document.getElementById('job-id').textContent !== ''`)); err != nil {
		fail("wait for the retried job", err)
	}
	if req := text("#job-request"); !strings.Contains(req, `"source_task_size": 1,`) || !strings.Contains(req, `"concurrency": 1,`) {
		t.Fatalf("retried job's request: %s", req)
	}
	step("cancel the retry", chromedp.Click("#cancel-btn"), chromedp.WaitVisible("#job-state.state-CANCELLED"))
	eval(`location.hash = '#/'`)
	step("the list", chromedp.WaitVisible(`#jobs tr[data-state="CANCELLED"]`))

	// Filters are in the URL: a reload keeps them, a change updates it.
	eval(`location.hash = '#/?state=CANCELLED'`)
	step("reload filtered", chromedp.Reload(), chromedp.WaitVisible(`#jobs tr[data-state="CANCELLED"]`))
	fctx, cancelF := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelF()
	if _, err := chromedp.Run(fctx, chromedp.Poll[bool](`[...document.querySelectorAll('#jobs tbody tr')].map(r => r.dataset.state).join(',') === 'CANCELLED,CANCELLED'`)); err != nil {
		fail("the filtered list after a reload", err)
	}
	if st := eval(`document.getElementById('filter-state').value`); st != "CANCELLED" {
		t.Fatalf("state filter after a reload: %q", st)
	}
	eval(`(() => { const s = document.getElementById('filter-state'); s.value = 'DONE'; s.dispatchEvent(new Event('change')); return ''; })()`)
	if h := eval(`location.hash`); h != "#/?state=DONE" {
		t.Fatalf("hash after choosing DONE: %q", h)
	}
	if _, err := chromedp.Run(fctx, chromedp.Poll[bool](`[...document.querySelectorAll('#jobs tbody tr')].map(r => r.dataset.state).join(',') === 'DONE'`)); err != nil {
		fail("the list filtered on DONE", err)
	}
	// The job page's back link returns to the filtered list.
	step("open the done job", chromedp.Click(`#jobs tr[data-state="DONE"]`), chromedp.WaitVisible("#job-state.state-DONE"))
	if back := eval(`document.getElementById('back-link').getAttribute('href')`); back != "#/?state=DONE" {
		t.Fatalf("back link: %q", back)
	}
	eval(`location.hash = '#/'`)
	step("the whole list", chromedp.WaitVisible(`#jobs tr[data-state="CANCELLED"]`))

	// The operations page: the default pool with its queue and the dev
	// worker; paused from the page, a refresh waits in its queue until the
	// pool is resumed.
	step("the operations page", chromedp.Click("#nav-ops"), chromedp.WaitVisible(`#pools tr[data-cluster="default"][data-paused="false"]`))
	if live, workers := text(`#pools tr[data-cluster="default"] .pool-live`), text(`#pools tr[data-cluster="default"] .pool-workers`); live != "1" || !strings.Contains(workers, "/") {
		t.Fatalf("default pool: live workers %q, workers %q", live, workers)
	}
	step("pause the default pool", chromedp.Click(`#pools tr[data-cluster="default"] .pool-toggle`),
		chromedp.WaitVisible(`#pools tr[data-cluster="default"][data-paused="true"]`))
	jobID := refreshID(t, base, "web$fast")
	qctx, cancelQ := context.WithTimeout(ctx, 30*time.Second)
	defer cancelQ()
	if _, err := chromedp.Run(qctx, chromedp.Poll[bool](`document.querySelector('#pools tr[data-cluster="default"] .pool-pending').textContent !== '0'`)); err != nil {
		fail("a pending task in the paused pool", err)
	}
	if st := jobState(t, base, jobID); st != "PENDING" {
		t.Fatalf("job in a paused pool: %s", st)
	}
	shoot("operations-paused")
	step("resume it", chromedp.Click(`#pools tr[data-cluster="default"] .pool-toggle`),
		chromedp.WaitVisible(`#pools tr[data-cluster="default"][data-paused="false"]`))
	deadline := time.Now().Add(time.Minute)
	for jobState(t, base, jobID) != "DONE" {
		if time.Now().After(deadline) {
			t.Fatalf("job after the pool resumed: %s", jobState(t, base, jobID))
		}
		time.Sleep(100 * time.Millisecond)
	}
	shoot("operations")
	eval(`location.hash = '#/'`)
	step("back to the list", chromedp.WaitVisible(`#jobs tr[data-state="CANCELLED"]`))

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		fail("screenshot", err)
	}
	path := filepath.Join(t.TempDir(), "console.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if len(shot) < 1000 {
		t.Fatalf("screenshot of %d bytes", len(shot))
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(shot))
	// MVQ_CONSOLE_SCREENSHOT=path keeps a copy (to look at the page).
	if keep := os.Getenv("MVQ_CONSOLE_SCREENSHOT"); keep != "" {
		_ = os.WriteFile(keep, shot, 0o644)
	}
}

// TestConsoleFiles: the console is served without credentials, with a
// strict content security policy, and carries no tenant data.
func TestConsoleFiles(t *testing.T) {
	base := startDev(t)
	for _, c := range []struct {
		path, ctype, want string
		status            int
	}{
		{"/ui/", "text/html", `<script src="app.js" defer></script>`, 200},
		{"/ui/app.js", "text/javascript", "sessionStorage", 200},
		{"/ui/style.css", "text/css", "font-family", 200},
		{"/ui/config.json", "application/json", `"trace_url_template":"http://tempo.invalid/explore?trace={trace_id}"`, 200},
		{"/ui/missing.js", "application/json", `"status":404`, 404},
		{"/ui/../v1/namespace/$/list", "application/json", "no file", 404}, // no way out of /ui/
	} {
		resp, err := http.Get(base + c.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.ctype) || !strings.Contains(string(b), c.want) {
			t.Errorf("GET %s: %d %s %.200s", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		if c.status == 200 && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("GET %s: no CSP", c.path)
		}
	}
	resp, err := http.Get(base + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.Path != "/ui/" {
		t.Errorf("/ui redirects to %s", resp.Request.URL.Path)
	}
}
