package table

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/table/internal/records"
)

// The record helpers other packages use (table/internal/records).

// Conform returns rec with exactly schema: columns matched by position,
// cast with safe casts, nulls checked (records.Conform). rec is not
// released.
func Conform(ctx context.Context, rec arrow.RecordBatch, schema *arrow.Schema, mem memory.Allocator) (arrow.RecordBatch, error) {
	return records.Conform(ctx, rec, schema, mem)
}

// TakeRecord returns the rows of rec at the indices idx, in that order
// (records.TakeRecord).
func TakeRecord(ctx context.Context, rec arrow.RecordBatch, idx arrow.Array) (arrow.RecordBatch, error) {
	return records.TakeRecord(ctx, rec, idx)
}

// ConcatBatches joins records of one schema into one (records.ConcatBatches).
func ConcatBatches(recs []arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	return records.ConcatBatches(recs, mem)
}

// SortedOffsets sorts and dedups offsets in place.
func SortedOffsets(offsets []uint32) []uint32 { return records.SortedOffsets(offsets) }
