package service_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/chunker"
	"github.com/mvq-dev/mvq/internal/testenv"
	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/service"
)

func TestMain(m *testing.M) {
	if os.Getenv("MVQ_TEST_WORKER") != "" {
		runWorkerProcess()
		return
	}
	if os.Getenv("MVQ_TEST_API") != "" {
		runAPIProcess()
		return
	}
	if os.Getenv("MVQ_TEST_THIEF") != "" {
		runThiefProcess()
		return
	}
	if os.Getenv("MVQ_TEST_PEER") != "" {
		runPeerProcess()
		return
	}
	benchMemory()
	// In S3 mode (make test-s3) one SeaweedFS serves the whole run.
	code := testenv.S3ForTestMain(m)
	testenv.StopShared()
	os.Exit(code)
}

// runWorkerProcess is the body of the worker processes the tests start by
// re-executing the test binary: a real cmd/worker equivalent.
func runWorkerProcess() {
	cfg, err := service.LoadConfig("worker", nil, os.Getenv, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signalContext()
	defer stop()
	err = service.RunWorker(ctx, cfg, service.ReadyFile(os.Getenv))
	if p := os.Getenv("MVQ_TEST_HEAPPROFILE"); p != "" { // benchmarks: where the worker's memory goes
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprintf(os.Stderr, "worker memory: Go runtime Sys %d MB (heap Sys %d MB, in use %d MB, released %d MB; stacks %d MB)\n",
			ms.Sys>>20, ms.HeapSys>>20, ms.HeapInuse>>20, ms.HeapReleased>>20, ms.StackSys>>20)
		if f, ferr := os.Create(p); ferr == nil {
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runAPIProcess is the body of the API process the tests start: a real
// cmd/api equivalent.
func runAPIProcess() {
	cfg, err := service.LoadConfig("api", nil, os.Getenv, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signalContext()
	defer stop()
	stopProfile := func() {}
	if p := os.Getenv("MVQ_TEST_CPUPROFILE"); p != "" { // benchmarks: where the API's time goes
		f, err := os.Create(p)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			stopProfile = func() { pprof.StopCPUProfile(); f.Close() }
		}
	}
	err = service.RunAPI(ctx, cfg, service.ReadyFile(os.Getenv))
	stopProfile()
	if p := os.Getenv("MVQ_TEST_MEMPROFILE"); p != "" { // benchmarks: what the API allocates
		if f, err := os.Create(p); err == nil {
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

type env struct {
	t         testing.TB
	api       string
	token     string        // sent as Authorization: Bearer when set
	apiLogs   *lockedBuffer // the API process's output
	redisURL  string
	warehouse string
	workers   []*exec.Cmd
	// workerReady are the ready files of the workers, holding each one's
	// metrics address.
	workerReady []string
}

// start runs the API in-process and n worker processes, all on a real
// redis-server and a warehouse in a temp dir.
func start(t *testing.T, workers int, clusters string) *env {
	return startAPI(t, workers, clusters)
}

// startAPI is start with extra environment for the API process (it runs
// with MVQ_AUTH=none unless apiEnv says otherwise).
func startAPI(t testing.TB, workers int, clusters string, apiEnv ...string) *env {
	t.Helper()
	r, db := testenv.SharedRedis(t)
	e := &env{t: t, redisURL: r.URL(db), warehouse: "file://" + t.TempDir()}
	for i := 0; i < workers; i++ {
		e.startWorker(clusters)
	}
	addr := e.startProcess("api", append([]string{"MVQ_TEST_API=1", "MVQ_LISTEN=127.0.0.1:0"}, apiEnv...)...)
	e.api = "http://" + addr
	return e
}

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (e *env) startWorker(clusters string) *exec.Cmd {
	e.t.Helper()
	e.startProcess("worker", "MVQ_TEST_WORKER=1", "MVQ_CLUSTERS="+clusters, "MVQ_METRICS_LISTEN=127.0.0.1:0", "MVQ_WORKER_CONCURRENCY=4")
	return e.workers[len(e.workers)-1]
}

// startProcess re-executes the test binary as an API or worker process
// and returns the address it wrote to its ready file.
func (e *env) startProcess(what string, extra ...string) string {
	e.t.Helper()
	ready := filepath.Join(e.t.TempDir(), "ready")
	cmd := exec.Command(os.Args[0])
	// Later entries win: extra may override MVQ_AUTH and MVQ_LOG_LEVEL.
	cmd.Env = append(append(os.Environ(), "MVQ_READY_FILE="+ready, "MVQ_REDIS_URL="+e.redisURL,
		"MVQ_WAREHOUSE="+e.warehouse, "MVQ_LOG_LEVEL=warn", "MVQ_AUTH=none"), extra...)
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if what == "api" {
		e.apiLogs = logs
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	if what == "worker" {
		e.workers = append(e.workers, cmd)
		e.workerReady = append(e.workerReady, ready)
	}
	e.t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if e.t.Failed() {
			e.t.Logf("%s %d log:\n%s", what, cmd.Process.Pid, logs.String())
		}
	})
	var addr []byte
	waitFor(e.t, 60*time.Second, what+" ready", func() bool {
		addr, _ = os.ReadFile(ready)
		return len(addr) > 0
	})
	return string(addr)
}

// waitFor waits on a condition with a deadline (testenv.WaitFor).
var waitFor = testenv.WaitFor

func (e *env) post(path string, body any, out any) int {
	e.t.Helper()
	raw, ok := body.(string)
	if !ok {
		b, _ := json.Marshal(body)
		raw = string(b)
	}
	status, b, err := e.do("POST", path, strings.NewReader(raw))
	if err != nil {
		e.t.Fatal(err)
	}
	if status >= 500 {
		e.t.Fatalf("POST %s: %d %s", path, status, b)
	}
	if out != nil {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(out); err != nil {
			e.t.Fatalf("POST %s: %d %s: %v", path, status, b, err)
		}
	}
	return status
}

func (e *env) job(id string) map[string]any {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.api+"/v1/job/"+id, nil)
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	dec.Decode(&m)
	return m
}

func (e *env) wait(id string) map[string]any {
	e.t.Helper()
	var j map[string]any
	waitFor(e.t, 180*time.Second, "job "+id, func() bool {
		j = e.job(id)
		s, _ := j["state"].(string)
		return s == "DONE" || s == "FAILED" || s == "CANCELLED"
	})
	return j
}

func (e *env) refresh(view string, body any) string {
	e.t.Helper()
	var r map[string]any
	if st := e.post("/v1/materialized_view/"+view+"/refresh", body, &r); st != 202 {
		e.t.Fatalf("refresh %s: %d %v", view, st, r)
	}
	return r["job_id"].(string)
}

func (e *env) mustDone(id string) map[string]any {
	e.t.Helper()
	j := e.wait(id)
	if j["state"] != "DONE" {
		e.t.Fatalf("job %s ended %v: %v", id, j["state"], j["failure"])
	}
	return j
}

const spec = `{"chunker": "fixed", "input_column": "body", "output_column": "chunk", "chunk_size": 5, "chunk_overlap": 1, "unit": "words"}`

func doc(i int) map[string]any {
	words := make([]string, 3+i%9)
	for w := range words {
		words[w] = fmt.Sprintf("w%d_%d", i, w)
	}
	lang := "en"
	if i%5 == 4 {
		lang = "de"
	}
	return map[string]any{"id": i, "lang": lang, "body": strings.Join(words, " ")}
}

func docs(from, to int) []map[string]any {
	var out []map[string]any
	for i := from; i < to; i++ {
		out = append(out, doc(i))
	}
	return out
}

func (e *env) createChunkerView(view, source string) {
	e.t.Helper()
	sum := sha256.Sum256([]byte(spec))
	req := map[string]any{
		"kind":          "chunker",
		"source_query":  `SELECT id, body FROM "` + source + `" WHERE lang = 'en'`,
		"output_schema": "",
		"udtf_spec": map[string]any{"kind": "chunker", "udtf": base64.StdEncoding.EncodeToString([]byte(spec)),
			"udtf_sha": hex.EncodeToString(sum[:]), "udtf_name": "fixed", "udtf_version": "1"},
		"with_no_data": true,
	}
	var r map[string]any
	if st := e.post("/v1/materialized_view/"+view+"/create", req, &r); st != 201 {
		e.t.Fatalf("create view: %d %v", st, r)
	}
}

type chunkRow struct {
	addr  string
	index string
	id    string
	chunk string
}

// String shows the whole row: a view row keeps its source row's identity
// (Lance's row address, its position in the data file), which is what a
// query's _rowaddr answers, in fragments with deletion files too.
func (r chunkRow) String() string {
	return fmt.Sprintf("%s/%s/%s/%q", r.addr, r.index, r.id, r.chunk)
}

// expected recomputes the view from the source as it is now: the oracle
// every refresh result is compared with.
func (e *env) expected(source string, limit int) []chunkRow {
	e.t.Helper()
	var rows []map[string]any
	e.post("/v1/table/"+source+"/query", map[string]any{"filter": "lang = 'en'", "with_row_id": true}, &rows)
	s, err := chunker.Parse([]byte(spec))
	if err != nil {
		e.t.Fatal(err)
	}
	ch, _ := chunker.New(s)
	var out []chunkRow
	for _, r := range rows {
		for i, c := range ch.Chunk(fmt.Sprint(r["body"]), nil) {
			out = append(out, chunkRow{addr: fmt.Sprint(r["_rowaddr"]), index: fmt.Sprint(i), id: fmt.Sprint(r["id"]), chunk: c})
		}
	}
	sortRows(out)
	if limit >= 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// num reads a JSON number decoded with UseNumber.
func num(v any) int64 {
	var n int64
	fmt.Sscan(fmt.Sprint(v), &n)
	return n
}

func sortRows(rows []chunkRow) {
	num := func(s string) uint64 { var n uint64; fmt.Sscan(s, &n); return n }
	sort.Slice(rows, func(i, j int) bool {
		if a, b := num(rows[i].addr), num(rows[j].addr); a != b {
			return a < b
		}
		return num(rows[i].index) < num(rows[j].index)
	})
}

func (e *env) viewRows(view string) []chunkRow {
	e.t.Helper()
	var rows []map[string]any
	if st := e.post("/v1/table/"+view+"/query", map[string]any{}, &rows); st != 200 {
		e.t.Fatalf("query view %d", st)
	}
	var out []chunkRow
	for _, r := range rows {
		if _, ok := r["body"]; ok {
			e.t.Fatalf("view row carries the input column: %v", r)
		}
		out = append(out, chunkRow{addr: fmt.Sprint(r["__source_row_id"]), index: fmt.Sprint(r["__chunk_index"]), id: fmt.Sprint(r["id"]), chunk: fmt.Sprint(r["chunk"])})
	}
	sortRows(out)
	return out
}

func (e *env) assertView(view, source string, limit int) {
	e.t.Helper()
	got, want := e.viewRows(view), e.expected(source, limit)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		e.t.Fatalf("view %s has %d rows, want %d\n got: %v\nwant: %v", view, len(got), len(want), got, want)
	}
}

// e2eTokens are the tokens of the end-to-end test with MVQ_AUTH=tokens:
// alice may do anything under docs, bob may only read other.
const (
	aliceToken = "e2e-alice-token-0123456789"
	bobToken   = "e2e-bob-token-0123456789"
)

// startWithTokens starts the API with MVQ_AUTH=tokens (debug logging, so
// the token-absence check sees every log line) and sends alice's token.
func startWithTokens(t *testing.T, workers int) *env {
	t.Helper()
	e := startAPI(t, workers, "default", "MVQ_AUTH=tokens", "MVQ_AUTH_TOKENS_FILE="+tokensFile(t), "MVQ_LOG_LEVEL=debug")
	e.token = aliceToken
	return e
}

// tokensFile writes the tokens file of alice (read, write and refresh on
// docs) and bob (read on other).
func tokensFile(t *testing.T) string {
	t.Helper()
	sum := sha256.Sum256([]byte(aliceToken))
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	yaml := "tokens:\n" +
		"  - token_sha256: " + hex.EncodeToString(sum[:]) + "\n" +
		"    principal: alice\n" +
		"    grants: [{namespace: docs, actions: [read, write, refresh]}]\n" +
		"  - token: " + bobToken + "\n" +
		"    principal: bob\n" +
		"    grants: [{namespace: other, actions: [read]}]\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestRefreshEndToEnd(t *testing.T) {
	e := startWithTokens(t, 2)
	for _, c := range []struct {
		token string
		want  int
	}{{"", 401}, {"not-a-token-of-this-api", 401}, {bobToken, 403}} {
		e.token = c.token
		if st := e.post("/v1/namespace/docs/create", `{}`, nil); st != c.want {
			t.Fatalf("namespace create with token %q: %d, want %d", c.token, st, c.want)
		}
	}
	e.token = aliceToken
	if st := e.post("/v1/namespace/docs/create", `{}`, nil); st != 200 {
		t.Fatalf("namespace create as alice: %d", st)
	}
	t.Cleanup(func() {
		// Nothing the API logged, at debug level, holds a token.
		logs := e.apiLogs.String()
		for _, tok := range []string{aliceToken, bobToken} {
			if strings.Contains(logs, tok) {
				t.Errorf("the API log holds a token:\n%s", logs)
			}
		}
	})
	if st := e.post("/v1/table/docs$articles/create", docs(0, 60), nil); st != 200 {
		t.Fatalf("create source: %d", st)
	}
	e.createChunkerView("docs$chunks", "docs$articles")

	// Full refresh, bounded concurrency across two worker processes.
	j := e.mustDone(e.refresh("docs$chunks", map[string]any{"source_task_size": 4, "concurrency": 2, "max_rows_per_fragment": 10}))
	e.assertView("docs$chunks", "docs$articles", -1)
	// No span exporter here: spans record nothing, but the job still has
	// its trace id.
	if tid, _ := j["trace_id"].(string); len(tid) != 32 || strings.Trim(tid, "0") == "" {
		t.Fatalf("job trace_id %q", tid)
	}
	prog := j["progress"].(map[string]any)
	if fmt.Sprint(prog["work_items_total"]) != "15" || fmt.Sprint(prog["work_items_done"]) != "15" {
		t.Fatalf("progress %v", prog)
	}
	if mr := fmt.Sprint(prog["max_running"]); mr != "1" && mr != "2" {
		t.Fatalf("max_running %s exceeds concurrency 2", mr)
	}
	res := j["result"].(map[string]any)
	if res["mode"] != "full" {
		t.Fatalf("result %v", res)
	}
	var stats map[string]any
	e.post("/v1/table/docs$chunks/stats", `{}`, &stats)
	if max := num(stats["fragment_stats"].(map[string]any)["lengths"].(map[string]any)["max"]); max > 10 || max == 0 {
		t.Fatalf("largest view fragment holds %d rows; max_rows_per_fragment is 10", max)
	}

	// Nothing changed: no_op, no new version.
	j = e.mustDone(e.refresh("docs$chunks", `{}`))
	if j["result"].(map[string]any)["mode"] != "no_op" {
		t.Fatalf("second refresh %v", j["result"])
	}

	// Append, update, delete: incremental with exact rows each time.
	e.post("/v1/table/docs$articles/insert", docs(60, 70), nil)
	j = e.mustDone(e.refresh("docs$chunks", `{"source_task_size": 3}`))
	if r := j["result"].(map[string]any); r["mode"] != "incremental" || fmt.Sprint(j["progress"].(map[string]any)["work_items_total"]) != "4" {
		t.Fatalf("incremental append: %v %v", r, j["progress"])
	}
	e.assertView("docs$chunks", "docs$articles", -1)
	e.post("/v1/table/docs$articles/update", map[string]any{"predicate": "id = 7", "updates": [][]string{{"body", "'brand new words here now'"}}}, nil)
	e.post("/v1/table/docs$articles/delete", map[string]any{"predicate": "id IN (3, 61)"}, nil)
	j = e.mustDone(e.refresh("docs$chunks", `{}`))
	if r := j["result"].(map[string]any); r["mode"] != "incremental" || fmt.Sprint(r["rows_removed"]) == "0" {
		t.Fatalf("incremental update/delete: %v", r)
	}
	e.assertView("docs$chunks", "docs$articles", -1)

	// output_limit keeps the first rows in (source row, chunk) order.
	e.createChunkerView("docs$limited", "docs$articles")
	e.mustDone(e.refresh("docs$limited", `{"output_limit": 7, "source_task_size": 2, "concurrency": 1}`))
	e.assertView("docs$limited", "docs$articles", 7)

	// Bad requests are 400s naming the field.
	for body, field := range map[string]string{
		`{"cluster": "nowhere"}`:  "cluster",
		`{"src_version": 999}`:    "src_version",
		`{"manifest": "{nope"}`:   "manifest",
		`{"concurrency": -1}`:     "concurrency",
		`{"source_task_size": 0}`: "source_task_size",
	} {
		var p map[string]any
		if st := e.post("/v1/materialized_view/docs$chunks/refresh", body, &p); st != 400 || !strings.Contains(fmt.Sprint(p["detail"]), field) {
			t.Errorf("refresh %s: %d %v", body, st, p)
		}
	}
}

func TestTwoConcurrentRefreshesAndCancel(t *testing.T) {
	e := start(t, 2, "default")
	e.post("/v1/table/src/create", docs(0, 40), nil)
	e.createChunkerView("v", "src")
	var ids []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Options differ: identical ones would join one PENDING job.
			id := e.refresh("v", fmt.Sprintf(`{"source_task_size": %d}`, 3+i))
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
		}()
	}
	wg.Wait()
	modes := map[string]int{}
	for _, id := range ids {
		j := e.mustDone(id)
		modes[fmt.Sprint(j["result"].(map[string]any)["mode"])]++
	}
	if modes["full"] != 1 || modes["no_op"] != 1 {
		t.Fatalf("two refreshes: modes %v", modes)
	}
	e.assertView("v", "src", -1)

	// Cancel: a cancelled job never changes the view.
	var before map[string]any
	e.post("/v1/table/v/describe", `{}`, &before)
	e.post("/v1/table/src/insert", docs(100, 400), nil)
	id := e.refresh("v", `{"source_task_size": 1, "concurrency": 1}`)
	var cj map[string]any
	st := e.post("/v1/jobs/cancel", map[string]any{"job_id": id}, &cj)
	if st != 200 {
		t.Fatalf("cancel: %d %v", st, cj)
	}
	j := e.wait(id)
	if j["state"] != "CANCELLED" {
		t.Fatalf("cancelled job ended %v", j["state"])
	}
	var after map[string]any
	e.post("/v1/table/v/describe", `{}`, &after)
	if fmt.Sprint(before["version"]) != fmt.Sprint(after["version"]) {
		t.Fatalf("cancelled job changed the view: v%v -> v%v", before["version"], after["version"])
	}
	if st := e.post("/v1/jobs/cancel", map[string]any{"job_id": id}, nil); st != 409 {
		t.Fatalf("second cancel: %d", st)
	}
	// The next refresh still brings the view up to date.
	e.mustDone(e.refresh("v", `{"source_task_size": 50}`))
	e.assertView("v", "src", -1)
	var list map[string]any
	e.post("/v1/jobs/list", map[string]any{"view": "v"}, &list)
	if n := len(list["jobs"].([]any)); n != 4 {
		t.Fatalf("jobs/list for v: %d jobs", n)
	}
}

// TestKilledWorker: the only worker is SIGKILLed while it holds work
// items; a worker started afterwards finishes the job (asynq recovers the
// dead worker's tasks when their lease expires), which ends DONE with
// exactly the right rows.
func TestKilledWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for asynq to recover a killed worker's task")
	}
	e := start(t, 1, "default")
	big := make([]map[string]any, 24)
	for i := range big {
		words := make([]string, 20000)
		for w := range words {
			words[w] = fmt.Sprintf("d%dw%d", i, w)
		}
		big[i] = map[string]any{"id": i, "lang": "en", "body": strings.Join(words, " ")}
	}
	if st := e.post("/v1/table/src/create", big, nil); st != 200 {
		t.Fatalf("create source: %d", st)
	}
	e.createChunkerView("v", "src")
	id := e.refresh("v", `{"source_task_size": 1, "concurrency": 2}`)

	opt, err := redis.ParseURL(e.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	active := func() int64 {
		n, _ := rdb.HLen(context.Background(), jobs.RedisKey("job:"+id+":active")).Result()
		return n
	}
	waitFor(t, 60*time.Second, "the worker to be mid-item", func() bool {
		p, _ := e.job(id)["progress"].(map[string]any)
		return p != nil && num(p["work_items_done"]) >= 2 && active() > 0
	})
	if err := e.workers[0].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.workers[0].Wait()
	// No worker is alive: items still marked running were cut off.
	if n := active(); n == 0 {
		t.Fatal("the killed worker held no work item; the test proves nothing")
	}
	e.startWorker("default")
	j := e.wait(id)
	if j["state"] != "DONE" {
		t.Fatalf("job after SIGKILL ended %v: %v", j["state"], j["failure"])
	}
	if p := j["progress"].(map[string]any); num(p["work_items_done"]) != 24 {
		t.Fatalf("progress after recovery: %v", p)
	}
	e.assertView("v", "src", -1)
}

// TestViewKindsAndOptions: query and udtf views, with_no_data false,
// src_version, cluster routing, inline manifest, intra-applier concurrency,
// job describe/list and the event stream.
func TestViewKindsAndOptions(t *testing.T) {
	e := start(t, 1, "default")
	e.startWorker("gpu")
	e.post("/v1/table/src/create", docs(0, 20), nil)
	e.post("/v1/table/src/insert", docs(20, 30), nil) // version 2

	// A query view created with data: the first refresh starts at once.
	var created map[string]any
	st := e.post("/v1/materialized_view/q/create", map[string]any{
		"kind": "query", "source_query": `SELECT id, upper(lang) AS lang FROM "src" WHERE id % 3 = 0`, "output_schema": "",
		"with_no_data": false,
	}, &created)
	if st != 201 || created["job_id"] == nil {
		t.Fatalf("create query view: %d %v", st, created)
	}
	e.mustDone(created["job_id"].(string))
	var rows []map[string]any
	e.post("/v1/table/q/query", map[string]any{}, &rows)
	if len(rows) != 10 || fmt.Sprint(rows[1]["id"]) != "3" || rows[1]["lang"] != "EN" || rows[1]["__source_row_id"] == nil {
		t.Fatalf("query view rows: %v", rows)
	}
	if st := e.post("/v1/materialized_view/q/create", map[string]any{"kind": "query", "source_query": `SELECT id FROM src`, "output_schema": ""}, nil); st != 409 {
		t.Fatalf("second create: %d", st)
	}
	var p map[string]any
	if st := e.post("/v1/materialized_view/q/refresh", `{"output_limit": 3}`, &p); st != 400 || !strings.Contains(fmt.Sprint(p["detail"]), "output_limit") {
		t.Fatalf("output_limit on a query view: %d %v", st, p)
	}
	// A view is written only by its refreshes.
	for path, body := range map[string]string{
		"/v1/table/q/insert": `[{"id": 1, "lang": "EN", "__source_row_id": 1}]`,
		"/v1/table/q/delete": `{"predicate": "id > 0"}`,
		"/v1/table/q/update": `{"updates": [["lang", "'x'"]]}`,
	} {
		var p map[string]any
		if st := e.post(path, body, &p); st != 400 || !strings.Contains(fmt.Sprint(p["detail"]), "materialized view") {
			t.Errorf("%s on a view: %d %v", path, st, p)
		}
	}
	var n json.Number
	e.post("/v1/table/q/count_rows", `{"predicate": "id > 10"}`, &n)
	if n.String() != "6" {
		t.Fatalf("count_rows on the view: %s", n)
	}

	// A chunker view refreshed to source version 1, on cluster gpu, with an
	// inline manifest and 4 applier goroutines.
	e.createChunkerView("c", "src")
	manifest := `{"version": "1", "name": "one-off"}`
	id := e.refresh("c", map[string]any{"src_version": 1, "cluster": "gpu", "manifest": manifest, "intra_applier_concurrency": 4, "source_task_size": 7})
	j := e.mustDone(id)
	sum := sha256.Sum256([]byte(`{"name":"one-off","version":"1"}`)) // canonical JSON
	if j["cluster"] != "gpu" || j["manifest_checksum"] != hex.EncodeToString(sum[:]) {
		t.Fatalf("job cluster/manifest: %v %v", j["cluster"], j["manifest_checksum"])
	}
	if r := j["result"].(map[string]any); fmt.Sprint(r["source_version"]) != "1" {
		t.Fatalf("src_version: %v", r)
	}
	got := e.viewRows("c")
	for _, r := range got {
		if num(r.id) >= 20 {
			t.Fatalf("refresh to version 1 holds row of version 2: %v", r)
		}
	}
	// Then to the latest: incremental, exact.
	e.mustDone(e.refresh("c", `{}`))
	e.assertView("c", "src", -1)

	// A udtf view: an aggregate over the whole source.
	e.post("/v1/materialized_view/agg/create", map[string]any{
		"kind": "udtf", "source_query": `SELECT lang, count(*) AS n FROM src GROUP BY lang ORDER BY lang`, "output_schema": "", "with_no_data": true,
	}, nil)
	e.mustDone(e.refresh("agg", `{}`))
	e.post("/v1/table/agg/query", map[string]any{}, &rows)
	if len(rows) != 2 || rows[0]["lang"] != "de" || fmt.Sprint(rows[0]["n"]) != "6" || fmt.Sprint(rows[1]["n"]) != "24" {
		t.Fatalf("udtf rows: %v", rows)
	}
	if j := e.mustDone(e.refresh("agg", `{}`)); j["result"].(map[string]any)["mode"] != "no_op" {
		t.Fatalf("udtf with an unchanged source: %v", j["result"])
	}

	// Jobs: describe, list by state, events end at the terminal state.
	var d map[string]any
	if st := e.post("/v1/jobs/describe", map[string]any{"job_id": id}, &d); st != 200 || d["job_id"] != id || d["job_type"] != "refresh" {
		t.Fatalf("describe: %d %v", st, d)
	}
	var list map[string]any
	e.post("/v1/jobs/list", map[string]any{"state": "DONE", "limit": 2}, &list)
	if len(list["jobs"].([]any)) != 2 || list["page_token"] == nil {
		t.Fatalf("list page: %v", list)
	}
	if st := e.post("/v1/jobs/describe", map[string]any{"job_id": "nope"}, nil); st != 404 {
		t.Fatalf("unknown job: %d", st)
	}
	resp, err := http.Get(e.api + "/v1/job/" + id + "/events")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body) // the stream ends after the terminal event
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" || !strings.Contains(string(body), `"state":"DONE"`) || !strings.Contains(string(body), "event: phase") {
		t.Fatalf("events: %s", body)
	}
}
