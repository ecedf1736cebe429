package file

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".lance"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFooterRoundTrip(t *testing.T) {
	b := golden(t, "kitchen_sink")
	f, err := ParseFooter(b[len(b)-FooterLen:])
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != V2_1 || f.NumGlobalBuffers == 0 || f.NumColumns == 0 {
		t.Fatalf("footer %+v", f)
	}
	if got := AppendFooter(nil, f); !bytes.Equal(got, b[len(b)-FooterLen:]) {
		t.Fatalf("AppendFooter gives %x, want %x", got, b[len(b)-FooterLen:])
	}
	c, err := ReadContainer(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Columns) != int(f.NumColumns) || c.Descriptor.GetLength() != 300 {
		t.Fatalf("%d columns, %d rows", len(c.Columns), c.Descriptor.GetLength())
	}
}

// TestHostileFooters changes one footer field at a time: every change is
// an error wrapping ErrCorrupt or ErrUnsupported, never a panic.
func TestHostileFooters(t *testing.T) {
	orig := golden(t, "kitchen_sink")
	le := binary.LittleEndian
	foot := len(orig) - FooterLen
	cases := map[string]func(b []byte){
		"magic":                func(b []byte) { copy(b[len(b)-4:], "LANX") },
		"column meta past end": func(b []byte) { le.PutUint64(b[foot:], uint64(len(b))) },
		"CMO table huge":       func(b []byte) { le.PutUint64(b[foot+8:], 1<<62) },
		"GBO table before CMO": func(b []byte) { le.PutUint64(b[foot+16:], 8) },
		"many columns":         func(b []byte) { le.PutUint32(b[foot+28:], 1<<31) },
		"many buffers":         func(b []byte) { le.PutUint32(b[foot+24:], 1<<31) },
		"legacy version":       func(b []byte) { le.PutUint16(b[foot+32:], 0); le.PutUint16(b[foot+34:], 2) },
		"future version":       func(b []byte) { le.PutUint16(b[foot+32:], 2); le.PutUint16(b[foot+34:], 3) },
		"global buffer past end": func(b []byte) {
			gbo := le.Uint64(b[foot+16:])
			le.PutUint64(b[gbo+8:], 1<<40)
		},
		"column metadata offset": func(b []byte) {
			cmo := le.Uint64(b[foot+8:])
			le.PutUint64(b[cmo:], 3)
		},
	}
	for name, mutate := range cases {
		b := append([]byte(nil), orig...)
		mutate(b)
		_, err := Open(bytes.NewReader(b), int64(len(b)))
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, n := range []int{0, 3, FooterLen - 1} {
		if _, err := Open(bytes.NewReader(orig[:n]), int64(n)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%d bytes: %v", n, err)
		}
	}
}

// TestScrambledPages reads pages of garbage: reads fail cleanly.
func TestScrambledPages(t *testing.T) {
	orig := golden(t, "vectors_nesting")
	r, err := Open(bytes.NewReader(orig), int64(len(orig)))
	if err != nil {
		t.Fatal(err)
	}
	// Scramble the page buffers (leave the metadata): decoding must not
	// panic.
	b := append([]byte(nil), orig...)
	for _, c := range r.Container().Columns {
		for _, p := range c.Pages {
			for _, ref := range p.Buffers {
				for i := ref.Offset; i < ref.Offset+ref.Size; i++ {
					b[i] ^= byte(i*7 + 1)
				}
			}
		}
	}
	r2, err := Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	for c := range r2.Schema().Fields() {
		if rec, err := r2.Read(t.Context(), []int{c}, 0, r2.NumRows()); err == nil {
			rec.Release()
		}
	}
}
