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
	"github.com/mvq-dev/mvq/table"
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

// TestIndexAfterSwapOfNames: two columns swap names, by mvq's
// alter_columns or by LanceDB's; the fragments keep their data files and
// their layout. An index on "x" was built over the field then named x,
// so it is not used for the column now named x (its Lance field id
// differs), and extending it builds it again for that field: filters and
// merge_insert keys on x answer as LanceDB does, before and after.
func TestIndexAfterSwapOfNames(t *testing.T) {
	o := lancedb.Need(t)
	for _, by := range []string{"mvq", "LanceDB"} {
		t.Run(by, func(t *testing.T) {
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
			dir := filepath.Join(root, "ns", "t.lance")
			if by == "mvq" {
				x, y := "y", "x"
				if _, err := tb.AlterColumns(ctx, []table.Alteration{{Field: "a0", Path: "x", Rename: &x}, {Field: "a1", Path: "y", Rename: &y}}); err != nil {
					t.Fatal(err)
				}
			} else {
				o.RenameColumn(t, dir, "x", "tmp")
				o.RenameColumn(t, dir, "y", "x")
				o.RenameColumn(t, dir, "tmp", "y")
			}
			check := func(when string) {
				t.Helper()
				for _, where := range []string{"x = 7", "x = 100007", "x > 102990", "y = 7"} {
					want := o.Count(t, dir, where)
					if n, err := tb.CountRows(ctx, 0, where); err != nil || n != want {
						t.Fatalf("%s, %s: mvq counts %d rows (%v), LanceDB %d", when, where, n, err, want)
					}
					if got := rowsOf(t, tb, where, 0); int64(len(got)) != want {
						t.Fatalf("%s, %s: mvq reads %d rows, LanceDB %d", when, where, len(got), want)
					}
				}
				m, err := tb.Load(ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				keys := array.NewInt64Builder(memory.DefaultAllocator)
				keys.AppendValues([]int64{7, 100007}, nil)
				ka := keys.NewInt64Array()
				defer ka.Release()
				ki, err := index.KeyIndexFor(ctx, tb, m, "x", ka)
				if err != nil {
					t.Fatal(err)
				}
				if ki != nil {
					matched := 0
					for _, f := range m.Fragments {
						off, _, ok, err := ki.Match(ctx, f)
						if err != nil {
							t.Fatal(err)
						}
						if !ok {
							matched = -1
							break
						}
						matched += len(off)
					}
					if matched >= 0 && matched != 1 {
						t.Fatalf("%s: the key index on x matches %d of the keys 7, 100007; the column holds 100007 only", when, matched)
					}
				}
			}
			check("after the swap")
			if _, err := index.Extend(ctx, tb, "x_idx"); err != nil {
				t.Fatal(err)
			}
			check("after extending the index")
			im, err := index.Load(ctx, tb, "x_idx")
			if err != nil {
				t.Fatal(err)
			}
			if idx, un := im.Coverage(mustLoad(t, tb)); un != 0 || idx != 3000 {
				t.Fatalf("after extending: the index covers %d rows, %d not; want all 3000", idx, un)
			}
		})
	}
}

func mustLoad(t *testing.T, tb *table.Table) *table.Manifest {
	t.Helper()
	m, err := tb.Load(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
