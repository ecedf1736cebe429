package file

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
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

// testFields converts an Arrow schema with lance/schema.
func testFields(t testing.TB, s *arrow.Schema) []*filepb.Field {
	t.Helper()
	f, err := schema.FromArrow(s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// writeTestDataset writes recs with the Writer into <root>/<name>.lance as a
// one-fragment dataset committed with lance/dataset, and returns the data
// file.
func writeTestDataset(t testing.TB, root, name string, recs []arrow.RecordBatch, opts WriterOptions) []byte {
	t.Helper()
	fields := testFields(t, recs[0].Schema())
	dir := filepath.Join(root, name+".lance")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, fields, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	fname := "0000test.lance"
	if keep := os.Getenv("LANCE_TEST_KEEP"); keep != "" {
		// A copy of each written file, for inspection.
		_ = os.WriteFile(filepath.Join(keep, name+".lance"), buf.Bytes(), 0o644)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", fname), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	df := &tablepb.DataFile{Path: fname, FileMajorVersion: 2, FileMinorVersion: 1, FileSizeBytes: uint64(buf.Len())}
	for i, f := range schema.Leaves(fields) {
		df.Fields = append(df.Fields, f.Id)
		df.ColumnIndices = append(df.ColumnIndices, int32(i))
	}
	frag := &tablepb.DataFragment{Files: []*tablepb.DataFile{df}, PhysicalRows: rows}
	txn := dataset.Overwrite(0, fields, nil, []*tablepb.DataFragment{frag}, nil)
	if _, err := dataset.Commit(dir, nil, txn, dataset.CommitOptions{StorageVersion: "2.1"}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// oracleRead reads <root>/<name>.lance with LanceDB: its countRows for
// where and the rows its query returns.
func oracleRead(t testing.TB, root, name, where string) (int64, arrow.Table) {
	t.Helper()
	o := oracle.Need(t)
	dir := filepath.Join(root, name+".lance")
	return o.Count(t, dir, where), o.Read(t, dir, oracle.ReadOpts{Where: where})
}

func concatColumn(t testing.TB, tbl arrow.Table, name string) arrow.Array {
	t.Helper()
	idx := tbl.Schema().FieldIndices(name)
	if len(idx) == 0 {
		t.Fatalf("column %q missing from LanceDB's result %s", name, tbl.Schema())
	}
	parts := tbl.Column(idx[0]).Data().Chunks()
	if len(parts) == 0 {
		return nil
	}
	a, err := array.Concatenate(parts, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// assertOracleEqual checks that LanceDB reads back exactly want.
func assertOracleEqual(t testing.TB, root, name string, want []arrow.RecordBatch) {
	t.Helper()
	var rows int64
	for _, r := range want {
		rows += r.NumRows()
	}
	count, got := oracleRead(t, root, name, "")
	if count != rows {
		t.Fatalf("LanceDB countRows = %d, want %d", count, rows)
	}
	for i, f := range want[0].Schema().Fields() {
		var parts []arrow.Array
		for _, r := range want {
			parts = append(parts, r.Column(i))
		}
		exp, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		act := concatColumn(t, got, f.Name)
		if act == nil && exp.Len() == 0 {
			continue
		}
		if act == nil {
			t.Fatalf("%s: no rows from LanceDB", f.Name)
		}
		if !arrow.TypeEqual(exp.DataType(), act.DataType()) {
			t.Errorf("%s: LanceDB type %s, wrote %s", f.Name, act.DataType(), exp.DataType())
			continue
		}
		if !array.Equal(exp, act) {
			t.Errorf("%s: LanceDB read differs from what was written\n%s", f.Name, firstDiff21w(exp, act))
		}
	}
}

func firstDiff21w(a, b arrow.Array) string {
	if a.Len() != b.Len() {
		return fmt.Sprintf("len %d vs %d", a.Len(), b.Len())
	}
	for i := 0; i < a.Len(); i++ {
		if !array.SliceEqual(a, int64(i), int64(i+1), b, int64(i), int64(i+1)) {
			sa, sb := a.ValueStr(i), b.ValueStr(i)
			return fmt.Sprintf("row %d: wrote %s, read %s", i, trunc(sa), trunc(sb))
		}
	}
	return "?"
}

func trunc(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return strings.TrimSpace(s)
}

// assertReaderEqual checks that the file's own Reader reads back want (a
// second opinion; LanceDB is the one that counts).
func assertReaderEqual(t testing.TB, file []byte, want []arrow.RecordBatch) {
	t.Helper()
	r, err := Open(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatalf("Reader: %v", err)
	}
	defer r.Close()
	var rows int64
	for _, w := range want {
		rows += w.NumRows()
	}
	if r.NumRows() != uint64(rows) {
		t.Fatalf("Reader: %d rows, want %d", r.NumRows(), rows)
	}
	cols := make([]int, want[0].NumCols())
	for i := range cols {
		cols[i] = i
	}
	got, err := r.Read(context.Background(), cols, 0, uint64(rows))
	if err != nil {
		t.Fatalf("Reader: %v", err)
	}
	defer got.Release()
	for i, f := range want[0].Schema().Fields() {
		var parts []arrow.Array
		for _, w := range want {
			parts = append(parts, w.Column(i))
		}
		exp, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		if !array.Equal(exp, got.Column(i)) {
			t.Errorf("Reader: %s differs\n%s", f.Name, firstDiff21w(exp, got.Column(i)))
		}
	}
	// Random access (chunk metadata, repetition indexes): rows in a
	// scattered order, the first and last among them.
	if rows == 0 {
		return
	}
	rng := rand.New(rand.NewSource(rows))
	take := []uint64{uint64(rows - 1), 0}
	for k := 0; k < 40; k++ {
		take = append(take, uint64(rng.Int63n(rows)))
	}
	tk, err := r.Take(context.Background(), cols, take)
	if err != nil {
		t.Fatalf("Reader.Take: %v", err)
	}
	defer tk.Release()
	for i, f := range want[0].Schema().Fields() {
		var parts []arrow.Array
		for _, w := range want {
			parts = append(parts, w.Column(i))
		}
		exp, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		for k, row := range take {
			if !array.SliceEqual(exp, int64(row), int64(row)+1, tk.Column(i), int64(k), int64(k)+1) {
				t.Errorf("Reader.Take: %s row %d differs", f.Name, row)
				break
			}
		}
	}
}
