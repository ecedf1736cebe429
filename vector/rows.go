package vector

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// wholeFileBytes: a data file up to this size is read in one request;
// a larger one is opened for ranged reads, so only the footer and the
// column chunks of the row groups holding hits are fetched.
const wholeFileBytes = 4 << 20

// readRows answers rows (positions in data file f, any order, repeats
// allowed) of the given top-level fields, in the order of rows. Only the
// row groups holding them, and only those fields' column chunks, are read.
func readRows(ctx context.Context, t *table.Table, f table.Fragment, fields []int, rows []int64, mem memory.Allocator) (arrow.RecordBatch, error) {
	if len(fields) == 0 {
		return array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, int64(len(rows))), nil
	}
	unreadable := func(err error) error {
		return &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("fragment %d (%s) unreadable", f.ID, f.Path), Err: err}
	}
	var src parquet.ReaderAtSeeker
	if f.Bytes > 0 && f.Bytes <= wholeFileBytes {
		data, err := t.Catalog().Warehouse().Read(ctx, t.Key(f.Path))
		if err != nil {
			return nil, unreadable(err)
		}
		src = bytes.NewReader(data)
	} else {
		r, err := t.Catalog().Warehouse().Open(ctx, t.Key(f.Path))
		if err != nil {
			return nil, unreadable(err)
		}
		defer r.Close()
		src = table.NewReaderAt(r, r.Size())
	}
	pf, err := file.NewParquetReader(src, file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		return nil, unreadable(err)
	}
	defer pf.Close()
	// The row groups holding rows, and each row's position among the rows
	// of those groups read one after the other.
	ng := pf.NumRowGroups()
	starts := make([]int64, ng+1)
	for i := range ng {
		starts[i+1] = starts[i] + pf.MetaData().RowGroup(i).NumRows()
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
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: max(batch, 1)}, mem)
	if err != nil {
		return nil, unreadable(err)
	}
	cols, err := f.FileFields(fields)
	if err != nil {
		return nil, err
	}
	rr, err := fr.GetRecordReader(ctx, table.LeafIndices(fr, cols), groups)
	if err != nil {
		return nil, unreadable(err)
	}
	defer rr.Release()
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	var n int64
	for rr.Next() {
		r := table.FromStorage(rr.RecordBatch(), mem)
		recs = append(recs, r)
		n += r.NumRows()
	}
	if err := rr.Err(); err != nil && err != io.EOF {
		return nil, unreadable(err)
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
