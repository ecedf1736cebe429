package scan

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
	"github.com/mvq-dev/mvq/lance/dataset"
	"github.com/mvq-dev/mvq/lance/file"
	"github.com/mvq-dev/mvq/lance/pb/tablepb"
	"github.com/mvq-dev/mvq/lance/schema"
)

// checkScan compares the Go scan of every version of dir with LanceDB's
// read of it: same columns, same rows in the same order.
func checkScan(t *testing.T, o *oracle.Oracle, dir string) {
	t.Helper()
	vs, err := dataset.ListVersions(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, vf := range vs {
		d, err := dataset.OpenVersion(dir, vf.Version)
		if err != nil {
			t.Fatal(err)
		}
		var recs []arrow.RecordBatch
		err = Dataset(context.Background(), d, nil, func(r arrow.RecordBatch) error {
			r.Retain()
			recs = append(recs, r)
			return nil
		})
		if err != nil {
			t.Fatalf("version %d: %v", vf.Version, err)
		}
		sc, _ := d.Schema()
		got := array.NewTableFromRecords(sc, recs)
		for _, r := range recs {
			r.Release()
		}
		want := o.Read(t, dir, oracle.ReadOpts{At: vf.Version})
		if got.NumRows() != want.NumRows() || got.NumCols() != want.NumCols() {
			t.Errorf("version %d: Go scans %dx%d, LanceDB reads %dx%d", vf.Version, got.NumRows(), got.NumCols(), want.NumRows(), want.NumCols())
		} else {
			for c := 0; c < int(want.NumCols()); c++ {
				g, w := concat(t, got, c), concat(t, want, c)
				if got.Schema().Field(c).Name != want.Schema().Field(c).Name || !array.Equal(g, w) {
					t.Errorf("version %d column %s: Go %v\nLanceDB %v", vf.Version, want.Schema().Field(c).Name, g, w)
				}
				g.Release()
				w.Release()
			}
		}
		got.Release()
		want.Release()
	}
}

func concat(t *testing.T, tbl arrow.Table, i int) arrow.Array {
	t.Helper()
	ch := tbl.Column(i).Data().Chunks()
	if len(ch) == 0 {
		return array.MakeArrayOfNull(memory.DefaultAllocator, tbl.Schema().Field(i).Type, 0)
	}
	a, err := array.Concatenate(ch, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// batch is n rows: id = start.., s = "s{id}", v = [id, id+.25, id+.5, id+.75].
func batch(t testing.TB, start, n int) arrow.RecordBatch {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "v", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	vb := b.Field(2).(*array.FixedSizeListBuilder)
	fb := vb.ValueBuilder().(*array.Float32Builder)
	for i := start; i < start+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%13 == 5 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("s%d", i))
		}
		vb.Append(true)
		for k := 0; k < 4; k++ {
			fb.Append(float32(i) + float32(k)/4)
		}
	}
	return b.NewRecordBatch()
}

func write(t testing.TB, o *oracle.Oracle, dir string, start, n int, version, mode string) {
	t.Helper()
	rec := batch(t, start, n)
	defer rec.Release()
	o.Write(t, dir, rec, version, mode)
}

// goDelete deletes, with this module's commit, the rows pick chooses.
func goDelete(t *testing.T, dir string, pick func(fragID, off uint64) bool) {
	t.Helper()
	d, err := dataset.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[uint64]*roaring.Bitmap{}
	for _, fr := range d.Fragments() {
		for off := uint64(0); off < fr.GetPhysicalRows(); off++ {
			if pick(fr.GetId(), off) {
				if rows[fr.GetId()] == nil {
					rows[fr.GetId()] = roaring.New()
				}
				rows[fr.GetId()].Add(uint32(off))
			}
		}
	}
	if _, err := d.DeleteRows(rows, "go delete", dataset.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
}

// goCreate writes rec as a new one-fragment dataset with this module's
// file writer (2.1) and commit.
func goCreate(t *testing.T, dir string, rec arrow.RecordBatch) {
	t.Helper()
	fields, err := schema.FromArrow(rec.Schema())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, dataset.DataDir), 0o755); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := file.NewWriter(&buf, fields, file.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	rows, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	name := "go-0.lance"
	if err := os.WriteFile(filepath.Join(dir, dataset.DataDir, name), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	df := &tablepb.DataFile{Path: name, FileMajorVersion: 2, FileMinorVersion: 1, FileSizeBytes: uint64(buf.Len())}
	for i, f := range schema.Leaves(fields) {
		df.Fields = append(df.Fields, f.Id)
		df.ColumnIndices = append(df.ColumnIndices, int32(i))
	}
	frag := &tablepb.DataFragment{Files: []*tablepb.DataFile{df}, PhysicalRows: rows}
	txn := dataset.Overwrite(0, fields, nil, []*tablepb.DataFragment{frag}, nil)
	if _, err := dataset.Commit(dir, nil, txn, dataset.CommitOptions{StorageVersion: "2.1"}); err != nil {
		t.Fatal(err)
	}
}

// TestScanMatchesLanceDB: LanceDB appends, deletes, updates, adds and drops
// columns (fragments with several data files, deletion files), this module
// deletes too; every version scans as LanceDB reads it, in 2.0 and 2.1.
func TestScanMatchesLanceDB(t *testing.T) {
	o := oracle.Need(t)
	for _, version := range []string{"2.0", "2.1"} {
		t.Run(version, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t.lance")
			write(t, o, dir, 0, 100, version, "create")
			write(t, o, dir, 100, 6000, "", "append")
			o.Delete(t, dir, "id % 10 = 3")
			o.Delete(t, dir, "id >= 200 AND id < 5900")
			o.Update(t, dir, "id = 50", map[string]string{"s": "'fifty'"})
			o.AddColumns(t, dir, map[string]string{"w": "id * 2"})
			o.DropColumns(t, dir, "s")
			goDelete(t, dir, func(frag, off uint64) bool { return off%7 == 1 })
			checkScan(t, o, dir)
		})
	}
}

// TestScanGoWrittenAfterLanceDB: a dataset this module wrote, then changed
// by LanceDB (append, update, delete), scans as LanceDB reads it; a
// projection reads only the asked columns, in the asked order.
func TestScanGoWrittenAfterLanceDB(t *testing.T) {
	o := oracle.Need(t)
	dir := filepath.Join(t.TempDir(), "t.lance")
	rec := batch(t, 0, 3000)
	defer rec.Release()
	goCreate(t, dir, rec)
	write(t, o, dir, 3000, 500, "", "append")
	o.Update(t, dir, "id % 100 = 7", map[string]string{"s": "'upd'"})
	o.Delete(t, dir, "id % 9 = 4")
	checkScan(t, o, dir)

	d, err := dataset.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	err = Dataset(context.Background(), d, []string{"s", "id"}, func(r arrow.RecordBatch) error {
		if r.NumCols() != 2 || r.Schema().Field(0).Name != "s" || r.Schema().Field(1).Name != "id" {
			t.Fatalf("projection read %v", r.Schema())
		}
		ids, ss := r.Column(1).(*array.Int64), r.Column(0).(*array.String)
		for i := 0; i < int(r.NumRows()); i++ {
			id := ids.Value(i)
			if id%9 == 4 {
				t.Fatalf("deleted row %d scanned", id)
			}
			want := fmt.Sprintf("s%d", id)
			switch {
			case id%100 == 7:
				want = "upd"
			case id%13 == 5:
				want = ""
			}
			if got := ss.Value(i); got != want || ss.IsNull(i) != (want == "") {
				t.Fatalf("row %d: s = %q (null %v), want %q", id, got, ss.IsNull(i), want)
			}
		}
		n += r.NumRows()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := o.Count(t, dir, ""); n != want {
		t.Fatalf("scanned %d rows, LanceDB counts %d", n, want)
	}
	if err := Dataset(context.Background(), d, []string{"nope"}, func(arrow.RecordBatch) error { return nil }); err == nil {
		t.Fatal("a scan of an unknown column succeeded")
	}
}
