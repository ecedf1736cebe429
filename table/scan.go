package table

import (
	"context"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/errs"
)

// ScanOptions select what Scan reads.
type ScanOptions struct {
	// Columns to read, in this order (nil: all). An unknown column is a
	// errs.CodeTableColumnNotFound error.
	Columns []string
	// Fragments to read, in this order (nil: all of the version).
	Fragments []Fragment
	// RowAddr appends a uint64 column _rowaddr = (fragment_id << 32) |
	// offset, the live offset (0..Rows-1) this package's readers, row
	// selections and indexes use.
	RowAddr bool
	// LanceRowAddr makes _rowaddr Lance's address instead: the offset is
	// the row's position in the data file, counting the rows its deletion
	// file hides (what LanceDB answers; see LanceRowAddrs). For answers
	// to users, never for addresses fed back into a Selection.
	LanceRowAddr bool
	// Prefetch is how many fragments are read ahead (default 2).
	Prefetch int
	// Rows, when set, reads only the listed rows of the fragments it
	// names (selection.go); a fragment it lists as nil is read whole.
	Rows Selection
}

// ProjectSchema returns the schema of a scan and the field indices read.
func ProjectSchema(schema *arrow.Schema, columns []string, rowAddr bool) (*arrow.Schema, []int, error) {
	var idx []int
	var fields []arrow.Field
	if columns == nil {
		fields = append(fields, schema.Fields()...)
	} else {
		idx = make([]int, 0, len(columns))
		for _, c := range columns {
			i := schema.FieldIndices(c)
			if len(i) == 0 {
				return nil, nil, errs.Errorf(errs.CodeTableColumnNotFound, "column %q not found", c)
			}
			idx = append(idx, i[0])
			fields = append(fields, schema.Field(i[0]))
		}
	}
	if rowAddr {
		fields = append(fields, arrow.Field{Name: RowAddrColumn, Type: arrow.PrimitiveTypes.Uint64})
	}
	return arrow.NewSchema(fields, nil), idx, nil
}

// Scan streams the rows of version m as records, fragment by fragment, in
// manifest order, reading ahead in the background. The caller must
// Release the reader.
func (t *Table) Scan(ctx context.Context, m *Manifest, opts ScanOptions) (array.RecordReader, error) {
	schema, err := m.ArrowSchema()
	if err != nil {
		return nil, err
	}
	out, idx, err := ProjectSchema(schema, opts.Columns, opts.RowAddr)
	if err != nil {
		return nil, err
	}
	// Files written under an older schema read as this version's.
	data := arrow.NewSchema(out.Fields()[:out.NumFields()-boolInt(opts.RowAddr)], nil)
	frags := opts.Fragments
	if frags == nil {
		frags = m.Fragments
	}
	if opts.Prefetch <= 0 {
		opts.Prefetch = 2
	}
	mem := t.c.opts.Mem
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan scanItem, opts.Prefetch)
	go func() {
		defer close(ch)
		for _, f := range frags {
			var recs []arrow.RecordBatch
			err := Recover("read fragment", func() (err error) {
				if rows := opts.Rows[f.ID]; rows != nil {
					recs, err = t.readSelected(ctx, f, idx, rows, opts.RowAddr, opts.LanceRowAddr, out, mem)
					return err
				}
				var pos []uint32 // data-file positions of the live rows
				if opts.RowAddr && opts.LanceRowAddr {
					if pos, err = t.livePositions(ctx, f); err != nil {
						return err
					}
				}
				recs, err = t.ReadFragment(ctx, f, idx, mem)
				if err == nil {
					recs, err = conformAll(ctx, recs, data, mem)
				}
				if err == nil && opts.RowAddr {
					recs = withRowAddr(recs, out, f.ID, pos, mem)
				}
				return err
			})
			select {
			case ch <- scanItem{recs, err}:
			case <-ctx.Done():
				for _, r := range recs {
					r.Release()
				}
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return &scanReader{schema: out, ch: ch, cancel: cancel, refs: 1}, nil
}

// RowAddrs returns the uint64 row addresses of n consecutive rows of
// fragment frag starting at offset off.
func RowAddrs(mem memory.Allocator, frag uint32, off uint64, n int) arrow.Array {
	b := array.NewUint64Builder(mem)
	defer b.Release()
	b.Reserve(n)
	base := RowAddress(frag, 0) | off
	for i := 0; i < n; i++ {
		b.UnsafeAppend(base + uint64(i))
	}
	return b.NewArray()
}

// withRowAddr appends _rowaddr to the records of a fragment read whole:
// live offsets, or the data-file positions pos[offset] when pos is set.
func withRowAddr(recs []arrow.RecordBatch, schema *arrow.Schema, frag uint32, pos []uint32, mem memory.Allocator) []arrow.RecordBatch {
	var off uint64
	out := make([]arrow.RecordBatch, 0, len(recs))
	for _, r := range recs {
		var addr arrow.Array
		if pos == nil {
			addr = RowAddrs(mem, frag, off, int(r.NumRows()))
		} else {
			b := array.NewUint64Builder(mem)
			b.Reserve(int(r.NumRows()))
			for _, p := range pos[off : off+uint64(r.NumRows())] {
				b.UnsafeAppend(RowAddress(frag, p))
			}
			addr = b.NewArray()
			b.Release()
		}
		off += uint64(r.NumRows())
		cols := append(append([]arrow.Array(nil), r.Columns()...), addr)
		out = append(out, array.NewRecordBatch(schema, cols, r.NumRows()))
		addr.Release()
		r.Release()
	}
	return out
}

type scanItem struct {
	recs []arrow.RecordBatch
	err  error
}

type scanReader struct {
	schema  *arrow.Schema
	ch      chan scanItem
	cancel  context.CancelFunc
	refs    int64
	pending []arrow.RecordBatch
	cur     arrow.RecordBatch
	err     error
}

func (r *scanReader) Retain()               { atomic.AddInt64(&r.refs, 1) }
func (r *scanReader) Schema() *arrow.Schema { return r.schema }
func (r *scanReader) RecordBatch() arrow.RecordBatch {
	return r.cur
}
func (r *scanReader) Record() arrow.RecordBatch { return r.cur }
func (r *scanReader) Err() error                { return r.err }

func (r *scanReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	for len(r.pending) == 0 {
		if r.err != nil {
			return false
		}
		it, ok := <-r.ch
		if !ok {
			return false
		}
		if it.err != nil {
			r.err = it.err
			return false
		}
		r.pending = it.recs
	}
	r.cur = r.pending[0]
	r.pending = r.pending[1:]
	return true
}

func (r *scanReader) Release() {
	if atomic.AddInt64(&r.refs, -1) != 0 {
		return
	}
	r.cancel()
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	for _, p := range r.pending {
		p.Release()
	}
	r.pending = nil
	for it := range r.ch {
		for _, p := range it.recs {
			p.Release()
		}
	}
}
