package file

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/mvq-dev/mvq/lance/internal/fastlanes"
	"github.com/mvq-dev/mvq/lance/pb/enc21pb"
)

type word interface {
	~uint8 | ~uint16 | ~uint32 | ~uint64
}

func wordsOf[T word](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

func appendWords[T word](dst []byte, w []T) []byte {
	var z T
	sz := int(unsafe.Sizeof(z))
	for _, v := range w {
		switch sz {
		case 1:
			dst = append(dst, byte(v))
		case 2:
			dst = binary.LittleEndian.AppendUint16(dst, uint16(v))
		case 4:
			dst = binary.LittleEndian.AppendUint32(dst, uint32(v))
		default:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(v))
		}
	}
	return dst
}

// inlineBitpacked packs fixed-width values (1, 2, 4 or 8 bytes) 1024 to a
// mini-block chunk, each chunk led by its own bit width (one word of the
// value type) then the FastLanes-packed block; the last chunk is padded
// with zeros. It returns the chunks and their total size.
func inlineBitpacked(s *fixedSink) ([]mbChunk, int) {
	switch s.w {
	case 1:
		return inlinePack[uint8](s.data, s.n)
	case 2:
		return inlinePack[uint16](s.data, s.n)
	case 4:
		return inlinePack[uint32](s.data, s.n)
	case 8:
		return inlinePack[uint64](s.data, s.n)
	}
	return nil, -1
}

func bitWidth[T word](v []T) int {
	var or T
	for _, x := range v {
		or |= x
	}
	return bits.Len64(uint64(or))
}

func inlinePack[T word](data []byte, n int) ([]mbChunk, int) {
	vals := wordsOf[T](data)
	var z T
	sz := int(unsafe.Sizeof(z))
	// Widths first: packing only pays if it beats the flat size.
	var widths []int
	total := 0
	for i := 0; i < n; i += fastlanes.BlockLen {
		w := bitWidth(vals[i:min(i+fastlanes.BlockLen, n)])
		widths = append(widths, w)
		total += sz * (1 + fastlanes.PackedLen[T](w))
	}
	if total >= n*sz {
		return nil, total
	}
	out := make([]mbChunk, 0, len(widths))
	block := make([]T, fastlanes.BlockLen)
	for k, w := range widths {
		i := k * fastlanes.BlockLen
		m := min(fastlanes.BlockLen, n-i)
		copy(block, vals[i:i+m])
		clear(block[m:])
		packed := make([]T, fastlanes.PackedLen[T](w))
		_ = fastlanes.Pack(w, block, packed)
		buf := make([]byte, 0, sz*(1+len(packed)))
		buf = appendWords(buf, []T{T(w)})
		buf = appendWords(buf, packed)
		out = append(out, mbChunk{n: m, log: 10, bufs: [][]byte{buf}})
	}
	out[len(out)-1].log = 0
	return out, total
}

func inlineBitpackEnc(bitsPerValue int) *enc21pb.CompressiveEncoding {
	return &enc21pb.CompressiveEncoding{Compression: &enc21pb.CompressiveEncoding_InlineBitpacking{
		InlineBitpacking: &enc21pb.InlineBitpacking{UncompressedBitsPerValue: uint64(bitsPerValue)}}}
}

// levelPacker compresses one page's rep or def levels, chunk by chunk, with
// out-of-line bitpacking at the page's width: whole 1024-level blocks
// packed, the tail packed when padding costs less than it saves and
// otherwise stored raw (the reader tells the two apart by length).
type levelPacker struct{ w int }

func newLevelPacker(levels []uint16) levelPacker {
	return levelPacker{w: bitWidth(levels)}
}

func (p levelPacker) encoding() *enc21pb.CompressiveEncoding {
	if p.w == 0 || p.w >= 16 {
		return flatEnc(16)
	}
	return &enc21pb.CompressiveEncoding{Compression: &enc21pb.CompressiveEncoding_OutOfLineBitpacking{
		OutOfLineBitpacking: &enc21pb.OutOfLineBitpacking{UncompressedBitsPerValue: 16, Values: flatEnc(uint64(p.w))}}}
}

func (p levelPacker) pack(levels []uint16) []byte {
	if p.w == 0 || p.w >= 16 {
		return u16bytes(levels)
	}
	per := fastlanes.PackedLen[uint16](p.w)
	out := make([]byte, 0, 2*(len(levels)/fastlanes.BlockLen+1)*per)
	packed := make([]uint16, per)
	block := make([]uint16, fastlanes.BlockLen)
	i := 0
	for ; i+fastlanes.BlockLen <= len(levels); i += fastlanes.BlockLen {
		_ = fastlanes.Pack(p.w, levels[i:i+fastlanes.BlockLen], packed)
		out = appendWords(out, packed)
	}
	if r := len(levels) - i; r > 0 {
		if p.w*(fastlanes.BlockLen-r) < (16-p.w)*r {
			copy(block, levels[i:])
			clear(block[r:])
			_ = fastlanes.Pack(p.w, block, packed)
			out = appendWords(out, packed)
		} else {
			out = appendWords(out, levels[i:])
		}
	}
	return out
}
