package table

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
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
// (schema out): live offsets, or with lanceAddr the rows' positions in
// the data file (physicalRows, for the selected rows only).
func (t *Table) readSelected(ctx context.Context, f Fragment, fields []int, offsets []uint32, rowAddr, lanceAddr bool, out *arrow.Schema, mem memory.Allocator) ([]arrow.RecordBatch, error) {
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
	recs, err := r.ReadRows(ctx, fields, offsets, mem)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	if rowAddr {
		addrs := offsets
		if lanceAddr {
			del, err := t.Deleted(ctx, f)
			if err != nil {
				return nil, err
			}
			if del != nil {
				addrs = physicalRows(del, offsets).ToArray() // ascending, as offsets
			}
		}
		ab := array.NewUint64Builder(mem)
		ab.Reserve(len(addrs))
		for _, o := range addrs {
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

// IndexMaintainer brings a table's indexes up to date after this process
// committed version m (package index extends per-fragment indexes to the
// new fragments). It runs synchronously after the commit, before the
// commit hook, with a context not cancelled with the request; it must not
// fail the commit (it logs its own errors).
type IndexMaintainer func(ctx context.Context, t *Table, m *Manifest)
