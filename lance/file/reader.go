package file

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/lance/pb/filepb"
	"github.com/mvq-dev/mvq/lance/schema"
)

// Reader reads a Lance data file (data/*.lance) of file format 2.0 or 2.1.
// It is safe for concurrent use by several goroutines when the io.ReaderAt
// it was opened on is.
type Reader struct {
	c       *Container
	fields  []*filepb.Field
	schema  *arrow.Schema
	numRows uint64
	mem     memory.Allocator
	// keepFSST: see KeepFSST.
	keepFSST bool
	// tops[i] describes top-level field i: its Lance field tree and the file
	// columns it is stored in.
	tops []*fieldNode
}

// fieldNode is a Lance field with its children and, for fields that own a
// column in the file, the column index.
type fieldNode struct {
	f        *filepb.Field
	dt       arrow.DataType
	children []*fieldNode
	column   int  // -1 when the field has no column of its own
	packed   bool // a packed struct: one column, children inside it
}

// Open reads the footer, the metadata and the schema of the Lance file r of
// the given size. Errors wrap ErrCorrupt for malformed files and
// ErrUnsupported for versions this package does not read.
func Open(r io.ReaderAt, size int64) (*Reader, error) {
	c, err := ReadContainer(r, size)
	if err != nil {
		return nil, err
	}
	rd := &Reader{c: c, mem: memory.DefaultAllocator, numRows: c.Descriptor.GetLength()}
	rd.fields = c.Descriptor.GetSchema().GetFields()
	rd.schema, err = schema.ToArrow(rd.fields, c.Descriptor.GetSchema().GetMetadata())
	if err != nil {
		return nil, fmt.Errorf("%w: schema: %v", ErrCorrupt, err)
	}
	if err := rd.mapColumns(); err != nil {
		return nil, err
	}
	return rd, nil
}

// Version is the file format version from the footer.
func (r *Reader) Version() Version { return r.c.Footer.Version }

// Schema is the Arrow schema of the file's top-level columns.
func (r *Reader) Schema() *arrow.Schema { return r.schema }

// Fields are the Lance fields of the file, depth-first as stored.
func (r *Reader) Fields() []*filepb.Field { return r.fields }

// NumRows is the number of rows the file descriptor declares.
func (r *Reader) NumRows() uint64 { return r.numRows }

// Container exposes the file's structure (footer, columns, pages).
func (r *Reader) Container() *Container { return r.c }

// Close releases nothing today (the caller owns the io.ReaderAt); it exists
// so that callers can treat readers as resources.
func (r *Reader) Close() error { return nil }

// KeepFSST has the reader keep, beside each string array it decodes from
// FSST-compressed blocks under one symbol table, the values' codes and the
// table, for as long as the array lives: a CodeCutter cuts them into the
// codes of substrings of the values, and a writer writes codes that come
// with their values instead of compressing the values again.
func (r *Reader) KeepFSST() { r.keepFSST = true }

// mapColumns builds the field tree and assigns file columns. In 2.1 only
// leaf fields (no children) own a column; in 2.0 every field does, parents
// first (depth-first order).
func (r *Reader) mapColumns() error {
	byID := make(map[int32]*fieldNode, len(r.fields))
	var tops []*fieldNode
	for _, f := range r.fields {
		n := &fieldNode{f: f, column: -1}
		if _, dup := byID[f.GetId()]; dup {
			return fmt.Errorf("%w: field id %d appears twice", ErrCorrupt, f.GetId())
		}
		byID[f.GetId()] = n
		if f.GetParentId() < 0 {
			tops = append(tops, n)
			continue
		}
		p, ok := byID[f.GetParentId()]
		if !ok {
			return fmt.Errorf("%w: field %q has unknown parent %d", ErrCorrupt, f.GetName(), f.GetParentId())
		}
		p.children = append(p.children, n)
	}
	if len(tops) != len(r.schema.Fields()) {
		return fmt.Errorf("%w: %d top-level fields but %d arrow fields", ErrCorrupt, len(tops), len(r.schema.Fields()))
	}
	col := 0
	structural := r.Version() != V2_0
	var walk func(n *fieldNode, dt arrow.DataType)
	walk = func(n *fieldNode, dt arrow.DataType) {
		n.dt = dt
		if isPacked(n.f) {
			// A packed struct is one column of row-major values (in 2.0
			// and 2.1 alike).
			n.column = col
			n.packed = true
			col++
			return
		}
		if !structural || len(n.children) == 0 {
			n.column = col
			col++
		}
		for i, ch := range n.children {
			walk(ch, childType(dt, i))
		}
	}
	for i, t := range tops {
		walk(t, r.schema.Field(i).Type)
	}
	if col > len(r.c.Columns) {
		return fmt.Errorf("%w: the schema needs %d columns, the file has %d", ErrCorrupt, col, len(r.c.Columns))
	}
	r.tops = tops
	return nil
}

// isPacked reports whether a struct field asks for packed (row-major)
// storage: metadata "lance-encoding:packed" or "packed" set to true.
func isPacked(f *filepb.Field) bool {
	if !strings.HasPrefix(f.GetLogicalType(), "struct") {
		return false
	}
	for _, k := range []string{"lance-encoding:packed", "packed"} {
		if v, ok := f.GetMetadata()[k]; ok && strings.EqualFold(string(v), "true") {
			return true
		}
	}
	return false
}

func childType(dt arrow.DataType, i int) arrow.DataType {
	switch t := dt.(type) {
	case *arrow.StructType:
		if i < t.NumFields() {
			return t.Field(i).Type
		}
	case arrow.ListLikeType:
		return t.Elem()
	}
	return arrow.Null
}

// ColumnIndexes returns the file columns that hold top-level field i, in
// file order.
func (r *Reader) ColumnIndexes(i int) []int {
	var out []int
	var walk func(n *fieldNode)
	walk = func(n *fieldNode) {
		if n.column >= 0 {
			out = append(out, n.column)
			if n.packed {
				return
			}
		}
		for _, ch := range n.children {
			walk(ch)
		}
	}
	walk(r.tops[i])
	return out
}

func (r *Reader) projection(columns []int) ([]int, *arrow.Schema, error) {
	if columns == nil {
		columns = make([]int, len(r.tops))
		for i := range columns {
			columns[i] = i
		}
	}
	fields := make([]arrow.Field, len(columns))
	for i, c := range columns {
		if c < 0 || c >= len(r.tops) {
			return nil, nil, fmt.Errorf("lance file: column %d out of range [0, %d)", c, len(r.tops))
		}
		fields[i] = r.schema.Field(c)
	}
	md := r.schema.Metadata()
	return columns, arrow.NewSchema(fields, &md), nil
}

// Read decodes rows [start, end) of the top-level columns listed (all of
// them when columns is nil), decoding only the pages and chunks that hold
// those rows. One call reads at most 16Mi rows of a 2.1 file; read bigger
// files in batches.
func (r *Reader) Read(ctx context.Context, columns []int, start, end uint64) (arrow.RecordBatch, error) {
	cols, sc, err := r.projection(columns)
	if err != nil {
		return nil, err
	}
	if start > end || end > r.numRows {
		return nil, fmt.Errorf("lance file: row range [%d, %d) outside [0, %d)", start, end, r.numRows)
	}
	var arrs []arrow.Array
	if r.Version() == V2_0 {
		arrs, err = r.read20(ctx, cols, start, end)
	} else {
		arrs, err = r.readColumns21(ctx, cols, []rowRange{{start, end}})
	}
	if err != nil {
		return nil, err
	}
	return newRecord(sc, arrs, int64(end-start)), nil
}

// Take decodes the given rows (any order, repeats allowed) of the listed
// top-level columns (all when nil). Each row must be below NumRows.
func (r *Reader) Take(ctx context.Context, columns []int, rows []uint64) (arrow.RecordBatch, error) {
	cols, sc, err := r.projection(columns)
	if err != nil {
		return nil, err
	}
	for _, row := range rows {
		if row >= r.numRows {
			return nil, fmt.Errorf("lance file: row %d outside [0, %d)", row, r.numRows)
		}
	}
	// Read sorted, coalesced ranges, then put the rows in the asked order.
	sorted := append([]uint64(nil), rows...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	var ranges []rowRange
	for _, row := range sorted {
		if n := len(ranges); n > 0 && ranges[n-1].end >= row {
			if ranges[n-1].end == row {
				ranges[n-1].end++
			}
			continue
		}
		ranges = append(ranges, rowRange{row, row + 1})
	}
	var arrs []arrow.Array
	if r.Version() == V2_0 {
		for _, rg := range ranges {
			part, err := r.read20(ctx, cols, rg.start, rg.end)
			if err != nil {
				releaseAll(arrs)
				return nil, err
			}
			if arrs == nil {
				arrs = part
				continue
			}
			for i := range arrs {
				cat, err := array.Concatenate([]arrow.Array{arrs[i], part[i]}, r.mem)
				arrs[i].Release()
				part[i].Release()
				if err != nil {
					releaseAll(arrs)
					return nil, err
				}
				arrs[i] = cat
			}
		}
	} else {
		arrs, err = r.readColumns21(ctx, cols, ranges)
	}
	if err != nil {
		return nil, err
	}
	// Position of each asked row in the decoded (sorted, deduplicated) rows.
	before := make([]uint64, len(ranges))
	for j := 1; j < len(ranges); j++ {
		before[j] = before[j-1] + ranges[j-1].end - ranges[j-1].start
	}
	pos := make([]int64, len(rows))
	for i, row := range rows {
		k := sort.Search(len(ranges), func(j int) bool { return ranges[j].end > row })
		pos[i] = int64(before[k] + row - ranges[k].start)
	}
	out := make([]arrow.Array, len(arrs))
	for i, a := range arrs {
		out[i], err = takeIndexes(r.mem, a, pos)
		a.Release()
		if err != nil {
			releaseAll(out[:i])
			releaseAll(arrs[i+1:])
			return nil, err
		}
	}
	return newRecord(sc, out, int64(len(rows))), nil
}

type rowRange struct{ start, end uint64 }

// reader20 is implemented by the 2.0 decoders (decode20.go); the assertion
// keeps this file independent of whether they are built in.
type reader20 interface {
	readColumns20(ctx context.Context, columns []int, start, end uint64) ([]arrow.Array, error)
}

func (r *Reader) read20(ctx context.Context, columns []int, start, end uint64) ([]arrow.Array, error) {
	if rr, ok := any(r).(reader20); ok {
		return rr.readColumns20(ctx, columns, start, end)
	}
	return nil, unsupportedf("file version 2.0 cannot be read by this build")
}

// takeIndexes gathers a's rows at pos into a new array: runs of
// consecutive positions are sliced and the slices concatenated (a itself
// when pos is 0..len-1).
func takeIndexes(mem memory.Allocator, a arrow.Array, pos []int64) (arrow.Array, error) {
	if len(pos) == a.Len() {
		same := true
		for i, p := range pos {
			if p != int64(i) {
				same = false
				break
			}
		}
		if same {
			a.Retain()
			return a, nil
		}
	}
	if len(pos) == 0 {
		return array.NewSlice(a, 0, 0), nil
	}
	if g, ok := gather(mem, a, pos); ok {
		return g, nil
	}
	var parts []arrow.Array
	defer func() { releaseAll(parts) }()
	for i := 0; i < len(pos); {
		j := i + 1
		for j < len(pos) && pos[j] == pos[j-1]+1 {
			j++
		}
		parts = append(parts, array.NewSlice(a, pos[i], pos[j-1]+1))
		i = j
	}
	if len(parts) == 1 {
		parts[0].Retain()
		return parts[0], nil
	}
	return array.Concatenate(parts, mem)
}

func newRecord(sc *arrow.Schema, arrs []arrow.Array, n int64) arrow.RecordBatch {
	rec := array.NewRecordBatch(sc, arrs, n)
	releaseAll(arrs)
	return rec
}

func releaseAll(arrs []arrow.Array) {
	for _, a := range arrs {
		if a != nil {
			a.Release()
		}
	}
}

// gather copies a's rows at pos for flat fixed-width, string and binary
// arrays and fixed-size lists of fixed-width values; ok is false for other
// types (and for arrays with an offset), which take the slicing path.
func gather(mem memory.Allocator, a arrow.Array, pos []int64) (arrow.Array, bool) {
	d := a.Data()
	if d.Offset() != 0 || d.Dictionary() != nil || a.DataType().ID() == arrow.DICTIONARY {
		return nil, false
	}
	n := len(pos)
	validity := func() (*memory.Buffer, int) {
		if a.NullN() == 0 {
			return nil, 0
		}
		buf := memory.NewResizableBuffer(mem)
		buf.Resize(int(bitutil.BytesForBits(int64(n))))
		bs := buf.Bytes()
		clear(bs)
		nulls := 0
		for i, p := range pos {
			if a.IsValid(int(p)) {
				bitutil.SetBit(bs, i)
			} else {
				nulls++
			}
		}
		return buf, nulls
	}
	switch t := a.DataType().(type) {
	case *arrow.StringType, *arrow.BinaryType, *arrow.LargeStringType, *arrow.LargeBinaryType:
		large := t.ID() == arrow.LARGE_STRING || t.ID() == arrow.LARGE_BINARY
		ob, vb := d.Buffers()[1].Bytes(), d.Buffers()[2].Bytes()
		off := func(i int64) int64 {
			if large {
				return int64(binary.LittleEndian.Uint64(ob[8*i:]))
			}
			return int64(binary.LittleEndian.Uint32(ob[4*i:]))
		}
		size := int64(0)
		for _, p := range pos {
			size += off(p+1) - off(p)
		}
		if !large && size > math.MaxInt32 {
			return nil, false
		}
		w := 4
		if large {
			w = 8
		}
		offs := memory.NewResizableBuffer(mem)
		offs.Resize(w * (n + 1))
		vals := memory.NewResizableBuffer(mem)
		vals.Resize(int(size))
		obs, vbs := offs.Bytes(), vals.Bytes()
		var at int64
		put := func(i int, v int64) {
			if large {
				binary.LittleEndian.PutUint64(obs[8*i:], uint64(v))
			} else {
				binary.LittleEndian.PutUint32(obs[4*i:], uint32(v))
			}
		}
		put(0, 0)
		for i, p := range pos {
			s, e := off(p), off(p+1)
			copy(vbs[at:], vb[s:e])
			at += e - s
			put(i+1, at)
		}
		bm, nulls := validity()
		out := array.NewData(t, n, []*memory.Buffer{bm, offs, vals}, nil, nulls, 0)
		releaseBuffers(bm, offs, vals)
		defer out.Release()
		return array.MakeFromData(out), true
	case *arrow.FixedSizeListType:
		cd := d.Children()[0]
		bw := fixedByteWidth(t.Elem())
		if bw <= 0 || cd.Offset() != 0 || cd.NullN() != 0 || len(cd.Buffers()) != 2 {
			return nil, false
		}
		row := int(t.Len()) * bw
		src := cd.Buffers()[1].Bytes()
		vals := memory.NewResizableBuffer(mem)
		vals.Resize(n * row)
		vbs := vals.Bytes()
		for i, p := range pos {
			copy(vbs[i*row:], src[int(p)*row:int(p+1)*row])
		}
		child := array.NewData(t.Elem(), n*int(t.Len()), []*memory.Buffer{nil, vals}, nil, 0, 0)
		bm, nulls := validity()
		out := array.NewData(t, n, []*memory.Buffer{bm}, []arrow.ArrayData{child}, nulls, 0)
		releaseBuffers(bm, vals)
		child.Release()
		defer out.Release()
		return array.MakeFromData(out), true
	}
	bw := fixedByteWidth(a.DataType())
	if bw <= 0 || len(d.Buffers()) != 2 {
		return nil, false
	}
	src := d.Buffers()[1].Bytes()
	vals := memory.NewResizableBuffer(mem)
	vals.Resize(n * bw)
	vbs := vals.Bytes()
	for i, p := range pos {
		copy(vbs[i*bw:], src[int(p)*bw:int(p+1)*bw])
	}
	bm, nulls := validity()
	out := array.NewData(a.DataType(), n, []*memory.Buffer{bm, vals}, nil, nulls, 0)
	releaseBuffers(bm, vals)
	defer out.Release()
	return array.MakeFromData(out), true
}

func releaseBuffers(bufs ...*memory.Buffer) {
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
}
