package file

// Helpers over the shared LanceDB oracle (internal/lanceoracle) for the 2.0
// tests.

import (
	"os"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
)

// readOracle20 returns LanceDB's read of the dataset dir as one record batch.
func readOracle20(t testing.TB, o *oracle.Oracle, dir string) arrow.RecordBatch {
	t.Helper()
	tbl := o.Read(t, dir, oracle.ReadOpts{})
	defer tbl.Release()
	cols := make([]arrow.Array, tbl.NumCols())
	for i := range cols {
		chunks := tbl.Column(i).Data().Chunks()
		if len(chunks) == 0 {
			b := array.NewBuilder(memory.DefaultAllocator, tbl.Schema().Field(i).Type)
			cols[i] = b.NewArray()
			b.Release()
			continue
		}
		c, err := array.Concatenate(chunks, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = c
	}
	return newRecord(tbl.Schema(), cols, tbl.NumRows())
}

// writeIPC20 writes rec as an Arrow IPC file.
func writeIPC20(t testing.TB, path string, rec arrow.RecordBatch) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(rec.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
