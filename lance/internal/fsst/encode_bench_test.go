package fsst

import (
	"bytes"
	"testing"
)

// BenchmarkEncodeAll: encoding a page of ~2 KB English documents (the
// refresh benchmark's corpus) with a table trained on it, in bytes of
// input per second.
func BenchmarkEncodeAll(b *testing.B) {
	data, offs := docs(512)
	e := Train(data, offs)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.EncodeAll(data, offs)
	}
}

// TestFastLoopMatchesTail: AppendEncode's eight-byte loop makes the codes
// the one-position loop makes, on text and on random bytes (escapes,
// symbols that end at the string's end).
func TestFastLoopMatchesTail(t *testing.T) {
	for _, src := range []func() ([]byte, []uint64){
		func() ([]byte, []uint64) { return docs(64) },
		func() ([]byte, []uint64) { return corpus(5000, 7) },
	} {
		data, offs := src()
		e := Train(data, offs)
		for i := 1; i < len(offs); i++ {
			s := data[offs[i-1]:offs[i]]
			got := e.AppendEncode([]byte("prefix"), s)
			want := e.appendTail([]byte("prefix"), s)
			if !bytes.Equal(got, want) {
				t.Fatalf("string %d (%q): fast loop %x, one position at a time %x", i-1, s, got, want)
			}
		}
	}
}
