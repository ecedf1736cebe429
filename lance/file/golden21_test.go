package file

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
)

// Golden files: small data files LanceDB 0.31 wrote (testdata/*.lance) with
// what LanceDB's own read returned for them (testdata/*.arrows, an Arrow IPC
// stream), so the reader's tests run without node. MVQ_LANCE_GOLDEN=1
// regenerates them with the oracle (MVQ_LANCE_GOLDEN=NAME only that one).

// longLists builds rows whose lists are long enough to span several
// mini-block chunks (chunks that only continue a row), with empty and null
// lists between them.
func longLists(t testing.TB, n int) arrow.RecordBatch {
	t.Helper()
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "li", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "ls", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		for c := 1; c < 3; c++ {
			lb := b.Field(c).(*array.ListBuilder)
			switch {
			case i%7 == 3:
				lb.AppendNull()
				continue
			case i%7 == 5:
				lb.Append(true)
				continue
			}
			lb.Append(true)
			k := i % 5
			if i%10 == 0 {
				k = 3000 + i
			}
			for j := 0; j < k; j++ {
				switch vb := lb.ValueBuilder().(type) {
				case *array.Int64Builder:
					if j%97 == 1 {
						vb.AppendNull()
					} else {
						vb.Append(int64(j % 1000))
					}
				case *array.StringBuilder:
					vb.Append(strings.Repeat("x", j%4))
				}
			}
		}
	}
	return b.NewRecordBatch()
}

var goldens = []struct {
	name string
	gen  func(testing.TB, int) arrow.RecordBatch
	rows int
}{
	{"kitchen_sink", kitchenSink, 300},
	{"vectors_nesting", vectorsAndNesting, 7},
	{"long_lists", longLists, 200},
	{"nested_fsl", nestedFSL, 40},
}

func TestGenerateGolden(t *testing.T) {
	if os.Getenv("MVQ_LANCE_GOLDEN") == "" {
		t.Skip("MVQ_LANCE_GOLDEN not set")
	}
	o := oracle.Need(t)
	for _, g := range goldens {
		if only := os.Getenv("MVQ_LANCE_GOLDEN"); only != "1" && only != g.name {
			continue
		}
		rec := g.gen(t, g.rows)
		dir, files := lanceWrite(t, o, rec)
		rec.Release()
		if len(files) != 1 {
			t.Fatalf("%s: %d files", g.name, len(files))
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", g.name+".lance"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		tbl := o.Read(t, dir, oracle.ReadOpts{})
		f, err := os.Create(filepath.Join("testdata", g.name+".arrows"))
		if err != nil {
			t.Fatal(err)
		}
		w := ipc.NewWriter(f, ipc.WithSchema(tbl.Schema()), ipc.WithZstd())
		tr := array.NewTableReader(tbl, 1<<20)
		for tr.Next() {
			if err := w.Write(tr.RecordBatch()); err != nil {
				t.Fatal(err)
			}
		}
		tr.Release()
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		tbl.Release()
	}
}

func TestGolden(t *testing.T) {
	for _, g := range goldens {
		t.Run(g.name, func(t *testing.T) {
			want, err := oracle.ReadStream(filepath.Join("testdata", g.name+".arrows"))
			if err != nil {
				t.Fatal(err)
			}
			defer want.Release()
			r := openFile(t, filepath.Join("testdata", g.name+".lance"))
			if r.Version() != V2_1 {
				t.Fatalf("version %v", r.Version())
			}
			if r.NumRows() != uint64(want.NumRows()) {
				t.Fatalf("%d rows, want %d", r.NumRows(), want.NumRows())
			}
			got := readAll(t, []string{filepath.Join("testdata", g.name+".lance")}, nil)
			defer got.Release()
			requireEqual(t, want, got)
			checkRangesAndTake(t, r, want)
			for _, l := range encodingSummary(t, r) {
				t.Log(l)
			}
		})
	}
}
