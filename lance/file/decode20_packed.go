package file

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/lance/pb/enc20pb"
)

// Packed structs and blobs in 2.0 files.
//
// A packed struct (a struct field with lance-encoding:packed) is one column
// whose pages hold rows of the fields' fixed-width values one after the
// other. A blob column (large_binary with lance-encoding:blob; its column
// encoding says Blob) holds a packed struct of u64 position and u64 size per
// value; the value is the bytes at that absolute position of the file, null
// when the description is (1, 0) and empty when it is (0, 0).

// readPacked20 reads rows [start, end) of a packed struct column.
func readPacked20(ctx context.Context, src *source20, dt arrow.DataType, col int, start, end uint64) (arrow.Array, error) {
	if _, ok := dt.(*arrow.StructType); !ok {
		return nil, fmt.Errorf("%w: packed column of type %s", errCorrupt20, dt)
	}
	return readPages20(ctx, src, dt, col, start, end)
}

// isBlob reports whether column col's encoding marks it as blob data.
func (s *source20) isBlob(col int) bool {
	if col < 0 || col >= len(s.c.Columns) || s.c.Columns[col].Encoding == nil {
		return false
	}
	var ce enc20pb.ColumnEncoding
	if err := s.c.UnpackEncoding(s.c.Columns[col].Encoding, &ce); err != nil {
		return false
	}
	return ce.GetBlob() != nil
}

var blobDescType20 = arrow.StructOf(
	arrow.Field{Name: "position", Type: arrow.PrimitiveTypes.Uint64},
	arrow.Field{Name: "size", Type: arrow.PrimitiveTypes.Uint64},
)

// readBlob20 reads rows [start, end) of a blob column as values of type dt
// (binary or large_binary).
func readBlob20(ctx context.Context, src *source20, dt arrow.DataType, col int, start, end uint64) (arrow.Array, error) {
	descs, err := readPages20(ctx, src, blobDescType20, col, start, end)
	if err != nil {
		return nil, err
	}
	defer descs.Release()
	st := descs.(*array.Struct)
	pos, ok1 := st.Field(0).(*array.Uint64)
	size, ok2 := st.Field(1).(*array.Uint64)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%w: blob descriptions are not two u64 fields", errCorrupt20)
	}
	_, large := binaryKind(dt)
	n := st.Len()
	valid := memory.NewResizableBuffer(memory.DefaultAllocator)
	defer valid.Release()
	valid.Resize((n + 7) / 8)
	vb := valid.Bytes()
	clear(vb)
	var data []byte
	offs := make([]uint64, 1, n+1)
	nulls := 0
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p, sz := pos.Value(i), size.Value(i)
		switch {
		case st.IsNull(i) || (p == 1 && sz == 0):
			nulls++
		case sz == 0:
			vb[i/8] |= 1 << (i % 8)
		default:
			if uint64(len(data))+sz > maxDecodedBytes {
				return nil, fmt.Errorf("%w: blob values of more than %d bytes in one read", errCorrupt20, maxDecodedBytes)
			}
			b, err := src.c.ReadBuffer(BufferRef{Offset: p, Size: sz})
			if err != nil {
				return nil, err
			}
			data = append(data, b...)
			vb[i/8] |= 1 << (i % 8)
		}
		offs = append(offs, uint64(len(data)))
	}
	if !large && len(data) > math.MaxInt32 {
		return nil, unsupportedf("%d bytes of %v values need a large type", len(data), dt)
	}
	ow := 4
	if large {
		ow = 8
	}
	ob := make([]byte, ow*(n+1))
	for i, o := range offs {
		if large {
			binary.LittleEndian.PutUint64(ob[8*i:], o)
		} else {
			binary.LittleEndian.PutUint32(ob[4*i:], uint32(o))
		}
	}
	var bitmap *memory.Buffer
	if nulls > 0 {
		bitmap = valid
	}
	nd := array.NewData(dt, n, []*memory.Buffer{bitmap, memory.NewBufferBytes(ob), memory.NewBufferBytes(data)}, nil, nulls, 0)
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

// packedStruct decodes rows [skip, skip+take) of a packed struct page: each
// row is the fixed-width values of the struct's fields one after the other
// (a fixed-size list of fixed-width items counts as one wide value).
func (d *decoder20) packedStruct(ps *enc20pb.PackedStruct, pageRows, skip, take uint64, dt arrow.DataType) (arrow.Array, error) {
	st, ok := dt.(*arrow.StructType)
	if !ok {
		return nil, fmt.Errorf("%w: packed struct encoding for type %s", errCorrupt20, dt)
	}
	if len(ps.GetInner()) != st.NumFields() {
		return nil, fmt.Errorf("%w: packed struct of %d encodings for %d fields", errCorrupt20, len(ps.GetInner()), st.NumFields())
	}
	widths, row, err := packedWidths(st)
	if err != nil {
		return nil, err
	}
	hi, lo := bits.Mul64(skip, uint64(row))
	hi2, n := bits.Mul64(take, uint64(row))
	if hi != 0 || hi2 != 0 || take > pageRows {
		return nil, fmt.Errorf("%w: %d packed rows of %d bytes", errCorrupt20, take, row)
	}
	raw, err := d.bufs.read(ps.GetBuffer(), lo, n)
	if err != nil {
		return nil, err
	}
	children := make([]arrow.ArrayData, 0, st.NumFields())
	defer func() {
		for _, c := range children {
			c.Release()
		}
	}()
	at := 0
	for i, f := range st.Fields() {
		w := widths[i]
		col := make([]byte, int(take)*w)
		for r := 0; r < int(take); r++ {
			copy(col[r*w:(r+1)*w], raw[r*row+at:])
		}
		at += w
		children = append(children, packedChild(f.Type, int(take), col))
	}
	nd := array.NewData(dt, int(take), []*memory.Buffer{nil}, children, 0, 0)
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

// packedWidths are the bytes each field of a packed struct takes in a row,
// and their sum; a field that cannot be packed is ErrUnsupported.
func packedWidths(st *arrow.StructType) ([]int, int, error) {
	widths := make([]int, st.NumFields())
	row := 0
	for i, f := range st.Fields() {
		w := packedWidth(f.Type)
		if w <= 0 {
			return nil, 0, unsupportedf("packed struct field %q of type %v", f.Name, f.Type)
		}
		widths[i] = w
		row += w
	}
	return widths, row, nil
}

// packedWidth is the bytes a value of t takes in a packed struct row, or
// 0 when t cannot be packed.
func packedWidth(t arrow.DataType) int {
	if fl, ok := t.(*arrow.FixedSizeListType); ok {
		w := packedWidth(fl.Elem())
		if _, nested := fl.Elem().(*arrow.FixedSizeListType); nested || w <= 0 {
			return 0
		}
		return w * int(fl.Len())
	}
	b := fixedBits(t)
	if b == 0 || b%8 != 0 {
		return 0
	}
	return int(b / 8)
}

// packedChild builds the array data of n values of t from their bytes.
func packedChild(t arrow.DataType, n int, b []byte) arrow.ArrayData {
	if fl, ok := t.(*arrow.FixedSizeListType); ok {
		items := packedChild(fl.Elem(), n*int(fl.Len()), b)
		defer items.Release()
		return array.NewData(t, n, []*memory.Buffer{nil}, []arrow.ArrayData{items}, 0, 0)
	}
	return array.NewData(t, n, []*memory.Buffer{nil, memory.NewBufferBytes(b)}, nil, 0, 0)
}
