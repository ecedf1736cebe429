package iceberg

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// deletedPositions finds which positions of a data file its deletes
// removed: all are the file's rows in order with no delete applied, kept
// the rows the deletes left, in the same order (deletes only drop rows).
// Each kept row is matched to the first row of all at or after the
// previous match that equals it; the rows skipped are the deleted ones,
// answered as sorted [lo, hi) pairs. Of equal rows, which one keeps its
// position cannot be told from their values, and does not change what
// the rows hold. ok is false when kept is not a subsequence of all or
// the file is too long to number (then no position is known).
func deletedPositions(all, kept []arrow.RecordBatch) (deleted []uint32, ok bool) {
	var total int64
	for _, r := range all {
		total += r.NumRows()
	}
	if total > math.MaxUint32 {
		return nil, false
	}
	var (
		ai, ar int   // row ar of all[ai]
		pos    int64 // its position in the file
	)
	del := func(lo, hi int64) {
		if lo == hi {
			return
		}
		if n := len(deleted); n > 0 && int64(deleted[n-1]) == lo {
			deleted[n-1] = uint32(hi)
			return
		}
		deleted = append(deleted, uint32(lo), uint32(hi))
	}
	for _, k := range kept {
		for kr := 0; kr < int(k.NumRows()); kr++ {
			from := pos
			for {
				if ai == len(all) {
					return nil, false
				}
				if ar == int(all[ai].NumRows()) {
					ai, ar = ai+1, 0
					continue
				}
				if sameRow(all[ai], ar, k, kr) {
					break
				}
				ar++
				pos++
			}
			del(from, pos)
			ar++
			pos++
		}
	}
	del(pos, total)
	return deleted, true
}

// sameRow reports whether row i of a equals row j of b, column by column.
func sameRow(a arrow.RecordBatch, i int, b arrow.RecordBatch, j int) bool {
	if a.NumCols() != b.NumCols() {
		return false
	}
	for c := 0; c < int(a.NumCols()); c++ {
		if !array.SliceEqual(a.Column(c), int64(i), int64(i+1), b.Column(c), int64(j), int64(j+1)) {
			return false
		}
	}
	return true
}
