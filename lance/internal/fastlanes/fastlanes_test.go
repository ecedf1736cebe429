package fastlanes

import (
	"math/rand/v2"
	"testing"
)

func roundTrip[T Uint](t *testing.T, rng *rand.Rand) {
	bits := bitsOf[T]()
	for w := 0; w <= bits; w++ {
		in := make([]T, BlockLen)
		for i := range in {
			v := T(rng.Uint64())
			if w < bits {
				v &= T(1)<<uint(w) - 1
			}
			in[i] = v
		}
		packed := make([]T, PackedLen[T](w))
		if err := Pack(w, in, packed); err != nil {
			t.Fatal(err)
		}
		out := make([]T, BlockLen)
		if err := Unpack(w, packed, out); err != nil {
			t.Fatal(err)
		}
		for i := range in {
			if in[i] != out[i] {
				t.Fatalf("%d-bit words packed to %d bits: value %d is %d, want %d", bits, w, i, out[i], in[i])
			}
		}
	}
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	roundTrip[uint8](t, rng)
	roundTrip[uint16](t, rng)
	roundTrip[uint32](t, rng)
	roundTrip[uint64](t, rng)
}

// TestLayout pins the interleaved layout. Value index
// FLOrder[row/8]*16 + (row%8)*128 + lane is row `row` of lane `lane`; with
// 32-bit words packed to 1 bit, row r of lane 0 is bit r of word 0.
func TestLayout(t *testing.T) {
	in := make([]uint32, BlockLen)
	in[0] = 1   // row 0 of lane 0
	in[128] = 1 // row 1 of lane 0
	in[64] = 1  // FLOrder[1] = 4, so row 8 of lane 0
	in[17] = 1  // row 0 of lane 17
	packed := make([]uint32, PackedLen[uint32](1))
	if err := Pack(1, in, packed); err != nil {
		t.Fatal(err)
	}
	if packed[0] != 1|2|1<<8 || packed[17] != 1 {
		t.Fatalf("packed[0] = %b, packed[17] = %b", packed[0], packed[17])
	}
}

func TestBadLengths(t *testing.T) {
	if err := Unpack(3, make([]uint16, 10), make([]uint16, BlockLen)); err == nil {
		t.Error("short input accepted")
	}
	if err := Unpack(17, make([]uint16, 1088), make([]uint16, BlockLen)); err == nil {
		t.Error("width over the word size accepted")
	}
	if err := Pack(3, make([]uint8, 5), make([]uint8, PackedLen[uint8](3))); err == nil {
		t.Error("short block accepted")
	}
}

func FuzzUnpack(f *testing.F) {
	f.Add(uint8(3), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, w uint8, data []byte) {
		in := make([]uint16, len(data)/2)
		for i := range in {
			in[i] = uint16(data[2*i]) | uint16(data[2*i+1])<<8
		}
		out := make([]uint16, BlockLen)
		if Unpack(int(w), in, out) == nil && len(in) != PackedLen[uint16](int(w)) {
			t.Fatalf("accepted %d words for width %d", len(in), w)
		}
	})
}
