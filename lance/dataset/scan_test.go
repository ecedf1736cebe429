package dataset

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/lance/internal/oracle"
)

// checkScan compares the Go scan of every version of dir with LanceDB's
// read of it: same columns, same rows in the same order.
func checkScan(t *testing.T, o *oracle.Oracle, dir string) {
	t.Helper()
	vs, err := ListVersions(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, vf := range vs {
		d, err := OpenVersion(dir, vf.Version)
		if err != nil {
			t.Fatal(err)
		}
		var recs []arrow.RecordBatch
		err = d.Scan(context.Background(), nil, func(r arrow.RecordBatch) error {
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

func TestScanMatchesLanceDB(t *testing.T) {
	o := oracle.Need(t)
	dir := newDir(t)
	write(t, o, dir, 0, 100, "2.1", "create")
	write(t, o, dir, 100, 6000, "", "append")
	o.Delete(t, dir, "id % 10 = 3")
	o.Delete(t, dir, "id >= 200 AND id < 5900")
	o.Update(t, dir, "id = 50", map[string]string{"s": "'fifty'"})
	o.AddColumns(t, dir, map[string]string{"w": "id * 2"})
	o.DropColumns(t, dir, "s")
	goDelete(t, dir, func(frag, off uint64) bool { return off%7 == 1 })
	checkScan(t, o, dir)
}
