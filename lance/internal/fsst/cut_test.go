package fsst

import (
	"bytes"
	"math/rand"
	"testing"
)

// trainedCutter trains a table on the strings data[offs[i]:offs[i+1]]
// and returns the trained encoder, the table as a file holds it, an
// encoder over that table and a cutter of strings it compressed.
func trainedCutter(t testing.TB, data []byte, offs []uint64) (*Encoder, *Table, *Encoder, *Cutter) {
	t.Helper()
	e := Train(data, offs)
	tab, err := ParseTable(e.Table())
	if err != nil {
		t.Fatal(err)
	}
	enc, err := NewEncoder(tab)
	if err != nil {
		t.Fatal(err)
	}
	return e, tab, enc, NewCutter(tab, enc)
}

// TestCutDecodesToSubstring: every cut [a, b) of every string decodes to
// exactly the substring, with codes from the string's own where they fit;
// a cut of 32 bytes or more is about as small as encoding the substring
// anew.
func TestCutDecodesToSubstring(t *testing.T) {
	data, offs := corpus(400, 7)
	e, tab, enc, c := trainedCutter(t, data, offs)
	codes, coffs := e.EncodeAll(data, offs)
	rng := rand.New(rand.NewSource(1))
	var cutBytes, freshBytes, cuts int
	for i := 0; i+1 < len(offs); i++ {
		s := string(data[offs[i]:offs[i+1]])
		if err := c.Reset(codes[coffs[i]:coffs[i+1]]); err != nil {
			t.Fatal(err)
		}
		if c.Len() != len(s) {
			t.Fatalf("string %d: Len %d, want %d", i, c.Len(), len(s))
		}
		pairs := [][2]int{{0, len(s)}, {0, 0}, {len(s), len(s)}}
		for k := 0; k < 20 && len(s) > 0; k++ {
			a := rng.Intn(len(s) + 1)
			pairs = append(pairs, [2]int{a, a + rng.Intn(len(s)-a+1)})
		}
		for _, p := range pairs {
			got, err := c.AppendCut([]byte{9}, s, p[0], p[1])
			if err != nil {
				t.Fatal(err)
			}
			if got[0] != 9 {
				t.Fatal("AppendCut overwrote dst")
			}
			dec, err := tab.AppendDecode(nil, got[1:])
			if err != nil {
				t.Fatalf("string %d cut %v: %v", i, p, err)
			}
			if !bytes.Equal(dec, []byte(s[p[0]:p[1]])) {
				t.Fatalf("string %d cut %v decodes to %q, want %q", i, p, dec, s[p[0]:p[1]])
			}
			if p[1]-p[0] >= 32 { // the ends cost more in short cuts
				cutBytes += len(got) - 1
				freshBytes += len(enc.AppendEncode(nil, []byte(s[p[0]:p[1]])))
				cuts++
			}
		}
	}
	if cutBytes > freshBytes+freshBytes/20 {
		t.Errorf("%d cuts took %d bytes, encoding them anew %d: more than 5%% larger", cuts, cutBytes, freshBytes)
	}
	// Out of range and a text of another length are refused.
	if err := c.Reset(codes[coffs[0]:coffs[1]]); err != nil {
		t.Fatal(err)
	}
	s := string(data[offs[0]:offs[1]])
	for _, p := range [][2]int{{-1, 1}, {2, 1}, {0, len(s) + 1}} {
		if _, err := c.AppendCut(nil, s, p[0], p[1]); err == nil {
			t.Errorf("cut %v of %d bytes accepted", p, len(s))
		}
	}
	if _, err := c.AppendCut(nil, s+"x", 0, 1); err == nil {
		t.Error("a text of another length accepted")
	}
}

// TestCutterRefusesCorruptCodes: codes without a symbol or with a dangling
// escape fail Reset.
func TestCutterRefusesCorruptCodes(t *testing.T) {
	_, tab, _, c := trainedCutter(t, []byte("abcabcabc"), []uint64{0, 9})
	if c.Len() != 0 {
		t.Errorf("Len before Reset = %d", c.Len())
	}
	if err := c.Reset([]byte{Escape}); err == nil {
		t.Error("dangling escape accepted")
	}
	if err := c.Reset([]byte{byte(tab.NumSymbols)}); err == nil && tab.NumSymbols < Escape {
		t.Error("code without a symbol accepted")
	}
	if _, err := NewEncoder(&Table{}); err == nil {
		t.Error("an encoder of an uncompressed table")
	}
}

// FuzzCut: codes from a file are outside input. Cutting any codes a table
// accepts (Reset) at any range gives codes that decode to exactly that
// range of the decoded string; codes it refuses never panic.
func FuzzCut(f *testing.F) {
	f.Add([]byte("hello hello hello world"), []byte{0, 1, 2, Escape, 'x'}, uint16(1), uint16(3))
	f.Add([]byte("abcabcabc"), []byte{Escape}, uint16(0), uint16(0))
	f.Fuzz(func(t *testing.T, sample, codes []byte, a, b uint16) {
		_, tab, _, c := trainedCutter(t, sample, []uint64{0, uint64(len(sample))})
		if c.Reset(codes) != nil {
			return
		}
		text, err := tab.AppendDecode(nil, codes)
		if err != nil {
			t.Fatalf("Reset accepted codes AppendDecode refuses: %v", err)
		}
		if c.Len() != len(text) {
			t.Fatalf("Len %d, decoded %d bytes", c.Len(), len(text))
		}
		lo, hi := int(a), int(b)
		if len(text) > 0 {
			lo, hi = lo%(len(text)+1), hi%(len(text)+1)
		}
		if lo > hi {
			lo, hi = hi, lo
		}
		got, err := c.AppendCut(nil, string(text), lo, hi)
		if lo > len(text) || hi > len(text) {
			if err == nil {
				t.Fatalf("cut [%d, %d) of %d bytes accepted", lo, hi, len(text))
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		dec, err := tab.AppendDecode(nil, got)
		if err != nil || !bytes.Equal(dec, text[lo:hi]) {
			t.Fatalf("cut [%d, %d) decodes to %q (%v), want %q", lo, hi, dec, err, text[lo:hi])
		}
	})
}
