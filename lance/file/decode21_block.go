package file

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/mvq-dev/mvq/lance/internal/fastlanes"
	"github.com/mvq-dev/mvq/lance/internal/fsst"
	"github.com/mvq-dev/mvq/lance/pb/enc21pb"
)

// vkind says how a vblock holds its values.
type vkind uint8

const (
	vFixed vkind = iota // n values of width bits each in data (width 1: LSB-first bitmap)
	vVar                // n values; value i is data[offs[i]:offs[i+1]]
	vFSL                // n lists of dim items in child; valid (optional) is a bitmap over child items
	vNull               // n values that are all null (no data)
	vDict               // n dictionary indices of width bits in data; child is the dictionary
)

// vblock is a decoded run of values of one leaf column: the items of a
// mini-block chunk, of a full-zip page, a dictionary, or levels.
type vblock struct {
	kind  vkind
	n     int
	width int // vFixed: bits per value
	data  []byte
	offs  []uint64 // vVar: n+1 offsets into data
	dim   int      // vFSL
	child *vblock  // vFSL
	valid []byte   // vFSL: validity bitmap of the child items, nil when all are valid
	// fsst, for vVar values decoded from FSST codes: the codes, one
	// string per value, and the table (for Reader.KeepFSST).
	fsst *arrayCodes
}

// maxDecodedBytes caps what one general-compression buffer may expand to.
const maxDecodedBytes = 1 << 30

// maxChunkValues caps the values one mini-block chunk may declare.
const maxChunkValues = 1 << 16

func fixedBytes(n, width int) int { return (n*width + 7) / 8 }

func newFixed(data []byte, n, width int) (*vblock, error) {
	need := fixedBytes(n, width)
	if len(data) < need {
		return nil, corruptf("%d values of %d bits need %d bytes, have %d", n, width, need, len(data))
	}
	return &vblock{kind: vFixed, n: n, width: width, data: data[:need]}, nil
}

func checkWidth(bits uint64) (int, error) {
	switch bits {
	case 1, 8, 16, 32, 64, 128, 256:
		return int(bits), nil
	}
	if bits%8 == 0 && bits > 0 && bits <= 1<<20 {
		return int(bits), nil
	}
	return 0, unsupportedf("flat values of %d bits", bits)
}

// --- general compression ---

var zstdDec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxDecodedBytes))

// decompressGeneral undoes Lance's general (zstd or lz4) buffer compression.
// zstd buffers are either a raw zstd frame or a u64 uncompressed length
// followed by a frame; lz4 buffers are a u32 uncompressed length followed by
// an lz4 block.
func decompressGeneral(c *enc21pb.BufferCompression, src []byte) ([]byte, error) {
	switch c.GetScheme() {
	case enc21pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD:
		if len(src) == 0 {
			return nil, nil
		}
		frame := src
		limit := uint64(maxDecodedBytes)
		if len(src) >= 8 && binary.LittleEndian.Uint32(src) != 0xFD2FB528 {
			n := binary.LittleEndian.Uint64(src)
			if n > maxDecodedBytes {
				return nil, corruptf("zstd buffer declares %d bytes", n)
			}
			limit = n
			frame = src[8:]
		}
		out, err := zstdDec.DecodeAll(frame, nil)
		if err != nil {
			return nil, corruptf("zstd: %v", err)
		}
		if uint64(len(out)) > limit || (limit != maxDecodedBytes && uint64(len(out)) != limit) {
			return nil, corruptf("zstd buffer decoded to %d bytes, declared %d", len(out), limit)
		}
		return out, nil
	case enc21pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4:
		if len(src) < 4 {
			return nil, corruptf("lz4 buffer of %d bytes", len(src))
		}
		n := binary.LittleEndian.Uint32(src)
		if uint64(n) > maxDecodedBytes || uint64(n) > 255*uint64(len(src))+16 {
			return nil, corruptf("lz4 buffer of %d bytes declares %d", len(src), n)
		}
		out := make([]byte, n)
		k, err := lz4.UncompressBlock(src[4:], out)
		if err != nil {
			return nil, corruptf("lz4: %v", err)
		}
		return out[:k], nil
	}
	return nil, unsupportedf("general compression scheme %v", c.GetScheme())
}

// --- block decompression (levels, dictionaries, all of a buffer at once) ---

// decodeBlock decodes a whole buffer holding n values with the given
// encoding (the "block" context: rep/def levels, dictionaries).
func decodeBlock(enc *enc21pb.CompressiveEncoding, buf []byte, n int) (*vblock, error) {
	if n < 0 || n > maxDecodedBytes {
		return nil, corruptf("block of %d values", n)
	}
	switch c := enc.GetCompression().(type) {
	case *enc21pb.CompressiveEncoding_Flat:
		w, err := checkWidth(c.Flat.GetBitsPerValue())
		if err != nil {
			return nil, err
		}
		if c.Flat.Data != nil {
			if buf, err = decompressGeneral(c.Flat.Data, buf); err != nil {
				return nil, err
			}
		}
		return newFixed(buf, n, w)
	case *enc21pb.CompressiveEncoding_InlineBitpacking:
		return unpackInline(c.InlineBitpacking.GetUncompressedBitsPerValue(), buf, n)
	case *enc21pb.CompressiveEncoding_OutOfLineBitpacking:
		flat := c.OutOfLineBitpacking.GetValues().GetFlat()
		if flat == nil {
			return nil, unsupportedf("out-of-line bitpacking over %T", c.OutOfLineBitpacking.GetValues().GetCompression())
		}
		return unpackOutOfLine(c.OutOfLineBitpacking.GetUncompressedBitsPerValue(), flat.GetBitsPerValue(), buf, n)
	case *enc21pb.CompressiveEncoding_Constant:
		return constantBlock(c.Constant.GetValue(), n)
	case *enc21pb.CompressiveEncoding_Variable:
		return decodeVariableBlock(buf, n)
	case *enc21pb.CompressiveEncoding_FixedSizeList:
		return decodeFSL(c.FixedSizeList, [][]byte{buf}, n)
	case *enc21pb.CompressiveEncoding_General:
		raw, err := decompressGeneral(c.General.GetCompression(), buf)
		if err != nil {
			return nil, err
		}
		return decodeBlock(c.General.GetValues(), raw, n)
	case *enc21pb.CompressiveEncoding_Fsst:
		inner, err := decodeBlock(c.Fsst.GetValues(), buf, n)
		if err != nil {
			return nil, err
		}
		return fsstBlock(c.Fsst.GetSymbolTable(), inner)
	}
	return nil, unsupportedf("block encoding %T", enc.GetCompression())
}

func constantBlock(v []byte, n int) (*vblock, error) {
	if len(v) == 0 {
		return &vblock{kind: vNull, n: n}, nil
	}
	if len(v) > 32 || n > maxDecodedBytes/len(v) {
		return nil, corruptf("constant of %d bytes times %d", len(v), n)
	}
	data := bytes.Repeat(v, n)
	return &vblock{kind: vFixed, n: n, width: 8 * len(v), data: data}, nil
}

// decodeVariableBlock reads the block form of variable-width data: a u32
// bits-per-offset (32 or 64), the start of the value bytes (u32 for 32-bit
// offsets; for 64-bit, 4 bytes of padding then a u64), then n+1 offsets
// relative to the value bytes, then the value bytes.
func decodeVariableBlock(buf []byte, n int) (*vblock, error) {
	if len(buf) < 8 {
		return nil, corruptf("variable block of %d bytes", len(buf))
	}
	le := binary.LittleEndian
	if buf[1] != 0 || buf[2] != 0 || buf[3] != 0 {
		return nil, unsupportedf("variable block in the pre-2.1 header format")
	}
	bits := le.Uint32(buf)
	var start, offStart uint64
	switch bits {
	case 32:
		start, offStart = uint64(le.Uint32(buf[4:])), 8
	case 64:
		if len(buf) < 16 {
			return nil, corruptf("variable block of %d bytes", len(buf))
		}
		start, offStart = le.Uint64(buf[8:]), 16
	default:
		return nil, corruptf("variable block with %d-bit offsets", bits)
	}
	if start < offStart || start > uint64(len(buf)) {
		return nil, corruptf("variable block data start %d outside %d bytes", start, len(buf))
	}
	bpo := uint64(bits / 8)
	if (start-offStart)/bpo < uint64(n)+1 {
		return nil, corruptf("variable block has room for %d offsets, needs %d", (start-offStart)/bpo, n+1)
	}
	offs := make([]uint64, n+1)
	data := buf[start:]
	for i := range offs {
		p := offStart + uint64(i)*bpo
		if bits == 32 {
			offs[i] = uint64(le.Uint32(buf[p:]))
		} else {
			offs[i] = le.Uint64(buf[p:])
		}
	}
	if err := checkOffsets(offs, len(data)); err != nil {
		return nil, err
	}
	return &vblock{kind: vVar, n: n, data: data, offs: offs}, nil
}

func checkOffsets(offs []uint64, size int) error {
	for i := 1; i < len(offs); i++ {
		if offs[i] < offs[i-1] {
			return corruptf("offsets decrease at %d (%d < %d)", i, offs[i], offs[i-1])
		}
	}
	if len(offs) > 0 && offs[len(offs)-1] > uint64(size) {
		return corruptf("offset %d past %d bytes", offs[len(offs)-1], size)
	}
	return nil
}

// --- bitpacking ---

func wordBytes(bits uint64) (int, error) {
	switch bits {
	case 8, 16, 32, 64:
		return int(bits / 8), nil
	}
	return 0, corruptf("bitpacking of %d-bit words", bits)
}

// unpackInline decodes one inline-bitpacked chunk: a word (of the
// uncompressed width) holding the packed bit width w, then one FastLanes
// block of 1024 values packed to w bits; the first n values are kept.
func unpackInline(uncompressedBits uint64, buf []byte, n int) (*vblock, error) {
	wb, err := wordBytes(uncompressedBits)
	if err != nil {
		return nil, err
	}
	if n > fastlanes.BlockLen {
		return nil, corruptf("inline bitpacked chunk of %d values", n)
	}
	if len(buf) < wb {
		return nil, corruptf("inline bitpacked chunk of %d bytes", len(buf))
	}
	var w uint64
	for i := wb - 1; i >= 0; i-- {
		w = w<<8 | uint64(buf[i])
	}
	if w > uncompressedBits {
		return nil, corruptf("bit width %d over %d", w, uncompressedBits)
	}
	out := make([]byte, fastlanes.BlockLen*wb)
	if err := unpackBlock(wb, int(w), buf[wb:], out); err != nil {
		return nil, err
	}
	return &vblock{kind: vFixed, n: n, width: wb * 8, data: out[:n*wb]}, nil
}

// unpackBlock unpacks one FastLanes block of words of wb bytes packed to w
// bits from src (at least the packed size) into dst (1024 words).
func unpackBlock(wb, w int, src, dst []byte) error {
	need := fastlanes.BlockLen * w / 8
	if len(src) < need {
		return corruptf("bitpacked block of %d bits per value needs %d bytes, have %d", w, need, len(src))
	}
	src = src[:need]
	le := binary.LittleEndian
	switch wb {
	case 1:
		return fastlanes.Unpack[uint8](w, src, dst)
	case 2:
		in := make([]uint16, need/2)
		for i := range in {
			in[i] = le.Uint16(src[2*i:])
		}
		out := make([]uint16, fastlanes.BlockLen)
		if err := fastlanes.Unpack(w, in, out); err != nil {
			return err
		}
		for i, v := range out {
			le.PutUint16(dst[2*i:], v)
		}
	case 4:
		in := make([]uint32, need/4)
		for i := range in {
			in[i] = le.Uint32(src[4*i:])
		}
		out := make([]uint32, fastlanes.BlockLen)
		if err := fastlanes.Unpack(w, in, out); err != nil {
			return err
		}
		for i, v := range out {
			le.PutUint32(dst[4*i:], v)
		}
	case 8:
		in := make([]uint64, need/8)
		for i := range in {
			in[i] = le.Uint64(src[8*i:])
		}
		out := make([]uint64, fastlanes.BlockLen)
		if err := fastlanes.Unpack(w, in, out); err != nil {
			return err
		}
		for i, v := range out {
			le.PutUint64(dst[8*i:], v)
		}
	}
	return nil
}

// unpackOutOfLine decodes n values bitpacked to w bits in whole FastLanes
// blocks; a last partial block is either packed (padded to 1024 values) or,
// when that would be larger, stored as raw words, told apart by the size.
func unpackOutOfLine(uncompressedBits, w uint64, buf []byte, n int) (*vblock, error) {
	wb, err := wordBytes(uncompressedBits)
	if err != nil {
		return nil, err
	}
	if w > uncompressedBits {
		return nil, corruptf("bit width %d over %d", w, uncompressedBits)
	}
	blockBytes := fastlanes.BlockLen * int(w) / 8
	whole, tail := n/fastlanes.BlockLen, n%fastlanes.BlockLen
	rawTail := tail > 0 && len(buf) == whole*blockBytes+tail*wb
	need := whole * blockBytes
	if tail > 0 {
		if rawTail {
			need += tail * wb
		} else {
			need += blockBytes
		}
	}
	if len(buf) < need || n > maxDecodedBytes/wb {
		return nil, corruptf("%d values bitpacked to %d bits need %d bytes, have %d", n, w, need, len(buf))
	}
	out := make([]byte, (whole+1)*fastlanes.BlockLen*wb)
	for b := 0; b < whole; b++ {
		if err := unpackBlock(wb, int(w), buf[b*blockBytes:], out[b*fastlanes.BlockLen*wb:]); err != nil {
			return nil, err
		}
	}
	if tail > 0 {
		dst := out[whole*fastlanes.BlockLen*wb:]
		src := buf[whole*blockBytes:]
		if rawTail {
			copy(dst, src[:tail*wb])
		} else if err := unpackBlock(wb, int(w), src, dst); err != nil {
			return nil, err
		}
	}
	return &vblock{kind: vFixed, n: n, width: wb * 8, data: out[:n*wb]}, nil
}

// --- FSST ---

func fsstBlock(table []byte, in *vblock) (*vblock, error) {
	if in.kind != vVar {
		return nil, corruptf("fsst over non-variable data")
	}
	t, err := fsst.ParseTable(table)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	data, offs, err := t.DecodeAll(in.data, in.offs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	out := &vblock{kind: vVar, n: in.n, data: data, offs: offs}
	if t.Compressed {
		out.fsst = &arrayCodes{table: table, codes: in.data, offs: in.offs}
	}
	return out, nil
}

// --- mini-block value decompression ---

// decodeMiniValues decodes the value buffers of one mini-block chunk
// holding n values.
func decodeMiniValues(enc *enc21pb.CompressiveEncoding, bufs [][]byte, n int) (*vblock, error) {
	if n < 0 || n > maxChunkValues {
		return nil, corruptf("chunk of %d values", n)
	}
	need := func(k int) error {
		if len(bufs) < k {
			return corruptf("chunk has %d buffers, the encoding needs %d", len(bufs), k)
		}
		return nil
	}
	switch c := enc.GetCompression().(type) {
	case *enc21pb.CompressiveEncoding_Flat:
		if err := need(1); err != nil {
			return nil, err
		}
		return decodeBlock(enc, bufs[0], n)
	case *enc21pb.CompressiveEncoding_InlineBitpacking:
		if err := need(1); err != nil {
			return nil, err
		}
		return unpackInline(c.InlineBitpacking.GetUncompressedBitsPerValue(), bufs[0], n)
	case *enc21pb.CompressiveEncoding_Variable:
		if err := need(1); err != nil {
			return nil, err
		}
		flat := c.Variable.GetOffsets().GetFlat()
		if flat == nil {
			return nil, unsupportedf("variable offsets encoded as %T", c.Variable.GetOffsets().GetCompression())
		}
		buf := bufs[0]
		if c.Variable.Values != nil {
			var err error
			if buf, err = decompressGeneral(c.Variable.Values, buf); err != nil {
				return nil, err
			}
		}
		return decodeVariableChunk(flat.GetBitsPerValue(), buf, n)
	case *enc21pb.CompressiveEncoding_Fsst:
		inner, err := decodeMiniValues(c.Fsst.GetValues(), bufs, n)
		if err != nil {
			return nil, err
		}
		return fsstBlock(c.Fsst.GetSymbolTable(), inner)
	case *enc21pb.CompressiveEncoding_FixedSizeList:
		return decodeFSL(c.FixedSizeList, bufs, n)
	case *enc21pb.CompressiveEncoding_Rle:
		if err := need(2); err != nil {
			return nil, err
		}
		vf, lf := c.Rle.GetValues().GetFlat(), c.Rle.GetRunLengths().GetFlat()
		if vf == nil || lf == nil || lf.GetBitsPerValue() != 8 {
			return nil, unsupportedf("rle other than flat values with 8-bit run lengths")
		}
		return decodeRLE(vf.GetBitsPerValue(), bufs[0], bufs[1], n)
	case *enc21pb.CompressiveEncoding_ByteStreamSplit:
		if err := need(1); err != nil {
			return nil, err
		}
		vf := c.ByteStreamSplit.GetValues().GetFlat()
		if vf == nil {
			return nil, unsupportedf("byte stream split over %T", c.ByteStreamSplit.GetValues().GetCompression())
		}
		return decodeBSS(vf.GetBitsPerValue(), bufs[0], n)
	case *enc21pb.CompressiveEncoding_General:
		if err := need(1); err != nil {
			return nil, err
		}
		raw, err := decompressGeneral(c.General.GetCompression(), bufs[0])
		if err != nil {
			return nil, err
		}
		nb := append([][]byte{raw}, bufs[1:]...)
		return decodeMiniValues(c.General.GetValues(), nb, n)
	case *enc21pb.CompressiveEncoding_PackedStruct:
		if err := need(1); err != nil {
			return nil, err
		}
		return decodePackedStruct(c.PackedStruct, bufs[0], n)
	}
	return nil, unsupportedf("mini-block encoding %T", enc.GetCompression())
}

// decodeVariableChunk reads a mini-block chunk of variable-width data: n+1
// offsets of bits each (absolute positions in the chunk buffer), then the
// bytes they point at.
func decodeVariableChunk(bits uint64, buf []byte, n int) (*vblock, error) {
	if bits != 32 && bits != 64 {
		return nil, corruptf("variable chunk with %d-bit offsets", bits)
	}
	bpo := int(bits / 8)
	if len(buf)/bpo < n+1 {
		return nil, corruptf("variable chunk of %d bytes cannot hold %d offsets", len(buf), n+1)
	}
	le := binary.LittleEndian
	offs := make([]uint64, n+1)
	for i := range offs {
		if bpo == 4 {
			offs[i] = uint64(le.Uint32(buf[4*i:]))
		} else {
			offs[i] = le.Uint64(buf[8*i:])
		}
	}
	if err := checkOffsets(offs, len(buf)); err != nil {
		return nil, err
	}
	base := offs[0]
	for i := range offs {
		offs[i] -= base
	}
	return &vblock{kind: vVar, n: n, data: buf[base:], offs: offs}, nil
}

func decodeRLE(bits uint64, vals, lens []byte, n int) (*vblock, error) {
	wb, err := wordBytes(bits)
	if err != nil {
		return nil, err
	}
	runs := len(lens)
	if len(vals) < runs*wb {
		return nil, corruptf("rle has %d run lengths but %d value bytes", runs, len(vals))
	}
	out := make([]byte, 0, n*wb)
	for r := 0; r < runs && len(out) < n*wb; r++ {
		v := vals[r*wb : (r+1)*wb]
		for k := 0; k < int(lens[r]) && len(out) < n*wb; k++ {
			out = append(out, v...)
		}
	}
	if len(out) != n*wb {
		return nil, corruptf("rle runs cover %d values, want %d", len(out)/wb, n)
	}
	return &vblock{kind: vFixed, n: n, width: int(bits), data: out}, nil
}

func decodeBSS(bits uint64, buf []byte, n int) (*vblock, error) {
	wb, err := wordBytes(bits)
	if err != nil {
		return nil, err
	}
	if len(buf) != n*wb {
		return nil, corruptf("byte stream split of %d values needs %d bytes, have %d", n, n*wb, len(buf))
	}
	out := make([]byte, n*wb)
	for j := 0; j < wb; j++ {
		stream := buf[j*n : (j+1)*n]
		for i, b := range stream {
			out[i*wb+j] = b
		}
	}
	return &vblock{kind: vFixed, n: n, width: int(bits), data: out}, nil
}

// fslLayer is one level of a (possibly nested) fixed-size list encoding.
type fslLayer struct {
	dim   int
	valid bool // a validity bitmap over this layer's items is stored
}

// fslLayers walks a fixed-size-list encoding, outermost layer first, to its
// flat items; cum is the number of items per row.
func fslLayers(desc *enc21pb.FixedSizeList) (layers []fslLayer, flat *enc21pb.Flat, cum int, err error) {
	d := desc
	cum = 1
	for depth := 0; ; depth++ {
		if depth > 8 {
			return nil, nil, 0, unsupportedf("fixed-size lists nested more than 8 deep")
		}
		dim := d.GetItemsPerValue()
		if dim == 0 || dim > 1<<20 || uint64(cum)*dim > 1<<20 {
			return nil, nil, 0, corruptf("fixed-size list of %d items", dim)
		}
		cum *= int(dim)
		layers = append(layers, fslLayer{int(dim), d.GetHasValidity()})
		switch c := d.GetValues().GetCompression().(type) {
		case *enc21pb.CompressiveEncoding_FixedSizeList:
			d = c.FixedSizeList
		case *enc21pb.CompressiveEncoding_Flat:
			return layers, c.Flat, cum, nil
		default:
			return nil, nil, 0, unsupportedf("fixed-size list over %T", c)
		}
	}
}

// nestFSL wraps the flat items of n rows in the fixed-size-list layers,
// innermost first. valid[i] is layer i's bitmap over its items (nil when
// the layer stores none); each is checked to cover them.
func nestFSL(layers []fslLayer, valid [][]byte, items *vblock, n int) (*vblock, error) {
	lists := n
	counts := make([]int, len(layers)) // lists in layer i
	for i, l := range layers {
		counts[i] = lists
		lists *= l.dim
	}
	b := items
	for i := len(layers) - 1; i >= 0; i-- {
		l := layers[i]
		b = &vblock{kind: vFSL, n: counts[i], dim: l.dim, child: b}
		if l.valid {
			if len(valid[i]) < (counts[i]*l.dim+7)/8 {
				return nil, corruptf("fixed-size list validity of %d bytes for %d items", len(valid[i]), counts[i]*l.dim)
			}
			b.valid = valid[i]
		}
	}
	return b, nil
}

// decodeFSL decodes fixed-size-list values: for each FSL layer, outermost
// first, an optional validity bitmap buffer over that layer's items, then the
// flat items in the last buffer.
func decodeFSL(desc *enc21pb.FixedSizeList, bufs [][]byte, n int) (*vblock, error) {
	layers, flat, cum, err := fslLayers(desc)
	if err != nil {
		return nil, err
	}
	w, err := checkWidth(flat.GetBitsPerValue())
	if err != nil {
		return nil, err
	}
	if n > maxDecodedBytes/cum {
		return nil, corruptf("%d fixed-size lists of %d", n, cum)
	}
	valid := make([][]byte, len(layers))
	nb := 0
	for i, l := range layers {
		if l.valid {
			if nb >= len(bufs) {
				return nil, corruptf("fixed-size list needs more than %d buffers", len(bufs))
			}
			valid[i] = bufs[nb]
			nb++
		}
	}
	if nb >= len(bufs) {
		return nil, corruptf("fixed-size list needs %d buffers, has %d", nb+1, len(bufs))
	}
	items, err := newFixed(bufs[nb], n*cum, w)
	if err != nil {
		return nil, err
	}
	return nestFSL(layers, valid, items, n)
}

// decodePackedStruct splits row-major fixed-width struct values into one
// vFixed block per field, returned as the children of a vFSL-shaped holder
// (dim 0); the caller assembles the struct.
func decodePackedStruct(desc *enc21pb.PackedStruct, buf []byte, n int) (*vblock, error) {
	widths := desc.GetBitsPerValue()
	total := 0
	for _, w := range widths {
		if w%8 != 0 || w == 0 || w > 1<<16 {
			return nil, unsupportedf("packed struct field of %d bits", w)
		}
		total += int(w / 8)
	}
	if total == 0 || len(buf) < n*total {
		return nil, corruptf("packed struct of %d rows x %d bytes in %d bytes", n, total, len(buf))
	}
	return &vblock{kind: vFixed, n: n, width: total * 8, data: buf[:n*total]}, nil
}
