package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/creack/pty"
	"github.com/spf13/cobra"
)

// The tests run this test binary as the mvq command (a real process with
// its own signals, terminal and exit code): with MVQ_TEST_AS_MVQ=1 it is
// mvq's main.
func TestMain(m *testing.M) {
	// mvq dev runs its runtime local-embed as `<this binary> udf ...`,
	// with an environment of its own.
	if os.Getenv("MVQ_TEST_AS_MVQ") == "1" || len(os.Args) > 1 && os.Args[1] == "udf" {
		os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// mvqCmd is the command `mvq args...` with env added.
func mvqCmd(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "MVQ_TEST_AS_MVQ=1"), env...)
	return cmd
}

// dev is a running `mvq dev`.
type dev struct {
	url       string
	warehouse string
	cmd       *exec.Cmd
	log       *syncWriter
	exited    chan struct{}
}

// stop ends mvq dev with SIGTERM and waits for it.
func (d *dev) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// startDev runs `mvq dev` on a free port over a new warehouse (or the one
// given) and waits until it listens. It is stopped (SIGTERM) at cleanup.
func startDev(t *testing.T, warehouse string, env ...string) *dev {
	t.Helper()
	dir := t.TempDir()
	if warehouse == "" {
		warehouse = filepath.Join(dir, "warehouse")
	}
	ready := filepath.Join(dir, "ready")
	cmd := mvqCmd(append([]string{"MVQ_READY_FILE=" + ready, "MVQ_LOG_LEVEL=warn"}, env...),
		"dev", "-listen", "127.0.0.1:0", "-warehouse", "file://"+warehouse)
	log := &syncWriter{w: &bytes.Buffer{}}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	d := &dev{warehouse: warehouse, cmd: cmd, log: log, exited: exited}
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(d.stop)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			d.url = "http://" + string(b)
			return d
		}
		select {
		case <-exited:
			t.Fatalf("mvq dev exited: %s", log.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("mvq dev did not start: %s", log.String())
		}
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.(*bytes.Buffer).String()
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

type result struct {
	stdout, stderr string
	code           int
}

// mvq runs the CLI against d and returns its output and exit code.
func (d *dev) mvq(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := mvqCmd(append([]string{"MVQ_URL=" + d.url}, env...), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

// ok runs the CLI and fails the test unless it exits 0.
func (d *dev) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := d.mvq(t, nil, args...)
	if r.code != 0 {
		t.Fatalf("mvq %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// arrowRecord is a small record: id int64, body utf8.
func arrowRecord(ids []int64, bodies []string) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "body", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
	b.Field(1).(*array.StringBuilder).AppendValues(bodies, nil)
	return b.NewRecordBatch()
}

// TestCLISession: from an empty warehouse to a refreshed chunker view,
// loading every input format, as a user would type it.
func TestCLISession(t *testing.T) {
	d := startDev(t, "")
	if out := d.ok(t, "ns", "create", "docs"); !strings.Contains(out, "created namespace docs") {
		t.Fatalf("ns create: %q", out)
	}
	if out := d.ok(t, "ns", "ls"); strings.TrimSpace(out) != "docs" {
		t.Fatalf("ns ls: %q", out)
	}
	csvFile := writeFile(t, "articles.csv", "id,lang,body\n1,en,The quick brown fox jumps over the lazy dog.\n2,de,Der schnelle braune Fuchs.\n3,en,\"A second, longer English article about foxes and dogs.\"\n")
	d.ok(t, "table", "create", "docs$articles", "--from", csvFile)
	nd := writeFile(t, "more.ndjson", `{"id": 4, "lang": "en", "body": "Fourth article."}`+"\n\n"+`{"id": 5, "lang": "fr", "body": "Cinquième."}`+"\n")
	if out := d.ok(t, "table", "insert", "docs$articles", "--from", nd); !strings.Contains(out, "inserted 2 rows") {
		t.Fatalf("insert: %q", out)
	}
	desc := d.ok(t, "table", "describe", "docs$articles")
	for _, want := range []string{"version   2", "rows      5", "id", "int64", "lang", "utf8"} {
		if !strings.Contains(desc, want) {
			t.Fatalf("describe lacks %q:\n%s", want, desc)
		}
	}
	// Parquet and Arrow IPC: schema as stored.
	rec := arrowRecord([]int64{10, 11}, []string{"parquet one", "parquet two"})
	defer rec.Release()
	var pq bytes.Buffer
	tbl := array.NewTableFromRecords(rec.Schema(), []arrow.RecordBatch{rec})
	if err := pqarrow.WriteTable(tbl, &pq, 1024, nil, pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
	tbl.Release()
	d.ok(t, "table", "create", "docs$pq", "--from", writeFile(t, "x.parquet", pq.String()))
	var ipcFile bytes.Buffer
	w, err := ipc.NewFileWriter(&ipcFile, ipc.WithSchema(rec.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil || w.Close() != nil {
		t.Fatal(err)
	}
	d.ok(t, "table", "create", "docs$ipc", "--from", writeFile(t, "x.arrow", ipcFile.String()))
	for _, name := range []string{"docs$pq", "docs$ipc"} {
		var rows []map[string]any
		if err := json.Unmarshal([]byte(d.ok(t, "query", name, "-o", "json")), &rows); err != nil || len(rows) != 2 || rows[1]["body"] != "parquet two" {
			t.Fatalf("%s rows: %v %v", name, rows, err)
		}
	}
	if out := d.ok(t, "table", "ls", "docs"); !strings.Contains(out, "articles") || !strings.Contains(out, "pq") {
		t.Fatalf("table ls: %q", out)
	}

	// query: JSON when not a terminal, CSV and aligned table on request.
	var rows []map[string]any
	if err := json.Unmarshal([]byte(d.ok(t, "query", "docs$articles", "--filter", "lang = 'en'", "--columns", "id,body", "--limit", "2")), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || len(rows[0]) != 2 || rows[0]["body"] == nil {
		t.Fatalf("query rows: %v", rows)
	}
	if out := d.ok(t, "query", "docs$articles", "--filter", "id = 2", "-o", "csv"); out != "id,lang,body\n2,de,Der schnelle braune Fuchs.\n" {
		t.Fatalf("csv: %q", out)
	}
	if out := d.ok(t, "query", "docs$articles", "--columns", "id,lang", "-o", "table"); !regexp.MustCompile(`(?m)^id\s+lang\n1\s+en\n`).MatchString(out) || !strings.Contains(out, "(5 rows)") {
		t.Fatalf("table: %q", out)
	}

	// A chunker view: the CLI encodes the spec and its sha256.
	jobID := strings.TrimSpace(d.ok(t, "view", "create", "docs$chunks", "--query", `SELECT id, body FROM "docs$articles" WHERE lang = 'en'`,
		"--chunker", "fixed", "--input", "body", "--output", "chunk", "--size", "20", "--overlap", "5"))
	if !regexp.MustCompile(`^[0-9a-f-]{36}$`).MatchString(jobID) {
		t.Fatalf("view create printed %q, want the first refresh's job id", jobID)
	}
	if r := d.mvq(t, nil, "jobs", "watch", jobID); r.code != 0 || !strings.Contains(r.stderr, "DONE") {
		t.Fatalf("watch: %+v", r)
	}
	d.ok(t, "table", "insert", "docs$articles", "--from", writeFile(t, "late.ndjson", `{"id": 6, "lang": "en", "body": "A late English article arrives."}`))
	r := d.mvq(t, nil, "refresh", "docs$chunks", "--wait", "--source-task-size", "1", "--concurrency", "2")
	if r.code != 0 {
		t.Fatalf("refresh --wait: %+v", r)
	}
	id2 := strings.TrimSpace(r.stdout)
	wants := []string{"DONE", "incremental refresh, source v3 → view v3"}
	if first, _, _ := strings.Cut(r.stderr, "\n"); !strings.Contains(first, " DONE") {
		// The wait began before the job ended (a job of a few
		// milliseconds can end before the wait's first read, and then
		// there is nothing to follow): it showed the phases.
		wants = append(wants, "RUNNING   planning", "expanding")
	}
	for _, want := range wants {
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("refresh --wait output lacks %q:\n%s", want, r.stderr)
		}
	}
	var chunks []map[string]any
	if err := json.Unmarshal([]byte(d.ok(t, "query", "docs$chunks", "--filter", "id = 6")), &chunks); err != nil || len(chunks) < 2 {
		t.Fatalf("chunks of the late article: %v %v", chunks, err)
	}
	show := d.ok(t, "jobs", "show", id2)
	for _, want := range []string{"state      DONE", `"source_task_size":1`, "result     incremental"} {
		if !strings.Contains(show, want) {
			t.Fatalf("jobs show lacks %q:\n%s", want, show)
		}
	}
	ls := d.ok(t, "jobs", "ls", "--view", "docs$chunks")
	if strings.Index(ls, id2) < 0 || strings.Index(ls, id2) > strings.Index(ls, jobID) {
		t.Fatalf("jobs ls (newest first): %s", ls)
	}
	// retry: a new job with the same request.
	r = d.mvq(t, nil, "jobs", "retry", id2, "--wait")
	if r.code != 0 {
		t.Fatalf("retry: %+v", r)
	}
	var retried map[string]any
	if err := json.Unmarshal([]byte(d.ok(t, "jobs", "show", strings.TrimSpace(r.stdout), "-o", "json")), &retried); err != nil {
		t.Fatal(err)
	}
	if req := retried["request"].(map[string]any); req["source_task_size"] != 1.0 || req["concurrency"] != 2.0 {
		t.Fatalf("retry request: %v", req)
	}
	views := d.ok(t, "view", "ls")
	if !regexp.MustCompile(`docs\$chunks\s+chunker\s+docs\$articles\s+\d+\s+\d+\s+\d+s ago\s+yes\s+DONE`).MatchString(views) {
		t.Fatalf("view ls:\n%s", views)
	}
	d.ok(t, "table", "insert", "docs$articles", "--from", nd)
	if views := d.ok(t, "view", "ls", "docs"); !strings.Contains(views, "1 behind") {
		t.Fatalf("view ls after an insert:\n%s", views)
	}
	if out := d.ok(t, "table", "versions", "docs$articles"); len(strings.Split(strings.TrimSpace(out), "\n")) != 5 {
		t.Fatalf("versions: %s", out)
	}
	d.ok(t, "table", "rm", "docs$pq")
	if r := d.mvq(t, nil, "table", "describe", "docs$pq"); r.code != 1 || !strings.HasPrefix(r.stderr, "mvq: Table not found: ") || strings.Contains(r.stderr, "{") {
		t.Fatalf("describe of a dropped table: %+v", r)
	}
	// A table that views read is dropped only with --cascade, which drops
	// them too; view rm drops a view.
	if r := d.mvq(t, nil, "table", "rm", "docs$articles"); r.code != 1 || !strings.Contains(r.stderr, "docs$chunks") {
		t.Fatalf("rm of a table a view reads: %+v", r)
	}
	d.ok(t, "view", "create", "docs$again", "--source", "docs$articles", "--chunker", "fixed", "--input", "body", "--output", "chunk", "--size", "50")
	d.ok(t, "view", "rm", "docs$again")
	d.ok(t, "table", "rm", "docs$articles", "--cascade")
	if out := d.ok(t, "table", "ls", "docs"); strings.Contains(out, "articles") || strings.Contains(out, "chunks") || strings.Contains(out, "again") {
		t.Fatalf("after the cascade:\n%s", out)
	}
}

// TestCLIExitCodes: DONE 0, FAILED 1 with the failure, CANCELLED 2, usage 2,
// and -h 0.
func TestCLIExitCodes(t *testing.T) {
	// One view row per work item at most: a chunker item that cuts more
	// fails, not retryable.
	d := startDev(t, "", "MVQ_MAX_ITEM_OUTPUT_ROWS=3")
	d.ok(t, "ns", "create", "x")
	var b strings.Builder
	for i := range 400 {
		fmt.Fprintf(&b, `{"id": %d, "body": "%s"}`+"\n", i, strings.Repeat("w", 40))
	}
	d.ok(t, "table", "create", "x$t", "--from", writeFile(t, "t.ndjson", b.String()))
	d.ok(t, "view", "create", "x$small", "--source", "x$t", "--chunker", "fixed", "--input", "body", "--size", "20", "--no-data")
	d.ok(t, "view", "create", "x$big", "--source", "x$t", "--chunker", "fixed", "--input", "body", "--size", "2", "--no-data")
	d.ok(t, "view", "create", "x$slow", "--source", "x$t", "--chunker", "fixed", "--input", "body", "--size", "20", "--no-data")

	if r := d.mvq(t, nil, "refresh", "x$small", "--wait", "--source-task-size", "1"); r.code != 0 {
		t.Fatalf("DONE: %+v", r)
	}
	r := d.mvq(t, nil, "refresh", "x$big", "--wait")
	if r.code != 1 || !regexp.MustCompile(`mvq: job \S+ FAILED: .*`).MatchString(r.stderr) || !strings.Contains(r.stderr, "source_task_size") {
		t.Fatalf("FAILED: exit %d\n%s", r.code, r.stderr)
	}
	// CANCELLED: a long job (400 items, one at a time), cancelled by
	// another client while one waits for it.
	job := strings.TrimSpace(d.ok(t, "refresh", "x$slow", "--source-task-size", "1", "--concurrency", "1"))
	waiter := mvqCmd([]string{"MVQ_URL=" + d.url}, "jobs", "watch", job)
	var wout bytes.Buffer
	waiter.Stdout, waiter.Stderr = &wout, &wout
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(d.ok(t, "jobs", "show", job), "phase      expanding") })
	if out := d.ok(t, "jobs", "cancel", job); !strings.Contains(out, "CANCELLED") {
		t.Fatalf("cancel: %s", out)
	}
	err := waiter.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(wout.String(), "was CANCELLED") {
		t.Fatalf("watch of a cancelled job: %v\n%s", err, wout.String())
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"refresh"}, 2, "takes VIEW"},
		{[]string{"refresh", "x$small", "--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"refresh", "x$small", "--concurrency", "0"}, 2, "--concurrency 0"},
		{[]string{"-h"}, 0, "Exit codes"},
		{[]string{"refresh", "--help"}, 0, "Example"},
		{[]string{"jobs", "show", "no-such-job"}, 1, "mvq: Job not found: job no-such-job not found (HTTP 404)"},
		{[]string{"refresh", "x$nothing", "--url", "http://127.0.0.1:1"}, 1, "cannot reach the mvq API at http://127.0.0.1:1: start one with `mvq dev`"},
		{[]string{"view", "nosuch", "x"}, 2, `unknown command "nosuch" for "mvq view"`},
		{[]string{"view", "rn", "x$small"}, 2, `(did you mean "rm"?)`},
		{[]string{"view"}, 0, "Available Commands"},
		{[]string{"view", "rm", "x$nosuch"}, 1, "Table not found"},
		{[]string{"table", "describe", "x"}, 1, `hint: "x" has no $`},
	} {
		r := d.mvq(t, nil, c.args...)
		if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.want) {
			t.Errorf("mvq %v: exit %d (want %d), output lacks %q:\n%s%s", c.args, r.code, c.code, c.want, r.stdout, r.stderr)
		}
	}
}

// TestCLIEveryCommandHasHelpAndExample: every command answers --help with
// exit 0 and shows an example.
func TestCLIEveryCommandHasHelpAndExample(t *testing.T) {
	a := &app{ctx: context.Background(), getenv: func(string) string { return "" }}
	var visit func(c *cobra.Command, path []string)
	visit = func(c *cobra.Command, path []string) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		if c.Example == "" {
			t.Errorf("mvq %s has no example", strings.Join(path, " "))
		}
		for _, s := range c.Commands() {
			visit(s, append(append([]string(nil), path...), s.Name()))
		}
	}
	root := a.rootCmd()
	root.InitDefaultHelpCmd()
	visit(root, nil)
	cmd := mvqCmd(nil, "table", "create", "--help")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "mvq table create 'docs$articles' --from articles.ndjson") {
		t.Fatalf("table create --help: %v\n%s", err, out)
	}
}

// TestCLIProgressOnATerminal: on a pseudo-terminal, --wait draws a bar in
// place (work items, rows, rows/s, elapsed, ETA), and Ctrl-C asks whether
// to cancel; answering y cancels, and the exit code is 2.
func TestCLIProgressOnATerminal(t *testing.T) {
	d := startDev(t, "")
	d.ok(t, "ns", "create", "p")
	var b strings.Builder
	for i := range 400 {
		fmt.Fprintf(&b, `{"id": %d, "body": "%s"}`+"\n", i, strings.Repeat("word ", 20))
	}
	d.ok(t, "table", "create", "p$t", "--from", writeFile(t, "t.ndjson", b.String()))
	d.ok(t, "view", "create", "p$c", "--source", "p$t", "--chunker", "fixed", "--input", "body", "--size", "30", "--no-data")

	// A refresh that runs to DONE on a terminal.
	out, code := onTerminal(t, d, nil, "refresh", "p$c", "--wait", "--source-task-size", "50", "--concurrency", "1")
	if code != 0 {
		t.Fatalf("exit %d:\n%q", code, out)
	}
	bar := regexp.MustCompile(`\r\x1b\[Kexpanding +\[=*>? *\] \d+/8 items  \S+ read  \S+ written  \S+ rows/s  \d+:\d\d  ETA (\d+:\d\d|--:--)`)
	if !bar.MatchString(out) {
		t.Fatalf("no progress bar drawn in place:\n%q", out)
	}
	if !regexp.MustCompile(`\[={10,}\] 8/8 items  400 read  \S+ written`).MatchString(out) || !strings.Contains(out, "DONE in ") {
		t.Fatalf("no final bar and summary:\n%q", out)
	}

	// Ctrl-C while waiting: the prompt, y, CANCELLED, exit 2.
	d.ok(t, "table", "insert", "p$t", "--from", writeFile(t, "more.ndjson", b.String()))
	out, code = onTerminal(t, d, func(ptmx *os.File, output func() string) {
		waitFor(t, func() bool { return strings.Contains(output(), "expanding ") })
		_, _ = ptmx.Write([]byte{3}) // ^C: the terminal sends SIGINT
		waitFor(t, func() bool { return strings.Contains(output(), "? [y/N] ") })
		_, _ = ptmx.Write([]byte("y\r"))
	}, "refresh", "p$c", "--wait", "--source-task-size", "1", "--concurrency", "1")
	if code != 2 || !strings.Contains(out, "Cancel job ") || !strings.Contains(out, "was CANCELLED") {
		t.Fatalf("Ctrl-C, y: exit %d\n%q", code, out)
	}
}

// onTerminal runs the CLI with a pseudo-terminal as its stdin, stdout and
// stderr; interact (optional) drives it while it runs.
func onTerminal(t *testing.T, d *dev, interact func(ptmx *os.File, output func() string), args ...string) (string, int) {
	t.Helper()
	cmd := mvqCmd([]string{"MVQ_URL=" + d.url}, args...)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 140})
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var mu sync.Mutex
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		p := make([]byte, 4096)
		for {
			n, err := ptmx.Read(p)
			mu.Lock()
			buf.Write(p[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	output := func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
	if interact != nil {
		interact(ptmx, output)
	}
	err = cmd.Wait()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return output(), code
}

// waitFor polls cond until it holds, failing the test after two minutes.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 2 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCLIToken: against MVQ_AUTH=tokens, --token and MVQ_TOKEN authenticate
// every call (event streams too); without one the error says what to do.
func TestCLIToken(t *testing.T) {
	tokens := writeFile(t, "tokens.yaml", "tokens:\n  - token: cli-secret-token\n    principal: alice\n    grants:\n      - namespace: \"*\"\n        actions: [read, write, refresh, admin]\n")
	d := startDev(t, "", "MVQ_AUTH=tokens", "MVQ_AUTH_TOKENS_FILE="+tokens)
	if r := d.mvq(t, nil, "ns", "create", "a"); r.code != 1 || !strings.Contains(r.stderr, "(HTTP 401); this API needs a token: pass --token or set MVQ_TOKEN") {
		t.Fatalf("no token: %+v", r)
	}
	if r := d.mvq(t, nil, "ns", "create", "a", "--token", "wrong"); r.code != 1 || !strings.Contains(r.stderr, "the token was refused") {
		t.Fatalf("wrong token: %+v", r)
	}
	if r := d.mvq(t, nil, "ns", "create", "a", "--token", "cli-secret-token"); r.code != 0 {
		t.Fatalf("--token: %+v", r)
	}
	env := []string{"MVQ_TOKEN=cli-secret-token"}
	for _, args := range [][]string{
		{"table", "create", "a$t", "--from", writeFile(t, "t.ndjson", `{"id": 1, "body": "some text to cut into chunks"}`)},
		{"view", "create", "a$v", "--source", "a$t", "--chunker", "fixed", "--input", "body", "--size", "5", "--no-data"},
		{"refresh", "a$v", "--wait"},
		{"view", "ls"},
		{"jobs", "ls"},
	} {
		if r := d.mvq(t, env, args...); r.code != 0 {
			t.Fatalf("MVQ_TOKEN, mvq %v: %+v", args, r)
		}
	}
}

// TestDevKeepsJobsAcrossRestarts: jobs survive a restart of mvq dev (its
// redis-server keeps an AOF under the warehouse).
func TestDevKeepsJobsAcrossRestarts(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed: mvq dev uses an in-memory Redis")
	}
	wh := filepath.Join(t.TempDir(), "wh")
	d := startDev(t, wh)
	d.ok(t, "ns", "create", "k")
	d.ok(t, "table", "create", "k$t", "--from", writeFile(t, "t.ndjson", `{"id": 1, "body": "persist me"}`))
	job := strings.TrimSpace(d.ok(t, "view", "create", "k$v", "--source", "k$t", "--chunker", "fixed", "--input", "body", "--size", "4"))
	d.ok(t, "jobs", "watch", job)
	// A second dev on the same warehouse is refused while the first runs.
	second := mvqCmd(nil, "dev", "-listen", "127.0.0.1:0", "-warehouse", "file://"+wh)
	if out, err := second.CombinedOutput(); err == nil || !strings.Contains(string(out), "another mvq dev uses this warehouse") {
		t.Fatalf("second dev: %v %s", err, out)
	}
	d.stop()
	d2 := startDev(t, wh)
	if out := d2.ok(t, "jobs", "show", job); !strings.Contains(out, "state      DONE") {
		t.Fatalf("after restart: %s", out)
	}
	if _, err := os.Stat(filepath.Join(wh, ".mvq-dev", "redis", "appendonlydir")); err != nil {
		t.Fatalf("no AOF under the warehouse: %v", err)
	}
	if out := d2.ok(t, "ns", "ls"); strings.TrimSpace(out) != "k" {
		t.Fatalf("the dev state folder shows as a namespace: %q", out)
	}
}
