package records

import (
	"context"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TakeRecord returns the rows of rec at the indices idx, in that order
// (compute.TakeArray over every column; the allocator is ctx's).
func TakeRecord(ctx context.Context, rec arrow.RecordBatch, idx arrow.Array) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range cols {
		c, err := compute.TakeArray(ctx, rec.Column(i), idx)
		if err != nil {
			return nil, err
		}
		cols[i] = c
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(idx.Len())), nil
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

// MergeFragment is target with the rows at off replaced by the input rows
// src (pairwise) and the rows at del removed, in target order.
func MergeFragment(ctx context.Context, target, source arrow.RecordBatch, off []uint32, src []int32, del []uint32) (arrow.RecordBatch, error) {
	si := make([]int64, len(src))
	for i, s := range src {
		si[i] = int64(s)
	}
	upd, err := TakeRows(ctx, source, si)
	if err != nil {
		return nil, err
	}
	both, err := Concat(compute.GetAllocator(ctx), target.Schema(), []arrow.RecordBatch{target, upd})
	upd.Release()
	if err != nil {
		return nil, err
	}
	defer both.Release()
	n := target.NumRows()
	idx := make([]int64, 0, n)
	oi, di := 0, 0
	for row := range uint32(n) {
		switch {
		case di < len(del) && del[di] == row:
			di++
		case oi < len(off) && off[oi] == row:
			idx = append(idx, n+int64(oi))
			oi++
		default:
			idx = append(idx, int64(row))
		}
	}
	return TakeRows(ctx, both, idx)
}

// TakeRows is TakeRecord with int64 indices.
func TakeRows(ctx context.Context, rec arrow.RecordBatch, idx []int64) (arrow.RecordBatch, error) {
	b := array.NewInt64Builder(compute.GetAllocator(ctx))
	b.AppendValues(idx, nil)
	ia := b.NewArray()
	b.Release()
	defer ia.Release()
	return TakeRecord(ctx, rec, ia)
}

// Concat concatenates recs (all of schema) into one batch that
// carries schema itself, not the records' (a fragment's fields carry
// Parquet metadata the table schema has not).
func Concat(mem memory.Allocator, schema *arrow.Schema, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(recs) == 0 {
		cols := make([]arrow.Array, schema.NumFields())
		for i := range cols {
			cols[i] = array.MakeArrayOfNull(mem, schema.Field(i).Type, 0)
			defer cols[i].Release()
		}
		return array.NewRecordBatch(schema, cols, 0), nil
	}
	all, err := ConcatBatches(recs, mem)
	if err != nil {
		return nil, err
	}
	defer all.Release()
	return array.NewRecordBatch(schema, all.Columns(), all.NumRows()), nil
}
