package vector

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/table"
)

// Candidates narrows a search to some rows of each fragment: an IVF
// index answers the rows of the partitions a query probes (package
// index). ok=false means the index does not cover f: every row of f is
// scored.
type Candidates interface {
	Rows(ctx context.Context, f table.Fragment) (rows []uint32, ok bool, err error)
}

// FragmentVectors answers the vectors of column col (dim floats each) of
// fragment f, flat, and which rows are non-null (nil: all), from the
// process-wide cache of decoded vectors. The slices are shared: do not
// change them.
func FragmentVectors(ctx context.Context, t *table.Table, f table.Fragment, col, dim int) ([]float32, []bool, error) {
	vs, err := fragmentVectors(ctx, t, f, col, dim, t.Catalog().Options().Mem)
	if err != nil {
		return nil, nil, err
	}
	return vs.flat, vs.valid, nil
}

// SquaredL2 is the squared Euclidean distance of a and b (len(b) ≥ len(a)).
func SquaredL2(a, b []float32) float32 { return l2(a, b) }

// InnerProduct is the inner product of a and b (len(b) ≥ len(a)).
func InnerProduct(a, b []float32) float32 { return dot(a, b) }

// scanRows offers rows of vs, at addresses base+row, to h.
func (s *scorer) scanRows(vs *vectors, base uint64, rows []uint32, h *topK) {
	dim := vs.dim
	bound := h.bound()
	for _, r := range rows {
		i := int(r)
		if i >= vs.rows() || vs.valid != nil && !vs.valid[i] {
			continue
		}
		d := s.distance(vs.flat[i*dim : i*dim+dim])
		if d <= bound && s.keep(d) {
			h.offer(d, base+uint64(i))
			bound = h.bound()
		}
	}
}

// allowed answers, per fragment, which rows the index lets a filtered
// search score (nil: every row).
type allowed struct {
	c     Candidates
	frags map[uint32]table.Fragment
	sets  map[uint32]map[uint32]bool
	whole map[uint32]bool
}

func newAllowed(c Candidates, m *table.Manifest) *allowed {
	a := &allowed{c: c, frags: map[uint32]table.Fragment{}, sets: map[uint32]map[uint32]bool{}, whole: map[uint32]bool{}}
	for _, f := range m.Fragments {
		a.frags[f.ID] = f
	}
	return a
}

func (a *allowed) ok(ctx context.Context, addr uint64) (bool, error) {
	fid := uint32(addr >> 32)
	if a.whole[fid] {
		return true, nil
	}
	set, seen := a.sets[fid]
	if !seen {
		rows, covered, err := a.c.Rows(ctx, a.frags[fid])
		if err != nil {
			return false, err
		}
		if !covered {
			a.whole[fid] = true
			return true, nil
		}
		set = make(map[uint32]bool, len(rows))
		for _, r := range rows {
			set[r] = true
		}
		a.sets[fid] = set
	}
	return set[uint32(addr)], nil
}

// postfilter keeps the hits whose rows satisfy filter, in order.
func postfilter(ctx context.Context, t *table.Table, m *table.Manifest, filter string, hits []hit) ([]hit, error) {
	if len(hits) == 0 {
		return hits, nil
	}
	sel := table.Selection{}
	for _, h := range hits {
		fid := uint32(h.addr >> 32)
		sel[fid] = append(sel[fid], uint32(h.addr))
	}
	for fid, rows := range sel {
		sel[fid] = table.SortedOffsets(rows)
	}
	rdr, err := t.Query(ctx, table.QueryOptions{Version: m.Version, Columns: []string{}, Filter: filter, RowAddr: true, Rows: sel})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	keep := map[uint64]bool{}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for _, a := range rec.Column(int(rec.NumCols()) - 1).(*array.Uint64).Uint64Values() {
			keep[a] = true
		}
	}
	if err := rdr.Err(); err != nil {
		return nil, err
	}
	out := hits[:0:0]
	for _, h := range hits {
		if keep[h.addr] {
			out = append(out, h)
		}
	}
	return out, nil
}

var _ = memory.DefaultAllocator

// keep narrows a batch of filtered rows to those the index allows.
func (a *allowed) keep(ctx context.Context, vs *vectors, addrs []uint64) (*vectors, []uint64, error) {
	out := &vectors{dim: vs.dim}
	var outAddrs []uint64
	for i, addr := range addrs {
		ok, err := a.ok(ctx, addr)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			continue
		}
		out.flat = append(out.flat, vs.flat[i*vs.dim:(i+1)*vs.dim]...)
		if vs.valid != nil {
			out.valid = append(out.valid, vs.valid[i])
		}
		outAddrs = append(outAddrs, addr)
	}
	if vs.valid != nil && out.valid == nil {
		out.valid = []bool{}
	}
	return out, outAddrs, nil
}
