package datafile

import (
	"context"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/errs"
	lancefile "github.com/mvq-dev/mvq/lance/file"
	lschema "github.com/mvq-dev/mvq/lance/schema"
)

// Lance data files (data/*.lance, file format 2.1, package lance/file) are
// the table format LanceDB reads. A Lance file has no row groups: a Reader
// over one presents consecutive runs of LanceGroupRows rows as its row
// groups, so callers that stream a file group by group bound their memory
// the same way for both formats.

// LanceExt is the extension of a Lance data file.
const LanceExt = ".lance"

// WriteLance writes records (every one of schema) to w as one Lance 2.1
// data file and answers its rows and bytes. The file's fields get ids
// depth-first from 0, as lance/schema makes them; a manifest maps the
// table's field ids to the file's columns (column_indices), so the ids
// inside the file do not matter to readers.
func WriteLance(w io.Writer, schema *arrow.Schema, recs []arrow.RecordBatch) (rows, size int64, err error) {
	return WriteLanceVersion(w, schema, recs, lancefile.V2_1, nil)
}

// WriteLanceVersion is WriteLance in file format v (2.0 for a dataset
// created with that storage version), sharing trained FSST tables with
// the other files written with tables (nil: among the file's own pages
// only). The pages of a file then mostly share one table, so a chunker
// view over the file cuts every chunk's codes from its text's, whatever
// page boundaries its work items cross (lance/file CodeCutter), and the
// file trains once, not per page.
func WriteLanceVersion(w io.Writer, schema *arrow.Schema, recs []arrow.RecordBatch, v lancefile.Version, tables *lancefile.FSSTTables) (rows, size int64, err error) {
	if tables == nil {
		tables = lancefile.NewFSSTTables()
	}
	fields, err := lschema.FromArrow(schema)
	if err != nil {
		return 0, 0, errs.Errorf(errs.CodeSchemaValidation, "schema: %v", err)
	}
	cw := &countingWriter{w: w}
	fw, err := lancefile.NewWriter(cw, fields, lancefile.WriterOptions{Version: v, Schema: schema, FSST: tables})
	if err != nil {
		return 0, 0, err
	}
	for _, r := range recs {
		if r.NumRows() == 0 {
			continue
		}
		if !r.Schema().Equal(schema) {
			return 0, 0, errs.Errorf(errs.CodeSchemaValidation, "record schema %s does not match table schema %s", r.Schema(), schema)
		}
		for i, f := range schema.Fields() {
			if !f.Nullable && r.Column(i).NullN() > 0 {
				return 0, 0, errs.Errorf(errs.CodeInvalidInput, "column %q is not nullable but has %d nulls", f.Name, r.Column(i).NullN())
			}
		}
		if err := fw.Write(r); err != nil {
			return 0, 0, err
		}
		rows += r.NumRows()
	}
	if _, err := fw.Close(); err != nil {
		return 0, 0, err
	}
	return rows, cw.n, nil
}

// LanceWritable reports whether the Lance writer can hold every column of
// schema (it cannot, for example, hold a fixed-size list of strings); a
// table writes such data as Parquet.
func LanceWritable(schema *arrow.Schema) error {
	return LanceWritableVersion(schema, lancefile.V2_1)
}

// LanceWritableVersion is LanceWritable for file format v.
func LanceWritableVersion(schema *arrow.Schema, v lancefile.Version) error {
	fields, err := lschema.FromArrow(schema)
	if err != nil {
		return err
	}
	// Building a writer checks every column's type; it writes nothing.
	_, err = lancefile.NewWriter(io.Discard, fields, lancefile.WriterOptions{Version: v, Schema: schema})
	return err
}

// LanceGroupRows is the row count of a Lance file's virtual row groups.
const LanceGroupRows = 65536

// OpenLance reads the footer and schema of the Lance data file src of the
// given size; closer (nil: none) is closed with the reader, also when
// OpenLance fails.
func OpenLance(src io.ReaderAt, size int64, closer io.Closer, o Options) (*Reader, error) {
	r := &Reader{o: o, closer: closer}
	lr, err := lancefile.Open(src, size)
	if err != nil {
		r.Close()
		return nil, Fail(o.Label, "corrupt", err)
	}
	r.lf = lr
	if o.KeepFSST {
		lr.KeepFSST()
	}
	if o.Parts != nil {
		if err := r.place(); err != nil {
			r.Close()
			return nil, err
		}
	}
	if o.Deleted != nil && !o.Deleted.IsEmpty() {
		if int64(o.Deleted.Maximum()) >= int64(lr.NumRows()) {
			r.Close()
			return nil, Fail(o.Label, "corrupt", fmt.Errorf("deletion file deletes row %d of %d", o.Deleted.Maximum(), lr.NumRows()))
		}
		r.live = make([]uint64, 0, lr.NumRows()-o.Deleted.GetCardinality())
		for p := uint64(0); p < lr.NumRows(); p++ {
			if !o.Deleted.Contains(uint32(p)) {
				r.live = append(r.live, p)
			}
		}
	}
	n := r.lanceRows()
	for n > 0 {
		g := min(n, LanceGroupRows)
		r.groups = append(r.groups, g)
		n -= g
	}
	return r, nil
}

// lanceRows is the number of rows the reader presents: the live ones.
func (r *Reader) lanceRows() int64 {
	if r.live != nil {
		return int64(len(r.live))
	}
	return int64(r.lf.NumRows())
}

// lanceFields maps table fields to the file's top-level columns.
func (r *Reader) lanceFields(fields []int) ([]int, error) {
	if r.o.Fields == nil {
		return fields, nil
	}
	return r.o.Fields(fields)
}

// lanceRange reads rows [start, end) of the given table fields in
// batches of up to batch rows.
func (r *Reader) lanceRange(ctx context.Context, fields []int, start, end, batch int64) ([]arrow.RecordBatch, error) {
	if end > r.lanceRows() {
		return nil, r.fail("unreadable", fmt.Errorf("file has %d live rows, want rows [%d, %d)", r.lanceRows(), start, end))
	}
	if fields != nil && len(fields) == 0 {
		return []arrow.RecordBatch{array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, end-start)}, nil
	}
	cols, err := r.lanceFields(fields)
	if err != nil {
		return nil, err
	}
	if batch <= 0 {
		batch = LanceGroupRows
	}
	var out []arrow.RecordBatch
	for pos := start; pos < end; {
		if err := ctx.Err(); err != nil {
			release(out)
			return nil, err
		}
		next := min(end, pos+batch)
		var rec arrow.RecordBatch
		switch {
		case r.parts != nil:
			rec, err = r.readParts(ctx, cols, pos, next)
		case r.live != nil:
			rec, err = r.lf.Take(ctx, cols, r.live[pos:next])
		default:
			rec, err = r.lf.Read(ctx, cols, uint64(pos), uint64(next))
		}
		if err != nil {
			release(out)
			return nil, r.decodeFail(err)
		}
		out = append(out, rec)
		pos = next
	}
	return out, nil
}

// lanceGroups reads the given virtual row groups (nil: all).
func (r *Reader) lanceGroups(ctx context.Context, fields, groups []int, batch int64) ([]arrow.RecordBatch, error) {
	if groups == nil {
		return r.lanceRange(ctx, fields, 0, r.lanceRows(), batch)
	}
	var out []arrow.RecordBatch
	for _, g := range groups {
		if g < 0 || g >= len(r.groups) {
			release(out)
			return nil, r.fail("unreadable", fmt.Errorf("row group %d of %d", g, len(r.groups)))
		}
		start := int64(g) * LanceGroupRows
		recs, err := r.lanceRange(ctx, fields, start, start+r.groups[g], batch)
		if err != nil {
			release(out)
			return nil, err
		}
		out = append(out, recs...)
	}
	return out, nil
}

func release(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// placed is a virtual column of a fragment of several files: the file
// (0: the reader's own, k: more[k-1], -1: none) and its top-level column.
type placed struct {
	file, col int
}

// place opens the fragment's other files and finds the top-level column
// of each part: the one of its file that holds the part's first leaf.
func (r *Reader) place() error {
	for i, s := range r.o.More {
		lr, err := lancefile.Open(s.Src, s.Size)
		if err != nil {
			return Fail(r.o.Label, "corrupt", fmt.Errorf("data file %d: %w", i+1, err))
		}
		if lr.NumRows() != r.lf.NumRows() {
			return Fail(r.o.Label, "corrupt", fmt.Errorf("data file %d has %d rows, the first %d", i+1, lr.NumRows(), r.lf.NumRows()))
		}
		if r.o.KeepFSST {
			lr.KeepFSST()
		}
		r.more = append(r.more, lr)
	}
	r.parts = make([]placed, len(r.o.Parts))
	for i, p := range r.o.Parts {
		if p.File < 0 {
			r.parts[i] = placed{-1, -1}
			continue
		}
		if p.File > len(r.more) {
			return Fail(r.o.Label, "corrupt", fmt.Errorf("column %d is in data file %d of %d", i, p.File, len(r.more)+1))
		}
		lr := r.file(p.File)
		col := -1
		for c := 0; c < lr.Schema().NumFields() && col < 0; c++ {
			for _, x := range lr.ColumnIndexes(c) {
				if x == int(p.Start) {
					col = c
					break
				}
			}
		}
		if col < 0 {
			return Fail(r.o.Label, "corrupt", fmt.Errorf("data file %d has no column %d", p.File, p.Start))
		}
		r.parts[i] = placed{p.File, col}
	}
	return nil
}

func (r *Reader) file(k int) *lancefile.Reader {
	if k == 0 {
		return r.lf
	}
	return r.more[k-1]
}

// readParts reads live rows [pos, next) of virtual columns cols (nil:
// all) from the files that hold them, one read per file; a column in no
// file is nulls of Arrow's null type (Conform casts it to the field's).
func (r *Reader) readParts(ctx context.Context, cols []int, pos, next int64) (arrow.RecordBatch, error) {
	if cols == nil {
		cols = make([]int, len(r.parts))
		for i := range cols {
			cols[i] = i
		}
	}
	n := next - pos
	arrs := make([]arrow.Array, len(cols))
	fields := make([]arrow.Field, len(cols))
	defer func() {
		for _, a := range arrs {
			if a != nil {
				a.Release()
			}
		}
	}()
	byFile := map[int][]int{} // file -> positions in cols
	for i, c := range cols {
		if c < 0 || c >= len(r.parts) {
			return nil, fmt.Errorf("column %d of %d", c, len(r.parts))
		}
		if p := r.parts[c]; p.file >= 0 {
			byFile[p.file] = append(byFile[p.file], i)
			continue
		}
		mem := r.o.Mem
		if mem == nil {
			mem = memory.DefaultAllocator
		}
		arrs[i] = array.MakeArrayOfNull(mem, arrow.Null, int(n))
		fields[i] = arrow.Field{Name: fmt.Sprintf("column_%d", c), Type: arrow.Null, Nullable: true}
	}
	for k, at := range byFile {
		fc := make([]int, len(at))
		for j, i := range at {
			fc[j] = r.parts[cols[i]].col
		}
		var rec arrow.RecordBatch
		var err error
		if r.live != nil {
			rec, err = r.file(k).Take(ctx, fc, r.live[pos:next])
		} else {
			rec, err = r.file(k).Read(ctx, fc, uint64(pos), uint64(next))
		}
		if err != nil {
			return nil, err
		}
		for j, i := range at {
			a := rec.Column(j)
			a.Retain()
			arrs[i] = a
			fields[i] = rec.Schema().Field(j)
		}
		rec.Release()
	}
	out := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, n)
	return out, nil
}

// CheckFields checks, from the file's metadata alone (nothing decoded),
// that a Lance file has a column for each of the given table fields,
// mapped through Options.Fields (and, for a fragment of several files,
// its parts, each found when the file was opened). A Parquet file is not
// checked: its reads answer for it.
func (r *Reader) CheckFields(fields []int) error {
	if r.lf == nil {
		return nil
	}
	cols, err := r.lanceFields(fields)
	if err != nil {
		return err
	}
	n := r.lf.Schema().NumFields()
	if r.parts != nil {
		n = len(r.parts)
	}
	for k, c := range cols {
		if c < 0 || c >= n {
			return r.fail("corrupt", fmt.Errorf("field %d is column %d; the file has %d", fields[k], c, n))
		}
	}
	return nil
}
