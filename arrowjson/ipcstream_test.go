package arrowjson

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestReadIPCStreamBytes: streams that follow each other are read one at
// a time, exactly; a stream past the limit, or with metadata that is not
// a FlatBuffer of the Arrow format, is refused before it is allocated or
// used.
func TestReadIPCStreamBytes(t *testing.T) {
	mem := checkedMem(t)
	rec := ipcTestRecord(t, mem)
	defer rec.Release()
	one := writeIPC(t, false, []arrow.RecordBatch{rec})
	two := writeIPC(t, false, []arrow.RecordBatch{rec, rec})
	r := bytes.NewReader(append(bytes.Clone(one), two...))
	for i, want := range [][]byte{one, two} {
		got, err := ReadIPCStreamBytes(r, 1<<20)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("stream %d: %d bytes, %v; want the %d bytes written", i, len(got), err, len(want))
		}
		recs, err := readAllIPC(got, mem, 0)
		if err != nil || len(recs) != i+1 {
			t.Fatalf("stream %d: %d batches, %v", i, len(recs), err)
		}
		for _, r := range recs {
			r.Release()
		}
	}
	if _, err := ReadIPCStreamBytes(r, 1<<20); err != io.EOF {
		t.Fatalf("after the last stream: %v, want io.EOF", err)
	}
	if _, err := ReadIPCStreamBytes(bytes.NewReader(two), int64(len(one))); !errors.Is(err, ErrStreamTooLarge) {
		t.Fatalf("a stream past the limit: %v", err)
	}
	huge := []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xF0, 0xFF, 0xFF, 0x7F}
	if _, err := ReadIPCStreamBytes(bytes.NewReader(huge), 1<<20); !errors.Is(err, ErrStreamTooLarge) {
		t.Fatalf("2 GiB of metadata announced: %v", err)
	}
	bad := bytes.Clone(one)
	bad[8], bad[9], bad[10], bad[11] = 0x00, 0xFF, 0xFF, 0x7F // root offset far outside
	var ie *IPCError
	if _, err := ReadIPCStreamBytes(bytes.NewReader(bad), 1<<20); !errors.As(err, &ie) {
		t.Fatalf("metadata with a bad root: %v, want an *IPCError", err)
	}
	if _, err := ReadIPCStreamBytes(bytes.NewReader(one[:len(one)-20]), 1<<20); err != io.ErrUnexpectedEOF {
		t.Fatalf("a cut stream: %v", err)
	}
}
