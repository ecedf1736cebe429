package file

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
)

// The golden 2.0 files in testdata/v20 were written by LanceDB 0.31.0
// (data_storage_version "2.0"); each NAME.lance has next to it NAME.arrow,
// LanceDB's own read of the dataset as an Arrow IPC file. Regenerate them
// with LANCE_GOLDEN_UPDATE=1 go test -run TestGolden20 ./lance/file/.

type golden20 struct {
	name string
	rec  func() arrow.RecordBatch
}

var goldens20 = []golden20{
	// Every type, 150 rows: dictionary pages for low-cardinality strings.
	{"alltypes", func() arrow.RecordBatch { return allTypes20(150, 4, 8) }},
	// Fewer columns, 3000 rows: several pages per column.
	{"multipage", func() arrow.RecordBatch {
		return selectColumns20(allTypes20(3000, 4), "i32", "b", "s", "sdict", "li", "nul_i32", "v4")
	}},
	// Strings whose fields ask for zstd, lz4 and FSST compression.
	{"compressed", func() arrow.RecordBatch { return compressedStrings20(200) }},
}

func selectColumns20(rec arrow.RecordBatch, names ...string) arrow.RecordBatch {
	defer rec.Release()
	var fields []arrow.Field
	var cols []arrow.Array
	for _, n := range names {
		i := rec.Schema().FieldIndices(n)[0]
		fields = append(fields, rec.Schema().Field(i))
		cols = append(cols, rec.Column(i))
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
}

func TestGolden20(t *testing.T) {
	dir := filepath.Join("testdata", "v20")
	if os.Getenv("LANCE_GOLDEN_UPDATE") != "" {
		updateGolden20(t, dir)
	}
	for _, g := range goldens20 {
		t.Run(g.name, func(t *testing.T) {
			r := openFile20(t, filepath.Join(dir, g.name+".lance"))
			want := readArrowFile20(t, filepath.Join(dir, g.name+".arrow"))
			defer want.Release()
			if r.Version() != V2_0 {
				t.Fatalf("version %v", r.Version())
			}
			got, err := r.Read(context.Background(), nil, 0, r.NumRows())
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			assertSameRecords(t, got, want)

			n := r.NumRows()
			rows := []uint64{n - 1, 0, n / 2, n / 2, 1, n / 3}
			cols := []int{int(want.NumCols()) - 1, 0, 3}
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

func readArrowFile20(t testing.TB, path string) arrow.RecordBatch {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := ipc.NewFileReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	var recs []arrow.RecordBatch
	for i := 0; i < fr.NumRecords(); i++ {
		rec, err := fr.RecordBatch(i)
		if err != nil {
			t.Fatal(err)
		}
		rec.Retain()
		defer rec.Release()
		recs = append(recs, rec)
	}
	return concatRecords20(t, recs)
}

func updateGolden20(t *testing.T, dir string) {
	o := oracle.Need(t)
	// Small pages, so that a small file has several.
	t.Setenv("LANCE_FILE_WRITER_MAX_PAGE_BYTES", "4096")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, g := range goldens20 {
		rec := g.rec()
		ds := filepath.Join(t.TempDir(), g.name+".lance")
		o.Write(t, ds, rec, "2.0", "create")
		rec.Release()
		files := dataFiles20(t, ds)
		if len(files) != 1 {
			t.Fatalf("%s: %d data files", g.name, len(files))
		}
		raw, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, g.name+".lance"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		want := readOracle20(t, o, ds)
		writeIPC20(t, filepath.Join(dir, g.name+".arrow"), want)
		want.Release()
	}
}
