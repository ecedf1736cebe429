package file

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
)

// oracleWrite has LanceDB write recs (as one batch) as a 2.1 dataset
// <root>/<name>.lance and returns the total size of its data files.
func oracleWrite(t testing.TB, root, name string, recs []arrow.RecordBatch) int64 {
	t.Helper()
	o := oracle.Need(t)
	cols := make([]arrow.Array, recs[0].NumCols())
	var rows int64
	for i := range cols {
		var parts []arrow.Array
		for _, r := range recs {
			parts = append(parts, r.Column(i))
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = c
		rows = int64(c.Len())
	}
	rec := array.NewRecordBatch(recs[0].Schema(), cols, rows)
	defer rec.Release()
	dir := filepath.Join(root, name+".lance")
	o.Write(t, dir, rec, "2.1", "create")
	if keep := os.Getenv("LANCE_TEST_KEEP"); keep != "" {
		files, _ := filepath.Glob(filepath.Join(dir, "data", "*.lance"))
		if len(files) > 0 {
			b, _ := os.ReadFile(files[0])
			_ = os.WriteFile(filepath.Join(keep, name+"-lancedb.lance"), b, 0o644)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "data", "*.lance"))
	var size int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		size += st.Size()
	}
	if size == 0 {
		t.Fatal("LanceDB wrote no data files")
	}
	return size
}

// TestWriter21SizeVsLanceDB compares the size of the Go writer's file with
// the data LanceDB writes for the same batches (target: at most 1.2 times),
// and checks LanceDB reads the Go file back exactly.
func TestWriter21SizeVsLanceDB(t *testing.T) {
	if testing.Short() {
		t.Skip("writes ~70 MB")
	}
	tables := benchTables(t)
	for _, name := range []string{"scalars", "vectors"} {
		t.Run(name, func(t *testing.T) {
			recs := tables[name]
			root := t.TempDir()
			ours := int64(len(writeTestDataset(t, root, "go", recs, WriterOptions{})))
			theirs := oracleWrite(t, root, "lancedb", recs)
			ratio := float64(ours) / float64(theirs)
			t.Logf("%s: Go writer %d bytes, LanceDB %d bytes, ratio %.3f", name, ours, theirs, ratio)
			if ratio > 1.2 {
				t.Errorf("%s: Go file is %.2f times LanceDB's (target at most 1.2)", name, ratio)
			}
			assertOracleEqual(t, root, "go", recs)
		})
	}
}
