package file

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
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

// assertSameColumns fails unless got's columns equal want's: same types and
// the same values in every valid slot, nulls in the same places.
func assertSameColumns(t *testing.T, names []string, got []arrow.Array, want arrow.RecordBatch) {
	t.Helper()
	if len(got) != int(want.NumCols()) {
		t.Fatalf("%d columns, oracle has %d", len(got), want.NumCols())
	}
	for i, g := range got {
		w := want.Column(i)
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
	o := needOracle20(t)
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
			o.write(t, dir, rec, "2.0", "create")
			want := o.read(t, dir)
			defer want.Release()
			files := dataFiles20(t, dir)
			if len(files) != 1 {
				t.Fatalf("%d data files", len(files))
			}
			raw, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			m, err := parseMemFile20(raw)
			if err != nil {
				t.Fatal(err)
			}
			if m.version != V2_0 {
				t.Fatalf("LanceDB wrote version %v, want 2.0", m.version)
			}
			if m.rows != uint64(tc.rows) {
				t.Fatalf("file has %d rows, want %d", m.rows, tc.rows)
			}
			cols := make([]int, m.schema.NumFields())
			names := make([]string, len(cols))
			for i := range cols {
				cols[i] = i
				names[i] = m.schema.Field(i).Name
			}
			got, err := readFields20(context.Background(), m, m.types(), cols, 0, m.rows)
			if err != nil {
				t.Fatal(err)
			}
			defer releaseAll(got)
			assertSameColumns(t, names, got, want)

			// Row ranges: a window across page boundaries, equal to the same
			// slice of the whole read.
			lo, hi := uint64(tc.rows/3), uint64(tc.rows/3+tc.rows/4)
			part, err := readFields20(context.Background(), m, m.types(), cols, lo, hi)
			if err != nil {
				t.Fatal(err)
			}
			defer releaseAll(part)
			slice := want.NewSlice(int64(lo), int64(hi))
			defer slice.Release()
			assertSameColumns(t, names, part, slice)
		})
	}
}
