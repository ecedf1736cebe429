// Package fastlanes packs and unpacks integers in the FastLanes bit-packing
// layout that Lance 2.1 files use ("inline" and "out-of-line" bitpacking).
//
// A block is always 1024 values of an unsigned type T of 8, 16, 32 or 64 bits
// (T bits). Packed to W bits (0 <= W <= T) a block takes 1024*W/T words of T.
// The 1024 values are spread over LANES = 1024/T lanes of T rows each: row r
// of lane l is value FLOrder[r/8]*16 + (r%8)*128 + l. Each lane packs its T
// values, W bits each, least significant bits first, into W consecutive
// words of its own; word k of lane l is stored at index LANES*k + l. This
// interleaving lets SIMD code work on all lanes at once; this package does
// the same arithmetic one value at a time.
package fastlanes

import (
	"errors"
	"fmt"
)

// BlockLen is the number of values in a FastLanes block.
const BlockLen = 1024

// FLOrder is the FastLanes row-group permutation.
var FLOrder = [8]int{0, 4, 2, 6, 1, 5, 3, 7}

// Uint is the set of word types FastLanes packs.
type Uint interface {
	~uint8 | ~uint16 | ~uint32 | ~uint64
}

// ErrLength is returned when a buffer has the wrong length for a block.
var ErrLength = errors.New("fastlanes: wrong buffer length")

func bitsOf[T Uint]() int {
	var z T
	switch any(z).(type) {
	case uint8:
		return 8
	case uint16:
		return 16
	case uint32:
		return 32
	}
	return 64
}

// PackedLen is the number of T words a block of 1024 values packed to w bits
// takes (w must be at most the width of T).
func PackedLen[T Uint](w int) int { return BlockLen * w / bitsOf[T]() }

// Pack packs exactly 1024 values in, keeping the low w bits of each, into
// out, which must hold PackedLen[T](w) words.
func Pack[T Uint](w int, in []T, out []T) error {
	t := bitsOf[T]()
	if w < 0 || w > t {
		return fmt.Errorf("fastlanes: bit width %d outside [0, %d]", w, t)
	}
	if len(in) != BlockLen || len(out) != PackedLen[T](w) {
		return ErrLength
	}
	if w == 0 {
		return nil
	}
	lanes := BlockLen / t
	var mask T = ^T(0)
	if w < t {
		mask = T(1)<<uint(w) - 1
	}
	clear(out)
	// Row by row: row r of every lane sits at the same bit offset r*w of
	// the lane's words, and the lanes of one row are contiguous in both the
	// input (from base) and the output (from lanes*word).
	for row := 0; row < t; row++ {
		base := FLOrder[row/8]*16 + (row%8)*128
		bit := row * w
		word, shift := bit/t, uint(bit%t)
		src := in[base : base+lanes]
		dst := out[lanes*word : lanes*word+lanes]
		for lane, v := range src {
			dst[lane] |= (v & mask) << shift
		}
		if int(shift)+w > t {
			hi := out[lanes*(word+1) : lanes*(word+1)+lanes]
			for lane, v := range src {
				hi[lane] |= (v & mask) >> (uint(t) - shift)
			}
		}
	}
	return nil
}

// Unpack unpacks a block packed to w bits (PackedLen[T](w) words in in) into
// the 1024 values of out.
func Unpack[T Uint](w int, in []T, out []T) error {
	t := bitsOf[T]()
	if w < 0 || w > t {
		return fmt.Errorf("fastlanes: bit width %d outside [0, %d]", w, t)
	}
	if len(out) != BlockLen || len(in) != PackedLen[T](w) {
		return ErrLength
	}
	if w == 0 {
		clear(out)
		return nil
	}
	lanes := BlockLen / t
	var mask T = ^T(0)
	if w < t {
		mask = T(1)<<uint(w) - 1
	}
	for row := 0; row < t; row++ {
		base := FLOrder[row/8]*16 + (row%8)*128
		bit := row * w
		word, shift := bit/t, uint(bit%t)
		dst := out[base : base+lanes]
		lo := in[lanes*word : lanes*word+lanes]
		if int(shift)+w > t {
			hi := in[lanes*(word+1) : lanes*(word+1)+lanes]
			for lane := range dst {
				dst[lane] = (lo[lane]>>shift | hi[lane]<<(uint(t)-shift)) & mask
			}
			continue
		}
		for lane := range dst {
			dst[lane] = (lo[lane] >> shift) & mask
		}
	}
	return nil
}
