package fsst

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"
)

func corpus(n int, seed int64) ([]byte, []uint64) {
	rng := rand.New(rand.NewSource(seed))
	words := []string{"http://", "www.", "example", ".com/", "lance", "format", " ", "the ", "é", "✓", "\x00", "\xff\xff"}
	var data []byte
	offs := []uint64{0}
	for i := 0; i < n; i++ {
		k := rng.Intn(12)
		for j := 0; j < k; j++ {
			if rng.Intn(5) == 0 {
				data = append(data, byte(rng.Intn(256)))
			} else {
				data = append(data, words[rng.Intn(len(words))]...)
			}
		}
		offs = append(offs, uint64(len(data)))
	}
	return data, offs
}

func TestEncodeRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 10, 5000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			data, offs := corpus(n, int64(n))
			e := Train(data, offs)
			codes, coffs := e.EncodeAll(data, offs)
			tab, err := ParseTable(e.Table())
			if err != nil {
				t.Fatal(err)
			}
			got, goffs, err := tab.DecodeAll(codes, coffs)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("round trip differs")
			}
			for i := range offs {
				if goffs[i] != offs[i]-offs[0] {
					t.Fatalf("offset %d: %d want %d", i, goffs[i], offs[i])
				}
			}
			if n == 5000 && len(codes)*10 > len(data)*7 {
				t.Errorf("compressed %d bytes to %d: expected at least 30%% smaller on repetitive text", len(data), len(codes))
			}
		})
	}
}

func FuzzEncodeRoundTrip(f *testing.F) {
	f.Add([]byte("hello hello hello world"), uint8(3))
	f.Add([]byte{255, 255, 0, 1}, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, parts uint8) {
		offs := []uint64{0}
		p := int(parts%16) + 1
		for i := 1; i <= p; i++ {
			offs = append(offs, uint64(len(data)*i/p))
		}
		e := Train(data, offs)
		codes, coffs := e.EncodeAll(data, offs)
		tab, err := ParseTable(e.Table())
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := tab.DecodeAll(codes, coffs)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
