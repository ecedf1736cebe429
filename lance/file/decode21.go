package file

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/mvq-dev/mvq/lance/pb/enc21pb"
)

// maxReadRows caps the rows one Read or Take decodes (callers read bigger
// files in batches), so that a file that declares absurd row counts for
// pages without data (all-null) cannot make the reader allocate without
// bound: what a read allocates is proportional to the rows asked or to
// bytes present in the file.
const maxReadRows = 1 << 24

// levelSlice is a run of whole rows of one leaf column decoded from one page:
// its levels (nil when the page has none), its layers, and its visible items.
type levelSlice struct {
	rep, def []uint16
	layers   []enc21pb.RepDefLayer
	vals     *vblock
	from, to int // the items of vals in the slice (when pieces is nil)
	pieces   []piece
}

func (s *levelSlice) items() []piece {
	if s.pieces != nil || s.vals == nil {
		return s.pieces
	}
	return []piece{{s.vals, s.from, s.to}}
}

// leafOut is a leaf column decoded over the asked rows: its layers
// (outermost first) and its visible items as pieces of decoded blocks.
type leafOut struct {
	layers []layerOut
	pieces []piece
}

type piece struct {
	b        *vblock
	from, to int
}

// readColumns21 decodes the given top-level columns over the sorted,
// disjoint row ranges, concatenated.
func (r *Reader) readColumns21(ctx context.Context, columns []int, ranges []rowRange) ([]arrow.Array, error) {
	var total uint64
	for _, rg := range ranges {
		total += rg.end - rg.start
	}
	if total > maxReadRows {
		return nil, fmt.Errorf("lance file: %d rows in one read, the limit is %d", total, maxReadRows)
	}
	if total == 0 {
		out := make([]arrow.Array, 0, len(columns))
		for _, c := range columns {
			out = append(out, array.MakeArrayOfNull(r.mem, r.tops[c].dt, 0))
		}
		return out, nil
	}
	return eachColumn(ctx, columns, func(c int) (arrow.Array, error) {
		top := r.tops[c]
		var leaves []leafOut
		var collect func(n *fieldNode) error
		collect = func(n *fieldNode) error {
			if n.column >= 0 {
				lo, err := r.decodeLeaf(ctx, n, ranges)
				if err != nil {
					return fmt.Errorf("column %q (file column %d): %w", n.f.GetName(), n.column, err)
				}
				leaves = append(leaves, lo)
				return nil
			}
			for _, ch := range n.children {
				if err := collect(ch); err != nil {
					return err
				}
			}
			return nil
		}
		if err := collect(top); err != nil {
			return nil, err
		}
		b := &arrowBuilder{mem: r.mem, keepFSST: r.keepFSST}
		arr, err := b.build(top, 0, leaves, int(total))
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", top.f.GetName(), err)
		}
		return arr, nil
	})
}

// eachColumn runs read for every column, up to GOMAXPROCS of them at once
// (a column's pages are independent of every other column's), and returns
// the arrays in the columns' order. On an error every array read is
// released and the first error (in column order) is returned.
func eachColumn(ctx context.Context, columns []int, read func(c int) (arrow.Array, error)) ([]arrow.Array, error) {
	out := make([]arrow.Array, len(columns))
	errs := make([]error, len(columns))
	workers := min(runtime.GOMAXPROCS(0), len(columns))
	if workers <= 1 {
		for i, c := range columns {
			if err := ctx.Err(); err != nil {
				releaseAll(out[:i])
				return nil, err
			}
			a, err := read(c)
			if err != nil {
				releaseAll(out[:i])
				return nil, err
			}
			out[i] = a
		}
		return out, nil
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(columns) {
					return
				}
				if errs[i] = ctx.Err(); errs[i] != nil {
					continue
				}
				out[i], errs[i] = read(columns[i])
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			for _, a := range out {
				if a != nil {
					a.Release()
				}
			}
			return nil, err
		}
	}
	return out, nil
}

// decodeLeaf decodes the asked rows of one leaf column, page by page.
func (r *Reader) decodeLeaf(ctx context.Context, n *fieldNode, ranges []rowRange) (leafOut, error) {
	if n.column >= len(r.c.Columns) {
		return leafOut{}, corruptf("no file column %d", n.column)
	}
	col := r.c.Columns[n.column]
	var slices []levelSlice
	var pageStart uint64
	ri := 0
	for pi := range col.Pages {
		p := &col.Pages[pi]
		pageEnd := pageStart + p.NumRows
		if pageEnd < pageStart {
			return leafOut{}, corruptf("page row counts overflow")
		}
		var local []rowRange
		for ri < len(ranges) && ranges[ri].start < pageEnd {
			rg := ranges[ri]
			s, e := max(rg.start, pageStart), min(rg.end, pageEnd)
			if s < e {
				local = append(local, rowRange{s - pageStart, e - pageStart})
			}
			if rg.end > pageEnd {
				break
			}
			ri++
		}
		if len(local) > 0 {
			if err := ctx.Err(); err != nil {
				return leafOut{}, err
			}
			var pl enc21pb.PageLayout
			if err := r.c.UnpackEncoding(p.Encoding, &pl); err != nil {
				return leafOut{}, fmt.Errorf("page %d: %w", pi, err)
			}
			got, err := r.decodePage(p, &pl, local)
			if err != nil {
				return leafOut{}, fmt.Errorf("page %d: %w", pi, err)
			}
			slices = append(slices, got...)
		}
		pageStart = pageEnd
		if ri >= len(ranges) {
			break
		}
	}
	var want uint64
	for _, rg := range ranges {
		want += rg.end - rg.start
	}
	if pageStart < ranges[len(ranges)-1].end && ri < len(ranges) {
		return leafOut{}, corruptf("column has %d rows in its pages, fewer than asked", pageStart)
	}
	return joinSlices(slices, n)
}

// joinSlices unravels every slice and concatenates the layers.
func joinSlices(slices []levelSlice, n *fieldNode) (leafOut, error) {
	var lo leafOut
	for si, s := range slices {
		if err := checkLayers(s.layers); err != nil {
			return lo, err
		}
		items := s.items()
		nitems := 0
		for _, pc := range items {
			nitems += pc.to - pc.from
		}
		outs, err := unravel(s.rep, s.def, s.layers, nitems)
		if err != nil {
			return lo, err
		}
		// Outermost first.
		for i, j := 0, len(outs)-1; i < j; i, j = i+1, j-1 {
			outs[i], outs[j] = outs[j], outs[i]
		}
		if si == 0 {
			lo.layers = outs
		} else {
			if len(outs) != len(lo.layers) {
				return lo, corruptf("pages of one column have %d and %d layers", len(lo.layers), len(outs))
			}
			for i := range outs {
				if err := lo.layers[i].appendLayer(outs[i]); err != nil {
					return lo, err
				}
			}
		}
		for _, pc := range items {
			if pc.to > pc.from {
				lo.pieces = append(lo.pieces, pc)
			}
		}
	}
	return lo, nil
}

func (l *layerOut) appendLayer(o layerOut) error {
	if l.list != o.list {
		return corruptf("pages of one column disagree on a list layer")
	}
	switch {
	case l.valid == nil && o.valid == nil:
	case l.valid == nil:
		v := make([]bool, l.n, l.n+o.n)
		for i := range v {
			v[i] = true
		}
		l.valid = append(v, o.valid...)
	case o.valid == nil:
		for i := 0; i < o.n; i++ {
			l.valid = append(l.valid, true)
		}
	default:
		l.valid = append(l.valid, o.valid...)
	}
	if l.list {
		base := l.offsets[len(l.offsets)-1]
		for _, off := range o.offsets[1:] {
			l.offsets = append(l.offsets, base+off)
		}
	}
	l.n += o.n
	return nil
}

// decodePage decodes the local row ranges of one page.
func (r *Reader) decodePage(p *PageInfo, pl *enc21pb.PageLayout, ranges []rowRange) ([]levelSlice, error) {
	switch l := pl.GetLayout().(type) {
	case *enc21pb.PageLayout_MiniBlockLayout:
		return r.decodeMiniBlockPage(p, l.MiniBlockLayout, ranges)
	case *enc21pb.PageLayout_FullZipLayout:
		return r.decodeFullZipPage(p, l.FullZipLayout, ranges)
	case *enc21pb.PageLayout_AllNullLayout:
		return r.decodeAllNullPage(p, l.AllNullLayout, ranges)
	case *enc21pb.PageLayout_BlobLayout:
		return r.decodeBlobPage(p, l.BlobLayout, ranges)
	}
	return nil, corruptf("page without a layout")
}

// sliceRows cuts whole rows [a, b) out of levels that start at a row
// boundary (or, with skipPreamble, after the first entries that finish a row
// begun earlier). It returns the level range and the visible item range.
func sliceRows(rep, def []uint16, mr, mvd uint16, skipPreamble bool, a, b uint64) (l0, l1, i0, i1 int, err error) {
	if rep == nil {
		// Rows are items (no lists): levels and items are 1:1.
		if b > uint64(len(def)) && def != nil {
			return 0, 0, 0, 0, corruptf("rows [%d, %d) past %d levels", a, b, len(def))
		}
		return int(a), int(b), int(a), int(b), nil
	}
	visible := func(i int) bool { return def == nil || def[i] <= mvd }
	pos, items := 0, 0
	if skipPreamble {
		for pos < len(rep) && rep[pos] != mr {
			if visible(pos) {
				items++
			}
			pos++
		}
	}
	seen := uint64(0)
	start, end := -1, len(rep)
	for ; pos < len(rep); pos++ {
		if rep[pos] == mr {
			if seen == a {
				start, i0 = pos, items
			}
			if seen == b {
				end = pos
				break
			}
			seen++
		}
		if visible(pos) {
			items++
		}
	}
	if start < 0 || seen < b {
		return 0, 0, 0, 0, corruptf("rows [%d, %d) not all found in %d levels (%d rows)", a, b, len(rep), seen)
	}
	return start, end, i0, items, nil
}
