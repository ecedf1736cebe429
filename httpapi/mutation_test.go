package httpapi_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/httpapi"
)

// sweepStream is a small valid IPC stream (about 600 bytes): one batch of
// an int64, a nullable int32, a nullable string and a list of strings.
func sweepStream(t *testing.T) []byte {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "n", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
	b.Field(1).(*array.Int32Builder).AppendValues([]int32{7, 0, -7}, []bool{true, false, true})
	b.Field(2).(*array.StringBuilder).AppendValues([]string{"a", "bé", ""}, []bool{true, true, false})
	lb := b.Field(3).(*array.ListBuilder)
	vb := lb.ValueBuilder().(*array.StringBuilder)
	lb.Append(true)
	vb.AppendValues([]string{"x", "y"}, nil)
	lb.AppendNull()
	lb.Append(true)
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var mutations = []struct {
	name string
	f    func(byte) byte
}{
	{"xff", func(b byte) byte { return b ^ 0xFF }},
	{"00", func(byte) byte { return 0 }},
	{"7f", func(byte) byte { return 0x7F }},
	{"inc", func(b byte) byte { return b + 1 }},
}

// allocatedBytes is the Go heap's cumulative allocation count: a difference
// over one request catches a transient allocation that a later GC hides.
func allocatedBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestIPCMutationSweep posts every single-byte mutation of a valid IPC
// stream to table/create and table/insert through the real router on a
// real warehouse. Every answer must be 2xx or 4xx (5xx means a panic or an
// unclassified error; a panic in a writer goroutine would end the test
// binary), no request may allocate more than maxAlloc bytes of Go heap (a
// length field driving an allocation would), and every table an accepted
// body created must be readable. MVQ_SWEEP_STRIDE=n tries every n-th
// position only (default 1: all of them).
func TestIPCMutationSweep(t *testing.T) {
	// Not parallel: the allocation bound reads the process-wide heap
	// allocation counter, which other tests running at the same time
	// would inflate.
	const maxAlloc = 64 << 20
	c := setup(t, httpapi.Config{MaxBodyBytes: 1 << 20})
	valid := sweepStream(t)
	t.Logf("stream: %d bytes", len(valid))
	stride := 1
	if s := os.Getenv("MVQ_SWEEP_STRIDE"); s != "" {
		stride, _ = strconv.Atoi(s)
		stride = max(stride, 1)
	}

	post := func(path string, body []byte) (int, []byte, uint64) {
		before := allocatedBytes()
		req, _ := http.NewRequest("POST", c.url+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/vnd.apache.arrow.stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: the server is gone: %v", path, err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, out, allocatedBytes() - before
	}
	if st, out, _ := post("/v1/table/base/create", valid); st != 200 {
		t.Fatalf("valid stream refused: %d %s", st, out)
	}

	start := time.Now()
	counts := map[string]int{}
	var created []string
	var peak uint64
	for pos := 0; pos < len(valid); pos += stride {
		for _, m := range mutations {
			body := bytes.Clone(valid)
			body[pos] = m.f(body[pos])
			if body[pos] == valid[pos] {
				continue
			}
			name := fmt.Sprintf("m%d_%s", pos, m.name)
			for _, op := range []string{"create", "insert"} {
				path := "/v1/table/" + name + "/create"
				if op == "insert" {
					path = "/v1/table/base/insert"
				}
				st, out, alloc := post(path, body)
				peak = max(peak, alloc)
				counts[fmt.Sprintf("%s %d", op, st)]++
				if st >= 500 || st < 200 || (st >= 300 && st < 400) {
					t.Errorf("%s byte %d %s (%#02x→%#02x): %d %s", op, pos, m.name, valid[pos], body[pos], st, out)
				}
				if alloc > maxAlloc {
					t.Errorf("%s byte %d %s: the request allocated %d MiB", op, pos, m.name, alloc>>20)
				}
				if op == "create" && st == 200 {
					created = append(created, name)
				}
			}
		}
	}
	// What was accepted must read back.
	for _, name := range append(created, "base") {
		st, out := c.do("POST", "/v1/table/"+name+"/query", "application/json", []byte(`{}`), "Accept", "application/json")
		if st != 200 {
			t.Errorf("query %s: %d %s", name, st, out)
		}
	}
	t.Logf("%v; peak allocation of one request %d KiB; %s", counts, peak>>10, time.Since(start).Round(time.Millisecond))
	if counts["create 400"] == 0 || counts["insert 400"] == 0 {
		t.Fatalf("no mutation was refused: %v", counts)
	}
}
