package file

import (
	"encoding/binary"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// arrowBuilder assembles Arrow arrays from unraveled leaf columns.
type arrowBuilder struct {
	mem memory.Allocator
	// keepFSST attaches FSST codes to the string arrays made from blocks
	// under one symbol table (Reader.KeepFSST).
	keepFSST bool
}

func leafCount(n *fieldNode) int {
	if n.column >= 0 {
		return 1
	}
	c := 0
	for _, ch := range n.children {
		c += leafCount(ch)
	}
	return c
}

// build assembles the array of field n, whose layer in each leaf is at
// depth (outermost 0), holding count entries.
func (b *arrowBuilder) build(n *fieldNode, depth int, leaves []leafOut, count int) (arrow.Array, error) {
	if len(leaves) == 0 {
		return nil, corruptf("field %q has no columns", n.f.GetName())
	}
	lo := leaves[0]
	if depth >= len(lo.layers) {
		return nil, corruptf("field %q is nested deeper than its levels", n.f.GetName())
	}
	layer := lo.layers[depth]
	if layer.n != count {
		return nil, corruptf("field %q has %d entries, its parent %d", n.f.GetName(), layer.n, count)
	}
	nulls, bitmap := b.validity(layer)
	if bitmap != nil {
		defer bitmap.Release()
	}
	if n.column >= 0 {
		if depth != len(lo.layers)-1 || layer.list {
			return nil, unsupportedf("field %q: a leaf with %d levels below it", n.f.GetName(), len(lo.layers)-1-depth)
		}
		return b.leaf(n.dt, lo.pieces, count, bitmap, nulls)
	}
	switch dt := n.dt.(type) {
	case *arrow.StructType:
		if layer.list {
			return nil, corruptf("struct %q stored as a list", n.f.GetName())
		}
		if len(n.children) != dt.NumFields() {
			return nil, corruptf("struct %q has %d children, its type %d", n.f.GetName(), len(n.children), dt.NumFields())
		}
		kids := make([]arrow.ArrayData, len(n.children))
		at := 0
		for i, ch := range n.children {
			k := leafCount(ch)
			if at+k > len(leaves) {
				return nil, corruptf("struct %q: missing columns", n.f.GetName())
			}
			a, err := b.build(ch, depth+1, leaves[at:at+k], count)
			if err != nil {
				for _, d := range kids[:i] {
					d.Release()
				}
				return nil, err
			}
			kids[i] = a.Data()
			kids[i].Retain()
			a.Release()
			at += k
		}
		data := array.NewData(dt, count, []*memory.Buffer{bitmap}, kids, nulls, 0)
		for _, d := range kids {
			d.Release()
		}
		defer data.Release()
		return array.MakeFromData(data), nil
	case *arrow.ListType, *arrow.LargeListType:
		if !layer.list || len(n.children) != 1 {
			return nil, corruptf("list %q stored without list levels", n.f.GetName())
		}
		nchild := int(layer.offsets[len(layer.offsets)-1])
		child, err := b.build(n.children[0], depth+1, leaves, nchild)
		if err != nil {
			return nil, err
		}
		defer child.Release()
		var offBuf *memory.Buffer
		if _, ok := dt.(*arrow.LargeListType); ok {
			offBuf = memory.NewResizableBuffer(b.mem)
			offBuf.Resize(8 * (count + 1))
			ob := offBuf.Bytes()
			for i, o := range layer.offsets {
				binary.LittleEndian.PutUint64(ob[8*i:], uint64(o))
			}
		} else {
			if nchild > math.MaxInt32 {
				return nil, unsupportedf("list %q of %d items needs large_list", n.f.GetName(), nchild)
			}
			offBuf = memory.NewResizableBuffer(b.mem)
			offBuf.Resize(4 * (count + 1))
			ob := offBuf.Bytes()
			for i, o := range layer.offsets {
				binary.LittleEndian.PutUint32(ob[4*i:], uint32(o))
			}
		}
		defer offBuf.Release()
		data := array.NewData(dt, count, []*memory.Buffer{bitmap, offBuf}, []arrow.ArrayData{child.Data()}, nulls, 0)
		defer data.Release()
		return array.MakeFromData(data), nil
	}
	return nil, unsupportedf("field %q of type %v with child columns", n.f.GetName(), n.dt)
}

func (b *arrowBuilder) validity(l layerOut) (int, *memory.Buffer) {
	if l.valid == nil {
		return 0, nil
	}
	buf := memory.NewResizableBuffer(b.mem)
	buf.Resize(int(bitutil.BytesForBits(int64(l.n))))
	bs := buf.Bytes()
	clear(bs)
	nulls := 0
	for i, v := range l.valid {
		if v {
			bitutil.SetBit(bs, i)
		} else {
			nulls++
		}
	}
	if nulls == 0 {
		buf.Release()
		return 0, nil
	}
	return nulls, buf
}

// fixedByteWidth is the byte width of a fixed-width Arrow type, 0 for
// booleans (bits) and -1 for types that are not fixed width.
func fixedByteWidth(dt arrow.DataType) int {
	if dt.ID() == arrow.BOOL {
		return 0
	}
	if fw, ok := dt.(arrow.FixedWidthDataType); ok {
		return fw.BitWidth() / 8
	}
	return -1
}

// leaf builds a leaf array of type dt from the pieces.
func (b *arrowBuilder) leaf(dt arrow.DataType, pieces []piece, count int, bitmap *memory.Buffer, nulls int) (arrow.Array, error) {
	if d, ok := dt.(*arrow.DictionaryType); ok {
		return b.dictionary(d, pieces, count, bitmap, nulls)
	}
	var err error
	if pieces, err = materialize(pieces); err != nil {
		return nil, err
	}
	total := 0
	for _, p := range pieces {
		total += p.to - p.from
	}
	if total != count {
		return nil, corruptf("%d values for %d entries", total, count)
	}
	switch t := dt.(type) {
	case *arrow.FixedSizeListType:
		dim := int(t.Len())
		var childPieces []piece
		var cvalid []bool
		anyValid := false
		for _, p := range pieces {
			if p.b.kind == vNull {
				childPieces = append(childPieces, piece{&vblock{kind: vNull, n: p.b.n * dim}, p.from * dim, p.to * dim})
				continue
			}
			if p.b.kind != vFSL || p.b.dim != dim {
				return nil, corruptf("fixed_size_list<%d> values stored as %v of %d", dim, p.b.kind, p.b.dim)
			}
			childPieces = append(childPieces, piece{p.b.child, p.from * dim, p.to * dim})
			if p.b.valid != nil {
				anyValid = true
			}
		}
		if anyValid {
			cvalid = make([]bool, 0, count*dim)
			for _, p := range pieces {
				for i := p.from * dim; i < p.to*dim; i++ {
					cvalid = append(cvalid, p.b.kind == vFSL && (p.b.valid == nil || bitutil.BitIsSet(p.b.valid, i)))
				}
			}
		}
		cn, cbm := b.validity(layerOut{n: count * dim, valid: cvalid})
		if cbm != nil {
			defer cbm.Release()
		}
		child, err := b.leaf(t.Elem(), childPieces, count*dim, cbm, cn)
		if err != nil {
			return nil, err
		}
		defer child.Release()
		data := array.NewData(dt, count, []*memory.Buffer{bitmap}, []arrow.ArrayData{child.Data()}, nulls, 0)
		defer data.Release()
		return array.MakeFromData(data), nil
	case *arrow.StringType, *arrow.BinaryType, *arrow.LargeStringType, *arrow.LargeBinaryType:
		large := dt.ID() == arrow.LARGE_STRING || dt.ID() == arrow.LARGE_BINARY
		var size uint64
		for _, p := range pieces {
			switch p.b.kind {
			case vVar:
				size += p.b.offs[p.to] - p.b.offs[p.from]
			case vNull:
			default:
				return nil, corruptf("%v values stored as fixed width", dt)
			}
		}
		if !large && size > math.MaxInt32 {
			return nil, unsupportedf("%d bytes of %v values need a large type", size, dt)
		}
		// One piece holding at least half its block's bytes (which the
		// array then keeps alive): hand them to Arrow without a copy, as
		// the fixed-width case below does. A decoded block is not written
		// once made.
		zeroCopy := len(pieces) == 1 && pieces[0].b.kind == vVar && size > 0 && 2*size >= uint64(len(pieces[0].b.data))
		var vals *memory.Buffer
		if zeroCopy {
			p := pieces[0]
			lo, hi := p.b.offs[p.from], p.b.offs[p.to]
			vals = memory.NewBufferBytes(p.b.data[lo:hi:hi])
		} else {
			vals = memory.NewResizableBuffer(b.mem)
			vals.Resize(int(size))
		}
		vb := vals.Bytes()
		ow := 4
		if large {
			ow = 8
		}
		offs := memory.NewResizableBuffer(b.mem)
		offs.Resize(ow * (count + 1))
		ob := offs.Bytes()
		put := func(i int, v uint64) {
			if large {
				binary.LittleEndian.PutUint64(ob[8*i:], v)
			} else {
				binary.LittleEndian.PutUint32(ob[4*i:], uint32(v))
			}
		}
		put(0, 0)
		var pos uint64
		k := 1
		for _, p := range pieces {
			if p.b.kind == vNull {
				for i := p.from; i < p.to; i++ {
					put(k, pos)
					k++
				}
				continue
			}
			o := p.b.offs
			if !zeroCopy {
				copy(vb[pos:], p.b.data[o[p.from]:o[p.to]])
			}
			base := o[p.from]
			for i := p.from + 1; i <= p.to; i++ {
				put(k, pos+o[i]-base)
				k++
			}
			pos += o[p.to] - base
		}
		if b.keepFSST {
			if c := piecesCodes(pieces, count); c != nil {
				attachCodes(vals, c)
			}
		}
		defer vals.Release()
		defer offs.Release()
		data := array.NewData(dt, count, []*memory.Buffer{bitmap, offs, vals}, nil, nulls, 0)
		defer data.Release()
		return array.MakeFromData(data), nil
	}
	if st, ok := dt.(*arrow.StructType); ok {
		return b.packedStruct(st, pieces, count, bitmap, nulls)
	}
	if dt.ID() == arrow.NULL {
		return array.NewNull(count), nil
	}
	bw := fixedByteWidth(dt)
	if bw < 0 {
		return nil, unsupportedf("leaf type %v", dt)
	}
	bits := bw * 8
	if bw == 0 {
		bits = 1
	}
	if len(pieces) == 1 && bits%8 == 0 && pieces[0].b.kind == vFixed && pieces[0].b.width == bits {
		// One piece: hand its bytes to Arrow without a copy.
		p := pieces[0]
		vals := memory.NewBufferBytes(p.b.data[p.from*bw : p.to*bw])
		data := array.NewData(dt, count, []*memory.Buffer{bitmap, vals}, nil, nulls, 0)
		defer data.Release()
		return array.MakeFromData(data), nil
	}
	buf := memory.NewResizableBuffer(b.mem)
	buf.Resize(fixedBytes(count, bits))
	out := buf.Bytes()
	clear(out)
	pos := 0
	for _, p := range pieces {
		n := p.to - p.from
		switch {
		case p.b.kind == vNull:
		case p.b.kind != vFixed:
			buf.Release()
			return nil, corruptf("%v values stored as %v", dt, p.b.kind)
		case p.b.width != bits:
			buf.Release()
			return nil, corruptf("%v values stored with %d bits", dt, p.b.width)
		case bits == 1:
			for i := 0; i < n; i++ {
				if bitutil.BitIsSet(p.b.data, p.from+i) {
					bitutil.SetBit(out, pos+i)
				}
			}
		default:
			copy(out[pos*bw:], p.b.data[p.from*bw:p.to*bw])
		}
		pos += n
	}
	defer buf.Release()
	data := array.NewData(dt, count, []*memory.Buffer{bitmap, buf}, nil, nulls, 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}

// packedStruct splits row-major struct values (each row the fields' bytes
// one after the other) into the struct's children.
func (b *arrowBuilder) packedStruct(st *arrow.StructType, pieces []piece, count int, bitmap *memory.Buffer, nulls int) (arrow.Array, error) {
	widths, row, err := packedWidths(st)
	if err != nil {
		return nil, err
	}
	kids := make([]arrow.ArrayData, len(widths))
	defer func() {
		for _, k := range kids {
			if k != nil {
				k.Release()
			}
		}
	}()
	at := 0
	for i, w := range widths {
		buf := make([]byte, 0, count*w)
		for _, p := range pieces {
			if p.b.kind == vNull {
				buf = append(buf, make([]byte, (p.to-p.from)*w)...)
				continue
			}
			if p.b.kind != vFixed || p.b.width != row*8 {
				return nil, corruptf("packed struct rows of %d bits, want %d", p.b.width, row*8)
			}
			for r := p.from; r < p.to; r++ {
				buf = append(buf, p.b.data[r*row+at:r*row+at+w]...)
			}
		}
		kids[i] = packedChild(st.Field(i).Type, count, buf)
		at += w
	}
	data := array.NewData(st, count, []*memory.Buffer{bitmap}, kids, nulls, 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}

// materialize replaces dictionary indices by the dictionary's values.
func materialize(pieces []piece) ([]piece, error) {
	var out []piece
	for i, p := range pieces {
		if p.b.kind != vDict {
			if out != nil {
				out = append(out, p)
			}
			continue
		}
		if out == nil {
			out = append(make([]piece, 0, len(pieces)), pieces[:i]...)
		}
		wb := p.b.width / 8
		idx := &vblock{kind: vFixed, n: p.to - p.from, width: p.b.width, data: p.b.data[p.from*wb : p.to*wb]}
		g, err := gatherDict(p.b.child, idx)
		if err != nil {
			return nil, err
		}
		out = append(out, piece{g, 0, g.n})
	}
	if out == nil {
		return pieces, nil
	}
	return out, nil
}

// dictionary builds an Arrow dictionary array. When every piece holds
// indices into one page dictionary, that dictionary and those indices are
// used as they are (as LanceDB returns them); otherwise the values are
// dictionary-encoded anew, in order of first appearance.
func (b *arrowBuilder) dictionary(dt *arrow.DictionaryType, pieces []piece, count int, bitmap *memory.Buffer, nulls int) (arrow.Array, error) {
	var dict *vblock
	shared := true
	for _, p := range pieces {
		switch {
		case p.b.kind == vNull:
		case p.b.kind != vDict:
			shared = false
		case dict == nil:
			dict = p.b.child
		case dict != p.b.child:
			shared = false
		}
	}
	iw := fixedByteWidth(dt.IndexType)
	if shared && dict != nil && iw > 0 {
		values, err := b.leaf(dt.ValueType, []piece{{dict, 0, dict.n}}, dict.n, nil, 0)
		if err != nil {
			return nil, err
		}
		defer values.Release()
		buf := memory.NewResizableBuffer(b.mem)
		buf.Resize(count * iw)
		out := buf.Bytes()
		clear(out)
		pos := 0
		for _, p := range pieces {
			if p.b.kind == vDict {
				wb := p.b.width / 8
				for i := p.from; i < p.to; i++ {
					var v uint64
					for k := wb - 1; k >= 0; k-- {
						v = v<<8 | uint64(p.b.data[i*wb+k])
					}
					if v >= uint64(dict.n) {
						v = 0 // only under a null
					}
					for k := 0; k < iw; k++ {
						out[(pos+i-p.from)*iw+k] = byte(v >> (8 * k))
					}
				}
			}
			pos += p.to - p.from
		}
		defer buf.Release()
		idata := array.NewData(dt.IndexType, count, []*memory.Buffer{bitmap, buf}, nil, nulls, 0)
		defer idata.Release()
		idx := array.MakeFromData(idata)
		defer idx.Release()
		return array.NewDictionaryArray(dt, idx, values), nil
	}
	plain, err := b.leaf(dt.ValueType, pieces, count, bitmap, nulls)
	if err != nil {
		return nil, err
	}
	defer plain.Release()
	db := array.NewDictionaryBuilder(b.mem, dt)
	defer db.Release()
	if err := db.AppendArray(plain); err != nil {
		return nil, unsupportedf("dictionary of %v: %v", dt.ValueType, err)
	}
	return db.NewArray(), nil
}

// piecesCodes are the FSST codes of the count values of pieces, when
// every piece was decoded from FSST codes under one table (the pages of
// a file written with shared tables), else nil. One piece's codes are
// not copied.
func piecesCodes(pieces []piece, count int) *arrayCodes {
	n := 0
	for _, p := range pieces {
		c := p.b.fsst
		if p.b.kind != vVar || c == nil || p.to >= len(c.offs) || !sameTable(c.table, pieces[0].b.fsst.table) {
			return nil
		}
		n += p.to - p.from
	}
	if n != count {
		return nil
	}
	if len(pieces) == 1 {
		p := pieces[0]
		return &arrayCodes{table: p.b.fsst.table, codes: p.b.fsst.codes, offs: p.b.fsst.offs[p.from : p.to+1]}
	}
	out := &arrayCodes{table: pieces[0].b.fsst.table, offs: make([]uint64, 1, count+1)}
	for _, p := range pieces {
		c := p.b.fsst
		start := uint64(len(out.codes))
		out.codes = append(out.codes, c.codes[c.offs[p.from]:c.offs[p.to]]...)
		out.offs = c.appendEnds(out.offs, start, p.from, p.to)
	}
	return out
}
