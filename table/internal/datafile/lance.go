package datafile

import (
	"context"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

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
// the other files written with tables (nil: none).
func WriteLanceVersion(w io.Writer, schema *arrow.Schema, recs []arrow.RecordBatch, v lancefile.Version, tables *lancefile.FSSTTables) (rows, size int64, err error) {
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
		if r.live != nil {
			rec, err = r.lf.Take(ctx, cols, r.live[pos:next])
		} else {
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
