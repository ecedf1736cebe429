package refresh

import (
	"testing"

	"github.com/mvq-dev/mvq/table"
)

// TestTwoViewsOneJobIDReadTheirOwnColumns: the source read of a work item
// is cached per job, view and source version; two views refreshed under
// one job id (a caller's choice of ids) each read the columns their own
// query names.
func TestTwoViewsOneJobIDReadTheirOwnColumns(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0, frag1)
	ids := b.create(t, "ids", CreateRequest{Kind: "query", SourceQuery: `SELECT id FROM "docs$articles"`})
	titles := b.create(t, "titles", CreateRequest{Kind: "query", SourceQuery: `SELECT id, title FROM "docs$articles"`})
	b.expandAll(t, b.plan(t, ids, "j1", Options{}))
	p := b.plan(t, titles, "j1", Options{})
	var rows int64
	for i := range p.Items {
		r, err := b.e.Expand(b.ctx, p, i)
		if err != nil {
			t.Fatalf("item %d of the second view under the same job id: %v", i, err)
		}
		rows += r.RowsWritten
	}
	if rows != 6 {
		t.Fatalf("the second view wrote %d rows, want 6", rows)
	}
}
