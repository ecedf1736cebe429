package vector

import (
	"context"
	"fmt"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// readRows answers rows (positions in data file f, any order, repeats
// allowed) of the given top-level fields, in the order of rows. Only the
// row groups holding them, and only those fields' column chunks, are read
// (a file over table.DefaultWholeFileBytes by ranged requests).
func readRows(ctx context.Context, t *table.Table, f table.Fragment, fields []int, rows []int64, mem memory.Allocator) (arrow.RecordBatch, error) {
	if len(fields) == 0 {
		return array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, int64(len(rows))), nil
	}
	r, err := t.OpenFragment(ctx, f, table.FragmentReadOptions{Mem: mem})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	unreadable := func(err error) error {
		return &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("fragment %d (%s) unreadable", f.ID, f.Path), Err: err}
	}
	// The row groups holding rows, and each row's position among the rows
	// of those groups read one after the other.
	sizes := r.RowGroups()
	ng := len(sizes)
	starts := make([]int64, ng+1)
	for i, n := range sizes {
		starts[i+1] = starts[i] + n
	}
	groupOf := func(r int64) int { return sort.Search(ng, func(g int) bool { return starts[g+1] > r }) }
	used := make([]bool, ng)
	for _, r := range rows {
		if r < 0 || r >= starts[ng] {
			return nil, unreadable(fmt.Errorf("row %d out of %d", r, starts[ng]))
		}
		used[groupOf(r)] = true
	}
	var groups []int
	skipped := make([]int64, ng) // rows of unread groups before group g
	var skip, batch int64
	for g := range ng {
		skipped[g] = skip
		if used[g] {
			groups = append(groups, g)
			batch = max(batch, starts[g+1]-starts[g])
		} else {
			skip += starts[g+1] - starts[g]
		}
	}
	recs, err := r.Read(ctx, fields, groups, batch)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	all, err := concat(recs, n, mem)
	if err != nil {
		return nil, unreadable(err)
	}
	defer all.Release()
	ib := array.NewInt64Builder(mem)
	defer ib.Release()
	for _, r := range rows {
		ib.Append(r - skipped[groupOf(r)])
	}
	take := ib.NewArray()
	defer take.Release()
	return table.TakeRecord(compute.WithAllocator(ctx, mem), all, take)
}
