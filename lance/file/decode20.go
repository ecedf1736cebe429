package file

// Decoding of Lance file format 2.0 pages (footer version 0.3).
//
// A 2.0 column holds pages whose encoding is a tree of
// lance.encodings.ArrayEncoding messages (encodings_v2_0.proto) wrapped in a
// google.protobuf.Any. LanceDB 0.31 writes, for data_storage_version "2.0":
//   - Nullable{NoNulls|SomeNulls|AllNulls} around Flat values (all fixed-width
//     types; bools as 1-bit Flat) and around FixedSizeList{Flat items};
//   - Binary{indices: Nullable{NoNulls{Flat 64}}, bytes: Flat 8} for strings
//     and binaries, nulls folded into the indices with null_adjustment;
//   - Dictionary{indices: Nullable{NoNulls{Flat 8}}, items: Binary} for utf8
//     pages of at least 100 rows and fewer than 100 distinct values, index 0
//     standing for null;
//   - List{offsets: Nullable{NoNulls{Flat 64}}} in the list column, the items
//     in the next column(s);
//   - SimpleStruct pages (no buffers) in a struct's header column, children in
//     the columns after it.
//
// The decoders here are pure: an encoding, the page's buffers already read,
// the number of rows in the page and the wanted row range give an Arrow array
// of exactly that range (offset 0). They never trust the encoding: every
// buffer access is bounds-checked and nothing is allocated beyond what the
// wanted range needs and the buffers can hold.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/mvq-dev/mvq/lance/internal/fsst"
	"github.com/mvq-dev/mvq/lance/pb/enc20pb"
)

// errCorrupt20 marks a 2.0 page whose encoding or buffers contradict each
// other; decoders wrap it with what was wrong. It wraps ErrCorrupt.
var errCorrupt20 = fmt.Errorf("%w 2.0 page", ErrCorrupt)

// maxEncodingDepth20 bounds the nesting of array encodings in one page; the
// deepest tree LanceDB writes is Nullable(FixedSizeList(Nullable(Flat))).
const maxEncodingDepth20 = 16

// checkVersion accepts the file format versions this package reads: 2.0
// (footer 0.3) and 2.1. The legacy 0.1/0.2 layout and 2.2 or later are
// refused with an error that names the version and how to convert the data.
func checkVersion(v Version) error {
	switch {
	case v == V2_0 || v == V2_1:
		return nil
	case v.Major == 0 && v.Minor < 3:
		return unsupportedf("file version %d.%d (legacy format) is not supported: rewrite the dataset with LanceDB using data_storage_version \"2.1\" (or \"2.0\")", v.Major, v.Minor)
	case v.Major == 2 && v.Minor >= 2 || v.Major > 2:
		return unsupportedf("file version %d.%d is not supported (2.0 and 2.1 are): rewrite the dataset with LanceDB using data_storage_version \"2.1\"", v.Major, v.Minor)
	default:
		return unsupportedf("file version %d.%d is not a known Lance file version (2.0 and 2.1 are supported)", v.Major, v.Minor)
	}
}

// pageBufs20 gives a 2.0 page decoder the buffers its encoding points at:
// the page's own, the column metadata's and the file's global buffers. They
// are either held in memory (page, column, file) or read on demand through
// fetch, a part at a time, so that decoding a few rows of a large page reads
// only the bytes that hold them.
type pageBufs20 struct {
	page   [][]byte
	column [][]byte
	file   [][]byte
	// fetch reads n bytes at offset off of buffer i of type t (the rest of
	// the buffer from off when n is wholeBuffer20); it must check the range
	// against the buffer.
	fetch func(t enc20pb.Buffer_BufferType, i uint32, off, n uint64) ([]byte, error)
	// fetchOwned says that fetch returns new slices the decoder may keep.
	fetchOwned bool
}

// wholeBuffer20 asks pageBufs20.read for everything from the offset on.
const wholeBuffer20 = ^uint64(0)

// read returns n bytes at offset off of the buffer desc points at, or the
// rest of it from off when n is wholeBuffer20.
func (b *pageBufs20) read(desc *enc20pb.Buffer, off, n uint64) ([]byte, error) {
	if desc == nil {
		return nil, fmt.Errorf("%w: missing buffer reference", errCorrupt20)
	}
	var set [][]byte
	switch desc.BufferType {
	case enc20pb.Buffer_page:
		set = b.page
	case enc20pb.Buffer_column:
		set = b.column
	case enc20pb.Buffer_file:
		set = b.file
	default:
		return nil, fmt.Errorf("%w: unknown buffer type %d", errCorrupt20, desc.BufferType)
	}
	if set == nil && b.fetch != nil {
		return b.fetch(desc.BufferType, desc.BufferIndex, off, n)
	}
	i := desc.BufferIndex
	if uint64(i) >= uint64(len(set)) {
		return nil, fmt.Errorf("%w: %v buffer %d of %d", errCorrupt20, desc.BufferType, i, len(set))
	}
	buf := set[i]
	if n == wholeBuffer20 {
		if off > uint64(len(buf)) {
			return nil, fmt.Errorf("%w: offset %d in a %d-byte buffer", errCorrupt20, off, len(buf))
		}
		return buf[off:], nil
	}
	if off > uint64(len(buf)) || n > uint64(len(buf))-off {
		return nil, fmt.Errorf("%w: bytes %d..+%d of a %d-byte buffer", errCorrupt20, off, n, len(buf))
	}
	return buf[off : off+n], nil
}

// decodePage20 decodes rows [skip, skip+take) of a page of pageRows rows
// encoded as enc into an Arrow array of type dt. It returns an error wrapping
// errCorrupt20 when the encoding does not fit dt or the buffers.
func decodePage20(enc *enc20pb.ArrayEncoding, bufs *pageBufs20, pageRows, skip, take uint64, dt arrow.DataType) (arrow.Array, error) {
	if skip > pageRows || take > pageRows-skip {
		return nil, fmt.Errorf("%w: rows %d..+%d outside a page of %d rows", errCorrupt20, skip, take, pageRows)
	}
	d := decoder20{bufs: bufs}
	return d.decode(enc, pageRows, skip, take, dt, 0)
}

type decoder20 struct {
	bufs *pageBufs20
	// decompressed caches a compressed buffer's content by its first byte's
	// address, so that a page is inflated once however it is sliced.
	decompressed map[*byte][]byte
}

func (d *decoder20) decode(enc *enc20pb.ArrayEncoding, pageRows, skip, take uint64, dt arrow.DataType, depth int) (arrow.Array, error) {
	if depth > maxEncodingDepth20 {
		return nil, fmt.Errorf("%w: encodings nested deeper than %d", errCorrupt20, maxEncodingDepth20)
	}
	if enc == nil {
		return nil, fmt.Errorf("%w: missing array encoding", errCorrupt20)
	}
	switch e := enc.ArrayEncoding.(type) {
	case *enc20pb.ArrayEncoding_Nullable:
		return d.nullable(e.Nullable, pageRows, skip, take, dt, depth)
	case *enc20pb.ArrayEncoding_Flat:
		return d.flat(e.Flat, pageRows, skip, take, dt)
	case *enc20pb.ArrayEncoding_FixedSizeList:
		return d.fixedSizeList(e.FixedSizeList, pageRows, skip, take, dt, depth)
	case *enc20pb.ArrayEncoding_Binary:
		return d.binary(e.Binary, pageRows, skip, take, dt, depth)
	case *enc20pb.ArrayEncoding_Dictionary:
		return d.dictionary(e.Dictionary, pageRows, skip, take, dt, depth)
	case *enc20pb.ArrayEncoding_FixedSizeBinary:
		return d.fixedSizeBinary(e.FixedSizeBinary, pageRows, skip, take, dt, depth)
	case *enc20pb.ArrayEncoding_Fsst:
		return d.fsst(e.Fsst, pageRows, skip, take, dt, depth)
	case *enc20pb.ArrayEncoding_PackedStruct:
		return d.packedStruct(e.PackedStruct, pageRows, skip, take, dt)
	case nil:
		return nil, fmt.Errorf("%w: empty array encoding", errCorrupt20)
	default:
		return nil, unsupportedf("2.0 array encoding %q is not supported", encodingName20(enc))
	}
}

func (d *decoder20) nullable(n *enc20pb.Nullable, pageRows, skip, take uint64, dt arrow.DataType, depth int) (arrow.Array, error) {
	switch v := n.GetNullability().(type) {
	case *enc20pb.Nullable_NoNulls:
		return d.decode(v.NoNulls.GetValues(), pageRows, skip, take, dt, depth+1)
	case *enc20pb.Nullable_AllNulls:
		// No buffer backs these rows: bound what they make us allocate.
		if need := nullBytes20(dt, float64(take)); need > maxNullBytes20 {
			return nil, fmt.Errorf("%w: %d all-null rows of %s need %.0f bytes (at most %d per page read)", errCorrupt20, take, dt, need, maxNullBytes20)
		}
		return array.MakeArrayOfNull(memory.DefaultAllocator, dt, int(take)), nil
	case *enc20pb.Nullable_SomeNulls:
		valid, err := d.decode(v.SomeNulls.GetValidity(), pageRows, skip, take, arrow.FixedWidthTypes.Boolean, depth+1)
		if err != nil {
			return nil, fmt.Errorf("validity: %w", err)
		}
		defer valid.Release()
		if valid.NullN() != 0 {
			return nil, fmt.Errorf("%w: validity bitmap has nulls itself", errCorrupt20)
		}
		values, err := d.decode(v.SomeNulls.GetValues(), pageRows, skip, take, dt, depth+1)
		if err != nil {
			return nil, err
		}
		defer values.Release()
		return withValidity(values, valid.Data().Buffers()[1].Bytes())
	default:
		return nil, fmt.Errorf("%w: nullable encoding without a nullability", errCorrupt20)
	}
}

// maxNullBytes20 caps the memory one all-null page read may materialize. An
// all-null page has no buffers, so its row count alone, which a hostile file
// sets at will, would decide the allocation.
const maxNullBytes20 = 1 << 30

// nullBytes20 estimates the bytes an Arrow array of n nulls of type dt
// takes (as a float, so that it cannot overflow).
func nullBytes20(dt arrow.DataType, n float64) float64 {
	bitmap := n/8 + 1
	switch t := dt.(type) {
	case *arrow.FixedSizeListType:
		return bitmap + nullBytes20(t.Elem(), n*float64(max(t.Len(), 1)))
	case *arrow.StructType:
		sum := bitmap
		for _, f := range t.Fields() {
			sum += nullBytes20(f.Type, n)
		}
		return sum
	case *arrow.ListType, *arrow.StringType, *arrow.BinaryType:
		return bitmap + 4*(n+1)
	case *arrow.LargeListType, *arrow.LargeStringType, *arrow.LargeBinaryType:
		return bitmap + 8*(n+1)
	}
	if w := fixedBits(dt); w > 0 {
		return bitmap + n*float64(w)/8
	}
	return bitmap + 8*n
}

// withValidity returns arr (offset 0) with its validity replaced by bitmap
// ANDed with the validity it already has.
func withValidity(arr arrow.Array, bitmap []byte) (arrow.Array, error) {
	data := arr.Data()
	n := data.Len()
	if data.Offset() != 0 {
		return nil, fmt.Errorf("lance 2.0: internal: validity on an array with offset %d", data.Offset())
	}
	if len(bitmap) < int(bitutil.BytesForBits(int64(n))) {
		return nil, fmt.Errorf("%w: validity bitmap of %d bytes for %d rows", errCorrupt20, len(bitmap), n)
	}
	out := make([]byte, bitutil.BytesForBits(int64(n)))
	copy(out, bitmap)
	if old := data.Buffers()[0]; old != nil && data.NullN() > 0 {
		bitutil.BitmapAnd(out, old.Bytes(), 0, 0, out, 0, int64(n))
	}
	nulls := n - bitutil.CountSetBits(out, 0, n)
	bufs := append([]*memory.Buffer{memory.NewBufferBytes(out)}, data.Buffers()[1:]...)
	var nd *array.Data
	if data.DataType().ID() == arrow.DICTIONARY {
		nd = array.NewDataWithDictionary(data.DataType(), n, bufs, nulls, 0, data.Dictionary().(*array.Data))
	} else {
		nd = array.NewData(data.DataType(), n, bufs, data.Children(), nulls, 0)
	}
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

// fixedBits is the width in bits of one value of a fixed-width type, or 0.
func fixedBits(dt arrow.DataType) uint64 {
	switch t := dt.(type) {
	case *arrow.BooleanType:
		return 1
	case *arrow.DictionaryType:
		return 0
	case arrow.FixedWidthDataType:
		if t.BitWidth() <= 0 {
			return 0
		}
		if _, nested := dt.(arrow.NestedType); nested {
			return 0
		}
		return uint64(t.BitWidth())
	}
	return 0
}

func (d *decoder20) flat(f *enc20pb.Flat, pageRows, skip, take uint64, dt arrow.DataType) (arrow.Array, error) {
	want := fixedBits(dt)
	if want == 0 {
		return nil, fmt.Errorf("%w: flat encoding for type %s", errCorrupt20, dt)
	}
	if f.BitsPerValue != want {
		return nil, fmt.Errorf("%w: flat encoding of %d bits per value for type %s (%d bits)", errCorrupt20, f.BitsPerValue, dt, want)
	}
	if want != 1 && want%8 != 0 {
		return nil, unsupportedf("2.0 flat encoding of %d bits per value is not supported", want)
	}
	// The bytes that hold rows [skip, skip+take): raw starts at row base.
	var raw []byte
	var base uint64
	owned := false
	if scheme := f.GetCompression().GetScheme(); scheme != "" && scheme != "none" {
		buf, err := d.flatBuffer(f, pageRows)
		if err != nil {
			return nil, err
		}
		raw = buf
	} else {
		var off, n uint64
		if want == 1 {
			base = skip &^ 7
			off, n = skip/8, (skip+take+7)/8-skip/8
		} else {
			hi, lo := bits.Mul64(skip, want/8)
			hi2, ln := bits.Mul64(take, want/8)
			if hi != 0 || hi2 != 0 {
				return nil, fmt.Errorf("%w: %d values of %d bits", errCorrupt20, take, want)
			}
			base, off, n = skip, lo, ln
		}
		buf, err := d.bufs.read(f.Buffer, off, n)
		if err != nil {
			return nil, err
		}
		raw, owned = buf, d.bufs.fetchOwned && d.bufs.page == nil
	}
	skip -= base
	if want == 1 {
		if uint64(len(raw))*8 < skip+take {
			return nil, fmt.Errorf("%w: bitmap of %d bytes for %d rows", errCorrupt20, len(raw), skip+take)
		}
		out := make([]byte, bitutil.BytesForBits(int64(take)))
		bitutil.CopyBitmap(raw, int(skip), int(take), out, 0)
		nd := array.NewData(dt, int(take), []*memory.Buffer{nil, memory.NewBufferBytes(out)}, nil, 0, 0)
		defer nd.Release()
		return array.MakeFromData(nd), nil
	}
	width := want / 8
	hi, end := bits.Mul64(skip+take, width)
	if hi != 0 || end > uint64(len(raw)) {
		return nil, fmt.Errorf("%w: flat buffer of %d bytes for %d values of %d bytes", errCorrupt20, len(raw), skip+take, width)
	}
	out := raw[skip*width : end : end]
	if !owned {
		out = make([]byte, take*width)
		copy(out, raw[skip*width:end])
	}
	nd := array.NewData(dt, int(take), []*memory.Buffer{nil, memory.NewBufferBytes(out)}, nil, 0, 0)
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

// flatBuffer returns the bytes of a flat encoding's buffer, decompressed when
// the encoding names a compression scheme. A decompressed buffer may not
// exceed the size pageRows values of its width need.
func (d *decoder20) flatBuffer(f *enc20pb.Flat, pageRows uint64) ([]byte, error) {
	raw, err := d.bufs.read(f.Buffer, 0, wholeBuffer20)
	if err != nil {
		return nil, err
	}
	scheme := f.GetCompression().GetScheme()
	if scheme == "" || scheme == "none" {
		return raw, nil
	}
	hi, lo := bits.Mul64(pageRows, f.BitsPerValue)
	if hi != 0 || lo > math.MaxInt32*8 {
		return nil, fmt.Errorf("%w: compressed flat buffer of %d values of %d bits", errCorrupt20, pageRows, f.BitsPerValue)
	}
	limit := int((lo + 7) / 8)
	if len(raw) > 0 {
		if got, ok := d.decompressed[&raw[0]]; ok {
			return got, nil
		}
	}
	out, err := decompress20(scheme, raw, limit)
	if err != nil {
		return nil, err
	}
	if len(raw) > 0 {
		if d.decompressed == nil {
			d.decompressed = map[*byte][]byte{}
		}
		d.decompressed[&raw[0]] = out
	}
	return out, nil
}

// decompress20 inflates a buffer compressed the way Lance's general buffer
// compressors write it, into at most limit bytes:
//   - zstd: a plain zstd frame, or a little-endian u64 uncompressed length
//     followed by a zstd stream (what Lance writes);
//   - lz4: a little-endian u32 uncompressed length followed by an LZ4 block.
func decompress20(scheme string, raw []byte, limit int) ([]byte, error) {
	le := binary.LittleEndian
	switch scheme {
	case "zstd":
		if len(raw) == 0 {
			return []byte{}, nil
		}
		zr, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(limit)+8<<20))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		if !rawZstdFrame(raw) {
			n := le.Uint64(raw)
			if n > uint64(limit) {
				return nil, fmt.Errorf("%w: zstd buffer of %d bytes, at most %d expected", errCorrupt20, n, limit)
			}
			out, err := zr.DecodeAll(raw[8:], make([]byte, 0, n))
			if err != nil {
				return nil, fmt.Errorf("%w: zstd buffer: %v", errCorrupt20, err)
			}
			if uint64(len(out)) != n {
				return nil, fmt.Errorf("%w: zstd buffer inflates to %d bytes, not %d", errCorrupt20, len(out), n)
			}
			return out, nil
		}
		if err := zr.Reset(bytes.NewReader(raw)); err != nil {
			return nil, fmt.Errorf("%w: zstd buffer: %v", errCorrupt20, err)
		}
		var out bytes.Buffer
		n, err := io.Copy(&out, io.LimitReader(zr, int64(limit)+1))
		if err != nil {
			return nil, fmt.Errorf("%w: zstd buffer: %v", errCorrupt20, err)
		}
		if n > int64(limit) {
			return nil, fmt.Errorf("%w: zstd buffer inflates past %d bytes", errCorrupt20, limit)
		}
		return out.Bytes(), nil
	case "lz4":
		if len(raw) < 4 {
			return nil, fmt.Errorf("%w: lz4 buffer of %d bytes", errCorrupt20, len(raw))
		}
		n := le.Uint32(raw)
		if uint64(n) > uint64(limit) {
			return nil, fmt.Errorf("%w: lz4 buffer of %d bytes, at most %d expected", errCorrupt20, n, limit)
		}
		out := make([]byte, n)
		got, err := lz4.UncompressBlock(raw[4:], out)
		if err != nil || got != int(n) {
			return nil, fmt.Errorf("%w: lz4 buffer: %d of %d bytes: %v", errCorrupt20, got, n, err)
		}
		return out, nil
	}
	return nil, unsupportedf("2.0 compression scheme %q is not supported", scheme)
}

// rawZstdFrame tells a plain zstd frame from Lance's length-prefixed form:
// a frame starts with the zstd magic and a frame header whose reserved bit
// is clear.
func rawZstdFrame(b []byte) bool {
	if len(b) < 8 {
		return true
	}
	return binary.LittleEndian.Uint32(b) == 0xFD2FB528 && b[4]&0x10 == 0
}

func (d *decoder20) fixedSizeList(f *enc20pb.FixedSizeList, pageRows, skip, take uint64, dt arrow.DataType, depth int) (arrow.Array, error) {
	ft, ok := dt.(*arrow.FixedSizeListType)
	if !ok {
		return nil, fmt.Errorf("%w: fixed-size-list encoding for type %s", errCorrupt20, dt)
	}
	dim := uint64(f.Dimension)
	if dim == 0 || dim != uint64(ft.Len()) {
		return nil, fmt.Errorf("%w: fixed-size-list of dimension %d for type %s", errCorrupt20, f.Dimension, dt)
	}
	if f.HasValidity {
		return nil, unsupportedf("2.0 fixed-size-list with inline validity is not supported")
	}
	hi, itemRows := bits.Mul64(pageRows, dim)
	if hi != 0 {
		return nil, fmt.Errorf("%w: fixed-size-list page of %d rows of %d items", errCorrupt20, pageRows, dim)
	}
	items, err := d.decode(f.Items, itemRows, skip*dim, take*dim, ft.Elem(), depth+1)
	if err != nil {
		return nil, err
	}
	defer items.Release()
	nd := array.NewData(dt, int(take), []*memory.Buffer{nil}, []arrow.ArrayData{items.Data()}, 0, 0)
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

// binaryKind reports whether dt is a variable-width binary type and whether
// its offsets are 64-bit.
func binaryKind(dt arrow.DataType) (ok, large bool) {
	switch dt.ID() {
	case arrow.STRING, arrow.BINARY:
		return true, false
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		return true, true
	}
	return false, false
}

func (d *decoder20) binary(b *enc20pb.Binary, pageRows, skip, take uint64, dt arrow.DataType, depth int) (arrow.Array, error) {
	isBin, large := binaryKind(dt)
	if !isBin {
		return nil, fmt.Errorf("%w: binary encoding for type %s", errCorrupt20, dt)
	}
	// The indices hold each row's end offset (cumulative, from the page's
	// first byte), plus null_adjustment when the row is null.
	lo := skip
	if skip > 0 {
		lo = skip - 1
	}
	idxArr, err := d.decode(b.Indices, pageRows, lo, skip+take-lo, arrow.PrimitiveTypes.Uint64, depth+1)
	if err != nil {
		return nil, fmt.Errorf("binary indices: %w", err)
	}
	defer idxArr.Release()
	if idxArr.NullN() != 0 {
		return nil, fmt.Errorf("%w: binary indices have nulls", errCorrupt20)
	}
	idx := idxArr.(*array.Uint64).Uint64Values()
	adj := b.NullAdjustment
	norm := func(v uint64) (bool, uint64) {
		if v >= adj {
			return false, v - adj
		}
		return true, v
	}
	var start uint64
	if skip > 0 {
		_, start = norm(idx[0])
		idx = idx[1:]
	}
	ends := make([]uint64, len(idx))
	var validity []byte
	nulls := 0
	prev := start
	for i, v := range idx {
		ok, end := norm(v)
		if end < prev {
			return nil, fmt.Errorf("%w: binary offsets decrease (%d after %d)", errCorrupt20, end, prev)
		}
		if !ok {
			if validity == nil {
				validity = make([]byte, bitutil.BytesForBits(int64(len(idx))))
				bitutil.SetBitsTo(validity, 0, int64(i), true)
			}
			nulls++
		} else if validity != nil {
			bitutil.SetBit(validity, i)
		}
		ends[i] = end - start
		prev = end
	}
	total := prev - start
	if !large && total > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d bytes of values for type %s", errCorrupt20, total, dt)
	}
	// A compressed bytes buffer inflates whole: it may hold as many bytes as
	// the page's last row ends at.
	limit := prev
	if f := innerFlat(b.Bytes); f != nil && f.GetCompression().GetScheme() != "" && pageRows > skip+take {
		lastArr, err := d.decode(b.Indices, pageRows, pageRows-1, 1, arrow.PrimitiveTypes.Uint64, depth+1)
		if err != nil {
			return nil, fmt.Errorf("binary indices: %w", err)
		}
		_, limit = norm(lastArr.(*array.Uint64).Value(0))
		lastArr.Release()
		if limit < prev {
			return nil, fmt.Errorf("%w: binary offsets decrease (%d at the end of the page)", errCorrupt20, limit)
		}
	}
	data, err := d.bytesRange(b.Bytes, start, total, limit, depth+1)
	if err != nil {
		return nil, fmt.Errorf("binary bytes: %w", err)
	}
	var offsets []byte
	if large {
		o := make([]int64, len(ends)+1)
		for i, e := range ends {
			o[i+1] = int64(e)
		}
		offsets = arrow.Int64Traits.CastToBytes(o)
	} else {
		o := make([]int32, len(ends)+1)
		for i, e := range ends {
			o[i+1] = int32(e)
		}
		offsets = arrow.Int32Traits.CastToBytes(o)
	}
	var vb *memory.Buffer
	if validity != nil {
		vb = memory.NewBufferBytes(validity)
	}
	nd := array.NewData(dt, int(take), []*memory.Buffer{vb, memory.NewBufferBytes(offsets), memory.NewBufferBytes(data)}, nil, nulls, 0)
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

// bytesRange returns n bytes starting at byte start of a byte-array encoding
// (Flat of 8 bits, possibly compressed into a buffer of at most limit bytes).
func (d *decoder20) bytesRange(enc *enc20pb.ArrayEncoding, start, n, limit uint64, depth int) ([]byte, error) {
	if n == 0 {
		return []byte{}, nil
	}
	for {
		nn, ok := enc.GetArrayEncoding().(*enc20pb.ArrayEncoding_Nullable)
		if !ok {
			break
		}
		nonull, ok := nn.Nullable.GetNullability().(*enc20pb.Nullable_NoNulls)
		if !ok {
			return nil, fmt.Errorf("%w: nullable bytes of a binary encoding", errCorrupt20)
		}
		if depth++; depth > maxEncodingDepth20 {
			return nil, fmt.Errorf("%w: encodings nested deeper than %d", errCorrupt20, maxEncodingDepth20)
		}
		enc = nonull.NoNulls.GetValues()
	}
	f := enc.GetFlat()
	if f == nil {
		return nil, unsupportedf("2.0 bytes of a binary encoding as %q are not supported", encodingName20(enc))
	}
	if f.BitsPerValue != 8 {
		return nil, fmt.Errorf("%w: bytes of a binary encoding with %d bits per value", errCorrupt20, f.BitsPerValue)
	}
	end := start + n
	if end < start {
		return nil, fmt.Errorf("%w: byte range overflows", errCorrupt20)
	}
	if scheme := f.GetCompression().GetScheme(); scheme == "" || scheme == "none" {
		raw, err := d.bufs.read(f.Buffer, start, n)
		if err != nil {
			return nil, err
		}
		if d.bufs.fetchOwned && d.bufs.page == nil {
			return raw, nil
		}
		out := make([]byte, n)
		copy(out, raw)
		return out, nil
	}
	raw, err := d.flatBuffer(f, max(end, limit))
	if err != nil {
		return nil, err
	}
	if end > uint64(len(raw)) {
		return nil, fmt.Errorf("%w: bytes %d..%d of a %d-byte buffer", errCorrupt20, start, end, len(raw))
	}
	out := make([]byte, n)
	copy(out, raw[start:end])
	return out, nil
}

func (d *decoder20) dictionary(de *enc20pb.Dictionary, pageRows, skip, take uint64, dt arrow.DataType, depth int) (arrow.Array, error) {
	valueType := dt
	dictTarget, isDict := dt.(*arrow.DictionaryType)
	if isDict {
		valueType = dictTarget.ValueType
	}
	n := uint64(de.NumDictionaryItems)
	items, err := d.decode(de.Items, n, 0, n, valueType, depth+1)
	if err != nil {
		return nil, fmt.Errorf("dictionary items: %w", err)
	}
	defer items.Release()
	idxType := arrow.DataType(arrow.PrimitiveTypes.Uint8)
	if isDict {
		idxType = dictTarget.IndexType
	} else if f := innerFlat(de.Indices); f != nil {
		switch f.BitsPerValue {
		case 16:
			idxType = arrow.PrimitiveTypes.Uint16
		case 32:
			idxType = arrow.PrimitiveTypes.Uint32
		case 64:
			idxType = arrow.PrimitiveTypes.Uint64
		}
	}
	indices, err := d.decode(de.Indices, pageRows, skip, take, idxType, depth+1)
	if err != nil {
		return nil, fmt.Errorf("dictionary indices: %w", err)
	}
	defer indices.Release()
	if isDict {
		// The indices of an Arrow dictionary column are stored as they are.
		for i := 0; i < indices.Len(); i++ {
			if indices.IsValid(i) {
				if k, ok := indexAt(indices, i); !ok || k >= n {
					return nil, fmt.Errorf("%w: dictionary index %d of %d items", errCorrupt20, k, n)
				}
			}
		}
		return array.NewDictionaryArray(dt, indices, items), nil
	}
	// Otherwise index 0 stands for null and index k for item k-1.
	pick := make([]int64, indices.Len())
	for i := range pick {
		k, ok := indexAt(indices, i)
		switch {
		case !ok || !indices.IsValid(i) || k == 0:
			pick[i] = -1
		case k > n:
			return nil, fmt.Errorf("%w: dictionary index %d of %d items", errCorrupt20, k, n)
		default:
			pick[i] = int64(k - 1)
		}
	}
	return takeValues(items, pick)
}

// encodingName20 is the name of the encoding set in enc ("flat", "nullable",
// ...), or "none".
func encodingName20(enc *enc20pb.ArrayEncoding) string {
	m := enc.ProtoReflect()
	if od := m.Descriptor().Oneofs().ByName("array_encoding"); od != nil {
		if f := m.WhichOneof(od); f != nil {
			return string(f.Name())
		}
	}
	return "none"
}

// innerFlat returns the Flat encoding under any NoNulls wrappers, or nil.
func innerFlat(enc *enc20pb.ArrayEncoding) *enc20pb.Flat {
	for i := 0; i < maxEncodingDepth20 && enc != nil; i++ {
		switch e := enc.ArrayEncoding.(type) {
		case *enc20pb.ArrayEncoding_Flat:
			return e.Flat
		case *enc20pb.ArrayEncoding_Nullable:
			enc = e.Nullable.GetNoNulls().GetValues()
		default:
			return nil
		}
	}
	return nil
}

// indexAt returns element i of an unsigned or signed integer array as a
// uint64; ok is false for negative values and other types.
func indexAt(a arrow.Array, i int) (uint64, bool) {
	switch a := a.(type) {
	case *array.Uint8:
		return uint64(a.Value(i)), true
	case *array.Uint16:
		return uint64(a.Value(i)), true
	case *array.Uint32:
		return uint64(a.Value(i)), true
	case *array.Uint64:
		return a.Value(i), true
	case *array.Int8:
		return uint64(a.Value(i)), a.Value(i) >= 0
	case *array.Int16:
		return uint64(a.Value(i)), a.Value(i) >= 0
	case *array.Int32:
		return uint64(a.Value(i)), a.Value(i) >= 0
	case *array.Int64:
		return uint64(a.Value(i)), a.Value(i) >= 0
	}
	return 0, false
}

// takeValues gathers items[pick[i]] (null where pick[i] < 0) into a new array
// of the items' type.
func takeValues(items arrow.Array, pick []int64) (arrow.Array, error) {
	b := array.NewBuilder(memory.DefaultAllocator, items.DataType())
	defer b.Release()
	b.Reserve(len(pick))
	for _, k := range pick {
		if k < 0 || items.IsNull(int(k)) {
			b.AppendNull()
			continue
		}
		if err := appendValue(b, items, int(k)); err != nil {
			return nil, err
		}
	}
	return b.NewArray(), nil
}

func appendValue(b array.Builder, items arrow.Array, k int) error {
	switch a := items.(type) {
	case *array.String:
		b.(*array.StringBuilder).Append(a.Value(k))
	case *array.LargeString:
		b.(*array.LargeStringBuilder).Append(a.Value(k))
	case *array.Binary:
		b.(*array.BinaryBuilder).Append(a.Value(k))
	case *array.LargeBinary:
		b.(*array.BinaryBuilder).Append(a.Value(k))
	default:
		return unsupportedf("2.0 dictionary of %s values is not supported", items.DataType())
	}
	return nil
}

func (d *decoder20) fixedSizeBinary(f *enc20pb.FixedSizeBinary, pageRows, skip, take uint64, dt arrow.DataType, depth int) (arrow.Array, error) {
	isBin, large := binaryKind(dt)
	if !isBin {
		return nil, fmt.Errorf("%w: fixed-size-binary encoding for type %s", errCorrupt20, dt)
	}
	w := uint64(f.ByteWidth)
	hi, start := bits.Mul64(skip, w)
	hi2, n := bits.Mul64(take, w)
	if hi != 0 || hi2 != 0 || (!large && n > math.MaxInt32) {
		return nil, fmt.Errorf("%w: fixed-size-binary of %d rows of %d bytes", errCorrupt20, take, w)
	}
	hi3, all := bits.Mul64(pageRows, w)
	if hi3 != 0 {
		return nil, fmt.Errorf("%w: fixed-size-binary page of %d rows of %d bytes", errCorrupt20, pageRows, w)
	}
	data, err := d.bytesRange(f.Bytes, start, n, all, depth+1)
	if err != nil {
		return nil, err
	}
	var offsets []byte
	if large {
		o := make([]int64, take+1)
		for i := range o {
			o[i] = int64(uint64(i) * w)
		}
		offsets = arrow.Int64Traits.CastToBytes(o)
	} else {
		o := make([]int32, take+1)
		for i := range o {
			o[i] = int32(uint64(i) * w)
		}
		offsets = arrow.Int32Traits.CastToBytes(o)
	}
	nd := array.NewData(dt, int(take), []*memory.Buffer{nil, memory.NewBufferBytes(offsets), memory.NewBufferBytes(data)}, nil, 0, 0)
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

// fsst decodes strings compressed one by one with an FSST symbol table (a
// 2.0 writer uses it when the field asks for "fsst" compression).
func (d *decoder20) fsst(f *enc20pb.Fsst, pageRows, skip, take uint64, dt arrow.DataType, depth int) (arrow.Array, error) {
	isBin, large := binaryKind(dt)
	if !isBin {
		return nil, fmt.Errorf("%w: fsst encoding for type %s", errCorrupt20, dt)
	}
	table, err := fsst.ParseTable(f.SymbolTable)
	if err != nil {
		return nil, fmt.Errorf("%w: fsst symbol table: %v", errCorrupt20, err)
	}
	packed, err := d.decode(f.Binary, pageRows, skip, take, dt, depth+1)
	if err != nil {
		return nil, err
	}
	defer packed.Release()
	pd := packed.Data()
	var offs []int64
	if large {
		offs = packed.(interface{ ValueOffsets() []int64 }).ValueOffsets()
	} else {
		for _, o := range packed.(interface{ ValueOffsets() []int32 }).ValueOffsets() {
			offs = append(offs, int64(o))
		}
	}
	src := pd.Buffers()[2].Bytes()
	out := make([]byte, 0, len(src)*2)
	ends := make([]int64, len(offs))
	for i := 0; i+1 < len(offs); i++ {
		if packed.IsValid(i) {
			if out, err = table.AppendDecode(out, src[offs[i]:offs[i+1]]); err != nil {
				return nil, fmt.Errorf("%w: fsst value %d: %v", errCorrupt20, i, err)
			}
		}
		ends[i+1] = int64(len(out))
	}
	if !large && len(out) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d bytes of values for type %s", errCorrupt20, len(out), dt)
	}
	var offsets []byte
	if large {
		offsets = arrow.Int64Traits.CastToBytes(ends)
	} else {
		o := make([]int32, len(ends))
		for i, e := range ends {
			o[i] = int32(e)
		}
		offsets = arrow.Int32Traits.CastToBytes(o)
	}
	nd := array.NewData(dt, int(take), []*memory.Buffer{pd.Buffers()[0], memory.NewBufferBytes(offsets), memory.NewBufferBytes(out)}, nil, pd.NullN(), 0)
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

// listPage20 is rows [skip, skip+take) of a 2.0 list-offsets page: Arrow
// offsets relative to the first item (take+1 values), the validity bitmap
// (nil when no list is null) and the page-relative range of items they span.
type listPage20 struct {
	offsets    []uint64
	validity   []byte
	nulls      int
	itemsStart uint64
	itemsEnd   uint64
}

// decodeListPage20 decodes rows [skip, skip+take) of a page of pageRows rows
// encoded as List. Each stored offset is the end of its list counted from the
// page's first item, plus null_offset_adjustment when the list is null.
func decodeListPage20(l *enc20pb.List, bufs *pageBufs20, pageRows, skip, take uint64) (*listPage20, error) {
	if skip > pageRows || take > pageRows-skip {
		return nil, fmt.Errorf("%w: rows %d..+%d outside a page of %d rows", errCorrupt20, skip, take, pageRows)
	}
	adj := l.NullOffsetAdjustment
	if adj == 0 || adj <= l.NumItems {
		return nil, fmt.Errorf("%w: list null offset adjustment %d for %d items", errCorrupt20, adj, l.NumItems)
	}
	lo := skip
	if skip > 0 {
		lo = skip - 1
	}
	d := decoder20{bufs: bufs}
	arr, err := d.decode(l.Offsets, pageRows, lo, skip+take-lo, arrow.PrimitiveTypes.Uint64, 1)
	if err != nil {
		return nil, fmt.Errorf("list offsets: %w", err)
	}
	defer arr.Release()
	if arr.NullN() != 0 {
		return nil, fmt.Errorf("%w: list offsets have nulls", errCorrupt20)
	}
	raw := arr.(*array.Uint64).Uint64Values()
	norm := func(v uint64) (bool, uint64, error) {
		valid := v < adj
		if !valid {
			v -= adj
		}
		if v > l.NumItems {
			return false, 0, fmt.Errorf("%w: list offset %d past the page's %d items", errCorrupt20, v, l.NumItems)
		}
		return valid, v, nil
	}
	var start uint64
	if skip > 0 {
		var err error
		if _, start, err = norm(raw[0]); err != nil {
			return nil, err
		}
		raw = raw[1:]
	}
	p := &listPage20{offsets: make([]uint64, len(raw)+1), itemsStart: start}
	prev := start
	for i, v := range raw {
		ok, end, err := norm(v)
		if err != nil {
			return nil, err
		}
		if end < prev {
			return nil, fmt.Errorf("%w: list offsets decrease (%d after %d)", errCorrupt20, end, prev)
		}
		if !ok {
			if p.validity == nil {
				p.validity = make([]byte, bitutil.BytesForBits(int64(len(raw))))
				bitutil.SetBitsTo(p.validity, 0, int64(i), true)
			}
			p.nulls++
		} else if p.validity != nil {
			bitutil.SetBit(p.validity, i)
		}
		p.offsets[i+1] = end - start
		prev = end
	}
	p.itemsEnd = prev
	return p, nil
}
