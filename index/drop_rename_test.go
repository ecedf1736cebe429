package index_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/index"
	lancedb "github.com/mvq-dev/mvq/internal/lanceoracle"
)

// TestIndexAfterLanceDBDropAndRename: LanceDB drops an indexed column
// and renames another to its name; the fragments keep their data files.
// mvq's filters on that name then answer from the renamed column's
// values, as LanceDB does, not from an index of the dropped one.
func TestIndexAfterLanceDBDropAndRename(t *testing.T) {
	o := lancedb.Need(t)
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	cat := lanceIndexCatalog(t, root)
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "y", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	for i := 0; i < 3000; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.Int64Builder).Append(int64(i))
		b.Field(2).(*array.Int64Builder).Append(int64(i) + 100000)
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	tb, _, err := cat.CreateTable(ctx, []string{"ns", "t"}, s, reader(rec), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := index.Create(ctx, tb, index.Spec{Column: "x", Type: "BTREE"}); err != nil {
		t.Fatal(err)
	}
	if n, err := tb.CountRows(ctx, 0, "x = 7"); err != nil || n != 1 {
		t.Fatalf("x = 7 before: %d rows (%v)", n, err)
	}
	dir := filepath.Join(root, "ns", "t.lance")
	o.DropColumns(t, dir, "x")
	o.RenameColumn(t, dir, "y", "x")
	for _, where := range []string{"x = 7", "x = 100007", "x > 102990"} {
		want := o.Count(t, dir, where)
		if n, err := tb.CountRows(ctx, 0, where); err != nil || n != want {
			t.Fatalf("%s after LanceDB's drop and rename: mvq counts %d rows (%v), LanceDB %d", where, n, err, want)
		}
		if got := rowsOf(t, tb, where, 0); int64(len(got)) != want {
			t.Fatalf("%s after LanceDB's drop and rename: mvq reads %d rows, LanceDB %d", where, len(got), want)
		}
	}
	// Extending the index builds it again over the renamed column.
	if _, err := index.Extend(ctx, tb, "x_idx"); err != nil {
		t.Fatal(err)
	}
	for _, where := range []string{"x = 7", "x = 100007"} {
		want := o.Count(t, dir, where)
		if n, err := tb.CountRows(ctx, 0, where); err != nil || n != want {
			t.Fatalf("%s after extending the index: mvq counts %d rows (%v), LanceDB %d", where, n, err, want)
		}
	}
}
