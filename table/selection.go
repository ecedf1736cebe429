package table

import (
	"context"
	"fmt"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/errs"
)

// Selection narrows a filtered read to the rows that may match its filter
// (a scalar index lookup, package index). It maps a fragment id to the
// sorted row offsets to read; a nil list reads the whole fragment, and a
// fragment absent from the map holds no row the filter keeps. The filter
// still runs over what is read: a selection only has to keep every row
// that could match, so answers are the same with or without it.
type Selection map[uint32][]uint32

// Fragments returns the fragments of m the selection reads, in manifest
// order.
func (s Selection) Fragments(m *Manifest) []Fragment {
	out := make([]Fragment, 0, len(s))
	for _, f := range m.Fragments {
		if rows, ok := s[f.ID]; ok && (rows == nil || len(rows) > 0) {
			out = append(out, f)
		}
	}
	return out
}

// RowSelector answers the Selection of filter over version m of t, or
// nil when it cannot narrow the read (no usable index). It must never
// leave out a row the filter keeps.
type RowSelector func(ctx context.Context, t *Table, m *Manifest, schema *arrow.Schema, filter string) (Selection, error)

// selectRows asks the catalog's selector (Indexes.Select); nil when there
// is none or it cannot narrow.
func (t *Table) selectRows(ctx context.Context, m *Manifest, schema *arrow.Schema, filter string) (Selection, error) {
	fn := t.c.Indexes().Select
	if fn == nil || filter == "" {
		return nil, nil
	}
	return fn(ctx, t, m, schema, filter)
}

// wholeFileBytes: a selected read of a data file up to this size reads
// it in one request.
const wholeFileBytes = 4 << 20

// readSelected reads the rows at offsets (sorted) of fragment f, fields
// as ReadFragment, decoding only the row groups that hold them. With
// rowAddr the records get a _rowaddr column of the rows' addresses
// (schema out).
func (t *Table) readSelected(ctx context.Context, f Fragment, fields []int, offsets []uint32, rowAddr bool, out *arrow.Schema, mem memory.Allocator) ([]arrow.RecordBatch, error) {
	if len(offsets) == 0 {
		return nil, nil
	}
	// A small file is read in one request; a larger one by ranges, so
	// only the column chunks of the row groups read are fetched.
	r, err := t.OpenFragment(ctx, f, FragmentReadOptions{Parallel: true, Mem: mem})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	// Row groups holding a selected row, and each selected row's position
	// among the rows of those groups.
	var groups []int
	local := make([]int64, 0, len(offsets))
	var start, kept int64
	j := 0
	for g, n := range r.RowGroups() {
		if j >= len(offsets) {
			break
		}
		if int64(offsets[j]) < start+n {
			groups = append(groups, g)
			for j < len(offsets) && int64(offsets[j]) < start+n {
				local = append(local, kept+int64(offsets[j])-start)
				j++
			}
			kept += n
		}
		start += n
	}
	if j < len(offsets) {
		return nil, &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("fragment %d (%s): row %d selected of %d", f.ID, f.Path, offsets[j], start)}
	}
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	if fields != nil && len(fields) == 0 {
		recs = append(recs, array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, int64(len(offsets))))
	} else if len(groups) > 0 {
		if recs, err = r.Read(ctx, fields, groups, 1<<16); err != nil {
			return nil, err
		}
		// Take each batch's selected rows (local is sorted), without
		// joining the batches first.
		cctx := compute.WithAllocator(ctx, mem)
		var taken []arrow.RecordBatch
		defer func() {
			for _, r := range taken {
				r.Release()
			}
		}()
		var base int64
		k := 0
		for _, r := range recs {
			end := base + r.NumRows()
			var idx []int64
			for k < len(local) && local[k] < end {
				idx = append(idx, local[k]-base)
				k++
			}
			base = end
			if len(idx) == 0 {
				continue
			}
			ib := array.NewInt64Builder(mem)
			ib.AppendValues(idx, nil)
			ia := ib.NewArray()
			ib.Release()
			tr, err := TakeRecord(cctx, r, ia)
			ia.Release()
			if err != nil {
				return nil, err
			}
			taken = append(taken, tr)
		}
		for _, r := range recs {
			r.Release()
		}
		recs = nil
		if len(taken) == 1 {
			recs, taken = taken, nil
		} else {
			one, err := ConcatBatches(taken, mem)
			if err != nil {
				return nil, err
			}
			recs = append(recs, one)
		}
	}
	if rowAddr {
		ab := array.NewUint64Builder(mem)
		ab.Reserve(len(offsets))
		for _, o := range offsets {
			ab.UnsafeAppend(RowAddress(f.ID, o))
		}
		addr := ab.NewArray()
		ab.Release()
		r := recs[0]
		cols := append(append([]arrow.Array(nil), r.Columns()...), addr)
		recs[0] = array.NewRecordBatch(out, cols, r.NumRows())
		addr.Release()
		r.Release()
	}
	res := recs
	recs = nil
	return res, nil
}

// ConcatBatches joins records of one schema into one (a single record is
// retained and returned). The caller releases the result.
func ConcatBatches(recs []arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	if len(recs) == 1 {
		recs[0].Retain()
		return recs[0], nil
	}
	schema := recs[0].Schema()
	cols := make([]arrow.Array, schema.NumFields())
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	for i := range cols {
		chunks := make([]arrow.Array, len(recs))
		for k, r := range recs {
			chunks[k] = r.Column(i)
		}
		c, err := array.Concatenate(chunks, mem)
		if err != nil {
			for _, c := range cols[:i] {
				c.Release()
			}
			return nil, err
		}
		cols[i] = c
	}
	rec := array.NewRecordBatch(schema, cols, n)
	for _, c := range cols {
		c.Release()
	}
	return rec, nil
}

// SortedOffsets sorts and dedups offsets in place.
func SortedOffsets(offsets []uint32) []uint32 {
	sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
	out := offsets[:0]
	for i, o := range offsets {
		if i == 0 || o != offsets[i-1] {
			out = append(out, o)
		}
	}
	return out
}

// IndexMaintainer brings a table's indexes up to date after this process
// committed version m (package index extends per-fragment indexes to the
// new fragments). It runs synchronously after the commit, before the
// commit hook, with a context not cancelled with the request; it must not
// fail the commit (it logs its own errors).
type IndexMaintainer func(ctx context.Context, t *Table, m *Manifest)
