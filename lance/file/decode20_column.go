package file

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/lance/pb/enc20pb"
)

// columnCount20 is the number of physical columns a field of type dt takes
// in a 2.0 file: lists and structs have a column of their own before their
// children's, every other type is one column.
func columnCount20(dt arrow.DataType) int {
	switch t := dt.(type) {
	case *arrow.ListType:
		return 1 + fieldColumns20(t.ElemField())
	case *arrow.LargeListType:
		return 1 + fieldColumns20(t.ElemField())
	case *arrow.StructType:
		n := 1
		for _, f := range t.Fields() {
			n += fieldColumns20(f)
		}
		return n
	}
	return 1
}

// fieldColumns20 is columnCount20 for a field: a packed struct is one column.
func fieldColumns20(f arrow.Field) int {
	if packedField(f) {
		return 1
	}
	return columnCount20(f.Type)
}

// packedField reports whether an Arrow struct field asks for packed storage
// (the metadata isPacked reads on the Lance field).
func packedField(f arrow.Field) bool {
	if f.Type.ID() != arrow.STRUCT {
		return false
	}
	for _, k := range []string{"lance-encoding:packed", "packed"} {
		if v, ok := f.Metadata.GetValue(k); ok && strings.EqualFold(v, "true") {
			return true
		}
	}
	return false
}

// readColumns20 reads rows [start, end) of the top-level fields listed in
// columns from a 2.0 file.
func (r *Reader) readColumns20(ctx context.Context, columns []int, start, end uint64) ([]arrow.Array, error) {
	for _, c := range columns {
		if c < 0 || c >= len(r.tops) {
			return nil, fmt.Errorf("lance file: column %d out of range [0, %d)", c, len(r.tops))
		}
	}
	// A source per column: its page index map is not shared between the
	// goroutines eachColumn runs.
	return eachColumn(ctx, columns, func(c int) (arrow.Array, error) {
		f := r.schema.Field(c)
		if r.tops[c].packed {
			arr, err := readPacked20(ctx, newSource20(r.c), f.Type, r.tops[c].column, start, end)
			if err != nil {
				return nil, fmt.Errorf("lance file: column %s: %w", f.Name, err)
			}
			return arr, nil
		}
		arr, err := readField20(ctx, newSource20(r.c), f.Type, r.tops[c].column, start, end, 0)
		if err != nil {
			return nil, fmt.Errorf("lance file: column %s: %w", r.schema.Field(c).Name, err)
		}
		return arr, nil
	})
}

// source20 serves a file's pages to the 2.0 column reader, for the length
// of one read. It indexes each column's pages by first row once.
type source20 struct {
	c     *Container
	index map[int]*pageIndex20
}

func newSource20(c *Container) *source20 {
	return &source20{c: c, index: map[int]*pageIndex20{}}
}

// pageIndex20 locates rows in a column: starts[p] is the first row of page
// p, starts[len(pages)] the column's row count. For a list column, items[p]
// is the first item of page p in the items column.
type pageIndex20 struct {
	starts []uint64
	items  []uint64
}

func (s *source20) pageIndex(col int) (*pageIndex20, error) {
	if ix, ok := s.index[col]; ok {
		return ix, nil
	}
	if col < 0 || col >= len(s.c.Columns) {
		return nil, fmt.Errorf("%w: column %d of %d", errCorrupt20, col, len(s.c.Columns))
	}
	pages := s.c.Columns[col].Pages
	ix := &pageIndex20{starts: make([]uint64, len(pages)+1)}
	for p, pg := range pages {
		next := ix.starts[p] + pg.NumRows
		if next < ix.starts[p] {
			return nil, fmt.Errorf("%w: column %d page row counts overflow", errCorrupt20, col)
		}
		ix.starts[p+1] = next
	}
	s.index[col] = ix
	return ix, nil
}

// listItems returns the first item of each page of list column col (and the
// column's item count last), reading every page's List encoding once.
func (s *source20) listItems(col int, ix *pageIndex20) ([]uint64, error) {
	if ix.items != nil {
		return ix.items, nil
	}
	items := make([]uint64, len(ix.starts))
	for p := range s.c.Columns[col].Pages {
		enc, err := s.pageEncoding(col, p)
		if err != nil {
			return nil, fmt.Errorf("page %d: %w", p, err)
		}
		l := enc.GetList()
		if l == nil {
			return nil, fmt.Errorf("%w: list column page %d is %q, want a list", errCorrupt20, p, encodingName20(enc))
		}
		items[p+1] = items[p] + l.NumItems
		if items[p+1] < items[p] {
			return nil, fmt.Errorf("%w: list item counts overflow", errCorrupt20)
		}
	}
	ix.items = items
	return items, nil
}

func (s *source20) pageEncoding(col, page int) (*enc20pb.ArrayEncoding, error) {
	var enc enc20pb.ArrayEncoding
	if err := s.c.UnpackEncoding(s.c.Columns[col].Pages[page].Encoding, &enc); err != nil {
		return nil, err
	}
	return &enc, nil
}

// pageBuffers returns the buffers of a page, read on demand (a part at a
// time) from the file.
func (s *source20) pageBuffers(ctx context.Context, col, page int) (*pageBufs20, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p := s.c.Columns[col].Pages[page]
	fetch := func(t enc20pb.Buffer_BufferType, i uint32, off, n uint64) ([]byte, error) {
		var refs []BufferRef
		switch t {
		case enc20pb.Buffer_page:
			refs = p.Buffers
		case enc20pb.Buffer_column:
			refs = s.c.Columns[col].Buffers
		case enc20pb.Buffer_file:
			refs = s.c.Globals
		}
		if uint64(i) >= uint64(len(refs)) {
			return nil, fmt.Errorf("%w: %v buffer %d of %d", errCorrupt20, t, i, len(refs))
		}
		ref := refs[i]
		if n == wholeBuffer20 {
			if off > ref.Size {
				return nil, fmt.Errorf("%w: offset %d in a %d-byte buffer", errCorrupt20, off, ref.Size)
			}
			n = ref.Size - off
		}
		if off > ref.Size || n > ref.Size-off {
			return nil, fmt.Errorf("%w: bytes %d..+%d of a %d-byte buffer", errCorrupt20, off, n, ref.Size)
		}
		return s.c.ReadRange(ref, off, n)
	}
	// Container.ReadRange returns a new slice per call.
	return &pageBufs20{fetch: fetch, fetchOwned: true}, nil
}

// pages calls fn for each page of column col that holds rows of [start,
// end), with the page's row count and the part of it wanted. It fails when
// the column has fewer than end rows.
func (s *source20) pages(col int, start, end uint64, fn func(page int, rows, skip, take uint64) error) error {
	ix, err := s.pageIndex(col)
	if err != nil {
		return err
	}
	if total := ix.starts[len(ix.starts)-1]; total < end {
		return fmt.Errorf("%w: column %d has %d rows, %d wanted", errCorrupt20, col, total, end)
	}
	// The first page that ends after start.
	p := sort.Search(len(ix.starts)-1, func(i int) bool { return ix.starts[i+1] > start })
	for ; p < len(ix.starts)-1 && ix.starts[p] < end; p++ {
		base, rows := ix.starts[p], ix.starts[p+1]-ix.starts[p]
		if rows == 0 {
			continue
		}
		skip := uint64(0)
		if start > base {
			skip = start - base
		}
		take := min(base+rows, end) - base - skip
		if err := fn(p, rows, skip, take); err != nil {
			return err
		}
	}
	return nil
}

// pagesWithData is pages with each page's encoding and buffers read.
func (s *source20) pagesWithData(ctx context.Context, col int, start, end uint64,
	fn func(page int, enc *enc20pb.ArrayEncoding, bufs *pageBufs20, rows, skip, take uint64) error) error {
	return s.pages(col, start, end, func(page int, rows, skip, take uint64) error {
		enc, err := s.pageEncoding(col, page)
		if err != nil {
			return fmt.Errorf("page %d: %w", page, err)
		}
		bufs, err := s.pageBuffers(ctx, col, page)
		if err != nil {
			return err
		}
		return fn(page, enc, bufs, rows, skip, take)
	})
}

// readField20 reads rows [start, end) of a field of type dt whose first
// physical column is col.
func readField20(ctx context.Context, src *source20, dt arrow.DataType, col int, start, end uint64, depth int) (arrow.Array, error) {
	if depth > maxEncodingDepth20 {
		return nil, fmt.Errorf("%w: fields nested deeper than %d", errCorrupt20, maxEncodingDepth20)
	}
	switch t := dt.(type) {
	case *arrow.StructType:
		return readStruct20(ctx, src, t, col, start, end, depth)
	case *arrow.ListType:
		return readList20(ctx, src, dt, t.Elem(), col, start, end, depth)
	case *arrow.LargeListType:
		return readList20(ctx, src, dt, t.Elem(), col, start, end, depth)
	}
	if ok, _ := binaryKind(dt); ok && src.isBlob(col) {
		return readBlob20(ctx, src, dt, col, start, end)
	}
	return readPages20(ctx, src, dt, col, start, end)
}

// readPages20 decodes rows [start, end) of one column whose pages hold
// values of type dt.
func readPages20(ctx context.Context, src *source20, dt arrow.DataType, col int, start, end uint64) (arrow.Array, error) {
	var pieces []arrow.Array
	defer func() { releaseAll(pieces) }()
	err := src.pagesWithData(ctx, col, start, end, func(page int, enc *enc20pb.ArrayEncoding, bufs *pageBufs20, rows, skip, take uint64) error {
		arr, err := decodePage20(enc, bufs, rows, skip, take, dt)
		if err != nil {
			return fmt.Errorf("page %d: %w", page, err)
		}
		pieces = append(pieces, arr)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return concat20(dt, pieces)
}

func concat20(dt arrow.DataType, pieces []arrow.Array) (arrow.Array, error) {
	switch len(pieces) {
	case 0:
		b := array.NewBuilder(memory.DefaultAllocator, dt)
		defer b.Release()
		return b.NewArray(), nil
	case 1:
		pieces[0].Retain()
		return pieces[0], nil
	}
	return array.Concatenate(pieces, memory.DefaultAllocator)
}

func readStruct20(ctx context.Context, src *source20, t *arrow.StructType, col int, start, end uint64, depth int) (arrow.Array, error) {
	// The header column holds SimpleStruct pages without buffers: a 2.0 file
	// keeps no struct validity, only the children's.
	err := src.pages(col, start, end, func(page int, _, _, _ uint64) error {
		enc, err := src.pageEncoding(col, page)
		if err != nil {
			return fmt.Errorf("page %d: %w", page, err)
		}
		if enc.GetStruct() == nil {
			return fmt.Errorf("%w: struct column page %d is %q, want a simple struct", errCorrupt20, page, encodingName20(enc))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	children := make([]arrow.ArrayData, 0, len(t.Fields()))
	defer func() {
		for _, c := range children {
			c.Release()
		}
	}()
	next := col + 1
	for _, f := range t.Fields() {
		var arr arrow.Array
		var err error
		if packedField(f) {
			arr, err = readPacked20(ctx, src, f.Type, next, start, end)
		} else {
			arr, err = readField20(ctx, src, f.Type, next, start, end, depth+1)
		}
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.Name, err)
		}
		if uint64(arr.Len()) != end-start {
			arr.Release()
			return nil, fmt.Errorf("%w: struct field %s has %d rows, want %d", errCorrupt20, f.Name, arr.Len(), end-start)
		}
		children = append(children, arr.Data())
		arr.Data().Retain()
		arr.Release()
		next += fieldColumns20(f)
	}
	nd := array.NewData(t, int(end-start), []*memory.Buffer{nil}, children, 0, 0)
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

func readList20(ctx context.Context, src *source20, dt, elem arrow.DataType, col int, start, end uint64, depth int) (arrow.Array, error) {
	_, large := dt.(*arrow.LargeListType)
	ix, err := src.pageIndex(col)
	if err != nil {
		return nil, err
	}
	// Each list page's offsets count from the page's first item; the items
	// of page p follow those of the pages before it in the items column.
	items, err := src.listItems(col, ix)
	if err != nil {
		return nil, err
	}
	var pieces []arrow.Array
	defer func() { releaseAll(pieces) }()
	err = src.pagesWithData(ctx, col, start, end, func(page int, enc *enc20pb.ArrayEncoding, bufs *pageBufs20, rows, skip, take uint64) error {
		lp, err := decodeListPage20(enc.GetList(), bufs, rows, skip, take)
		if err != nil {
			return fmt.Errorf("page %d: %w", page, err)
		}
		base := items[page]
		vals, err := readField20(ctx, src, elem, col+1, base+lp.itemsStart, base+lp.itemsEnd, depth+1)
		if err != nil {
			return fmt.Errorf("list items: %w", err)
		}
		arr, err := makeList20(dt, large, lp, vals)
		vals.Release()
		if err != nil {
			return err
		}
		pieces = append(pieces, arr)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return concat20(dt, pieces)
}

func makeList20(dt arrow.DataType, large bool, lp *listPage20, items arrow.Array) (arrow.Array, error) {
	if uint64(items.Len()) != lp.itemsEnd-lp.itemsStart {
		return nil, fmt.Errorf("%w: %d list items read, %d wanted", errCorrupt20, items.Len(), lp.itemsEnd-lp.itemsStart)
	}
	var offsets []byte
	if large {
		o := make([]int64, len(lp.offsets))
		for i, v := range lp.offsets {
			o[i] = int64(v)
		}
		offsets = arrow.Int64Traits.CastToBytes(o)
	} else {
		if items.Len() > 1<<31-1 {
			return nil, fmt.Errorf("%w: %d items in a list page", errCorrupt20, items.Len())
		}
		o := make([]int32, len(lp.offsets))
		for i, v := range lp.offsets {
			o[i] = int32(v)
		}
		offsets = arrow.Int32Traits.CastToBytes(o)
	}
	var vb *memory.Buffer
	if lp.validity != nil {
		vb = memory.NewBufferBytes(lp.validity)
	}
	nd := array.NewData(dt, len(lp.offsets)-1, []*memory.Buffer{vb, memory.NewBufferBytes(offsets)}, []arrow.ArrayData{items.Data()}, lp.nulls, 0)
	defer nd.Release()
	return array.MakeFromData(nd), nil
}
