package file

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/lance/pb/filepb"
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
	column   int // -1 when the field has no column of its own
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
	rd.schema, err = lanceToArrow(rd.fields, c.Descriptor.GetSchema().GetMetadata())
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
// those rows.
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
	pos := make([]int64, len(rows))
	for i, row := range rows {
		k := sort.Search(len(ranges), func(j int) bool { return ranges[j].end > row })
		var before uint64
		for _, rg := range ranges[:k] {
			before += rg.end - rg.start
		}
		pos[i] = int64(before + row - ranges[k].start)
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

// takeIndexes gathers a's rows at pos into a new array.
func takeIndexes(mem memory.Allocator, a arrow.Array, pos []int64) (arrow.Array, error) {
	idx := array.NewInt64Builder(mem)
	defer idx.Release()
	idx.AppendValues(pos, nil)
	ia := idx.NewArray()
	defer ia.Release()
	return compute.TakeArray(context.Background(), a, ia)
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

// lanceToArrow converts Lance fields (depth-first, parent ids) to an Arrow
// schema.
func lanceToArrow(fields []*filepb.Field, md map[string][]byte) (*arrow.Schema, error) {
	children := map[int32][]*filepb.Field{}
	var tops []*filepb.Field
	for _, f := range fields {
		if f.GetParentId() < 0 {
			tops = append(tops, f)
		} else {
			children[f.GetParentId()] = append(children[f.GetParentId()], f)
		}
	}
	var conv func(f *filepb.Field, depth int) (arrow.Field, error)
	conv = func(f *filepb.Field, depth int) (arrow.Field, error) {
		if depth > 64 {
			return arrow.Field{}, fmt.Errorf("fields nested more than 64 deep")
		}
		var kids []arrow.Field
		for _, ch := range children[f.GetId()] {
			af, err := conv(ch, depth+1)
			if err != nil {
				return af, err
			}
			kids = append(kids, af)
		}
		dt, err := parseLogicalType(f.GetLogicalType(), kids)
		if err != nil {
			return arrow.Field{}, fmt.Errorf("field %q: %w", f.GetName(), err)
		}
		var fmd arrow.Metadata
		if len(f.GetMetadata()) > 0 {
			keys := make([]string, 0, len(f.GetMetadata()))
			for k := range f.GetMetadata() {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			vals := make([]string, len(keys))
			for i, k := range keys {
				vals[i] = string(f.GetMetadata()[k])
			}
			fmd = arrow.NewMetadata(keys, vals)
		}
		return arrow.Field{Name: f.GetName(), Type: dt, Nullable: f.GetNullable(), Metadata: fmd}, nil
	}
	out := make([]arrow.Field, len(tops))
	for i, f := range tops {
		af, err := conv(f, 0)
		if err != nil {
			return nil, err
		}
		out[i] = af
	}
	var smd arrow.Metadata
	if len(md) > 0 {
		keys := make([]string, 0, len(md))
		for k := range md {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		vals := make([]string, len(keys))
		for i, k := range keys {
			vals[i] = string(md[k])
		}
		smd = arrow.NewMetadata(keys, vals)
	}
	return arrow.NewSchema(out, &smd), nil
}

var simpleTypes = map[string]arrow.DataType{
	"null": arrow.Null, "bool": arrow.FixedWidthTypes.Boolean,
	"int8": arrow.PrimitiveTypes.Int8, "uint8": arrow.PrimitiveTypes.Uint8,
	"int16": arrow.PrimitiveTypes.Int16, "uint16": arrow.PrimitiveTypes.Uint16,
	"int32": arrow.PrimitiveTypes.Int32, "uint32": arrow.PrimitiveTypes.Uint32,
	"int64": arrow.PrimitiveTypes.Int64, "uint64": arrow.PrimitiveTypes.Uint64,
	"halffloat": arrow.FixedWidthTypes.Float16, "float": arrow.PrimitiveTypes.Float32,
	"double": arrow.PrimitiveTypes.Float64, "string": arrow.BinaryTypes.String,
	"binary": arrow.BinaryTypes.Binary, "large_string": arrow.BinaryTypes.LargeString,
	"large_binary": arrow.BinaryTypes.LargeBinary, "json": arrow.BinaryTypes.LargeBinary,
	"date32:day": arrow.FixedWidthTypes.Date32, "date64:ms": arrow.FixedWidthTypes.Date64,
	"time32:s": arrow.FixedWidthTypes.Time32s, "time32:ms": arrow.FixedWidthTypes.Time32ms,
	"time64:us": arrow.FixedWidthTypes.Time64us, "time64:ns": arrow.FixedWidthTypes.Time64ns,
	"duration:s": arrow.FixedWidthTypes.Duration_s, "duration:ms": arrow.FixedWidthTypes.Duration_ms,
	"duration:us": arrow.FixedWidthTypes.Duration_us, "duration:ns": arrow.FixedWidthTypes.Duration_ns,
}

func timeUnit(s string) (arrow.TimeUnit, error) {
	switch s {
	case "s":
		return arrow.Second, nil
	case "ms":
		return arrow.Millisecond, nil
	case "us":
		return arrow.Microsecond, nil
	case "ns":
		return arrow.Nanosecond, nil
	}
	return 0, fmt.Errorf("unknown time unit %q", s)
}

func parseLogicalType(lt string, kids []arrow.Field) (arrow.DataType, error) {
	if dt, ok := simpleTypes[lt]; ok {
		return dt, nil
	}
	parts := strings.Split(lt, ":")
	switch parts[0] {
	case "struct":
		return arrow.StructOf(kids...), nil
	case "list", "list.struct", "large_list", "large_list.struct":
		if len(kids) != 1 {
			return nil, fmt.Errorf("%s with %d children", lt, len(kids))
		}
		if strings.HasPrefix(lt, "large_") {
			return arrow.LargeListOfField(kids[0]), nil
		}
		return arrow.ListOfField(kids[0]), nil
	case "fixed_size_list":
		if len(parts) < 3 {
			break
		}
		n, err := strconv.ParseInt(parts[len(parts)-1], 10, 32)
		if err != nil || n < 0 {
			break
		}
		inner, err := parseLogicalType(strings.Join(parts[1:len(parts)-1], ":"), nil)
		if err != nil {
			return nil, err
		}
		return arrow.FixedSizeListOfField(int32(n), arrow.Field{Name: "item", Type: inner, Nullable: true}), nil
	case "fixed_size_binary":
		if len(parts) != 2 {
			break
		}
		n, err := strconv.ParseInt(parts[1], 10, 32)
		if err != nil || n < 0 {
			break
		}
		return &arrow.FixedSizeBinaryType{ByteWidth: int(n)}, nil
	case "decimal":
		if len(parts) != 4 {
			break
		}
		p, err1 := strconv.ParseInt(parts[2], 10, 32)
		s, err2 := strconv.ParseInt(parts[3], 10, 32)
		if err1 != nil || err2 != nil {
			break
		}
		switch parts[1] {
		case "128":
			return &arrow.Decimal128Type{Precision: int32(p), Scale: int32(s)}, nil
		case "256":
			return &arrow.Decimal256Type{Precision: int32(p), Scale: int32(s)}, nil
		}
	case "timestamp":
		if len(parts) < 3 {
			break
		}
		u, err := timeUnit(parts[1])
		if err != nil {
			return nil, err
		}
		tz := strings.Join(parts[2:], ":")
		if tz == "-" {
			tz = ""
		}
		return &arrow.TimestampType{Unit: u, TimeZone: tz}, nil
	case "dict":
		if len(parts) != 4 {
			break
		}
		v, err := parseLogicalType(parts[1], nil)
		if err != nil {
			return nil, err
		}
		k, err := parseLogicalType(parts[2], nil)
		if err != nil {
			return nil, err
		}
		return &arrow.DictionaryType{IndexType: k, ValueType: v}, nil
	}
	return nil, fmt.Errorf("unsupported logical type %q", lt)
}
