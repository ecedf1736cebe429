package file

// Encoding of Lance file format 2.0 pages, the encodings LanceDB's 2.0
// writer uses for plain columns (see decode20.go):
//   - fixed-width values and bools: Nullable{NoNulls|SomeNulls|AllNulls} over
//     Flat, the validity a 1-bit Flat in the page's first buffer;
//   - fixed-size lists: the same Nullable around FixedSizeList, whose items
//     carry a Nullable of their own;
//   - strings and binaries: Binary with u64 end offsets (Nullable{NoNulls{Flat
//     64}}) and the bytes as Flat 8, nulls folded in with null_adjustment;
//   - lists: a column of List pages (u64 end offsets, nulls folded in with
//     null_offset_adjustment), the items in the columns after it;
//   - structs: a header column with one SimpleStruct page, the children in
//     the columns after it. A 2.0 file has no place for struct validity:
//     like LanceDB, the writer keeps only the children's nulls.
// Dictionary encoding is not written: it is an optimization LanceDB applies
// to low-cardinality strings, and plain Binary reads back the same.

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/mvq-dev/mvq/lance/pb/enc20pb"
	"github.com/mvq-dev/mvq/lance/pb/filepb"
)

func init() { newColumnWriters20Hook = newColumnWriters20 }

// newColumnWriters20 returns one column writer per top-level field of schema
// (fields is the same schema as Lance fields, in pre-order) for a 2.0 file,
// cutting pages at DefaultPageSize bytes. It fails for types a 2.0 file
// cannot hold (dictionaries, unions, maps).
func newColumnWriters20(fields []*filepb.Field, schema *arrow.Schema) ([]columnWriter, error) {
	return newColumnWriters20Sized(fields, schema, DefaultPageSize)
}

// newColumnWriters20Sized is newColumnWriters20 with pages cut once about
// pageBytes bytes are buffered.
func newColumnWriters20Sized(fields []*filepb.Field, schema *arrow.Schema, pageBytes int) ([]columnWriter, error) {
	top := 0
	for _, f := range fields {
		if f.ParentId == -1 {
			top++
		}
	}
	if len(fields) > 0 && top != schema.NumFields() {
		return nil, fmt.Errorf("lance 2.0: %d top-level Lance fields for %d Arrow fields", top, schema.NumFields())
	}
	out := make([]columnWriter, schema.NumFields())
	for i, f := range schema.Fields() {
		w, err := newWriter20(f.Type, pageBytes, 0)
		if err != nil {
			return nil, fmt.Errorf("lance 2.0: field %s: %w", f.Name, err)
		}
		out[i] = w
	}
	return out, nil
}

func newWriter20(dt arrow.DataType, pageBytes, depth int) (columnWriter, error) {
	if depth > maxEncodingDepth20 {
		return nil, fmt.Errorf("types nested deeper than %d", maxEncodingDepth20)
	}
	switch t := dt.(type) {
	case *arrow.StructType:
		w := &structWriter20{}
		for _, f := range t.Fields() {
			c, err := newWriter20(f.Type, pageBytes, depth+1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name, err)
			}
			w.children = append(w.children, c)
		}
		return w, nil
	case *arrow.ListType:
		c, err := newWriter20(t.Elem(), pageBytes, depth+1)
		if err != nil {
			return nil, err
		}
		return &listWriter20{items: c, pageBytes: pageBytes}, nil
	case *arrow.LargeListType:
		c, err := newWriter20(t.Elem(), pageBytes, depth+1)
		if err != nil {
			return nil, err
		}
		return &listWriter20{items: c, pageBytes: pageBytes}, nil
	}
	if err := checkLeaf20(dt, depth); err != nil {
		return nil, err
	}
	return &leafWriter20{dt: dt, pageBytes: pageBytes}, nil
}

// checkLeaf20 reports whether a leaf column of type dt can be written.
func checkLeaf20(dt arrow.DataType, depth int) error {
	if depth > maxEncodingDepth20 {
		return fmt.Errorf("types nested deeper than %d", maxEncodingDepth20)
	}
	if ok, _ := binaryKind(dt); ok {
		return nil
	}
	if t, ok := dt.(*arrow.FixedSizeListType); ok {
		if t.Len() <= 0 {
			return fmt.Errorf("fixed-size list of %d items", t.Len())
		}
		if ok, _ := binaryKind(t.Elem()); ok {
			return fmt.Errorf("fixed-size list of %s is not supported in 2.0", t.Elem())
		}
		return checkLeaf20(t.Elem(), depth+1)
	}
	if fixedBits(dt) == 0 || (fixedBits(dt) != 1 && fixedBits(dt)%8 != 0) {
		return fmt.Errorf("type %s is not supported in 2.0 files", dt)
	}
	return nil
}

func valuesColumn20() encodedColumn {
	return encodedColumn{encoding: &enc20pb.ColumnEncoding{ColumnEncoding: &enc20pb.ColumnEncoding_Values{Values: &emptypb.Empty{}}}}
}

// shiftPages moves pages by n columns (a child writer's pages into its
// parent's column numbering).
func shiftPages(pages []encodedPage, n int) []encodedPage {
	for i := range pages {
		pages[i].column += n
	}
	return pages
}

// arrayBytes estimates the bytes a slice of an array will take in a page.
func arrayBytes(arr arrow.Array) int {
	n := 0
	var walk func(d arrow.ArrayData, rows int)
	walk = func(d arrow.ArrayData, rows int) {
		n += rows / 8
		switch t := d.DataType().(type) {
		case *arrow.FixedSizeListType:
			for _, c := range d.Children() {
				walk(c, rows*int(t.Len()))
			}
		case arrow.BinaryDataType:
			n += rows * 8
			if bufs := d.Buffers(); len(bufs) > 2 && bufs[2] != nil && d.Len() > 0 {
				n += bufs[2].Len() * rows / d.Len()
			}
		default:
			n += rows * int(fixedBits(d.DataType())+7) / 8
		}
	}
	walk(arr.Data(), arr.Len())
	return n
}

// leafWriter20 writes a column of a type that takes one column.
type leafWriter20 struct {
	dt        arrow.DataType
	pageBytes int
	pending   []arrow.Array
	bytes     int
}

func (w *leafWriter20) numColumns() int { return 1 }

func (w *leafWriter20) write(arr arrow.Array) ([]encodedPage, error) {
	if !arrow.TypeEqual(arr.DataType(), w.dt) {
		return nil, fmt.Errorf("lance 2.0: array of type %s for a column of type %s", arr.DataType(), w.dt)
	}
	n := arr.Len()
	if n == 0 {
		return nil, nil
	}
	// Cut a large array into pieces of about a page each.
	perRow := max(arrayBytes(arr)/n, 1)
	var pages []encodedPage
	for lo := 0; lo < n; {
		room := max((w.pageBytes-w.bytes)/perRow, 1)
		hi := min(lo+room, n)
		part := array.NewSlice(arr, int64(lo), int64(hi))
		w.pending = append(w.pending, part)
		w.bytes += arrayBytes(part)
		lo = hi
		if w.bytes >= w.pageBytes {
			p, err := w.flush()
			if err != nil {
				return nil, err
			}
			pages = append(pages, p)
		}
	}
	return pages, nil
}

func (w *leafWriter20) flush() (encodedPage, error) {
	defer func() {
		releaseAll(w.pending)
		w.pending, w.bytes = nil, 0
	}()
	arr, err := concat20(w.dt, w.pending)
	if err != nil {
		return encodedPage{}, err
	}
	defer arr.Release()
	enc, bufs, err := encodeArray20(arr)
	if err != nil {
		return encodedPage{}, err
	}
	return encodedPage{buffers: bufs, encoding: enc, numRows: uint64(arr.Len())}, nil
}

func (w *leafWriter20) finish() ([]encodedPage, []encodedColumn, error) {
	var pages []encodedPage
	if len(w.pending) > 0 {
		p, err := w.flush()
		if err != nil {
			return nil, nil, err
		}
		pages = append(pages, p)
	}
	return pages, []encodedColumn{valuesColumn20()}, nil
}

// encodeArray20 encodes a whole array (of a leaf type) as one page: its
// encoding and the page's buffers in buffer-index order.
func encodeArray20(arr arrow.Array) (*enc20pb.ArrayEncoding, [][]byte, error) {
	var bufs [][]byte
	enc, err := encodeValues20(arr, &bufs)
	if err != nil {
		return nil, nil, err
	}
	return enc, bufs, nil
}

func addBuffer(bufs *[][]byte, b []byte) *enc20pb.Buffer {
	*bufs = append(*bufs, b)
	return &enc20pb.Buffer{BufferIndex: uint32(len(*bufs) - 1), BufferType: enc20pb.Buffer_page}
}

func flatEnc20(bitsPerValue uint64, buf *enc20pb.Buffer) *enc20pb.ArrayEncoding {
	return &enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_Flat{Flat: &enc20pb.Flat{BitsPerValue: bitsPerValue, Buffer: buf}}}
}

// copyBits copies n bits of src starting at bit off into a new bitmap.
func copyBits(src []byte, off, n int) []byte {
	out := make([]byte, bitutil.BytesForBits(int64(n)))
	if n > 0 {
		bitutil.CopyBitmap(src, off, n, out, 0)
	}
	return out
}

func encodeValues20(arr arrow.Array, bufs *[][]byte) (*enc20pb.ArrayEncoding, error) {
	if ok, large := binaryKind(arr.DataType()); ok {
		return encodeBinary20(arr, large, bufs)
	}
	n := arr.Len()
	if arr.NullN() == n && n > 0 {
		return &enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_Nullable{Nullable: &enc20pb.Nullable{
			Nullability: &enc20pb.Nullable_AllNulls{AllNulls: &enc20pb.Nullable_AllNull{}}}}}, nil
	}
	var validity *enc20pb.ArrayEncoding
	if arr.NullN() > 0 {
		validity = flatEnc20(1, addBuffer(bufs, copyBits(arr.NullBitmapBytes(), arr.Data().Offset(), n)))
	}
	values, err := encodeNonNull20(arr, bufs)
	if err != nil {
		return nil, err
	}
	if validity == nil {
		return &enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_Nullable{Nullable: &enc20pb.Nullable{
			Nullability: &enc20pb.Nullable_NoNulls{NoNulls: &enc20pb.Nullable_NoNull{Values: values}}}}}, nil
	}
	return &enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_Nullable{Nullable: &enc20pb.Nullable{
		Nullability: &enc20pb.Nullable_SomeNulls{SomeNulls: &enc20pb.Nullable_SomeNull{Validity: validity, Values: values}}}}}, nil
}

// encodeNonNull20 encodes the values of arr, its validity aside.
func encodeNonNull20(arr arrow.Array, bufs *[][]byte) (*enc20pb.ArrayEncoding, error) {
	d := arr.Data()
	off, n := d.Offset(), d.Len()
	if fl, ok := arr.(*array.FixedSizeList); ok {
		dim := int(fl.DataType().(*arrow.FixedSizeListType).Len())
		items := array.NewSlice(fl.ListValues(), int64(off*dim), int64((off+n)*dim))
		defer items.Release()
		itemsEnc, err := encodeValues20(items, bufs)
		if err != nil {
			return nil, err
		}
		return &enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_FixedSizeList{FixedSizeList: &enc20pb.FixedSizeList{
			Dimension: uint32(dim), Items: itemsEnc}}}, nil
	}
	width := fixedBits(arr.DataType())
	switch {
	case width == 1:
		return flatEnc20(1, addBuffer(bufs, copyBits(d.Buffers()[1].Bytes(), off, n))), nil
	case width >= 8 && width%8 == 0:
		w := int(width / 8)
		src := d.Buffers()[1].Bytes()
		out := make([]byte, n*w)
		copy(out, src[off*w:(off+n)*w])
		return flatEnc20(width, addBuffer(bufs, out)), nil
	}
	return nil, fmt.Errorf("lance 2.0: cannot encode type %s", arr.DataType())
}

// valueOffsets returns the n+1 offsets of a binary-like array as int64.
func valueOffsets(arr arrow.Array) []int64 {
	n := arr.Len()
	out := make([]int64, n+1)
	switch a := arr.(type) {
	case *array.String:
		for i, o := range a.ValueOffsets() {
			out[i] = int64(o)
		}
	case *array.Binary:
		for i, o := range a.ValueOffsets() {
			out[i] = int64(o)
		}
	case *array.LargeString:
		copy(out, a.ValueOffsets())
	case *array.LargeBinary:
		copy(out, a.ValueOffsets())
	}
	return out
}

func encodeBinary20(arr arrow.Array, large bool, bufs *[][]byte) (*enc20pb.ArrayEncoding, error) {
	n := arr.Len()
	offs := valueOffsets(arr)
	var data []byte
	if d := arr.Data().Buffers(); len(d) > 2 && d[2] != nil {
		data = d[2].Bytes()
	}
	first, last := offs[0], offs[n]
	if first < 0 || last < first || last > int64(len(data)) {
		return nil, fmt.Errorf("lance 2.0: binary offsets %d..%d outside %d bytes", first, last, len(data))
	}
	total := uint64(last - first)
	if total >= math.MaxUint64/4 {
		return nil, fmt.Errorf("lance 2.0: %d bytes in a page", total)
	}
	adj := total + 1
	idx := make([]uint64, n)
	for i := 0; i < n; i++ {
		idx[i] = uint64(offs[i+1] - first)
		if arr.IsNull(i) {
			idx[i] += adj
		}
	}
	indices := &enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_Nullable{Nullable: &enc20pb.Nullable{
		Nullability: &enc20pb.Nullable_NoNulls{NoNulls: &enc20pb.Nullable_NoNull{
			Values: flatEnc20(64, addBuffer(bufs, arrow.Uint64Traits.CastToBytes(idx)))}}}}}
	out := make([]byte, total)
	copy(out, data[first:last])
	bytesEnc := flatEnc20(8, addBuffer(bufs, out))
	return &enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_Binary{Binary: &enc20pb.Binary{
		Indices: indices, Bytes: bytesEnc, NullAdjustment: adj}}}, nil
}

// listWriter20 writes a list column: its offsets page(s) in its own column
// and the items through the writer of the item type.
type listWriter20 struct {
	items     columnWriter
	pageBytes int
	// ends holds, per buffered list, the end of its items counted from the
	// first buffered item; valid marks the non-null lists.
	ends  []uint64
	valid []bool
	span  uint64
}

func (w *listWriter20) numColumns() int { return 1 + w.items.numColumns() }

func (w *listWriter20) write(arr arrow.Array) ([]encodedPage, error) {
	// Cut a long array so that an offsets page stays about a page in size.
	if per := max(w.pageBytes/8, 1); arr.Len() > per {
		var pages []encodedPage
		for lo := 0; lo < arr.Len(); lo += per {
			part := array.NewSlice(arr, int64(lo), int64(min(lo+per, arr.Len())))
			ps, err := w.write(part)
			part.Release()
			if err != nil {
				return nil, err
			}
			pages = append(pages, ps...)
		}
		return pages, nil
	}
	var offs []int64
	var values arrow.Array
	// The arrays' Offsets() cover the whole buffer, not just this slice.
	n, off := arr.Len(), arr.Data().Offset()
	if n == 0 {
		return nil, nil
	}
	switch a := arr.(type) {
	case *array.List:
		o := a.Offsets()
		if len(o) < off+n+1 {
			return nil, fmt.Errorf("lance 2.0: list array with %d offsets for rows %d..%d", len(o), off, off+n)
		}
		offs = make([]int64, n+1)
		for i, v := range o[off : off+n+1] {
			offs[i] = int64(v)
		}
		values = a.ListValues()
	case *array.LargeList:
		o := a.Offsets()
		if len(o) < off+n+1 {
			return nil, fmt.Errorf("lance 2.0: list array with %d offsets for rows %d..%d", len(o), off, off+n)
		}
		offs = o[off : off+n+1]
		values = a.ListValues()
	default:
		return nil, fmt.Errorf("lance 2.0: array of type %s for a list column", arr.DataType())
	}
	first, last := offs[0], offs[n]
	if first < 0 || last < first || last > int64(values.Len()) {
		return nil, fmt.Errorf("lance 2.0: list offsets %d..%d outside %d items", first, last, values.Len())
	}
	for i := 0; i < n; i++ {
		if offs[i+1] < offs[i] {
			return nil, fmt.Errorf("lance 2.0: list offsets decrease")
		}
		w.ends = append(w.ends, w.span+uint64(offs[i+1]-first))
		w.valid = append(w.valid, arr.IsValid(i))
	}
	w.span += uint64(last - first)
	items := array.NewSlice(values, first, last)
	defer items.Release()
	pages, err := w.items.write(items)
	if err != nil {
		return nil, err
	}
	pages = shiftPages(pages, 1)
	if len(w.ends)*8 >= w.pageBytes {
		pages = append(pages, w.flush())
	}
	return pages, nil
}

// flush encodes the buffered lists as one page.
func (w *listWriter20) flush() encodedPage {
	adj := w.span + 1
	vals := make([]uint64, len(w.ends))
	for i, e := range w.ends {
		vals[i] = e
		if !w.valid[i] {
			vals[i] += adj
		}
	}
	var bufs [][]byte
	offsets := &enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_Nullable{Nullable: &enc20pb.Nullable{
		Nullability: &enc20pb.Nullable_NoNulls{NoNulls: &enc20pb.Nullable_NoNull{
			Values: flatEnc20(64, addBuffer(&bufs, arrow.Uint64Traits.CastToBytes(vals)))}}}}}
	enc := &enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_List{List: &enc20pb.List{
		Offsets: offsets, NullOffsetAdjustment: adj, NumItems: w.span}}}
	p := encodedPage{buffers: bufs, encoding: enc, numRows: uint64(len(w.ends))}
	w.ends, w.valid, w.span = nil, nil, 0
	return p
}

func (w *listWriter20) finish() ([]encodedPage, []encodedColumn, error) {
	var pages []encodedPage
	if len(w.ends) > 0 {
		pages = append(pages, w.flush())
	}
	itemPages, itemCols, err := w.items.finish()
	if err != nil {
		return nil, nil, err
	}
	pages = append(pages, shiftPages(itemPages, 1)...)
	return pages, append([]encodedColumn{valuesColumn20()}, itemCols...), nil
}

// structWriter20 writes a struct's header column and its children.
type structWriter20 struct {
	children []columnWriter
	rows     uint64
}

func (w *structWriter20) numColumns() int {
	n := 1
	for _, c := range w.children {
		n += c.numColumns()
	}
	return n
}

func (w *structWriter20) write(arr arrow.Array) ([]encodedPage, error) {
	s, ok := arr.(*array.Struct)
	if !ok || s.NumField() != len(w.children) {
		return nil, fmt.Errorf("lance 2.0: array of type %s for a struct column of %d fields", arr.DataType(), len(w.children))
	}
	w.rows += uint64(arr.Len())
	var pages []encodedPage
	col := 1
	for i, c := range w.children {
		ps, err := c.write(s.Field(i))
		if err != nil {
			return nil, err
		}
		pages = append(pages, shiftPages(ps, col)...)
		col += c.numColumns()
	}
	return pages, nil
}

func (w *structWriter20) finish() ([]encodedPage, []encodedColumn, error) {
	var pages []encodedPage
	if w.rows > 0 {
		pages = append(pages, encodedPage{
			encoding: &enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_Struct{Struct: &enc20pb.SimpleStruct{}}},
			numRows:  w.rows,
		})
	}
	cols := []encodedColumn{valuesColumn20()}
	col := 1
	for _, c := range w.children {
		ps, cs, err := c.finish()
		if err != nil {
			return nil, nil, err
		}
		pages = append(pages, shiftPages(ps, col)...)
		cols = append(cols, cs...)
		col += c.numColumns()
	}
	return pages, cols, nil
}
