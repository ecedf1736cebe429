package index_test

import (
	"context"
	"errors"
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

// lanceIndexCatalog is a Lance-format catalog on a local warehouse in
// root, maintaining indexes, with a namespace ns.
func lanceIndexCatalog(t *testing.T, root string) *table.Catalog {
	t.Helper()
	return newCatalogAt(t, root, table.Options{Format: table.FormatLance, MaxRowsPerFragment: 1000})
}

// filesUnder lists the files under dir, relative to it.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if !info.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestIndexesOutOfLanceCleanup: mvq's index files live outside Lance's
// _indices/, so LanceDB's optimize with cleanup of everything older than
// now (unverified files included) leaves them, while it does delete mvq
// index files left in _indices/ (the layout before); a LanceDB index in
// _indices/ stays LanceDB's.
func TestIndexesOutOfLanceCleanup(t *testing.T) {
	o := lancedb.Need(t)
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	cat := lanceIndexCatalog(t, root)
	rec := scalarRows(0, 3000)
	defer rec.Release()
	tb, _, err := cat.CreateTable(ctx, []string{"ns", "s"}, scalarSchema, reader(rec), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := index.Create(ctx, tb, index.Spec{Column: "k", Type: "BITMAP"}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "ns", "s.lance")
	ours := filepath.Join(dir, strings.TrimSuffix(table.IndexDir, "/"))
	mine := filesUnder(t, ours)
	if len(mine) < 2 {
		t.Fatalf("mvq index files under %s: %v", ours, mine)
	}
	o.CreateIndex(t, dir, "id", "btree")
	// The layout before: a copy of mvq's files in Lance's folder.
	legacy := filepath.Join(dir, "_indices")
	for _, rel := range mine {
		b, err := os.ReadFile(filepath.Join(ours, rel))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(legacy, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := rowsOf(t, tb, "k = 3", 0)

	o.OptimizeCleanup(t, dir)

	if got := filesUnder(t, ours); strings.Join(got, ",") != strings.Join(mine, ",") {
		t.Fatalf("mvq index files after LanceDB's cleanup: %v, want %v", got, mine)
	}
	for _, rel := range mine {
		if _, err := os.Stat(filepath.Join(legacy, rel)); !os.IsNotExist(err) {
			t.Fatalf("LanceDB's cleanup left %s in _indices/ (%v): the test no longer shows what it is for", rel, err)
		}
	}
	if ix := o.Indices(t, dir); len(ix) != 1 || ix[0].Columns[0] != "id" {
		t.Fatalf("LanceDB indexes after its cleanup: %+v", ix)
	}
	if _, err := index.Load(ctx, tb, "k_idx"); err != nil {
		t.Fatalf("mvq's index after LanceDB's cleanup: %v", err)
	}
	if got := rowsOf(t, tb, "k = 3", 0); len(got) != len(want) {
		t.Fatalf("k = 3: %d rows after LanceDB's optimize, %d before", len(got), len(want))
	}
}

// TestUpgradeMovesIndexes: a warehouse whose mvq indexes are in Lance's
// _indices/ (the first Lance layout) is refused at start with a message
// naming the upgrade command; the upgrade moves them (only them: a LanceDB
// index stays) and the index serves again.
func TestUpgradeMovesIndexes(t *testing.T) {
	o := lancedb.Need(t)
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	cat := lanceIndexCatalog(t, root)
	rec := scalarRows(0, 3000)
	defer rec.Release()
	tb, _, err := cat.CreateTable(ctx, []string{"ns", "s"}, scalarSchema, reader(rec), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := index.Create(ctx, tb, index.Spec{Column: "s", Type: "BTREE"}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "ns", "s.lance")
	o.CreateIndex(t, dir, "id", "btree")
	lanceOwn := filesUnder(t, filepath.Join(dir, "_indices"))
	// Back to the first layout: mvq's files in _indices/, no marker.
	ours := filepath.Join(dir, strings.TrimSuffix(table.IndexDir, "/"))
	mine := filesUnder(t, ours)
	for _, rel := range mine {
		p := filepath.Join(dir, "_indices", rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(ours, rel), p); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.Remove(filepath.Join(root, table.WarehouseMarker))

	err = table.CheckWarehouseFormat(ctx, cat)
	if !errors.Is(err, table.ErrNotUpgraded) || !strings.Contains(err.Error(), table.UpgradeCommand) || !strings.Contains(err.Error(), "_indices") {
		t.Fatalf("start check on mvq indexes in _indices/: %v", err)
	}
	rep, err := table.Upgrade(ctx, cat, table.UpgradeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.IndexFiles != len(mine) {
		t.Fatalf("upgrade moved %d index files, want %d", rep.IndexFiles, len(mine))
	}
	if got := filesUnder(t, ours); strings.Join(got, ",") != strings.Join(mine, ",") {
		t.Fatalf("after the upgrade %s holds %v, want %v", ours, got, mine)
	}
	if got := filesUnder(t, filepath.Join(dir, "_indices")); strings.Join(got, ",") != strings.Join(lanceOwn, ",") {
		t.Fatalf("after the upgrade _indices/ holds %v, want LanceDB's own %v", got, lanceOwn)
	}
	if err := table.CheckWarehouseFormat(ctx, cat); err != nil {
		t.Fatalf("start check after the upgrade: %v", err)
	}
	again, err := table.Upgrade(ctx, cat, table.UpgradeOptions{})
	if err != nil || again.IndexFiles != 0 {
		t.Fatalf("a second upgrade moved %d index files (%v)", again.IndexFiles, err)
	}
	im, err := index.Load(ctx, tb, "s_idx")
	if err != nil {
		t.Fatal(err)
	}
	m, err := tb.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ix, _ := im.Coverage(m); ix != 3000 {
		t.Fatalf("the moved index covers %d rows, want 3000", ix)
	}
	if ix := o.Indices(t, dir); len(ix) != 1 || ix[0].Stats.NumIndexedRows != 3000 {
		t.Fatalf("LanceDB's index after the upgrade: %+v", ix)
	}
}

// TestIndexAfterLanceDBRewritesColumn: LanceDB's alter_columns writes a
// cast column to a new data file under the same fragment ids and
// deletion files; a round trip through float32 changes the values of an
// indexed float64 column. Extending the index then indexes the new values
// (its per-fragment files are named by the fragment's data files too),
// and mvq's indexed filter answers what LanceDB does.
func TestIndexAfterLanceDBRewritesColumn(t *testing.T) {
	o := lancedb.Need(t)
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	cat := lanceIndexCatalog(t, root)
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	for i := 0; i < 3000; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.Float64Builder).Append(float64(i) / 10) // most not a float32
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	tb, _, err := cat.CreateTable(ctx, []string{"ns", "f"}, s, reader(rec), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := index.Create(ctx, tb, index.Spec{Column: "f", Type: "BTREE"}); err != nil {
		t.Fatal(err)
	}
	if n, err := tb.CountRows(ctx, 0, "f = 0.1"); err != nil || n != 1 {
		t.Fatalf("f = 0.1 before: %d rows (%v)", n, err)
	}
	dir := filepath.Join(root, "ns", "f.lance")
	o.AlterColumns(t, dir, map[string]string{"f": "float32"})
	o.AlterColumns(t, dir, map[string]string{"f": "float64"})
	if _, err := index.Extend(ctx, tb, "f_idx"); err != nil {
		t.Fatal(err)
	}
	for _, where := range []string{"f = 1e-1", "f = 1.0000000149011612e-1", "f > 9e-2 AND f < 1.1e-1", "f > 2.9985e2"} {
		want := o.Count(t, dir, where)
		if n, err := tb.CountRows(ctx, 0, where); err != nil || n != want {
			t.Fatalf("%s after LanceDB's round trip through float32: mvq counts %d rows (%v), LanceDB %d", where, n, err, want)
		}
		if got := rowsOf(t, tb, where, 0); int64(len(got)) != want {
			t.Fatalf("%s after LanceDB's round trip through float32: mvq reads %d rows, LanceDB %d", where, len(got), want)
		}
	}
	// (Literals in exponent form are doubles, which the index serves.)
	if o.Count(t, dir, "f = 1.0000000149011612e-1") != 1 {
		t.Fatal("LanceDB's cast did not change 0.1: the test no longer shows what it is for")
	}
}
