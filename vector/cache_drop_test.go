package vector

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/duck"
	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
	"github.com/mvq-dev/mvq/table"
)

// TestVectorCacheAfterLanceDBDrop: after LanceDB drops column a, column b
// becomes schema field 1 and, in the layout read from the manifest, virtual
// column 1, while the fragment keeps its key: vectors cached for a must not
// answer for b (the cache is keyed by data file and file column; before,
// the key (location, fragment key, column 1) held a's vectors).
func TestVectorCacheAfterLanceDBDrop(t *testing.T) {
	o := oracle.Need(t)
	ctx := context.Background()
	root := t.TempDir()
	wh, err := table.OpenWarehouse(ctx, "file://"+root)
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	db, err := duck.Open(duck.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cat := table.NewCatalog(wh, db, table.Options{Format: table.FormatLance})
	if err := cat.CreateNamespace(ctx, []string{"ns"}, "", nil); err != nil {
		t.Fatal(err)
	}
	vt := arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "a", Type: vt, Nullable: true},
		{Name: "b", Type: vt, Nullable: true},
	}, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	for i := 0; i < 5; i++ {
		bld.Field(0).(*array.Int64Builder).Append(int64(i))
		for c, v := range [][]float32{{float32(i), 1}, {float32(100 + i), 2}} {
			fb := bld.Field(1 + c).(*array.FixedSizeListBuilder)
			fb.Append(true)
			fb.ValueBuilder().(*array.Float32Builder).AppendValues(v, nil)
		}
	}
	rec := bld.NewRecordBatch()
	rdr, _ := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	tb, _, err := cat.CreateTable(ctx, []string{"ns", "v"}, schema, rdr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := tb.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	va, _, err := FragmentVectors(ctx, tb, m.Fragments[0], 1, 2) // column a
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a before drop: %v (fragment key %q)", va, m.Fragments[0].Key())

	o.DropColumns(t, filepath.Join(root, "ns", "v.lance"), "a")
	m2, s2, err := tb.LoadSchema(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := m2.Fragments[0]
	t.Logf("after drop: schema %v; key %q parts %q columns %q", s2, f.Key(), f.Parts, f.Columns)
	vb, _, err := FragmentVectors(ctx, tb, f, 1, 2) // column b now
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("b after drop (through the cache): %v", vb)
	if vb[0] != 100 {
		t.Fatalf("column b read as %v: the cached vectors of dropped column a", vb)
	}
}
