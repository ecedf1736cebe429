package udf

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestMain lets the test binary act as an Arrow-protocol UDF subprocess.
func TestMain(m *testing.M) {
	switch mode := os.Getenv("MVQ_TEST_ARROW_UDF"); mode {
	case "":
	case "1":
		arrowUDF()
		return
	default:
		arrowHostile(mode)
		return
	}
	os.Exit(m.Run())
}

// arrowUDF answers each IPC stream on stdin with a stream of one column
// "len": the length of each "text" value.
func arrowUDF() {
	for {
		rd, err := ipc.NewReader(os.Stdin)
		if err != nil {
			return
		}
		var w *ipc.Writer
		schema := arrow.NewSchema([]arrow.Field{{Name: "len", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
		w = ipc.NewWriter(os.Stdout, ipc.WithSchema(schema))
		for rd.Next() {
			rec := rd.RecordBatch()
			txt := rec.Column(0).(*array.String)
			b := array.NewInt64Builder(memory.DefaultAllocator)
			for i := 0; i < txt.Len(); i++ {
				b.Append(int64(len(txt.Value(i))))
			}
			arr := b.NewArray()
			out := array.NewRecordBatch(schema, []arrow.Array{arr}, int64(txt.Len()))
			_ = w.Write(out)
		}
		_ = w.Close()
		rd.Release()
	}
}

func texts(t *testing.T, vals ...string) arrow.RecordBatch {
	t.Helper()
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	for _, v := range vals {
		if v == "<null>" {
			b.AppendNull()
		} else {
			b.Append(v)
		}
	}
	arr := b.NewArray()
	defer arr.Release()
	s := arrow.NewSchema([]arrow.Field{{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	return array.NewRecordBatch(s, []arrow.Array{arr}, int64(len(vals)))
}

func wordsSchema(label bool) *arrow.Schema {
	f := []arrow.Field{{Name: "words", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}
	if label {
		f = append(f, arrow.Field{Name: "label", Type: arrow.BinaryTypes.String, Nullable: true})
	}
	return arrow.NewSchema(f, nil)
}

func registry(t *testing.T, doc string) *Registry {
	t.Helper()
	dir, _ := filepath.Abs(".")
	reg, err := Parse([]byte(doc), dir)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func settings(t *testing.T, reg *Registry, name string, env map[string]string) Settings {
	t.Helper()
	rt, ok := reg.Lookup(name)
	if !ok {
		t.Fatalf("runtime %s not declared", name)
	}
	return Settings{Runtime: rt, Env: env}
}

func int64s(rec arrow.RecordBatch, col int) []int64 {
	return rec.Column(col).(*array.Int64).Int64Values()
}

const execRuntimes = `
runtimes:
  wordcount:
    kind: exec
    command: ["python3", "../examples/udfs/wordcount.py"]
    protocol: ndjson
    timeout: 20s
    max_batch_rows: 2
    allowed_env: [WORDCOUNT_LABEL]
  misbehave:
    kind: exec
    command: ["python3", "testdata/misbehave.py"]
    protocol: ndjson
    timeout: 6s # a python start on a loaded 2-core machine can take seconds
    allowed_env: [WORDCOUNT_LABEL]
`

func TestExecNDJSONWordcount(t *testing.T) {
	reg := registry(t, execRuntimes)
	m := NewManager(nil)
	defer m.Close()
	in := texts(t, "one two three", "", "<null>", "a b", "x")
	defer in.Release()
	c := Call{Settings: settings(t, reg, "wordcount", map[string]string{"WORDCOUNT_LABEL": "L1"}), Parallel: 2}
	out, err := m.Run(context.Background(), c, in, wordsSchema(true))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if got := fmt.Sprint(int64s(out, 0)); got != "[3 0 0 2 1]" {
		t.Fatalf("words %s", got)
	}
	if got := out.Column(1).(*array.String).Value(4); got != "L1" {
		t.Fatalf("label %q, want the manifest env var", got)
	}
	// Another environment is another pool: the label changes.
	c.Settings.Env = nil
	out2, err := m.Run(context.Background(), c, in, wordsSchema(true))
	if err != nil {
		t.Fatal(err)
	}
	defer out2.Release()
	if got := out2.Column(1).(*array.String).Value(0); got != "" {
		t.Fatalf("label %q without env_vars", got)
	}
}

func TestExecEnvironmentIsOnlyTheManifests(t *testing.T) {
	t.Setenv("MVQ_TEST_SECRET", "worker-secret")
	reg := registry(t, execRuntimes)
	m := NewManager(nil)
	defer m.Close()
	in := texts(t, "env")
	defer in.Release()
	out, err := m.Run(context.Background(), Call{Settings: settings(t, reg, "misbehave", map[string]string{"WORDCOUNT_LABEL": "mine"})}, in, wordsSchema(true))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if got := out.Column(1).(*array.String).Value(0); got != "<unset>|mine" {
		t.Fatalf("the subprocess saw %q: the worker's environment leaked or env_vars were lost", got)
	}
}

func TestExecFailures(t *testing.T) {
	reg := registry(t, execRuntimes)
	m := NewManager(nil)
	defer m.Close()
	s := settings(t, reg, "misbehave", nil)
	for _, tc := range []struct{ text, want string }{
		{"crash", "exited"},
		{"hang", "timeout"},
		{"garbage", `first bad line "this is not json"`},
	} {
		t.Run(tc.text, func(t *testing.T) {
			in := texts(t, "fine", tc.text)
			defer in.Release()
			start := time.Now()
			_, err := m.Run(context.Background(), Call{Settings: s}, in, wordsSchema(false))
			if err == nil || !strings.Contains(err.Error(), "runtime misbehave") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming the runtime and %q", err, tc.want)
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("took %s", time.Since(start))
			}
			// The process was replaced: the next call works.
			ok := texts(t, "still fine here")
			defer ok.Release()
			out, err := m.Run(context.Background(), Call{Settings: s}, ok, wordsSchema(false))
			if err != nil {
				t.Fatalf("after a %s: %v", tc.text, err)
			}
			if int64s(out, 0)[0] != 3 {
				t.Fatalf("words %v", int64s(out, 0))
			}
			out.Release()
		})
	}
}

func TestExecStderrGoesToEvents(t *testing.T) {
	reg := registry(t, execRuntimes)
	m := NewManager(nil)
	defer m.Close()
	in := texts(t, "stderr")
	defer in.Release()
	var mu sync.Mutex
	var lines []string
	deadline := time.Now().Add(30 * time.Second)
	out, err := m.Run(context.Background(), Call{Settings: settings(t, reg, "misbehave", nil), Events: func(s string) {
		mu.Lock()
		lines = append(lines, s)
		mu.Unlock()
	}}, in, wordsSchema(false))
	if err != nil {
		t.Fatal(err)
	}
	out.Release()
	// stderr is read concurrently with stdout: wait for the line.
	for {
		mu.Lock()
		got := strings.Join(lines, "\n")
		mu.Unlock()
		if strings.Contains(got, "a warning from the udf") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stderr lines %q", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestExecArrowProtocol(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	reg := registry(t, fmt.Sprintf(`{"runtimes": {"lens": {"kind": "exec", "command": [%q], "protocol": "arrow", "max_batch_rows": 2, "allowed_env": ["MVQ_TEST_ARROW_UDF"]}}}`, exe))
	m := NewManager(nil)
	defer m.Close()
	in := texts(t, "a", "bbb", "cc", "")
	defer in.Release()
	s := settings(t, reg, "lens", map[string]string{"MVQ_TEST_ARROW_UDF": "1"})
	out, err := m.Run(context.Background(), Call{Settings: s}, in, arrow.NewSchema([]arrow.Field{{Name: "len", Type: arrow.PrimitiveTypes.Int64}}, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if got := fmt.Sprint(int64s(out, 0)); got != "[1 3 2 0]" {
		t.Fatalf("lens %s", got)
	}
}

// embedServer is an OpenAI-compatible embeddings endpoint computing
// deterministic vectors: component j of text t is len(t)+j, or with
// failFirst, answering 500 (then 429 with Retry-After) before it works.
type embedServer struct {
	*httptest.Server
	calls, inFlight, peak atomic.Int64
	failFirst             int64
	delay                 time.Duration
}

func newEmbedServer(t *testing.T, failFirst int64, delay time.Duration) *embedServer {
	s := &embedServer{failFirst: failFirst, delay: delay}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.calls.Add(1)
		cur := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for {
			p := s.peak.Load()
			if cur <= p || s.peak.CompareAndSwap(p, cur) {
				break
			}
		}
		if n <= s.failFirst {
			if n%2 == 0 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			http.Error(w, "overloaded", http.StatusInternalServerError)
			return
		}
		time.Sleep(s.delay)
		var req struct {
			Model      string   `json:"model"`
			Input      []string `json:"input"`
			Dimensions int      `json:"dimensions"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var data []item
		for i, in := range req.Input {
			v := make([]float32, req.Dimensions)
			for j := range v {
				v[j] = float32(len(in) + j)
			}
			data = append(data, item{Index: i, Embedding: v})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data, "model": req.Model})
	}))
	t.Cleanup(s.Close)
	return s
}

func embedRuntime(url string, maxInFlight int) string {
	return fmt.Sprintf(`{"runtimes": {"embed": {"kind": "http", "url": %q, "protocol": "openai-embeddings", "model": "m", "dimensions": 3, "timeout": "10s", "max_batch_rows": 2, "max_in_flight": %d}}}`, url, maxInFlight)
}

func vecSchema(dim int) *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{{Name: "embedding", Type: arrow.FixedSizeListOf(int32(dim), arrow.PrimitiveTypes.Float32), Nullable: true}}, nil)
}

func TestHTTPEmbeddings(t *testing.T) {
	srv := newEmbedServer(t, 0, 0)
	reg := registry(t, embedRuntime(srv.URL, 8))
	m := NewManager(nil)
	defer m.Close()
	in := texts(t, "ab", "<null>", "abcd")
	defer in.Release()
	out, err := m.Run(context.Background(), Call{Settings: settings(t, reg, "embed", nil), Parallel: 2}, in, vecSchema(3))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	col := out.Column(0).(*array.FixedSizeList)
	vals := col.ListValues().(*array.Float32).Float32Values()
	if !col.IsNull(1) || fmt.Sprint(vals[0:3]) != "[2 3 4]" || fmt.Sprint(vals[6:9]) != "[4 5 6]" {
		t.Fatalf("embeddings %v nulls %v", vals, col.NullN())
	}
}

func TestHTTPRetriesHonourRetryAfter(t *testing.T) {
	srv := newEmbedServer(t, 2, 0) // 500, then 429 with Retry-After: 1, then 200
	reg := registry(t, embedRuntime(srv.URL, 1))
	m := NewManager(nil)
	defer m.Close()
	in := texts(t, "ab")
	defer in.Release()
	start := time.Now()
	out, err := m.Run(context.Background(), Call{Settings: settings(t, reg, "embed", nil)}, in, vecSchema(3))
	if err != nil {
		t.Fatal(err)
	}
	out.Release()
	if srv.calls.Load() != 3 {
		t.Fatalf("%d calls, want 3", srv.calls.Load())
	}
	if el := time.Since(start); el < time.Second {
		t.Fatalf("answered after %s: Retry-After 1 was not honoured", el)
	}
}

func TestHTTPGivesUpOnAClientError(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "bad model", http.StatusBadRequest)
	}))
	defer srv.Close()
	reg := registry(t, embedRuntime(srv.URL, 1))
	m := NewManager(nil)
	defer m.Close()
	in := texts(t, "ab")
	defer in.Release()
	_, err := m.Run(context.Background(), Call{Settings: settings(t, reg, "embed", nil)}, in, vecSchema(3))
	if !IsPermanent(err) || !strings.Contains(err.Error(), "status 400") || calls.Load() != 1 {
		t.Fatalf("err %v after %d calls, want a permanent 400 at once", err, calls.Load())
	}
}

func TestHTTPMaxInFlight(t *testing.T) {
	srv := newEmbedServer(t, 0, 50*time.Millisecond)
	reg := registry(t, embedRuntime(srv.URL, 2))
	m := NewManager(nil)
	defer m.Close()
	vals := make([]string, 20)
	for i := range vals {
		vals[i] = strings.Repeat("x", i)
	}
	in := texts(t, vals...)
	defer in.Release()
	out, err := m.Run(context.Background(), Call{Settings: settings(t, reg, "embed", nil), Parallel: 8}, in, vecSchema(3))
	if err != nil {
		t.Fatal(err)
	}
	out.Release()
	if p := srv.peak.Load(); p > 2 || p < 1 {
		t.Fatalf("peak in flight %d, want <= max_in_flight 2", p)
	}
}

func TestParseRefusesBadFiles(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`runtimes: {a: {kind: exec, protocol: ndjson}}`, "command: required"},
		{`runtimes: {a: {kind: exec, command: [x], protocol: csv}}`, "protocol"},
		{`runtimes: {a: {kind: http, url: "ftp://x", protocol: json-batch}}`, "url"},
		{`runtimes: {a: {kind: http, url: "http://x", protocol: openai-embeddings}}`, "dimensions"},
		{`runtimes: {a: {kind: exec, command: [x], protocol: ndjson, colour: red}}`, "colour"},
		{`runtimes: {a: {kind: exec, command: [x], protocol: ndjson, timeout: soon}}`, "duration"},
		{`other: 1`, "other"},
	} {
		if _, err := Parse([]byte(tc.doc), "."); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.doc, err, tc.want)
		}
	}
}
