// Package datafile is the Parquet layer of table data files: writing
// records as a file (with the storage types a file holds and the writer
// properties every data file has) and reading a file's row groups, chosen
// columns or a row range back in the table's types. The table package
// fetches the bytes and maps a version's fields to a file's columns; this
// package knows nothing of manifests.
package datafile

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/mvq-dev/mvq/errs"
	lancefile "github.com/mvq-dev/mvq/lance/file"
	"github.com/mvq-dev/mvq/table/internal/records"
)

// Options tunes how a Reader decodes a file.
type Options struct {
	// Buffered reads column chunks through a 1 MiB buffered stream instead
	// of whole (bounds memory on large row groups read in small batches).
	Buffered bool
	// Parallel decodes the columns of a batch concurrently.
	Parallel bool
	// Label names the file in the reader's errors ("t fragment 3 (data/x)").
	Label string
	// Mem allocates Arrow buffers.
	Mem memory.Allocator
	// KeepFSST keeps the FSST codes of a Lance file's strings beside the
	// arrays read (lance/file Reader.KeepFSST).
	KeepFSST bool
	// Fields maps top-level fields of the table (nil: all) to those of the
	// file (nil: the same).
	Fields func(fields []int) ([]int, error)
	// Deleted, for a Lance file, are positions of its rows to leave out:
	// the reader then presents the live rows only, as rows 0, 1, …
	Deleted *roaring.Bitmap
	// Parts, for a Lance fragment whose columns are not its file's in
	// order or live in several files, places each of its virtual columns
	// (the columns Fields maps to): Part.File 0 is this file, k > 0 is
	// More[k-1], -1 is none (the column reads as nulls).
	Parts []Part
	// More are the fragment's other Lance data files.
	More []Source
}

// Part is where a virtual column of a fragment is: the data file and the
// file column of its first leaf.
type Part struct {
	File  int
	Start int32
}

// Source is a Lance data file to open: its bytes and size, and what to
// close with the reader (nil: nothing).
type Source struct {
	Src    io.ReaderAt
	Size   int64
	Closer io.Closer
}

// Reader reads one data file: its row groups, and the records of chosen
// columns over chosen row groups or a row range, in the table's (not the
// file's storage) types. Every error it returns is an invalid-table-state
// error naming the file. Close it when done; it is not safe for
// concurrent use.
type Reader struct {
	o      Options
	pf     *file.Reader
	lf     *lancefile.Reader // a Lance data file instead (lance.go)
	more   []*lancefile.Reader
	parts  []placed // with Options.Parts: each virtual column's file and top-level column
	live   []uint64 // with Options.Deleted: the positions of the live rows
	closer io.Closer
	groups []int64 // rows of each row group
}

// Open reads the footer of a data file from src; closer (nil: none) is
// closed with the reader, also when Open fails.
func Open(src parquet.ReaderAtSeeker, closer io.Closer, o Options) (*Reader, error) {
	r := &Reader{o: o, closer: closer}
	props := parquet.NewReaderProperties(o.Mem)
	if o.Buffered {
		props.BufferedStreamEnabled = true
		props.BufferSize = 1 << 20
	}
	pf, err := file.NewParquetReader(src, file.WithReadProps(props))
	if err != nil {
		r.Close()
		return nil, Fail(o.Label, "corrupt", err)
	}
	r.pf = pf
	r.groups = make([]int64, pf.NumRowGroups())
	for i := range r.groups {
		r.groups[i] = pf.MetaData().RowGroup(i).NumRows()
	}
	return r, nil
}

// Fail is an error of opening the file label names: one the store cannot
// read, or that is not Parquet, leaves the table in an invalid state (no
// retry mends a missing or torn file); a cancelled context stays what it
// is.
func Fail(label, what string, err error) error {
	msg := label + " " + what
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", msg, err)
	}
	return &errs.Error{Code: errs.CodeInvalidTableState, Message: msg, Err: err}
}

func (r *Reader) fail(what string, err error) error { return Fail(r.o.Label, what, err) }

// decodeFail is an error while decoding an opened file: it keeps the code
// it has, or none (the worker retries it), as a decode that stopped half
// way may be the store's passing trouble.
func (r *Reader) decodeFail(err error) error {
	return fmt.Errorf("%s unreadable: %w", r.o.Label, err)
}

// Close releases the file.
func (r *Reader) Close() error {
	var err error
	if r.pf != nil {
		err = r.pf.Close()
		r.pf = nil
	}
	if r.closer != nil {
		if cerr := r.closer.Close(); err == nil {
			err = cerr
		}
		r.closer = nil
	}
	if cerr := CloseSources(r.o.More); err == nil {
		err = cerr
	}
	r.o.More = nil
	return err
}

// CloseSources closes what each source holds open, answering the first
// error.
func CloseSources(srcs []Source) error {
	var err error
	for _, s := range srcs {
		if s.Closer != nil {
			if cerr := s.Closer.Close(); err == nil {
				err = cerr
			}
		}
	}
	return err
}

// RowGroups answers the row count of each row group, in file order (the
// caller must not change it).
func (r *Reader) RowGroups() []int64 { return r.groups }

// NumRows answers the rows of the file.
func (r *Reader) NumRows() int64 {
	if r.lf != nil {
		return r.lanceRows()
	}
	return r.pf.NumRows()
}

// records answers a reader of the given top-level fields of the table
// (nil: all; mapped through Options.Fields) over the given row groups
// (nil: all), in batches of up to batch rows.
func (r *Reader) records(ctx context.Context, fields, groups []int, batch int64) (pqarrow.RecordReader, error) {
	cols := fields
	if r.o.Fields != nil {
		var err error
		if cols, err = r.o.Fields(fields); err != nil {
			return nil, err
		}
	}
	fr, err := pqarrow.NewFileReader(r.pf, pqarrow.ArrowReadProperties{Parallel: r.o.Parallel, BatchSize: max(batch, 1)}, r.o.Mem)
	if err != nil {
		return nil, r.decodeFail(err)
	}
	rr, err := fr.GetRecordReader(ctx, leafIndices(fr, cols), groups)
	if err != nil {
		return nil, r.decodeFail(err)
	}
	return rr, nil
}

// Read answers the records of the given top-level fields (nil: all;
// empty: no columns, one record of the row count) of the given row
// groups (nil: all), in batches of up to batch rows. The caller releases
// them.
func (r *Reader) Read(ctx context.Context, fields, groups []int, batch int64) ([]arrow.RecordBatch, error) {
	if r.lf != nil {
		return r.lanceGroups(ctx, fields, groups, batch)
	}
	if fields != nil && len(fields) == 0 {
		n := r.pf.NumRows()
		if groups != nil {
			n = 0
			for _, g := range groups {
				n += r.groups[g]
			}
		}
		return []arrow.RecordBatch{array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, n)}, nil
	}
	rr, err := r.records(ctx, fields, groups, batch)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	var out []arrow.RecordBatch
	for rr.Next() {
		out = append(out, FromStorage(rr.RecordBatch(), r.o.Mem))
	}
	if err := rr.Err(); err != nil && err != io.EOF {
		for _, rec := range out {
			rec.Release()
		}
		return nil, r.decodeFail(err)
	}
	return out, nil
}

// ReadRange answers rows [start, end) of the given top-level fields (as
// Read), decoding only the row groups that hold them and skipping the
// pages before start, in batches of up to batch rows. The caller releases
// them.
func (r *Reader) ReadRange(ctx context.Context, fields []int, start, end, batch int64) ([]arrow.RecordBatch, error) {
	if end <= start {
		return nil, nil
	}
	if r.lf != nil {
		return r.lanceRange(ctx, fields, start, end, batch)
	}
	var groups []int
	first, pos := int64(-1), int64(0)
	for i, n := range r.groups {
		if pos < end && pos+n > start {
			if first < 0 {
				first = pos
			}
			groups = append(groups, i)
		}
		pos += n
	}
	if pos < end {
		return nil, r.fail("unreadable", fmt.Errorf("file has %d rows, want rows [%d, %d)", pos, start, end))
	}
	rr, err := r.records(ctx, fields, groups, batch)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	if start > first {
		if err := rr.SeekToRow(start - first); err != nil {
			return nil, r.decodeFail(err)
		}
	}
	var out []arrow.RecordBatch
	for need := end - start; need > 0; {
		if !rr.Next() {
			for _, rec := range out {
				rec.Release()
			}
			if err := rr.Err(); err != nil && err != io.EOF {
				return nil, r.decodeFail(err)
			}
			return nil, r.fail("unreadable", fmt.Errorf("short read of rows [%d, %d)", start, end))
		}
		rec := rr.RecordBatch()
		n := min(rec.NumRows(), need)
		s := rec.NewSlice(0, n)
		out = append(out, FromStorage(s, r.o.Mem))
		s.Release()
		need -= n
	}
	return out, nil
}

// leafIndices returns the Parquet leaf columns of the given top-level
// file fields (nil: all), as pqarrow's column selection wants them.
func leafIndices(fr *pqarrow.FileReader, fields []int) []int {
	if fields == nil {
		return nil
	}
	var out []int
	var walk func(f *pqarrow.SchemaField)
	walk = func(f *pqarrow.SchemaField) {
		if f.IsLeaf() {
			out = append(out, f.ColIndex)
			return
		}
		for i := range f.Children {
			walk(&f.Children[i])
		}
	}
	for _, i := range fields {
		walk(&fr.Manifest.Fields[i])
	}
	return out
}

// ReadRows reads the rows at offsets (sorted) of the file, fields as Read,
// decoding only the row groups that hold them. The caller releases them.
func (fr *Reader) ReadRows(ctx context.Context, fields []int, offsets []uint32, mem memory.Allocator) ([]arrow.RecordBatch, error) {
	var err error
	// Row groups holding a selected row, and each selected row's position
	// among the rows of those groups.
	var groups []int
	local := make([]int64, 0, len(offsets))
	var start, kept int64
	j := 0
	for g, n := range fr.groups {
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
		return nil, &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("%s: row %d selected of %d", fr.o.Label, offsets[j], start)}
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
		if recs, err = fr.Read(ctx, fields, groups, 1<<16); err != nil {
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
			tr, err := records.TakeRecord(cctx, r, ia)
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
			one, err := records.ConcatBatches(taken, mem)
			if err != nil {
				return nil, err
			}
			recs = append(recs, one)
		}
	}
	res := recs
	recs = nil
	return res, nil
}
