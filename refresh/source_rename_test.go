package refresh

import (
	"net/url"
	"testing"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
	"github.com/mvq-dev/mvq/table"
)

// TestLanceDBDropAndRenameRefreshesFull: LanceDB drops a source column a
// query view reads and renames another column to its name. The fragments
// keep their data files, but the view's column now comes from another
// column of them: the next refresh recomputes the view (not an
// incremental no-op that keeps the old values), and the view holds the
// renamed column's values.
func TestLanceDBDropAndRenameRefreshesFull(t *testing.T) {
	o := oracle.Need(t)
	t.Parallel()
	b := setup(t, table.Options{})
	src := b.source(t, frag0)
	id := b.create(t, "q", CreateRequest{Kind: "query", SourceQuery: `SELECT id, title FROM "docs$articles"`})
	b.refresh(t, id, "r1", Options{})
	u, err := url.Parse(src.Location())
	if err != nil {
		t.Fatal(err)
	}
	o.DropColumns(t, u.Path, "title")
	o.RenameColumn(t, u.Path, "lang", "title")
	p, _ := b.refresh(t, id, "r2", Options{})
	if p.Mode != ModeFull {
		t.Fatalf("refresh after LanceDB's drop and rename: mode %s, want full", p.Mode)
	}
	got := b.rows(t, id)
	fresh := b.create(t, "q2", CreateRequest{Kind: "query", SourceQuery: `SELECT id, title FROM "docs$articles"`})
	b.refresh(t, fresh, "f1", Options{})
	want := b.rows(t, fresh)
	if len(got) != len(want) {
		t.Fatalf("view %v, a fresh view %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("view %v, a fresh view %v", got, want)
		}
	}
}
