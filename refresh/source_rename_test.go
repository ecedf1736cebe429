package refresh

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
	"github.com/mvq-dev/mvq/table"
)

// TestLanceDBDropAndRenameRefreshesFull: LanceDB drops a source column a
// query view reads and renames another column to its name. The fragments
// keep their data files, but the view's column now comes from another
// column of them: the next refresh recomputes the view (not an
// incremental no-op that keeps the old values), and the view holds the
// renamed column's values. With cleanup, LanceDB's optimize then removes
// the version the view last refreshed from (the one fragment, without
// deletions, keeps its id): the plan cannot compare with that version any
// more, and refreshes in full, not no_op.
func TestLanceDBDropAndRenameRefreshesFull(t *testing.T) {
	o := oracle.Need(t)
	for _, cleanup := range []bool{false, true} {
		t.Run(fmt.Sprintf("cleanup=%v", cleanup), func(t *testing.T) {
			t.Parallel()
			b, id, dir, sql := localQueryView(t)
			o.DropColumns(t, dir, "title")
			o.RenameColumn(t, dir, "lang", "title")
			if cleanup {
				o.OptimizeCleanup(t, dir)
			}
			sameAsFreshQueryView(t, b, id, sql, "LanceDB's drop and rename")
		})
	}
}

// sameAsFreshQueryView refreshes query view id and compares it with a new
// view of sql refreshed from scratch; the refresh must be full.
func sameAsFreshQueryView(t *testing.T, b *bundle, id []string, sql string, name string) {
	t.Helper()
	p, _ := b.refresh(t, id, "r2", Options{})
	if p.Mode != ModeFull {
		t.Fatalf("%s: refresh mode %s, want full", name, p.Mode)
	}
	got := b.rows(t, id)
	fresh := b.create(t, "q2", CreateRequest{Kind: "query", SourceQuery: sql})
	b.refresh(t, fresh, "f1", Options{})
	want := b.rows(t, fresh)
	if len(got) != len(want) {
		t.Fatalf("%s: view %v, a fresh view %v", name, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: view %v, a fresh view %v", name, got, want)
		}
	}
}

// TestMvqSwapRenameRefreshesFull: mvq swaps the names of two source
// columns (plain fragments, no column map): the view's column now reads
// the other column, so the next refresh is full and equals a new view.
func TestMvqSwapRenameRefreshesFull(t *testing.T) {
	b := setup(t, table.Options{Format: table.FormatLance})
	src := b.source(t, frag0)
	sql := `SELECT id, title FROM "docs$articles"`
	id := b.create(t, "q", CreateRequest{Kind: "query", SourceQuery: sql})
	b.refresh(t, id, "r1", Options{})
	x, y := "lang", "title"
	if _, err := src.AlterColumns(context.Background(), []table.Alteration{{Field: "a0", Path: "title", Rename: &x}, {Field: "a1", Path: "lang", Rename: &y}}); err != nil {
		t.Fatal(err)
	}
	sameAsFreshQueryView(t, b, id, sql, "swap")
}

// TestMvqDropAndRenameRefreshesFull: mvq drops a column a view reads and
// renames another to its name; the next refresh is full and equals a new
// view.
func TestMvqDropAndRenameRefreshesFull(t *testing.T) {
	b := setup(t, table.Options{Format: table.FormatLance})
	src := b.source(t, frag0)
	sql := `SELECT id, title FROM "docs$articles"`
	id := b.create(t, "q", CreateRequest{Kind: "query", SourceQuery: sql})
	b.refresh(t, id, "r1", Options{})
	if _, err := src.DropColumns(context.Background(), []string{"title"}); err != nil {
		t.Fatal(err)
	}
	y := "title"
	if _, err := src.AlterColumns(context.Background(), []table.Alteration{{Field: "a1", Path: "lang", Rename: &y}}); err != nil {
		t.Fatal(err)
	}
	sameAsFreshQueryView(t, b, id, sql, "drop+rename")
}

// TestLanceDBDropAndRenameAfterStruct: as above with a struct column
// before the ones a view reads. LanceDB's drop turns every fragment into
// a layout of parts (leaf columns), where the old layout numbered
// top-level columns; the renamed column's leaf number equals the dropped
// column's top-level number, so comparing file columns alone saw no
// move. Lance field ids tell the columns apart.
func TestLanceDBDropAndRenameAfterStruct(t *testing.T) {
	o := oracle.Need(t)
	t.Parallel()
	b := setup(t, table.Options{})
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			arrow.Field{Name: "b", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), Nullable: true},
		{Name: "w", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "x", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "y", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, s, strings.NewReader(
		`[{"id":1,"s":{"a":1,"b":2},"w":"w1","x":"x1","y":"y1"},{"id":2,"s":{"a":3,"b":4},"w":"w2","x":"x2","y":"y2"}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	rdr, _ := array.NewRecordReader(s, []arrow.RecordBatch{rec})
	src, _, err := b.cat.CreateTable(b.ctx, srcID, s, rdr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	sql := `SELECT id, x FROM "docs$articles"`
	id := b.create(t, "q", CreateRequest{Kind: "query", SourceQuery: sql})
	b.refresh(t, id, "r1", Options{})
	dir := localDir(t, src)
	// A drop of a column the view does not read turns the fragments into
	// parts too; the view's columns did not move.
	o.DropColumns(t, dir, "y")
	if p, _ := b.refresh(t, id, "r-y", Options{}); p.Mode == ModeFull {
		t.Fatalf("refresh after LanceDB dropped a column the view does not read: mode %s", p.Mode)
	}
	o.DropColumns(t, dir, "x")
	o.RenameColumn(t, dir, "w", "x")
	sameAsFreshQueryView(t, b, id, sql, "LanceDB's drop and rename after a struct")
	if got := b.rows(t, id); len(got) != 2 || !strings.Contains(got[0], "w1") {
		t.Fatalf("view after the drop and rename: %v, want the values of w", got)
	}
}

// TestLanceDBOverwriteRefreshesView: LanceDB's overwrite numbers the new
// version's fragments from 0 again, so the new fragment 0 holds other
// rows than the fragment 0 the view last refreshed from, with no
// deletion file. The next refresh does not keep the old rows.
func TestLanceDBOverwriteRefreshesView(t *testing.T) {
	o := oracle.Need(t)
	t.Parallel()
	b, id, dir, sql := localQueryView(t)
	rdr := articles(t, article{7, "Seven", "en", "s"}, article{8, "Eight", "en", "h"})
	defer rdr.Release()
	rdr.Next()
	o.Write(t, dir, rdr.RecordBatch(), "", "overwrite")
	sameAsFreshQueryView(t, b, id, sql, "LanceDB's overwrite")
}

// localQueryView makes a query view of the articles' ids and titles
// (frag0), refreshed once, and answers it with the source's local folder
// for LanceDB to change (localDir).
func localQueryView(t *testing.T) (*bundle, []string, string, string) {
	t.Helper()
	b := setup(t, table.Options{})
	src := b.source(t, frag0)
	sql := `SELECT id, title FROM "docs$articles"`
	id := b.create(t, "q", CreateRequest{Kind: "query", SourceQuery: sql})
	b.refresh(t, id, "r1", Options{})
	return b, id, localDir(t, src), sql
}

// localDir is the local folder of table src for LanceDB to change; it
// skips the test where the warehouse is not local (make test-s3 runs this
// package on S3; LanceDB here writes a local dataset).
func localDir(t *testing.T, src *table.Table) string {
	t.Helper()
	u, err := url.Parse(src.Location())
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "file" {
		t.Skip("LanceDB changes the source on a local warehouse only")
	}
	return u.Path
}

// TestMvqAddColumnsKeepsViewIncremental: mvq's add_columns writes every
// source fragment again under its id (a new data file with the new
// column); the rows are the same, so a view over the source stays
// incremental (no_op here), and an overwrite check does not take it for
// new rows.
func TestMvqAddColumnsKeepsViewIncremental(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{Format: table.FormatLance})
	b.source(t, frag0)
	sql := `SELECT id, title FROM "docs$articles"`
	id := b.create(t, "q", CreateRequest{Kind: "query", SourceQuery: sql})
	b.refresh(t, id, "r1", Options{})
	before := b.rows(t, id)
	if _, _, err := b.e.AddColumns(b.ctx, srcID, []AddColumnEntry{{Name: "title_len", Computed: str("length(title) * 10")}}); err != nil {
		t.Fatal(err)
	}
	if p, _ := b.refresh(t, id, "r2", Options{}); p.Mode != ModeNoOp {
		t.Fatalf("refresh after mvq's add_columns: mode %s (%s), want no_op", p.Mode, p.Reason)
	}
	if got := b.rows(t, id); !slices.Equal(got, before) {
		t.Fatalf("view after add_columns %v, before %v", got, before)
	}
}
