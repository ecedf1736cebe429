package fsst

import (
	"encoding/binary"
	"errors"
	"testing"
)

// table serializes a symbol table the way Lance does.
func table(compressed bool, syms ...string) []byte {
	b := make([]byte, SymbolTableSize)
	h := Magic | uint64(len(syms))
	if compressed {
		h |= 1 << 24
	}
	binary.LittleEndian.PutUint64(b, h)
	for i, s := range syms {
		var v uint64
		for k := len(s) - 1; k >= 0; k-- {
			v = v<<8 | uint64(s[k])
		}
		binary.LittleEndian.PutUint64(b[8+8*i:], v)
		b[8+8*len(syms)+i] = byte(len(s))
	}
	return b
}

func TestDecodeAll(t *testing.T) {
	tb, err := ParseTable(table(true, "hello", " ", "world!!!"))
	if err != nil {
		t.Fatal(err)
	}
	// "hello world!!!" then "" then "x hello" (x escaped).
	data := []byte{0, 1, 2, Escape, 'x', 1, 0}
	out, offs, err := tb.DecodeAll(data, []uint64{0, 3, 3, 7})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{string(out[offs[0]:offs[1]]), string(out[offs[1]:offs[2]]), string(out[offs[2]:offs[3]])}
	want := []string{"hello world!!!", "", "x hello"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("string %d: %q, want %q", i, got[i], want[i])
		}
	}
}

func TestUncompressedTable(t *testing.T) {
	tb, err := ParseTable(table(false))
	if err != nil {
		t.Fatal(err)
	}
	out, offs, err := tb.DecodeAll([]byte("abcdef"), []uint64{0, 2, 6})
	if err != nil || string(out) != "abcdef" || offs[1] != 2 || offs[2] != 6 {
		t.Fatalf("got %q %v %v", out, offs, err)
	}
}

func TestCorrupt(t *testing.T) {
	tb, err := ParseTable(table(true, "ab"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"dangling escape": {0, Escape},
		"unknown code":    {0, 7},
	} {
		if _, _, err := tb.DecodeAll(data, []uint64{0, uint64(len(data))}); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, _, err := tb.DecodeAll([]byte{0}, []uint64{0, 5}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("offset past the data: %v", err)
	}
	if _, err := ParseTable(make([]byte, SymbolTableSize)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("no magic: %v", err)
	}
	bad := table(true, "ab")
	bad[8+8] = 9 // length of symbol 0
	if _, err := ParseTable(bad); !errors.Is(err, ErrCorrupt) {
		t.Errorf("symbol length 9: %v", err)
	}
}

func FuzzFSST(f *testing.F) {
	f.Add(table(true, "hello", " ", "world"), []byte{0, 1, 2, Escape, 'x'}, uint16(3))
	f.Add(table(false), []byte("plain"), uint16(2))
	f.Fuzz(func(t *testing.T, st, data []byte, cut uint16) {
		tb, err := ParseTable(st)
		if err != nil {
			return
		}
		c := uint64(cut) % (uint64(len(data)) + 2)
		out, offs, err := tb.DecodeAll(data, []uint64{0, c, uint64(len(data))})
		if err != nil {
			return
		}
		if len(out) > 8*len(data) || offs[2] != uint64(len(out)) {
			t.Fatalf("%d bytes from %d", len(out), len(data))
		}
	})
}
