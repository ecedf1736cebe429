package refresh

import (
	"testing"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// TestViewFollowsRenamedSource: a view binds to its source's identity, so
// after the source is renamed (even into another namespace, and with a new
// table created under the old name) the view keeps refreshing from it,
// incrementally.
func TestViewFollowsRenamedSource(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0)
	id := b.create(t, "q", CreateRequest{Kind: "query", SourceQuery: `SELECT id, title FROM "docs$articles" WHERE lang = 'en'`})
	b.refresh(t, id, "j1", Options{})

	if err := b.cat.CreateNamespace(b.ctx, []string{"archive"}, "", nil); err != nil {
		t.Fatal(err)
	}
	newID := []string{"archive", "articles2"}
	if err := b.cat.RenameTable(b.ctx, srcID, newID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.cat.OpenTable(b.ctx, srcID); errs.CodeOf(err) != errs.CodeTableNotFound {
		t.Fatalf("old name after rename: %v", err)
	}
	// Another table now takes the old name: the view must not read it.
	if _, _, err := b.cat.CreateTable(b.ctx, srcID, articleSchema, articles(t, article{100, "Other", "en", "x"}), "", nil); err != nil {
		t.Fatal(err)
	}
	moved, err := b.cat.OpenTable(b.ctx, newID)
	if err != nil {
		t.Fatal(err)
	}
	b.insert(t, moved, frag1...)
	p, res := b.refresh(t, id, "j2", Options{})
	if p.Mode != ModeIncremental || res.RowsAdded != 2 {
		t.Fatalf("refresh after rename: plan %s (%s), result %+v", p.Mode, p.Reason, res)
	}
	eqRows(t, "view", b.rows(t, id), []string{"0:0|1|Alpha", "0:2|3|Gamma", "0:3|4|Delta", "1:0|5|Eps", "1:1|6|Zeta"})

	// Renaming a view is refused; renaming onto an existing table is a conflict.
	if err := b.cat.RenameTable(b.ctx, id, []string{"docs", "q2"}); errs.CodeOf(err) != errs.CodeInvalidInput {
		t.Fatalf("rename a view: %v", err)
	}
	if err := b.cat.RenameTable(b.ctx, newID, srcID); errs.CodeOf(err) != errs.CodeTableAlreadyExists {
		t.Fatalf("rename onto an existing table: %v", err)
	}
}
