// Package vector answers exact nearest-neighbour queries over a table's
// fixed_size_list<float32> column: every row's distance to the query
// vector is computed (no index), the k nearest are kept in a bounded heap
// per fragment, fragments are searched in parallel, and the rows are read
// back with a _distance column, nearest first.
//
// Data files never change, so the decoded vectors of a fragment are kept
// in a process-wide cache (by file, bounded in bytes): repeated searches
// run at the speed of a loop over the floats.
package vector

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// DistanceColumn is the column a search adds.
const DistanceColumn = "_distance"

// Distance types: l2 is the squared Euclidean distance, cosine 1 − cos θ,
// dot 1 − a·b. Smaller is nearer for all three.
const (
	L2     = "l2"
	Cosine = "cosine"
	Dot    = "dot"
)

// DefaultK is k when a query gives none.
const DefaultK = 10

// MaxK bounds k.
const MaxK = 100_000

// Query is one search.
type Query struct {
	Vector []float32
	K      int    // 0: DefaultK
	Metric string // "": l2
	// Column is the vector column; "": the table's only
	// fixed_size_list<float32> column.
	Column string
	// Filter is a SQL predicate the rows must satisfy (prefilter).
	Filter string
	// Columns are the columns answered (nil: all), then _distance.
	Columns []string
	Version uint64 // 0: latest
	// Lower and Upper, when set, bound the distances kept: [Lower, Upper).
	Lower, Upper *float32
	// RowAddr adds the _rowaddr column.
	RowAddr bool
	// Index, when set, scores only the rows it answers for the fragments
	// it covers (an IVF index's probed partitions; ivf.go).
	Index Candidates
	// Refine, with Index, takes K×Refine candidates, ranks them by exact
	// distance and keeps K.
	Refine int
	// Postfilter applies Filter to the nearest rows found without it
	// (fewer than K may remain) instead of searching only the rows it
	// keeps.
	Postfilter bool
}

// hit is one candidate row.
type hit struct {
	dist float32
	addr uint64
}

// Search runs q over table t. Errors: CodeInvalidInput naming the field
// (vector, k, distance_type, vector_column), CodeTableColumnNotFound for
// an unknown column, the table's errors.
func Search(ctx context.Context, t *table.Table, q Query, mem memory.Allocator) (arrow.RecordBatch, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	m, schema, err := t.LoadSchema(ctx, q.Version)
	if err != nil {
		return nil, err
	}
	col, dim, err := vectorColumn(schema, q.Column)
	if err != nil {
		return nil, err
	}
	if len(q.Vector) != dim {
		return nil, errs.Errorf(errs.CodeInvalidInput, "vector: %d dimensions, column %q holds vectors of %d", len(q.Vector), schema.Field(col).Name, dim)
	}
	for _, x := range q.Vector {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, errs.Errorf(errs.CodeInvalidInput, "vector: not finite")
		}
	}
	if q.K == 0 {
		q.K = DefaultK
	}
	if q.K < 0 || q.K > MaxK {
		return nil, errs.Errorf(errs.CodeInvalidInput, "k: must be 1 to %d (got %d)", MaxK, q.K)
	}
	if q.Metric == "" {
		q.Metric = L2
	}
	sc, err := newScorer(strings.ToLower(q.Metric), q.Vector)
	if err != nil {
		return nil, err
	}
	sc.lower, sc.upper = q.Lower, q.Upper
	out, _, err := table.ProjectSchema(schema, q.Columns, q.RowAddr)
	if err != nil {
		return nil, err
	}
	k := q.K
	if q.Index != nil && q.Refine > 1 {
		q.K = min(k*q.Refine, MaxK)
	}
	var hits []hit
	if strings.TrimSpace(q.Filter) == "" || q.Postfilter {
		hits, err = searchFragments(ctx, t, m, col, dim, q.K, sc, q.Index, mem)
		if err == nil && strings.TrimSpace(q.Filter) != "" {
			hits, err = postfilter(ctx, t, m, q.Filter, hits)
		}
	} else {
		hits, err = searchFiltered(ctx, t, m, schema.Field(col).Name, dim, q, sc)
	}
	if err != nil {
		return nil, err
	}
	// The distances are exact: the refined candidates are ranked already.
	hits = hits[:min(k, len(hits))]
	return fetch(ctx, t, m, schema, out, q, hits, col, dim, mem)
}

// vectorColumn finds the searched column: name, or the only
// fixed_size_list<float32> column.
func vectorColumn(schema *arrow.Schema, name string) (int, int, error) {
	if name != "" {
		idx := schema.FieldIndices(name)
		if len(idx) == 0 {
			return 0, 0, errs.Errorf(errs.CodeTableColumnNotFound, "vector_column: column %q not found", name)
		}
		dim, ok := vectorDim(schema.Field(idx[0]).Type)
		if !ok {
			return 0, 0, errs.Errorf(errs.CodeInvalidInput, "vector_column: %q is %s, not a vector column (fixed_size_list<float32>)", name, schema.Field(idx[0]).Type)
		}
		return idx[0], dim, nil
	}
	found, dim := -1, 0
	var names []string
	for i, f := range schema.Fields() {
		if d, ok := vectorDim(f.Type); ok {
			found, dim = i, d
			names = append(names, f.Name)
		}
	}
	switch len(names) {
	case 0:
		return 0, 0, errs.Errorf(errs.CodeInvalidInput, "vector: the table has no vector column (fixed_size_list<float32>)")
	case 1:
		return found, dim, nil
	}
	return 0, 0, errs.Errorf(errs.CodeInvalidInput, "vector_column: required, the table has several vector columns (%s)", strings.Join(names, ", "))
}

func vectorDim(t arrow.DataType) (int, bool) {
	fl, ok := t.(*arrow.FixedSizeListType)
	if !ok || fl.Elem().ID() != arrow.FLOAT32 {
		return 0, false
	}
	return int(fl.Len()), true
}

// searchFragments scores every fragment in parallel and merges their
// best k.
func searchFragments(ctx context.Context, t *table.Table, m *table.Manifest, col, dim, k int, sc *scorer, idx Candidates, mem memory.Allocator) ([]hit, error) {
	frags := m.Fragments
	per := make([][]hit, len(frags))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, f := range frags {
		g.Go(func() error {
			vs, err := fragmentVectors(gctx, t, f, col, dim, mem)
			if err != nil {
				return err
			}
			h := newTopK(k)
			if idx != nil {
				rows, ok, err := idx.Rows(gctx, f)
				if err != nil {
					return err
				}
				if ok {
					sc.scanRows(vs, uint64(f.ID)<<32, rows, h)
					per[i] = h.items
					return nil
				}
			}
			sc.scan(vs, uint64(f.ID)<<32, h)
			per[i] = h.items
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	h := newTopK(k)
	for _, p := range per {
		for _, x := range p {
			h.offer(x.dist, x.addr)
		}
	}
	return h.sorted(), nil
}

// searchFiltered scores the rows the filter keeps, read through the
// table's query path.
func searchFiltered(ctx context.Context, t *table.Table, m *table.Manifest, name string, dim int, q Query, sc *scorer) ([]hit, error) {
	rdr, err := t.Query(ctx, table.QueryOptions{Version: m.Version, Columns: []string{name}, Filter: q.Filter, RowAddr: true})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	h := newTopK(q.K)
	var ok *allowed
	if q.Index != nil {
		ok = newAllowed(q.Index, m)
	}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		vs, err := flatten(rec.Column(0), dim)
		if err != nil {
			return nil, err
		}
		addrs := rec.Column(1).(*array.Uint64).Uint64Values()
		if ok != nil {
			if vs, addrs, err = ok.keep(ctx, vs, addrs); err != nil {
				return nil, err
			}
		}
		sc.scanAddrs(vs, addrs, h)
	}
	if err := rdr.Err(); err != nil {
		return nil, err
	}
	return h.sorted(), nil
}

// fetch reads the answered columns of the hits and adds _distance.
// The vector column comes from the decoded vectors, not the files.
func fetch(ctx context.Context, t *table.Table, m *table.Manifest, schema, out *arrow.Schema, q Query, hits []hit, vcol, dim int, mem memory.Allocator) (arrow.RecordBatch, error) {
	fields := append(slices.Clone(out.Fields()), arrow.Field{Name: DistanceColumn, Type: arrow.PrimitiveTypes.Float32})
	// Source columns read, in out's order (without _rowaddr).
	var idx []int
	if q.Columns == nil {
		for i := range schema.Fields() {
			idx = append(idx, i)
		}
	} else {
		for _, c := range q.Columns {
			idx = append(idx, schema.FieldIndices(c)[0])
		}
	}
	var read []int // idx without the vector column
	at := make([]int, len(idx))
	for c, i := range idx {
		at[c] = -1
		if i != vcol {
			at[c] = len(read)
			read = append(read, i)
		}
	}
	byFrag := map[uint32][]int{} // fragment → hit positions
	for i, h := range hits {
		byFrag[uint32(h.addr>>32)] = append(byFrag[uint32(h.addr>>32)], i)
	}
	frags := map[uint32]table.Fragment{}
	for _, f := range m.Fragments {
		frags[f.ID] = f
	}
	// Each fragment's rows of the hits, then put in hit order.
	parts := make([]arrow.RecordBatch, 0, len(byFrag))
	order := make([]int64, len(hits)) // hit i is row order[i] of the concatenation
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	cctx := compute.WithAllocator(ctx, mem)
	var base int64
	for id, pos := range byFrag {
		rows := make([]int64, len(pos))
		for k, p := range pos {
			rows[k] = int64(uint32(hits[p].addr))
			order[p] = base + int64(k)
		}
		got, err := readRows(ctx, t, frags[id], read, rows, mem)
		if err != nil {
			return nil, err
		}
		got, err = conformRead(ctx, got, schema, read, mem)
		if err != nil {
			return nil, err
		}
		parts = append(parts, got)
		base += got.NumRows()
	}
	cols := make([]arrow.Array, 0, len(fields))
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	ib := array.NewInt64Builder(mem)
	ib.AppendValues(order, nil)
	perm := ib.NewArray()
	ib.Release()
	defer perm.Release()
	for c := range idx {
		if at[c] < 0 {
			col, err := hitVectors(ctx, t, frags, hits, vcol, dim, out.Field(c).Type, mem)
			if err != nil {
				return nil, err
			}
			cols = append(cols, col)
			continue
		}
		var chunks []arrow.Array
		for _, p := range parts {
			chunks = append(chunks, p.Column(at[c]))
		}
		var joined arrow.Array
		if len(chunks) == 0 {
			joined = array.MakeArrayOfNull(mem, out.Field(c).Type, 0)
		} else {
			var err error
			if joined, err = array.Concatenate(chunks, mem); err != nil {
				return nil, err
			}
		}
		col, err := compute.TakeArray(cctx, joined, perm)
		joined.Release()
		if err != nil {
			return nil, err
		}
		cols = append(cols, col)
	}
	if q.RowAddr {
		// Hits are live addresses; users get Lance's.
		addrs := make([]uint64, len(hits))
		for i, h := range hits {
			addrs[i] = h.addr
		}
		if err := t.LanceRowAddrs(ctx, m, addrs); err != nil {
			return nil, err
		}
		ab := array.NewUint64Builder(mem)
		ab.AppendValues(addrs, nil)
		cols = append(cols, ab.NewArray())
		ab.Release()
	}
	db := array.NewFloat32Builder(mem)
	for _, h := range hits {
		db.Append(h.dist)
	}
	cols = append(cols, db.NewArray())
	db.Release()
	for i, c := range cols {
		if !arrow.TypeEqual(c.DataType(), fields[i].Type) {
			fields[i].Type = c.DataType()
		}
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(len(hits))), nil
}

// hitVectors builds the vector column of the hits from the decoded
// vectors of their fragments.
func hitVectors(ctx context.Context, t *table.Table, frags map[uint32]table.Fragment, hits []hit, vcol, dim int, typ arrow.DataType, mem memory.Allocator) (arrow.Array, error) {
	fl := typ.(*arrow.FixedSizeListType)
	b := array.NewFixedSizeListBuilderWithField(mem, fl.Len(), fl.ElemField())
	defer b.Release()
	vb := b.ValueBuilder().(*array.Float32Builder)
	for _, h := range hits {
		vs, err := fragmentVectors(ctx, t, frags[uint32(h.addr>>32)], vcol, dim, mem)
		if err != nil {
			return nil, err
		}
		r := int(uint32(h.addr))
		if vs.valid != nil && !vs.valid[r] {
			b.AppendNull()
			continue
		}
		b.Append(true)
		vb.AppendValues(vs.flat[r*dim:(r+1)*dim], nil)
	}
	return b.NewArray(), nil
}

// concat joins recs (no columns: rows rows of nothing).
func concat(recs []arrow.RecordBatch, rows int64, mem memory.Allocator) (arrow.RecordBatch, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("vector: fragment has no rows")
	}
	return table.ConcatBatches(recs, mem)
}

// topK keeps the k smallest distances (ties: the lower address) in a
// max-heap.
type topK struct {
	k     int
	items []hit
}

func newTopK(k int) *topK { return &topK{k: k, items: make([]hit, 0, k)} }

func worse(a, b hit) bool { return a.dist > b.dist || a.dist == b.dist && a.addr > b.addr }

// bound is the distance a candidate must beat (+Inf until k are held).
func (h *topK) bound() float32 {
	if len(h.items) < h.k {
		return float32(math.Inf(1))
	}
	return h.items[0].dist
}

func (h *topK) offer(d float32, addr uint64) {
	x := hit{d, addr}
	if len(h.items) < h.k {
		h.items = append(h.items, x)
		for i := len(h.items) - 1; i > 0; {
			p := (i - 1) / 2
			if !worse(h.items[i], h.items[p]) {
				break
			}
			h.items[i], h.items[p] = h.items[p], h.items[i]
			i = p
		}
		return
	}
	if !worse(h.items[0], x) {
		return
	}
	h.items[0] = x
	n := len(h.items)
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && worse(h.items[l], h.items[m]) {
			m = l
		}
		if r < n && worse(h.items[r], h.items[m]) {
			m = r
		}
		if m == i {
			break
		}
		h.items[i], h.items[m] = h.items[m], h.items[i]
		i = m
	}
}

// sorted answers the hits nearest first.
func (h *topK) sorted() []hit {
	out := slices.Clone(h.items)
	sort.Slice(out, func(i, j int) bool { return worse(out[j], out[i]) })
	return out
}

// conformRead gives rows read from a data file (its column names and
// types) the names and types of the version's fields read (a file written
// before a rename or a widening has the old ones). It releases rec.
func conformRead(ctx context.Context, rec arrow.RecordBatch, schema *arrow.Schema, read []int, mem memory.Allocator) (arrow.RecordBatch, error) {
	defer rec.Release()
	fields := make([]arrow.Field, len(read))
	for k, i := range read {
		fields[k] = schema.Field(i)
	}
	return table.Conform(ctx, rec, arrow.NewSchema(fields, nil), mem)
}
