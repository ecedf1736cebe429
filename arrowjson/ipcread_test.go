package arrowjson

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func ipcTestRecord(t testing.TB, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	rec, err := DecodeRows(strings.NewReader(`[
		{"id":1,"score":1.5,"name":"a","tags":["x","y"],"meta":{"a":1,"b":"z"}},
		{"id":2,"score":null,"name":null,"tags":null,"meta":null},
		{"id":3,"score":-2,"name":"ü","tags":[],"meta":{"a":null,"b":null}}]`), fuzzSchema, mem)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func writeIPC(t testing.TB, file bool, recs []arrow.RecordBatch, opts ...ipc.Option) []byte {
	t.Helper()
	var buf bytes.Buffer
	opts = append(opts, ipc.WithSchema(recs[0].Schema()))
	var w interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	if file {
		fw, err := ipc.NewFileWriter(&buf, opts...)
		if err != nil {
			t.Fatal(err)
		}
		w = fw
	} else {
		w = ipc.NewWriter(&buf, opts...)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readAllIPC(data []byte, mem memory.Allocator, maxDecoded int64) ([]arrow.RecordBatch, error) {
	r, err := ReadIPC(data, mem, maxDecoded)
	if err != nil {
		return nil, err
	}
	defer r.Release()
	var out []arrow.RecordBatch
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		out = append(out, rec)
	}
	if err := r.Err(); err != nil {
		for _, rec := range out {
			rec.Release()
		}
		return nil, err
	}
	return out, nil
}

func TestReadIPCStreamAndFile(t *testing.T) {
	mem := checkedMem(t)
	rec := ipcTestRecord(t, mem)
	defer rec.Release()
	for _, file := range []bool{false, true} {
		data := writeIPC(t, file, []arrow.RecordBatch{rec, rec})
		got, err := readAllIPC(data, mem, 0)
		if err != nil {
			t.Fatalf("file=%v: %v", file, err)
		}
		if len(got) != 2 || !array.RecordEqual(got[0], rec) || !array.RecordEqual(got[1], rec) {
			t.Errorf("file=%v: got %d batches, not the ones written", file, len(got))
		}
		for _, r := range got {
			r.Release()
		}
	}
}

func TestReadIPCRefuses(t *testing.T) {
	mem := checkedMem(t)
	rec := ipcTestRecord(t, mem)
	defer rec.Release()
	stream := writeIPC(t, false, []arrow.RecordBatch{rec})

	bad := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	sb := array.NewStringBuilder(mem)
	sb.Append("ok")
	sb.Append("\xff\xfe")
	col := sb.NewArray()
	sb.Release()
	badRec := array.NewRecordBatch(bad, []arrow.Array{col}, 2)
	col.Release()
	defer badRec.Release()

	file := writeIPC(t, true, []arrow.RecordBatch{rec})
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "empty body"},
		{"stray bytes", stream[:len(stream)-5], "stray bytes"},
		{"after end of stream", append(bytes.Clone(stream), 1, 2, 3, 4), "after the end-of-stream marker"},
		{"huge metadata length", []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xF0, 0xFF, 0xFF, 0x7F, 0, 0, 0, 0}, "does not fit"},
		{"invalid UTF-8", writeIPC(t, false, []arrow.RecordBatch{badRec}), "not valid utf8"},
		{"file without footer", file[:len(file)-3], "truncated Arrow IPC file"},
		{"file with a lying footer length", func() []byte {
			f := bytes.Clone(file)
			f[len(f)-10] = 0xFF
			f[len(f)-9] = 0xFF
			return f
		}(), "footer length"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAllIPC(tc.data, mem, 0)
			for _, r := range got {
				r.Release()
			}
			var ie *IPCError
			if !errors.As(err, &ie) {
				t.Fatalf("error %v is not an *IPCError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// TestReadIPCDecompressionBudget: a compressed body may not decode to more
// than the budget, however few bytes were sent.
func TestReadIPCDecompressionBudget(t *testing.T) {
	mem := checkedMem(t)
	schema := arrow.NewSchema([]arrow.Field{{Name: "z", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(mem)
	b.AppendValues(make([]int64, 1<<20), nil) // 8 MiB of zeros
	col := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(col.Len()))
	col.Release()
	defer rec.Release()
	data := writeIPC(t, false, []arrow.RecordBatch{rec}, ipc.WithZstd())
	if len(data) > 64<<10 {
		t.Fatalf("compressed stream is %d bytes", len(data))
	}
	if _, err := readAllIPC(data, mem, 1<<20); err == nil || !strings.Contains(err.Error(), "more than 1048576 bytes") {
		t.Fatalf("over the budget: %v", err)
	}
	got, err := readAllIPC(data, mem, 32<<20)
	if err != nil {
		t.Fatalf("within the budget: %v", err)
	}
	if len(got) != 1 || !array.RecordEqual(got[0], rec) {
		t.Error("decompressed batch differs")
	}
	for _, r := range got {
		r.Release()
	}
}

func FuzzReadIPC(f *testing.F) {
	rec := ipcTestRecord(f, memory.DefaultAllocator)
	f.Add(writeIPC(f, false, []arrow.RecordBatch{rec}))
	f.Add(writeIPC(f, true, []arrow.RecordBatch{rec}))
	f.Add(writeIPC(f, false, []arrow.RecordBatch{rec}, ipc.WithLZ4()))
	rec.Release()
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		recs, err := readAllIPC(data, mem, 4<<20)
		if err != nil {
			// arrow-go may leave a buffer behind when decoding fails half
			// way (the server's Go allocator lets the GC have it), so
			// leaks are only checked for bodies that decode.
			var ie *IPCError
			if !errors.As(err, &ie) {
				t.Fatalf("error is not an *IPCError: %v", err)
			}
			return
		}
		for _, r := range recs {
			if err := array.ValidateRecordFull(r); err != nil {
				t.Fatalf("a batch yielded is invalid: %v", err)
			}
			r.Release()
		}
		mem.AssertSize(t, 0)
	})
}
