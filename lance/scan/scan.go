// Package scan reads the rows of a Lance dataset version: each fragment's
// data files (a column may live in any of them, or in none: it reads as
// nulls), with its deleted rows left out, in LanceDB's scan order.
package scan

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/lance/dataset"
	"github.com/mvq-dev/mvq/lance/file"
	"github.com/mvq-dev/mvq/lance/pb/tablepb"
)

// Dataset calls fn with the live rows of each fragment of version d, in
// fragment order, rows in their order within the fragment (LanceDB's scan
// order). columns names top-level columns (nil: all, in schema order). fn
// must not keep the batch past its return without retaining it.
func Dataset(ctx context.Context, d *dataset.Dataset, columns []string, fn func(arrow.RecordBatch) error) error {
	for _, fr := range d.Fragments() {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := Fragment(ctx, d, fr, columns)
		if err != nil {
			return err
		}
		err = fn(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// topField is a top-level field of the dataset schema with its Lance id and
// the ids below it.
type topField struct {
	arrow arrow.Field
	id    int32
	ids   map[int32]bool // the field and its descendants
}

func topFields(d *dataset.Dataset, columns []string) ([]topField, *arrow.Schema, error) {
	sc, err := d.Schema()
	if err != nil {
		return nil, nil, err
	}
	fields := d.Manifest().GetFields()
	var tops []topField
	for _, f := range fields {
		if f.GetParentId() == -1 {
			tops = append(tops, topField{id: f.GetId(), ids: map[int32]bool{f.GetId(): true}})
		}
	}
	if len(tops) != sc.NumFields() {
		return nil, nil, corrupt("schema has %d top-level fields, Arrow %d", len(tops), sc.NumFields())
	}
	// Fields are stored parent first, so one pass marks every descendant.
	owner := map[int32]int{}
	for i, t := range tops {
		owner[t.id] = i
		tops[i].arrow = sc.Field(i)
	}
	for _, f := range fields {
		if p := f.GetParentId(); p != -1 {
			if i, ok := owner[p]; ok {
				owner[f.GetId()] = i
				tops[i].ids[f.GetId()] = true
			}
		}
	}
	if columns == nil {
		return tops, sc, nil
	}
	var out []topField
	var afs []arrow.Field
	for _, c := range columns {
		i := slices.IndexFunc(tops, func(t topField) bool { return t.arrow.Name == c })
		if i < 0 {
			return nil, nil, fmt.Errorf("no column %q", c)
		}
		out = append(out, tops[i])
		afs = append(afs, tops[i].arrow)
	}
	md := sc.Metadata()
	return out, arrow.NewSchema(afs, &md), nil
}

// fileColumn finds the data file of fr holding top-level field t and the
// index of that field among the file's top-level columns; ok is false when
// no file holds it.
func fileColumn(fr *tablepb.DataFragment, t topField, readers []*file.Reader) (fi, col int, ok bool, err error) {
	for fi, df := range fr.GetFiles() {
		var cols []int32
		for p, id := range df.GetFields() {
			if !t.ids[id] {
				continue
			}
			if len(df.GetColumnIndices()) == 0 {
				return 0, 0, false, fmt.Errorf("data file %s has no column indices (legacy layout)", df.GetPath())
			}
			if ci := df.GetColumnIndices()[p]; ci >= 0 {
				cols = append(cols, ci)
			}
		}
		if len(cols) == 0 {
			continue
		}
		r := readers[fi]
		for i := 0; i < r.Schema().NumFields(); i++ {
			for _, c := range r.ColumnIndexes(i) {
				if slices.Contains(cols, int32(c)) {
					return fi, i, true, nil
				}
			}
		}
		return 0, 0, false, corrupt("data file %s: columns %v of field %q are not in the file", df.GetPath(), cols, t.arrow.Name)
	}
	return 0, 0, false, nil
}

// Fragment returns the live rows of one fragment of d (deleted rows left
// out), with the dataset's names and types. A column no data file of the
// fragment holds reads as nulls.
func Fragment(ctx context.Context, d *dataset.Dataset, fr *tablepb.DataFragment, columns []string) (arrow.RecordBatch, error) {
	tops, sc, err := topFields(d, columns)
	if err != nil {
		return nil, err
	}
	readers := make([]*file.Reader, len(fr.GetFiles()))
	for i, df := range fr.GetFiles() {
		p, err := d.DataFilePath(df)
		if err != nil {
			return nil, err
		}
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		r, err := file.Open(f, st.Size())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		defer r.Close()
		if r.NumRows() != fr.GetPhysicalRows() {
			return nil, corrupt("data file %s has %d rows, fragment %d has %d", p, r.NumRows(), fr.GetId(), fr.GetPhysicalRows())
		}
		readers[i] = r
	}
	del, err := d.DeletedRows(fr)
	if err != nil {
		return nil, err
	}
	var live []uint64
	n := fr.GetPhysicalRows()
	if !del.IsEmpty() {
		live = make([]uint64, 0, n-del.GetCardinality())
		for off := uint64(0); off < n; off++ {
			if !del.Contains(uint32(off)) {
				live = append(live, off)
			}
		}
		n = uint64(len(live))
	}
	// Group the wanted columns by data file: one read per file.
	type want struct{ out, col int }
	byFile := map[int][]want{}
	arrs := make([]arrow.Array, len(tops))
	defer func() {
		for _, a := range arrs {
			if a != nil {
				a.Release()
			}
		}
	}()
	for i, t := range tops {
		fi, col, ok, err := fileColumn(fr, t, readers)
		if err != nil {
			return nil, err
		}
		if !ok {
			arrs[i] = array.MakeArrayOfNull(memory.DefaultAllocator, t.arrow.Type, int(n))
			continue
		}
		byFile[fi] = append(byFile[fi], want{i, col})
	}
	for fi, ws := range byFile {
		cols := make([]int, len(ws))
		for k, w := range ws {
			cols[k] = w.col
		}
		var rec arrow.RecordBatch
		if live == nil {
			rec, err = readers[fi].Read(ctx, cols, 0, n)
		} else {
			rec, err = readers[fi].Take(ctx, cols, live)
		}
		if err != nil {
			return nil, fmt.Errorf("fragment %d, %s: %w", fr.GetId(), fr.GetFiles()[fi].GetPath(), err)
		}
		for k, w := range ws {
			a := rec.Column(k)
			if !arrow.TypeEqual(a.DataType(), tops[w.out].arrow.Type) {
				rec.Release()
				return nil, corrupt("fragment %d: column %q is %s in %s, %s in the schema", fr.GetId(), tops[w.out].arrow.Name, a.DataType(), fr.GetFiles()[fi].GetPath(), tops[w.out].arrow.Type)
			}
			a.Retain()
			arrs[w.out] = a
		}
		rec.Release()
	}
	out := array.NewRecordBatch(sc, arrs, int64(n))
	return out, nil
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", dataset.ErrCorrupt, fmt.Sprintf(format, args...))
}
