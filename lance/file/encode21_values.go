package file

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// valueSink gathers the visible values of a leaf (a null's slot holds
// zeros or an empty value) into the flat form the 2.1 compressors take.
type valueSink interface {
	appendValue(arr arrow.Array, i int)
	appendNull()
	appendAll(arr arrow.Array)
	count() int
	// maxBytes is the widest value in bytes, which picks mini-block (under
	// 256) or full-zip.
	maxBytes() int
}

func newSink(dt arrow.DataType) (valueSink, error) {
	switch t := dt.(type) {
	case *arrow.NullType:
		return &nullSink{}, nil
	case *arrow.BooleanType:
		return &bitSink{}, nil
	case *arrow.StringType, *arrow.BinaryType:
		return &varSink{offsets: []uint64{0}}, nil
	case *arrow.LargeStringType, *arrow.LargeBinaryType:
		return &varSink{offsets: []uint64{0}, wide: true}, nil
	case *arrow.FixedSizeListType:
		fw, ok := t.Elem().(arrow.FixedWidthDataType)
		if !ok || fw.BitWidth()%8 != 0 || fw.BitWidth() == 0 {
			return nil, fmt.Errorf("fixed_size_list of %s is not supported", t.Elem())
		}
		d := int(t.Len())
		if d <= 0 {
			return nil, fmt.Errorf("fixed_size_list of size %d is not supported", d)
		}
		iw := fw.BitWidth() / 8
		return &fixedSink{w: d * iw, dim: d, innerW: iw}, nil
	case arrow.FixedWidthDataType:
		bw := t.BitWidth()
		if bw%8 != 0 || bw == 0 {
			return nil, fmt.Errorf("type %s is not supported", dt)
		}
		return &fixedSink{w: bw / 8}, nil
	}
	return nil, fmt.Errorf("type %s is not supported", dt)
}

type nullSink struct{ n int }

func (s *nullSink) appendValue(arrow.Array, int) { s.n++ }
func (s *nullSink) appendNull()                  { s.n++ }
func (s *nullSink) appendAll(a arrow.Array)      { s.n += a.Len() }
func (s *nullSink) count() int                   { return s.n }
func (s *nullSink) maxBytes() int                { return 0 }

// fixedSink holds fixed-width values; for a fixed-size list each value is
// the dim items of one list (innerW bytes each).
type fixedSink struct {
	w, dim, innerW int
	data           []byte
	n              int
	// itemValid is the validity of a fixed-size list's items, one bit per
	// item (1 = valid); nil while every item so far is valid.
	itemValid []byte
}

// noteItems records the validity of row i's items of the fixed-size list
// arr (all valid for a placeholder, arr nil), just appended as value s.n-1.
func (s *fixedSink) noteItems(arr arrow.Array, i int) {
	var child arrow.Array
	if arr != nil {
		child = arr.(*array.FixedSizeList).ListValues()
		if child.NullN() == 0 {
			child = nil
		}
	}
	base := (s.n - 1) * s.dim
	if child == nil && s.itemValid == nil {
		return
	}
	if s.itemValid == nil {
		s.itemValid = make([]byte, (s.n*s.dim+7)/8, (s.n*s.dim+7)/8*2)
		for k := 0; k < base; k++ {
			s.itemValid[k/8] |= 1 << (k % 8)
		}
	}
	for len(s.itemValid)*8 < base+s.dim {
		s.itemValid = append(s.itemValid, 0)
	}
	first := 0
	if child != nil {
		first = (arr.Data().Offset() + i) * s.dim
	}
	for k := 0; k < s.dim; k++ {
		if child == nil || child.IsValid(first+k) {
			b := base + k
			s.itemValid[b/8] |= 1 << (b % 8)
		}
	}
}

// hasItemNulls says whether some item of a fixed-size list is null.
func (s *fixedSink) hasItemNulls() bool {
	if s.itemValid == nil {
		return false
	}
	for k := 0; k < s.n*s.dim; k++ {
		if s.itemValid[k/8]&(1<<(k%8)) == 0 {
			return true
		}
	}
	return false
}

// itemBits copies the validity bits of values [from, from+n) to a new
// buffer starting at bit 0.
func (s *fixedSink) itemBits(from, n int) []byte {
	out := make([]byte, (n*s.dim+7)/8)
	for k := 0; k < n*s.dim; k++ {
		b := from*s.dim + k
		if s.itemValid[b/8]&(1<<(b%8)) != 0 {
			out[k/8] |= 1 << (k % 8)
		}
	}
	return out
}

func (s *fixedSink) src(arr arrow.Array) (buf []byte, first int) {
	if s.dim > 0 {
		fsl := arr.(*array.FixedSizeList)
		child := fsl.ListValues()
		bufs := child.Data().Buffers()
		if len(bufs) < 2 || bufs[1] == nil {
			return nil, 0
		}
		return bufs[1].Bytes(), child.Data().Offset()*s.innerW + arr.Data().Offset()*s.w
	}
	bufs := arr.Data().Buffers()
	if len(bufs) < 2 || bufs[1] == nil {
		return nil, 0
	}
	return bufs[1].Bytes(), arr.Data().Offset() * s.w
}

func (s *fixedSink) appendValue(arr arrow.Array, i int) {
	buf, first := s.src(arr)
	o := first + i*s.w
	if o+s.w > len(buf) {
		s.appendNull()
		return
	}
	s.data = append(s.data, buf[o:o+s.w]...)
	s.n++
	if s.dim > 0 {
		s.noteItems(arr, i)
	}
}

func (s *fixedSink) appendNull() {
	s.data = append(s.data, make([]byte, s.w)...)
	s.n++
	if s.dim > 0 {
		s.noteItems(nil, 0)
	}
}

func (s *fixedSink) appendAll(arr arrow.Array) {
	buf, first := s.src(arr)
	n := arr.Len()
	end := first + n*s.w
	if end > len(buf) {
		for i := 0; i < n; i++ {
			s.appendValue(arr, i)
		}
		return
	}
	if s.dim > 0 && (s.itemValid != nil || arr.(*array.FixedSizeList).ListValues().NullN() > 0) {
		for i := 0; i < n; i++ {
			s.appendValue(arr, i)
		}
		return
	}
	s.data = append(s.data, buf[first:end]...)
	s.n += n
}

func (s *fixedSink) count() int    { return s.n }
func (s *fixedSink) maxBytes() int { return s.w }

// bitSink holds booleans packed LSB first.
type bitSink struct {
	bits []byte
	n    int
}

func (s *bitSink) put(v bool) {
	if s.n%8 == 0 {
		s.bits = append(s.bits, 0)
	}
	if v {
		s.bits[s.n/8] |= 1 << (s.n % 8)
	}
	s.n++
}

func (s *bitSink) appendValue(arr arrow.Array, i int) {
	s.put(arr.(*array.Boolean).Value(i))
}
func (s *bitSink) appendNull() { s.put(false) }
func (s *bitSink) appendAll(arr arrow.Array) {
	b := arr.(*array.Boolean)
	bufs := b.Data().Buffers()
	if len(bufs) < 2 || bufs[1] == nil {
		for i := 0; i < b.Len(); i++ {
			s.put(false)
		}
		return
	}
	raw, off := bufs[1].Bytes(), b.Data().Offset()
	for i := 0; i < b.Len(); i++ {
		s.put(bitutil.BitIsSet(raw, off+i))
	}
}
func (s *bitSink) count() int    { return s.n }
func (s *bitSink) maxBytes() int { return 1 }

// varSink holds variable-width values with 32-bit (or, wide, 64-bit)
// offsets in the file.
type varSink struct {
	offsets []uint64
	data    []byte
	wide    bool
	maxLen  int
	// pre holds the FSST codes the values came with (fsst_codes.go):
	// usable while every value was appended with appendAll from an array
	// with codes under one table.
	pre sinkCodes
}

func (s *varSink) add(b []byte) {
	s.data = append(s.data, b...)
	s.offsets = append(s.offsets, uint64(len(s.data)))
	s.maxLen = max(s.maxLen, len(b))
}

func (s *varSink) appendValue(arr arrow.Array, i int) {
	s.pre.bad = true
	switch a := arr.(type) {
	case *array.String:
		s.data = append(s.data, a.Value(i)...)
		s.offsets = append(s.offsets, uint64(len(s.data)))
		s.maxLen = max(s.maxLen, len(a.Value(i)))
	case *array.LargeString:
		s.data = append(s.data, a.Value(i)...)
		s.offsets = append(s.offsets, uint64(len(s.data)))
		s.maxLen = max(s.maxLen, len(a.Value(i)))
	case *array.Binary:
		s.add(a.Value(i))
	case *array.LargeBinary:
		s.add(a.Value(i))
	}
}

func (s *varSink) appendNull() {
	s.pre.bad = true
	s.offsets = append(s.offsets, uint64(len(s.data)))
}

func (s *varSink) appendAll(arr arrow.Array) {
	var offs32 []int32
	var offs64 []int64
	switch a := arr.(type) {
	case *array.String:
		offs32 = a.ValueOffsets()
	case *array.Binary:
		offs32 = a.ValueOffsets()
	case *array.LargeString:
		offs64 = a.ValueOffsets()
	case *array.LargeBinary:
		offs64 = a.ValueOffsets()
	}
	bufs := arr.Data().Buffers()
	var raw []byte
	if len(bufs) > 2 && bufs[2] != nil {
		raw = bufs[2].Bytes()
	}
	hasNulls := arr.NullN() > 0
	n := arr.Len()
	s.pre.add(arr, n, s.count() == 0)
	if !hasNulls && len(s.offsets) == 1 && len(s.data) == 0 && s.alias(raw, offs32, offs64, n) {
		return
	}
	if n > 0 {
		var span int64
		if offs32 != nil {
			span = int64(offs32[n]) - int64(offs32[0])
		} else {
			span = offs64[n] - offs64[0]
		}
		if span > 0 && span <= int64(len(raw)) {
			s.data = slices.Grow(s.data, int(span))
		}
		s.offsets = slices.Grow(s.offsets, n)
	}
	for i := 0; i < n; i++ {
		var st, en int64
		if offs32 != nil {
			st, en = int64(offs32[i]), int64(offs32[i+1])
		} else {
			st, en = offs64[i], offs64[i+1]
		}
		if (hasNulls && arr.IsNull(i)) || st < 0 || en < st || en > int64(len(raw)) {
			s.offsets = append(s.offsets, uint64(len(s.data)))
			continue
		}
		s.add(raw[st:en])
	}
}

// alias makes the empty sink hold the n values of an array without nulls
// by referring to its value bytes, not copying them (a page is most often
// one array's rows). The encoders only read a sink's bytes, and only while
// the writer holds the array; the capacity is cut so that a later append
// copies. It reports false, changing nothing, when an offset is out of
// order or out of range.
func (s *varSink) alias(raw []byte, offs32 []int32, offs64 []int64, n int) bool {
	if n == 0 || (offs32 == nil && offs64 == nil) {
		return false
	}
	at := func(i int) int64 {
		if offs32 != nil {
			return int64(offs32[i])
		}
		return offs64[i]
	}
	lo, hi := at(0), at(n)
	if lo < 0 || hi < lo || hi > int64(len(raw)) {
		return false
	}
	offsets := make([]uint64, 1, n+1)
	maxLen := 0
	prev := lo
	for i := 1; i <= n; i++ {
		o := at(i)
		if o < prev || o > hi {
			return false
		}
		maxLen = max(maxLen, int(o-prev))
		offsets = append(offsets, uint64(o-lo))
		prev = o
	}
	s.data, s.offsets, s.maxLen = raw[lo:hi:hi], offsets, max(s.maxLen, maxLen)
	return true
}

func (s *varSink) count() int    { return len(s.offsets) - 1 }
func (s *varSink) maxBytes() int { return s.maxLen }
