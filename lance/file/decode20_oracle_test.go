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
)

// dataFiles20 returns the data files of a dataset folder.
func dataFiles20(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "data", "*.lance"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// openFile20 opens a data file with the Reader.
func openFile20(t testing.TB, path string) *Reader {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// takeRecord gathers rows of the listed columns of rec.
func takeRecord(t testing.TB, rec arrow.RecordBatch, cols []int, rows []uint64) arrow.RecordBatch {
	t.Helper()
	fields := make([]arrow.Field, len(cols))
	arrs := make([]arrow.Array, len(cols))
	for i, c := range cols {
		fields[i] = rec.Schema().Field(c)
		idx := make([]int64, len(rows))
		for k, r := range rows {
			idx[k] = int64(r)
		}
		a, err := takeIndexes(memory.DefaultAllocator, rec.Column(c), idx)
		if err != nil {
			t.Fatal(err)
		}
		arrs[i] = a
	}
	return newRecord(arrow.NewSchema(fields, nil), arrs, int64(len(rows)))
}

// assertSameRecords fails unless got's columns equal want's: same names and
// types, the same values in every valid slot, nulls in the same places.
func assertSameRecords(t *testing.T, got, want arrow.RecordBatch) {
	t.Helper()
	if got.NumCols() != want.NumCols() || got.NumRows() != want.NumRows() {
		t.Fatalf("%d columns of %d rows, want %d of %d", got.NumCols(), got.NumRows(), want.NumCols(), want.NumRows())
	}
	names := make([]string, got.NumCols())
	for i := range names {
		names[i] = got.Schema().Field(i).Name
		if w := want.Schema().Field(i).Name; w != names[i] {
			t.Errorf("column %d is %s, want %s", i, names[i], w)
		}
	}
	for i, g := range got.Columns() {
		w := want.Column(i)
		if g.DataType().ID() == arrow.DICTIONARY && arrow.TypeEqual(g.DataType(), w.DataType()) {
			// Dictionaries may be split or merged differently: compare values.
			g, w = dictValues(t, g), dictValues(t, w)
			defer g.Release()
			defer w.Release()
		}
		if !arrow.TypeEqual(g.DataType(), w.DataType()) {
			t.Errorf("column %s: type %s, oracle %s", names[i], g.DataType(), w.DataType())
			continue
		}
		if g.Len() != w.Len() {
			t.Errorf("column %s: %d rows, oracle %d", names[i], g.Len(), w.Len())
			continue
		}
		if !array.Equal(g, w) {
			for r := 0; r < g.Len(); r++ {
				gs, ws := array.NewSlice(g, int64(r), int64(r+1)), array.NewSlice(w, int64(r), int64(r+1))
				same := array.Equal(gs, ws)
				if !same {
					t.Errorf("column %s row %d: got %v, oracle %v", names[i], r, gs, ws)
				}
				gs.Release()
				ws.Release()
				if !same {
					break
				}
			}
		}
	}
}

func TestRead20MatchesLanceDB(t *testing.T) {
	o := oracle.Need(t)
	for _, tc := range []struct {
		name string
		rows int
		dims []int
	}{
		{"small", 300, []int{4, 128, 1536}},
		{"multipage", 25000, []int{4, 768}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := allTypes20(tc.rows, tc.dims...)
			defer rec.Release()
			dir := filepath.Join(t.TempDir(), "t.lance")
			o.Write(t, dir, rec, "2.0", "create")
			want := readOracle20(t, o, dir)
			defer want.Release()
			files := dataFiles20(t, dir)
			if len(files) != 1 {
				t.Fatalf("%d data files", len(files))
			}
			r := openFile20(t, files[0])
			if r.Version() != V2_0 {
				t.Fatalf("LanceDB wrote version %v, want 2.0", r.Version())
			}
			if r.NumRows() != uint64(tc.rows) {
				t.Fatalf("file has %d rows, want %d", r.NumRows(), tc.rows)
			}
			got, err := r.Read(context.Background(), nil, 0, r.NumRows())
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			assertSameRecords(t, got, want)

			// Row ranges: a window across page boundaries, equal to the same
			// slice of the whole read.
			lo, hi := uint64(tc.rows/3), uint64(tc.rows/3+tc.rows/4)
			part, err := r.Read(context.Background(), nil, lo, hi)
			if err != nil {
				t.Fatal(err)
			}
			defer part.Release()
			slice := want.NewSlice(int64(lo), int64(hi))
			defer slice.Release()
			assertSameRecords(t, part, slice)

			// Take: scattered rows in any order, with repeats, of a projection.
			rows := []uint64{uint64(tc.rows - 1), 0, 5, 5, uint64(tc.rows / 2), 3, uint64(tc.rows/2 + 1)}
			cols := []int{2, 13, 29, 33, 34, len(r.Schema().Fields()) - 1}
			took, err := r.Take(context.Background(), cols, rows)
			if err != nil {
				t.Fatal(err)
			}
			defer took.Release()
			wantTake := takeRecord(t, want, cols, rows)
			defer wantTake.Release()
			assertSameRecords(t, took, wantTake)
		})
	}
}

// dictValues materializes a dictionary array of strings: row i is the item
// its index points at, null where the index or the item is null.
func dictValues(t testing.TB, a arrow.Array) arrow.Array {
	t.Helper()
	d := a.(*array.Dictionary)
	items, ok := d.Dictionary().(*array.String)
	if !ok {
		t.Fatalf("dictionary of %s", d.Dictionary().DataType())
	}
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	for i := 0; i < d.Len(); i++ {
		if k := d.GetValueIndex(i); d.IsNull(i) || items.IsNull(k) {
			b.AppendNull()
		} else {
			b.Append(items.Value(k))
		}
	}
	return b.NewArray()
}
