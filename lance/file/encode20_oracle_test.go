package file

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
	"github.com/mvq-dev/mvq/lance/dataset"
	"github.com/mvq-dev/mvq/lance/pb/filepb"
	"github.com/mvq-dev/mvq/lance/pb/tablepb"
	"github.com/mvq-dev/mvq/lance/schema"
)

// writeFile20 writes recs as one 2.0 file with the Writer, cutting pages at
// pageBytes, and returns its bytes.
func writeFile20(t testing.TB, recs []arrow.RecordBatch, pageBytes int) []byte {
	t.Helper()
	sc := recs[0].Schema()
	fields, err := schema.FromArrow(sc)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, fields, WriterOptions{Version: V2_0, Schema: sc})
	if err != nil {
		t.Fatal(err)
	}
	if pageBytes > 0 {
		// Smaller pages than the default, to test page boundaries on small data.
		if w.cols, err = newColumnWriters20Sized(fields, sc, pageBytes); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// dataFile20 writes data into dir/data under name and describes it as a
// 2.0 data file of a dataset whose schema is fields (in a 2.0 file every
// field has a column, in pre-order).
func dataFile20(t testing.TB, dir, name string, fields []*filepb.Field, data []byte) *tablepb.DataFile {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	df := &tablepb.DataFile{Path: name, FileMajorVersion: 2, FileMinorVersion: 0, FileSizeBytes: uint64(len(data))}
	for i, f := range fields {
		df.Fields = append(df.Fields, f.Id)
		df.ColumnIndices = append(df.ColumnIndices, int32(i))
	}
	return df
}

// writeDataset20 creates dir as a 2.0 dataset of one fragment, the file data.
func writeDataset20(t testing.TB, dir string, sc *arrow.Schema, data []byte, rows uint64) {
	t.Helper()
	fields, err := schema.FromArrow(sc)
	if err != nil {
		t.Fatal(err)
	}
	df := dataFile20(t, dir, "go-written-2-0.lance", fields, data)
	txn := dataset.Overwrite(0, fields, nil, []*tablepb.DataFragment{{Files: []*tablepb.DataFile{df}, PhysicalRows: rows}}, nil)
	if _, err := dataset.Commit(dir, nil, txn, dataset.CommitOptions{StorageVersion: "2.0"}); err != nil {
		t.Fatal(err)
	}
}

// appendDataset20 appends the file data as a new fragment to the dataset.
func appendDataset20(t testing.TB, dir, name string, data []byte, rows uint64) {
	t.Helper()
	ds, err := dataset.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if v := ds.StorageVersion(); v != "2.0" {
		t.Fatalf("dataset is %q, want 2.0", v)
	}
	df := dataFile20(t, dir, name, ds.Manifest().GetFields(), data)
	txn := dataset.Append(ds.Version(), []*tablepb.DataFragment{{Files: []*tablepb.DataFile{df}, PhysicalRows: rows}})
	if _, err := dataset.Commit(dir, ds, txn, dataset.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
}

// readAll20 reads every row of a data file with the Reader.
func readAll20(t testing.TB, path string) arrow.RecordBatch {
	t.Helper()
	r := openFile20(t, path)
	rec, err := r.Read(context.Background(), nil, 0, r.NumRows())
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestWrite20ReadByLanceDB(t *testing.T) {
	o := oracle.Need(t)
	for _, tc := range []struct {
		name      string
		rows      int
		batches   int
		pageBytes int
		dims      []int
	}{
		{"small", 300, 1, 0, []int{4, 128, 1536}},
		{"multipage", 25000, 3, 64 << 10, []int{4, 768}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := allTypes20(tc.rows, tc.dims...)
			defer rec.Release()
			var recs []arrow.RecordBatch
			step := int64(tc.rows / tc.batches)
			for lo := int64(0); lo < int64(tc.rows); lo += step {
				s := rec.NewSlice(lo, min(lo+step, int64(tc.rows)))
				defer s.Release()
				recs = append(recs, s)
			}
			data := writeFile20(t, recs, tc.pageBytes)
			root := t.TempDir()
			ours := filepath.Join(root, "ours.lance")
			writeDataset20(t, ours, rec.Schema(), data, uint64(tc.rows))

			// LanceDB reads our file as it reads its own 2.0 file of the same
			// rows (which, like ours, drops struct validity: 2.0 has none).
			theirs := filepath.Join(root, "theirs.lance")
			o.Write(t, theirs, rec, "2.0", "create")
			want := readOracle20(t, o, theirs)
			defer want.Release()
			got := readOracle20(t, o, ours)
			defer got.Release()
			assertSameRecords(t, got, want)

			if tc.pageBytes > 0 {
				// The small page size cut every kind of column into pages.
				r := openFile20(t, filepath.Join(ours, "data", "go-written-2-0.lance"))
				for _, name := range []string{"i32", "s", "li", "lli", "v768"} {
					idx := r.Schema().FieldIndices(name)[0]
					for _, c := range r.ColumnIndexes(idx) {
						if n := len(r.Container().Columns[c].Pages); n < 2 {
							t.Errorf("field %s column %d has %d page(s)", name, c, n)
						}
					}
				}
			}

			// And so does our reader.
			back := readAll20(t, filepath.Join(ours, "data", "go-written-2-0.lance"))
			defer back.Release()
			assertSameRecords(t, back, want)

			// LanceDB appends to the Go-written dataset: it stays 2.0, and our
			// reader reads LanceDB's new file.
			more := allTypes20(500, tc.dims...)
			defer more.Release()
			o.Write(t, ours, more, "", "append")
			files := dataFiles20(t, ours)
			if len(files) != 2 {
				t.Fatalf("%d data files after the append, want 2", len(files))
			}
			all := readOracle20(t, o, ours)
			defer all.Release()
			var parts []arrow.RecordBatch
			for _, f := range files {
				r := openFile20(t, f)
				if r.Version() != V2_0 {
					t.Fatalf("%s is version %v after LanceDB appended to a 2.0 dataset", filepath.Base(f), r.Version())
				}
				p := readAll20(t, f)
				defer p.Release()
				if filepath.Base(f) == "go-written-2-0.lance" {
					parts = append([]arrow.RecordBatch{p}, parts...)
				} else {
					parts = append(parts, p)
				}
			}
			joined := concatRecords20(t, parts)
			defer joined.Release()
			assertSameRecords(t, joined, all)

			// Go appends a 2.0 file after LanceDB's: LanceDB reads all three.
			last := allTypes20(700, tc.dims...)
			defer last.Release()
			appendDataset20(t, ours, "go-appended-2-0.lance", writeFile20(t, []arrow.RecordBatch{last}, tc.pageBytes), 700)
			all3 := readOracle20(t, o, ours)
			defer all3.Release()
			lastBack := readAll20(t, filepath.Join(ours, "data", "go-appended-2-0.lance"))
			defer lastBack.Release()
			joined3 := concatRecords20(t, []arrow.RecordBatch{joined, lastBack})
			defer joined3.Release()
			assertSameRecords(t, joined3, all3)
			if n := o.Count(t, ours, "i32 IS NULL"); n != int64(all3.Column(2).NullN()) {
				t.Errorf("LanceDB counts %d rows with a null i32, want %d", n, all3.Column(2).NullN())
			}
		})
	}
}

func concatRecords20(t testing.TB, recs []arrow.RecordBatch) arrow.RecordBatch {
	t.Helper()
	sc := recs[0].Schema()
	cols := make([]arrow.Array, sc.NumFields())
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	for i := range cols {
		parts := make([]arrow.Array, len(recs))
		for k, r := range recs {
			parts[k] = r.Column(i)
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = c
	}
	return newRecord(sc, cols, n)
}
