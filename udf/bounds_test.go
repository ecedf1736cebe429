package udf

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The names of the attack on a refresh's env_vars: each makes a program
// run other code than the operator's command.
var hostileEnv = map[string]string{
	"PYTHONWARNINGS": "ignore::antigravity.x::0",
	"BROWSER":        "/bin/sh -c 'touch /tmp/pwned' #%s",
	"BASH_ENV":       "/tmp/evil.sh",
	"LD_PRELOAD":     "/tmp/evil.so",
	"PATH":           "/tmp/evil",
	"NODE_OPTIONS":   "--require /tmp/evil.js",
}

func TestRuntimesFileRefusesUnsafeEnv(t *testing.T) {
	for name := range hostileEnv {
		doc := fmt.Sprintf(`runtimes: {a: {kind: exec, command: [x], protocol: ndjson, allowed_env: [OK_NAME, %s]}}`, name)
		_, err := Parse([]byte(doc), ".")
		if err == nil || !strings.Contains(err.Error(), "runtime a: allowed_env: "+name+" is never passed to user code") {
			t.Errorf("allowed_env with %s: %v, want a refusal naming it", name, err)
		}
	}
	for _, tc := range []struct{ doc, want string }{
		{`runtimes: {a: {kind: exec, command: [x], protocol: ndjson, allowed_env: ["A=B"]}}`, "not a variable name"},
		{`runtimes: {a: {kind: exec, command: [x], protocol: ndjson, allowed_env: [python_path]}}`, "never passed"},
		{`runtimes: {a: {kind: http, url: "http://x", protocol: json-batch, allowed_env: [A]}}`, "allowed_env: only for kind exec"},
		{`runtimes: {a: {kind: exec, command: [x], protocol: ndjson, timeout: 8760h}}`, "timeout: at most"},
	} {
		if _, err := Parse([]byte(tc.doc), "."); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.doc, err, tc.want)
		}
	}
}

func envDumpRuntime(t *testing.T, dump string) *Registry {
	return registry(t, fmt.Sprintf(`
runtimes:
  envdump:
    kind: exec
    command: ["sh", "testdata/envdump.sh", %q]
    protocol: ndjson
    timeout: 20s
    allowed_env: [ALLOWED_ONE]
`, dump))
}

// TestExecEnvOnlyAllowedNames: the environment of user code holds only
// what the runtimes file allows. Resolving a manifest refuses the other
// names, naming the field; settings built around Resolve are refused
// again before a process starts; an allowed name reaches the process.
func TestExecEnvOnlyAllowedNames(t *testing.T) {
	t.Setenv("MVQ_TEST_SECRET", "worker-secret")
	dump := filepath.Join(t.TempDir(), "env")
	reg := envDumpRuntime(t, dump)
	rt, _ := reg.Lookup("envdump")
	for name, val := range hostileEnv {
		_, err := rt.Resolve(nil, map[string]string{name: val, "ALLOWED_ONE": "x"})
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "env_vars."+name {
			t.Errorf("env_vars %s: %v, want a *FieldError naming env_vars.%s", name, err, name)
		}
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"NOT_LISTED": "x"}, "env_vars.NOT_LISTED: runtime envdump does not allow it (its allowed_env: ALLOWED_ONE)"},
		{map[string]string{"ALLOWED_ONE": "a\nb"}, "env_vars.ALLOWED_ONE: value holds a NUL or line break"},
		{map[string]string{"ALLOWED_ONE": strings.Repeat("v", MaxEnvValueBytes+1)}, "env_vars.ALLOWED_ONE: value of"},
	} {
		if _, err := rt.Resolve(nil, tc.env); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.env, err, tc.want)
		}
	}

	m := NewManager(nil)
	defer m.Close()
	in := texts(t, "a")
	defer in.Release()
	// Past Resolve (a caller that forgot it): refused, no process started.
	bad := Settings{Runtime: rt, Env: map[string]string{"LD_PRELOAD": "/tmp/evil.so", "ALLOWED_ONE": "x"}}
	if _, err := m.Run(context.Background(), Call{Settings: bad}, in, wordsSchema(false)); !IsPermanent(err) || !strings.Contains(err.Error(), "env_vars.LD_PRELOAD") {
		t.Fatalf("run with LD_PRELOAD: %v", err)
	}
	if _, err := os.Stat(dump); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a process started with a refused environment (%v)", err)
	}

	s, err := rt.Resolve(nil, map[string]string{"ALLOWED_ONE": "yes"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.Run(context.Background(), Call{Settings: s}, in, wordsSchema(false))
	if err != nil {
		t.Fatal(err)
	}
	out.Release()
	got, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(got)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		env[k] = v
	}
	if env["ALLOWED_ONE"] != "yes" {
		t.Fatalf("the allowed name did not reach the process: %q", got)
	}
	for name := range hostileEnv {
		if _, ok := env[name]; ok && name != "PATH" {
			t.Errorf("the process got %s", name)
		}
	}
	if env["PATH"] != os.Getenv("PATH") || env["MVQ_TEST_SECRET"] != "" {
		t.Fatalf("PATH %q (want the worker's), MVQ_TEST_SECRET %q (want none)", env["PATH"], env["MVQ_TEST_SECRET"])
	}
}

// TestOverridesBoundedByRuntime: a manifest can only lower what the
// operator declared, and choose only a declared model.
func TestOverridesBoundedByRuntime(t *testing.T) {
	reg := registry(t, `{"runtimes": {"embed": {"kind": "http", "url": "http://127.0.0.1:1/v1/embeddings", "protocol": "openai-embeddings",
		"model": "small", "models": ["large"], "dimensions": 768, "timeout": "10s", "max_batch_rows": 64, "max_in_flight": 8}}}`)
	rt, _ := reg.Lookup("embed")
	dur := func(s string) *Duration { d, _ := time.ParseDuration(s); v := Duration(d); return &v }
	num := func(n int) *int { return &n }
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		o     Overrides
		field string
	}{
		{Overrides{Timeout: dur("8760h")}, "mvq.timeout"},
		{Overrides{Timeout: dur("11s")}, "mvq.timeout"},
		{Overrides{MaxInFlight: num(1024)}, "mvq.max_in_flight"},
		{Overrides{MaxBatchRows: num(65)}, "mvq.max_batch_rows"},
		{Overrides{Model: str("someone-elses-model")}, "mvq.model"},
		{Overrides{Dimensions: num(769)}, "mvq.dimensions"},
		{Overrides{MaxBatchRows: num(0)}, "mvq.max_batch_rows"},
	} {
		_, err := rt.Resolve(&tc.o, nil)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: %v, want a refusal naming %s", tc.o, err, tc.field)
		}
	}
	s, err := rt.Resolve(&Overrides{Timeout: dur("2s"), MaxInFlight: num(2), MaxBatchRows: num(8), Model: str("large"), Dimensions: num(256)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(s.Timeout) != 2*time.Second || s.MaxInFlight != 2 || s.MaxBatchRows != 8 || s.Model != "large" || s.Dimensions != 256 {
		t.Fatalf("lowered settings %+v", s.Runtime)
	}
	if _, err := rt.Resolve(nil, map[string]string{"A": "b"}); err == nil || !strings.Contains(err.Error(), "allowed_env: none") {
		t.Fatalf("env_vars on an http runtime: %v", err)
	}
	// Code that is not told the dimensions (here the built-in embedder,
	// an exec runtime) cannot be asked for fewer: every row would fail the
	// column's width.
	local := LocalEmbedRuntime("local-embed", "/bin/true", 64)
	var fe *FieldError
	if _, err := local.Resolve(&Overrides{Dimensions: num(8)}, nil); !errors.As(err, &fe) || fe.Field != "mvq.dimensions" {
		t.Fatalf("lowered dimensions of an exec runtime: %v", err)
	}
	if s, err := local.Resolve(&Overrides{Dimensions: num(64)}, nil); err != nil || s.Dimensions != 64 {
		t.Fatalf("its own dimensions: %+v %v", s, err)
	}
}

// idlePids answers the process ids of the idle subprocesses of runtime name.
func (m *Manager) idlePids(name string) []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for _, p := range m.pools {
		if p.runtime != name {
			continue
		}
		p.mu.Lock()
		for _, pr := range p.idle {
			out = append(out, pr.cmd.Process.Pid)
		}
		p.mu.Unlock()
	}
	return out
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestExecPoolsCappedAndEvicted: every distinct env_vars value is a pool
// of its own; past MaxPools per runtime the least recently used idle
// pools are closed, and what stays idle is closed after IdleTimeout.
func TestExecPoolsCappedAndEvicted(t *testing.T) {
	reg := envDumpRuntime(t, filepath.Join(t.TempDir(), "env"))
	m := NewManager(nil)
	m.IdleTimeout, m.MaxPools = 2*time.Second, 2
	defer m.Close()
	in := texts(t, "a b")
	defer in.Release()
	var pids []int
	for i := range 5 {
		s := settings(t, reg, "envdump", map[string]string{"ALLOWED_ONE": fmt.Sprint("value-", i)})
		out, err := m.Run(context.Background(), Call{Settings: s}, in, wordsSchema(false))
		if err != nil {
			t.Fatal(err)
		}
		out.Release()
		pids = append(pids, m.idlePids("envdump")...)
		if pools, idle := m.poolCounts("envdump"); pools > 2 || idle > 2 {
			t.Fatalf("after %d environments: %d pools, %d idle processes (MaxPools 2)", i+1, pools, idle)
		}
	}
	// The pools closed by the cap are gone with their processes.
	live := 0
	for _, pid := range uniq(pids) {
		if alive(pid) {
			live++
		}
	}
	if live > 2 {
		t.Fatalf("%d subprocesses of 5 environments alive, want at most MaxPools 2", live)
	}
	// The rest is closed once idle for IdleTimeout.
	deadline := time.Now().Add(30 * time.Second)
	for {
		pools, idle := m.poolCounts("envdump")
		n := 0
		for _, pid := range uniq(pids) {
			if alive(pid) {
				n++
			}
		}
		if pools == 0 && idle == 0 && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the idle timeout: %d pools, %d idle, %d processes alive", pools, idle, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// And a later call starts afresh.
	out, err := m.Run(context.Background(), Call{Settings: settings(t, reg, "envdump", nil)}, in, wordsSchema(false))
	if err != nil {
		t.Fatal(err)
	}
	out.Release()
}

func uniq(xs []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// TestExecTimeoutIsNamed: a timeout names the runtime and the timeout,
// and says it is one (for the caller's retry policy).
func TestExecTimeoutIsNamed(t *testing.T) {
	reg := registry(t, execRuntimes)
	m := NewManager(nil)
	defer m.Close()
	in := texts(t, "hang")
	defer in.Release()
	_, err := m.Run(context.Background(), Call{Settings: settings(t, reg, "misbehave", nil)}, in, wordsSchema(false))
	var ue *Error
	if !errors.As(err, &ue) || ue.Timeout != 6*time.Second || !strings.Contains(err.Error(), "runtime misbehave: no answer within the timeout of 6s") {
		t.Fatalf("err %v, want a timeout naming the runtime and 6s", err)
	}
}

// arrowHostile is the test binary as a hostile arrow-protocol UDF (mode
// from MVQ_TEST_ARROW_UDF): "big" answers a valid stream of about 4 MiB,
// "liar" a message header claiming 2 GiB of metadata then nothing,
// "badmeta" a message whose FlatBuffer root points far outside it.
func arrowHostile(mode string) {
	rd, err := ipc.NewReader(os.Stdin)
	if err != nil {
		return
	}
	for rd.Next() {
	}
	switch mode {
	case "big":
		schema := arrow.NewSchema([]arrow.Field{{Name: "len", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
		b := array.NewStringBuilder(memory.DefaultAllocator)
		b.Append(strings.Repeat("x", 4<<20))
		arr := b.NewArray()
		w := ipc.NewWriter(os.Stdout, ipc.WithSchema(schema))
		_ = w.Write(array.NewRecordBatch(schema, []arrow.Array{arr}, 1))
		_ = w.Close()
	case "liar":
		var hdr [8]byte
		binary.LittleEndian.PutUint32(hdr[0:], 0xFFFFFFFF)
		binary.LittleEndian.PutUint32(hdr[4:], 0x7FFFFFF0)
		_, _ = os.Stdout.Write(hdr[:])
	case "badmeta":
		msg := make([]byte, 8+64)
		binary.LittleEndian.PutUint32(msg[0:], 0xFFFFFFFF)
		binary.LittleEndian.PutUint32(msg[4:], 64)
		binary.LittleEndian.PutUint32(msg[8:], 0x7FFFFF00) // root table offset
		_, _ = os.Stdout.Write(msg)
	}
	time.Sleep(time.Hour) // keep the pipe open: only a bound ends the read
}

// TestExecArrowOutputBoundedAndVerified: an arrow-protocol answer is
// read within max_output_bytes, its metadata verified before use; hostile
// output fails the call at once, naming the runtime, and the worker lives.
func TestExecArrowOutputBoundedAndVerified(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	reg := registry(t, fmt.Sprintf(`{"runtimes": {"lens": {"kind": "exec", "command": [%q], "protocol": "arrow",
		"timeout": "60s", "max_output_bytes": 1048576, "allowed_env": ["MVQ_TEST_ARROW_UDF"]}}}`, exe))
	m := NewManager(nil)
	defer m.Close()
	in := texts(t, "a")
	defer in.Release()
	for mode, want := range map[string]string{
		"big":     "output of one batch exceeds max_output_bytes (1048576 bytes)",
		"liar":    "output of one batch exceeds max_output_bytes (1048576 bytes)",
		"badmeta": "invalid metadata",
	} {
		t.Run(mode, func(t *testing.T) {
			start := time.Now()
			s := settings(t, reg, "lens", map[string]string{"MVQ_TEST_ARROW_UDF": mode})
			_, err := m.Run(context.Background(), Call{Settings: s}, in, arrow.NewSchema([]arrow.Field{{Name: "len", Type: arrow.BinaryTypes.String}}, nil))
			if !IsPermanent(err) || !strings.Contains(err.Error(), "runtime lens") || !strings.Contains(err.Error(), want) {
				t.Fatalf("err %v, want a permanent error naming the runtime and %q", err, want)
			}
			if el := time.Since(start); el > 30*time.Second {
				t.Fatalf("took %s: the bound did not end the read", el)
			}
		})
	}
}

// TestHTTPLoweredInFlightKeepsTheRuntimeBound: calls that lower
// max_in_flight to different values share the runtime's one bound per
// process instead of each getting a semaphore of their own.
func TestHTTPLoweredInFlightKeepsTheRuntimeBound(t *testing.T) {
	srv := newEmbedServer(t, 0, 100*time.Millisecond)
	reg := registry(t, embedRuntime(srv.URL, 2))
	rt, _ := reg.Lookup("embed")
	m := NewManager(nil)
	defer m.Close()
	vals := make([]string, 16)
	for i := range vals {
		vals[i] = strings.Repeat("x", i)
	}
	in := texts(t, vals...)
	defer in.Release()
	errs := make(chan error, 2)
	for _, n := range []int{1, 2} {
		s, err := rt.Resolve(&Overrides{MaxInFlight: &n}, nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			out, err := m.Run(context.Background(), Call{Settings: s, Parallel: 8}, in, vecSchema(3))
			if err == nil {
				out.Release()
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if p := srv.peak.Load(); p > 2 {
		t.Fatalf("peak in flight %d, want <= the runtime's max_in_flight 2", p)
	}
}
