package httpapi

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"
)

// TestReadAllGrowsTowardTheDeclaredLength: a body that arrives whole is
// read into a buffer no larger than its declared length; a declared length
// the client never sends holds at most twice what arrived; a body longer
// than declared is still read whole.
func TestReadAllGrowsTowardTheDeclaredLength(t *testing.T) {
	body := bytes.Repeat([]byte("abcdefgh"), 3<<17) // 3 MiB
	got, err := readAll(bytes.NewReader(body), int64(len(body)))
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("whole body: %d bytes, %v", len(got), err)
	}
	if cap(got) > len(body) {
		t.Errorf("whole body of %d bytes: buffer of %d", len(body), cap(got))
	}
	short := []byte(strings.Repeat("x", 1000))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err = readAll(io.MultiReader(bytes.NewReader(short), cut{}), 256<<20)
	runtime.ReadMemStats(&after)
	if err == nil || got != nil {
		t.Fatalf("cut body: %d bytes, %v", len(got), err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("1000 bytes of a declared 256 MiB body allocated %d MiB", alloc>>20)
	}
	long := append(bytes.Clone(body), "tail"...)
	got, err = readAll(bytes.NewReader(long), int64(len(body)))
	if err != nil || !bytes.Equal(got, long) {
		t.Fatalf("body longer than declared: %d bytes, %v", len(got), err)
	}
}

// cut is a body whose connection broke.
type cut struct{}

func (cut) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }
