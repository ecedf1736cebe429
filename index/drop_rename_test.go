package index_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	tb, _ := xyTable(t, cat)
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
			tb, _ := xyTable(t, cat)
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

// TestLegacyIndexRebuiltForItsField: an index written before field ids
// were recorded (no field_id, file names without one) is built again,
// for the column's field, by its next extension; after a swap of two
// names (whose commit extends it) filters on the name answer from the
// column that has it now.
func TestLegacyIndexRebuiltForItsField(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	cat := lanceIndexCatalog(t, root)
	tb, im := xyTable(t, cat)
	// Make it an index of before: no field_id in its definitions, its
	// files under the names they had.
	dir := filepath.Join(root, "ns", "t.lance", "_mvq_indices")
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	suffix := fmt.Sprintf("-i%d", *im.FieldID)
	for _, e := range es {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			files, _ := os.ReadDir(p)
			for _, f := range files {
				if err := os.Rename(filepath.Join(p, f.Name()), filepath.Join(p, strings.Replace(f.Name(), suffix, "", 1))); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var def map[string]any
		if err := json.Unmarshal(raw, &def); err != nil {
			t.Fatal(err)
		}
		delete(def, "field_id")
		if raw, err = json.Marshal(def); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if im, err = index.Load(ctx, tb, "x_idx"); err != nil || im.FieldID != nil {
		t.Fatalf("the index of before: %+v (%v)", im, err)
	}
	if n, err := tb.CountRows(ctx, 0, "x = 7"); err != nil || n != 1 {
		t.Fatalf("x = 7 on the index of before: %d (%v)", n, err)
	}
	x, y := "y", "x"
	if _, err := tb.AlterColumns(ctx, []table.Alteration{{Field: "a0", Path: "x", Rename: &x}, {Field: "a1", Path: "y", Rename: &y}}); err != nil {
		t.Fatal(err)
	}
	for where, want := range map[string]int64{"x = 7": 0, "x = 100007": 1, "y = 7": 1} {
		if n, err := tb.CountRows(ctx, 0, where); err != nil || n != want {
			t.Fatalf("%s after the swap: %d rows (%v), want %d", where, n, err, want)
		}
	}
	im, err = index.Load(ctx, tb, "x_idx")
	if err != nil {
		t.Fatal(err)
	}
	if im.FieldID == nil {
		t.Fatalf("after an extension the index records no field id")
	}
	if idx, un := im.Coverage(mustLoad(t, tb)); un != 0 || idx != 3000 {
		t.Fatalf("after the swap's extension the index covers %d rows, %d not; want all 3000", idx, un)
	}
}

// TestExtensionGivingUpKeepsNamedFiles: an extension that gives its build
// up (the column's field changed after it read the table) removes only
// the files no definition names. Another extension of the same build
// made and committed the same file (the names are a function of the
// build, the field and the fragment) meanwhile: it stays.
func TestExtensionGivingUpKeepsNamedFiles(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	cat := lanceIndexCatalog(t, root)
	// A second catalog on the same warehouse without index maintenance.
	plain := openCatalog(t, root, table.Options{Format: table.FormatLance, MaxRowsPerFragment: 1000})
	tb, _ := xyTable(t, cat)
	// An append through a catalog without index maintenance: fragment 3
	// is not indexed yet.
	other, err := plain.OpenTable(ctx, []string{"ns", "t"})
	if err != nil {
		t.Fatal(err)
	}
	r1 := xyRows(3000, 1000)
	defer r1.Release()
	if _, _, err := other.Insert(ctx, reader(r1), "append"); err != nil {
		t.Fatal(err)
	}
	fired := false
	index.BeforeDefCommit(func() {
		if fired {
			return
		}
		fired = true
		// Another extension builds fragment 3 and commits; then the
		// names x and y swap (no maintenance runs).
		if n, err := index.Extend(ctx, tb, "x_idx"); err != nil || n != 1 {
			t.Errorf("the other extension: %d fragments (%v), want 1", n, err)
		}
		x, y := "y", "x"
		if _, err := other.AlterColumns(ctx, []table.Alteration{{Field: "a0", Path: "x", Rename: &x}, {Field: "a1", Path: "y", Rename: &y}}); err != nil {
			t.Error(err)
		}
	})
	defer index.BeforeDefCommit(nil)
	if _, err := index.Extend(ctx, tb, "x_idx"); err != nil {
		t.Fatal(err)
	}
	index.BeforeDefCommit(nil)
	im, err := index.Load(ctx, tb, "x_idx")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := os.ReadDir(filepath.Join(root, "ns", "t.lance", "_mvq_indices", im.UUID))
	have := map[string]bool{}
	for _, f := range files {
		have[f.Name()] = true
	}
	for _, c := range im.Fragments {
		name := fmt.Sprintf("frag-%d-i%d.idx", c.ID, *im.FieldID)
		if !have[name] {
			t.Errorf("the definition names fragment %d, whose file %s is gone (files: %v)", c.ID, name, have)
		}
	}
}

// xySchema: id, x (= id) and y (= id + 100000).
var xySchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "y", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

// xyRows are rows from..from+n-1 of xySchema.
func xyRows(from, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, xySchema)
	defer b.Release()
	for i := from; i < from+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.Int64Builder).Append(int64(i))
		b.Field(2).(*array.Int64Builder).Append(int64(i) + 100000)
	}
	return b.NewRecordBatch()
}

// xyTable creates table ns.t of cat with rows 0..2999 of xySchema and a
// BTREE index x_idx on x.
func xyTable(t *testing.T, cat *table.Catalog) (*table.Table, *index.Meta) {
	t.Helper()
	ctx := context.Background()
	rec := xyRows(0, 3000)
	defer rec.Release()
	tb, _, err := cat.CreateTable(ctx, []string{"ns", "t"}, xySchema, reader(rec), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	im, err := index.Create(ctx, tb, index.Spec{Column: "x", Type: "BTREE"})
	if err != nil {
		t.Fatal(err)
	}
	return tb, im
}
