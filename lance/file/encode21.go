package file

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/mvq-dev/mvq/lance/pb/enc21pb"
	"github.com/mvq-dev/mvq/lance/pb/filepb"
)

// newColumnWriters21 makes one writer per top-level field for file format
// 2.1: every leaf (primitive, fixed-size list, string, or an empty struct)
// is a column; structs and lists are folded into the leaves' repetition and
// definition levels.
func newColumnWriters21(fields []*filepb.Field, pageSize int, tables *FSSTTables) ([]columnWriter, error) {
	children := map[int32][]*filepb.Field{}
	for _, f := range fields {
		children[f.ParentId] = append(children[f.ParentId], f)
	}
	var count func(f *filepb.Field, depth int) (int, error)
	count = func(f *filepb.Field, depth int) (int, error) {
		if depth > maxNesting {
			return 0, fmt.Errorf("field %q: nested deeper than %d", f.Name, maxNesting)
		}
		kids := children[f.Id]
		if len(kids) == 0 {
			return 1, nil
		}
		n := 0
		for _, k := range kids {
			c, err := count(k, depth+1)
			if err != nil {
				return 0, err
			}
			n += c
		}
		return n, nil
	}
	var out []columnWriter
	for _, f := range children[-1] {
		n, err := count(f, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, &fieldWriter21{field: f, ncols: n, pageSize: pageSize, fsst: tables})
	}
	return out, nil
}

// maxNesting bounds struct/list depth so levels fit comfortably in 16 bits.
const maxNesting = 64

// fieldWriter21 buffers a top-level field's arrays until about pageSize
// bytes have arrived, then encodes one page per leaf column over those rows.
type fieldWriter21 struct {
	field        *filepb.Field
	ncols        int
	pageSize     int
	fsst         *FSSTTables // nil: a table per page
	dt           arrow.DataType
	leaves       [][]int // per leaf: the child index taken at each struct
	pending      []arrow.Array
	pendingRows  int
	pendingBytes int
	nextRow      uint64
}

func (w *fieldWriter21) numColumns() int { return w.ncols }

func (w *fieldWriter21) write(arr arrow.Array) ([]encodedPage, error) {
	if w.dt == nil {
		w.leaves = leafPaths(arr.DataType(), nil, nil)
		if len(w.leaves) != w.ncols {
			return nil, fmt.Errorf("arrow type %s has %d leaves, schema %d", arr.DataType(), len(w.leaves), w.ncols)
		}
		w.dt = arr.DataType()
	} else if !arrow.TypeEqual(arr.DataType(), w.dt) {
		return nil, fmt.Errorf("arrow type changed from %s to %s", w.dt, arr.DataType())
	}
	if err := checkWritable(arr); err != nil {
		return nil, err
	}
	n := arr.Len()
	if n == 0 {
		return nil, nil
	}
	perRow := approxBytes(arr, 0, n)/n + 1
	var pages []encodedPage
	for off := 0; off < n; {
		take := n - off
		room := w.pageSize - w.pendingBytes
		if fit := room / perRow; fit < take {
			take = max(fit, 1)
		}
		s := array.NewSlice(arr, int64(off), int64(off+take))
		w.pending = append(w.pending, s)
		w.pendingRows += take
		w.pendingBytes += take * perRow
		off += take
		if w.pendingBytes >= w.pageSize {
			p, err := w.flush()
			if err != nil {
				return nil, err
			}
			pages = append(pages, p...)
		}
	}
	return pages, nil
}

func (w *fieldWriter21) finish() ([]encodedPage, []encodedColumn, error) {
	pages, err := w.flush()
	if err != nil {
		return nil, nil, err
	}
	return pages, make([]encodedColumn, w.ncols), nil
}

func (w *fieldWriter21) flush() ([]encodedPage, error) {
	if w.pendingRows == 0 {
		return nil, nil
	}
	defer func() {
		for _, a := range w.pending {
			a.Release()
		}
		w.pending = w.pending[:0]
		w.nextRow += uint64(w.pendingRows)
		w.pendingRows, w.pendingBytes = 0, 0
	}()
	pages := make([]encodedPage, 0, len(w.leaves))
	for i, path := range w.leaves {
		p, err := encodeLeafPages(w.pending, path, i, w.nextRow, w.pendingRows, fsstColumn{w.fsst, uint64(uint32(w.field.Id))<<32 | uint64(i)})
		if err != nil {
			return nil, err
		}
		pages = append(pages, p...)
	}
	return pages, nil
}

// encodeLeafPages encodes rows of arrs (numRows in all, the first being row
// firstRow of the file) as one page of the leaf at path, or, when a
// mini-block chunk would overflow its 16-bit level counts (long runs of
// empty or null lists), as pages over halves of the rows.
func encodeLeafPages(arrs []arrow.Array, path []int, col int, firstRow uint64, numRows int, fc fsstColumn) ([]encodedPage, error) {
	sh, err := shredLeaf(arrs, path)
	if err != nil {
		return nil, err
	}
	sh.fsst = fc
	layout, bufs, err := encodePage21(sh, uint64(numRows))
	if errors.Is(err, errChunkLevels) && numRows > 1 {
		half := numRows / 2
		a, b := splitRows(arrs, half)
		defer releaseAll(a)
		defer releaseAll(b)
		p1, err := encodeLeafPages(a, path, col, firstRow, half, fc)
		if err != nil {
			return nil, err
		}
		p2, err := encodeLeafPages(b, path, col, firstRow+uint64(half), numRows-half, fc)
		if err != nil {
			return nil, err
		}
		return append(p1, p2...), nil
	}
	if err != nil {
		return nil, err
	}
	return []encodedPage{{column: col, buffers: bufs, encoding: layout, numRows: uint64(numRows), firstRow: firstRow}}, nil
}

// splitRows slices arrs into the first n rows and the rest.
func splitRows(arrs []arrow.Array, n int) (head, tail []arrow.Array) {
	for _, a := range arrs {
		l := a.Len()
		switch {
		case n <= 0:
			tail = append(tail, array.NewSlice(a, 0, int64(l)))
		case n >= l:
			head = append(head, array.NewSlice(a, 0, int64(l)))
		default:
			head = append(head, array.NewSlice(a, 0, int64(n)))
			tail = append(tail, array.NewSlice(a, int64(n), int64(l)))
		}
		n -= l
	}
	return head, tail
}

// checkWritable refuses what the 2.1 encoders cannot write: fixed-size
// lists of nested types.
func checkWritable(arr arrow.Array) error {
	switch a := arr.(type) {
	case *array.Struct:
		for i := 0; i < a.NumField(); i++ {
			if err := checkWritable(a.Field(i)); err != nil {
				return err
			}
		}
	case *array.List:
		return checkWritable(a.ListValues())
	case *array.LargeList:
		return checkWritable(a.ListValues())
	}
	return nil
}

// leafPaths lists, depth first, the struct child indexes leading to each
// leaf of dt (lists have one child and need no index).
func leafPaths(dt arrow.DataType, prefix []int, out [][]int) [][]int {
	switch t := dt.(type) {
	case *arrow.StructType:
		if t.NumFields() == 0 {
			return append(out, append([]int(nil), prefix...))
		}
		for i, f := range t.Fields() {
			out = leafPaths(f.Type, append(prefix, i), out)
		}
		return out
	case *arrow.ListType:
		return leafPaths(t.Elem(), prefix, out)
	case *arrow.LargeListType:
		return leafPaths(t.Elem(), prefix, out)
	default:
		return append(out, append([]int(nil), prefix...))
	}
}

// approxBytes estimates the encoded size of rows [i, j) of arr.
func approxBytes(arr arrow.Array, i, j int) int {
	n := j - i
	if n <= 0 {
		return 0
	}
	switch a := arr.(type) {
	case *array.String:
		o := a.ValueOffsets()
		return int(o[j]-o[i]) + 4*n
	case *array.Binary:
		o := a.ValueOffsets()
		return int(o[j]-o[i]) + 4*n
	case *array.LargeString:
		o := a.ValueOffsets()
		return int(o[j]-o[i]) + 8*n
	case *array.LargeBinary:
		o := a.ValueOffsets()
		return int(o[j]-o[i]) + 8*n
	case *array.Boolean:
		return n/8 + 1
	case *array.Struct:
		s := n / 8
		for k := 0; k < a.NumField(); k++ {
			s += approxBytes(a.Field(k), i, j)
		}
		return s
	case *array.List:
		st, _ := a.ValueOffsets(i)
		_, en := a.ValueOffsets(j - 1)
		return approxBytes(a.ListValues(), int(st), int(en)) + 2*n
	case *array.LargeList:
		st, _ := a.ValueOffsets(i)
		_, en := a.ValueOffsets(j - 1)
		return approxBytes(a.ListValues(), int(st), int(en)) + 2*n
	case *array.FixedSizeList:
		d := int(a.DataType().(*arrow.FixedSizeListType).Len())
		off := a.Data().Offset()
		return approxBytes(a.ListValues(), (off+i)*d, (off+j)*d)
	}
	if fw, ok := arr.DataType().(arrow.FixedWidthDataType); ok {
		return n * max(fw.BitWidth()/8, 1)
	}
	return n
}

// shredded is one leaf's data for a page: levels plus the visible values.
type shredded struct {
	rep, def []uint16 // nil when there are no lists / no nulls
	vis      []bool   // per level: has a value slot (only with lists)
	layers   []enc21pb.RepDefLayer
	sink     valueSink
	valid    int        // number of non-null visible values
	fsst     fsstColumn // the column's shared FSST tables, if any
}

type nodeKind uint8

const (
	kindLeaf nodeKind = iota
	kindStruct
	kindList
)

type shredNode struct {
	kind     nodeKind
	child    int    // struct child index
	repLevel uint16 // list rep level
	// firstRep is the rep level of the outermost list at or below the node.
	firstRep uint16
	// visible: a null or empty here still has a value slot (no list at or
	// below it).
	visible bool
}

type shredder struct {
	nodes   []shredNode
	rep     []uint16
	code    []uint16
	vis     []bool
	hasRep  bool
	sink    valueSink
	nullAt  []bool
	emptyAt []bool
	// nullType: the leaf is of the null type (every value null, whatever
	// its bitmap says).
	nullType bool
}

// shredLeaf turns the leaf at path of the top-level arrays into levels and
// values.
func shredLeaf(arrs []arrow.Array, path []int) (*shredded, error) {
	dt := arrs[0].DataType()
	var nodes []shredNode
	pi := 0
	for {
		switch t := dt.(type) {
		case *arrow.StructType:
			if t.NumFields() == 0 {
				return nil, errors.New("empty struct columns are not supported")
			}
			nodes = append(nodes, shredNode{kind: kindStruct, child: path[pi]})
			dt = t.Field(path[pi]).Type
			pi++
			continue
		case *arrow.ListType:
			nodes = append(nodes, shredNode{kind: kindList})
			dt = t.Elem()
			continue
		case *arrow.LargeListType:
			nodes = append(nodes, shredNode{kind: kindList})
			dt = t.Elem()
			continue
		}
		nodes = append(nodes, shredNode{kind: kindLeaf})
		break
	}
	sink, err := newSink(dt)
	if err != nil {
		return nil, err
	}
	nlists := 0
	for _, n := range nodes {
		if n.kind == kindList {
			nlists++
		}
	}
	r := uint16(nlists)
	for i := range nodes {
		if nodes[i].kind == kindList {
			nodes[i].repLevel = r
			r--
		}
	}
	var below uint16
	visible := true
	for i := len(nodes) - 1; i >= 0; i-- {
		if nodes[i].kind == kindList {
			below = nodes[i].repLevel
			visible = false
		}
		nodes[i].firstRep = below
		nodes[i].visible = visible
	}
	_, nullType := sink.(*nullSink)
	s := &shredder{nodes: nodes, hasRep: nlists > 0, sink: sink, nullType: nullType,
		nullAt: make([]bool, len(nodes)), emptyAt: make([]bool, len(nodes))}

	if len(nodes) == 1 {
		// A top-level leaf: levels come straight from the validity bitmap.
		anyNull := s.nullType
		for _, a := range arrs {
			anyNull = anyNull || a.NullN() > 0
		}
		for _, a := range arrs {
			if anyNull {
				base := len(s.code)
				s.code = append(s.code, make([]uint16, a.Len())...)
				if a.NullN() > 0 || s.nullType {
					s.nullAt[0] = a.Len() > 0
					for i := 0; i < a.Len(); i++ {
						if s.nullType || a.IsNull(i) {
							s.code[base+i] = 1
						}
					}
				}
			}
			sink.appendAll(a)
		}
	} else {
		for _, a := range arrs {
			for i := 0; i < a.Len(); i++ {
				s.emit(0, a, i, 0)
			}
		}
	}
	return s.finish()
}

func (s *shredder) emit(j int, arr arrow.Array, i int, rep uint16) {
	n := &s.nodes[j]
	if arr.IsNull(i) || (n.kind == kindLeaf && s.nullType) {
		s.special(j, uint16(2*j+1), rep)
		s.nullAt[j] = true
		if n.kind != kindList {
			// A null struct still has an entry in each layer below it down
			// to the first list, which Lance reads as null there (as Arrow
			// builders write them): those layers must admit nulls.
			for k := j + 1; k < len(s.nodes); k++ {
				s.nullAt[k] = true
				if s.nodes[k].kind == kindList {
					break
				}
			}
		}
		return
	}
	switch n.kind {
	case kindLeaf:
		if s.hasRep {
			s.rep = append(s.rep, rep)
			s.vis = append(s.vis, true)
		}
		s.code = append(s.code, 0)
		s.sink.appendValue(arr, i)
	case kindStruct:
		s.emit(j+1, arr.(*array.Struct).Field(n.child), i, rep)
	case kindList:
		var start, end int64
		var child arrow.Array
		switch l := arr.(type) {
		case *array.List:
			start, end = l.ValueOffsets(i)
			child = l.ListValues()
		case *array.LargeList:
			start, end = l.ValueOffsets(i)
			child = l.ListValues()
		}
		if start == end {
			s.special(j, uint16(2*j+2), rep)
			s.emptyAt[j] = true
			return
		}
		r := rep
		if r == 0 {
			r = n.repLevel
		}
		for c := start; c < end; c++ {
			s.emit(j+1, child, int(c), r)
			r = 0
		}
	}
}

// special records a null (struct, list or leaf) or an empty list at node j.
func (s *shredder) special(j int, code uint16, rep uint16) {
	n := &s.nodes[j]
	if s.hasRep {
		if rep == 0 {
			rep = n.firstRep
		}
		s.rep = append(s.rep, rep)
		s.vis = append(s.vis, n.visible)
	}
	s.code = append(s.code, code)
	if n.visible {
		s.sink.appendNull()
	}
}

// finish maps the provisional codes to definition levels: outer layers get
// the higher levels, and a list with both nulls and empties uses two (null
// one below empty), as Lance numbers them.
func (s *shredder) finish() (*shredded, error) {
	nl := len(s.nodes)
	levels := make([]uint16, 2*nl+1)
	var maxDef uint16
	for j := 0; j < nl; j++ {
		if s.nullAt[j] {
			maxDef++
		}
		if s.emptyAt[j] {
			maxDef++
		}
	}
	cur := maxDef
	layers := make([]enc21pb.RepDefLayer, nl)
	for j := 0; j < nl; j++ {
		n := s.nodes[j]
		var layer enc21pb.RepDefLayer
		if n.kind == kindList {
			switch {
			case s.nullAt[j] && s.emptyAt[j]:
				levels[2*j+1], levels[2*j+2] = cur-1, cur
				cur -= 2
				layer = enc21pb.RepDefLayer_REPDEF_NULL_AND_EMPTY_LIST
			case s.nullAt[j]:
				levels[2*j+1] = cur
				cur--
				layer = enc21pb.RepDefLayer_REPDEF_NULLABLE_LIST
			case s.emptyAt[j]:
				levels[2*j+2] = cur
				cur--
				layer = enc21pb.RepDefLayer_REPDEF_EMPTYABLE_LIST
			default:
				layer = enc21pb.RepDefLayer_REPDEF_ALL_VALID_LIST
			}
		} else if s.nullAt[j] {
			levels[2*j+1] = cur
			cur--
			layer = enc21pb.RepDefLayer_REPDEF_NULLABLE_ITEM
		} else {
			layer = enc21pb.RepDefLayer_REPDEF_ALL_VALID_ITEM
		}
		layers[nl-1-j] = layer
	}
	out := &shredded{layers: layers, sink: s.sink}
	if s.hasRep {
		out.rep = s.rep
		out.vis = s.vis
	}
	valid := 0
	if maxDef > 0 {
		for i, c := range s.code {
			s.code[i] = levels[c]
		}
		out.def = s.code
		for i, d := range out.def {
			if d == 0 && (out.vis == nil || out.vis[i]) {
				valid++
			}
		}
	} else {
		valid = s.sink.count()
	}
	out.valid = valid
	return out, nil
}
