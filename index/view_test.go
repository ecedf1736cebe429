package index_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// refreshView runs one refresh of view id in this process (plan, expand
// every item, commit), as a worker does.
func refreshView(t testing.TB, e *refresh.Engine, id []string, job string) {
	t.Helper()
	ctx := context.Background()
	var opts refresh.Options
	if err := e.Prepare(ctx, id, &opts); err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(ctx, id, job, opts)
	if err != nil {
		t.Fatal(err)
	}
	results := make([]refresh.ItemResult, len(p.Items))
	for i := range p.Items {
		if results[i], err = e.Expand(ctx, p, i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Commit(ctx, p, results); err != nil {
		t.Fatal(err)
	}
}

// TestIndexesFollowCommits: a commit extends the table's indexes to the
// fragments it added (an insert into a table, a refresh of a view), so
// an index on a view covers every row after each refresh, and filtered
// queries on the view answer the same with and without it.
func TestIndexesFollowCommits(t *testing.T) {
	ctx := context.Background()
	cat := newCatalog(t, table.Options{MaxRowsPerFragment: 500})
	rec := scalarRows(0, 2000)
	src, _, err := cat.CreateTable(ctx, []string{"ns", "src"}, scalarSchema, reader(rec), "", nil)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := index.Create(ctx, src, index.Spec{Column: "k", Type: "BITMAP"}); err != nil {
		t.Fatal(err)
	}
	more := scalarRows(2000, 2600)
	if _, _, err := src.Insert(ctx, reader(more), ""); err != nil {
		t.Fatal(err)
	}
	more.Release()
	m, _ := src.Load(ctx, 0)
	im, _ := index.Load(ctx, src, "k_idx")
	if ix, unix := im.Coverage(m); ix != 2600 || unix != 0 {
		t.Fatalf("after an insert: %d indexed, %d not", ix, unix)
	}

	e := refresh.NewEngine(cat)
	t.Cleanup(func() { _ = e.Close() })
	view := []string{"ns", "v"}
	if _, err := e.CreateView(ctx, view, refresh.CreateRequest{Kind: "query", SourceQuery: `SELECT id, k, s FROM "ns$src" WHERE id % 2 = 0`}); err != nil {
		t.Fatal(err)
	}
	refreshView(t, e, view, "job-1")
	vt, err := cat.OpenTable(ctx, view)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := index.Create(ctx, vt, index.Spec{Column: "id", Type: "BTREE"}); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		from := 2600 + round*400
		add := scalarRows(from, from+400)
		if _, _, err := src.Insert(ctx, reader(add), ""); err != nil {
			t.Fatal(err)
		}
		add.Release()
		refreshView(t, e, view, fmt.Sprintf("job-%d", round+2))
		vm, _ := vt.Load(ctx, 0)
		vim, _ := index.Load(ctx, vt, "id_idx")
		if ix, unix := vim.Coverage(vm); unix != 0 || ix != vm.NumRows() || ix != int64((from+400)/2) {
			t.Fatalf("refresh %d: %d indexed, %d not, view has %d rows", round, ix, unix, vm.NumRows())
		}
		filter := fmt.Sprintf("id >= %d AND id < %d", from-10, from+10)
		with := rowsOf(t, vt, filter, 0)
		vt.Catalog().UseIndexes(scanOnly)
		without := rowsOf(t, vt, filter, 0)
		vt.Catalog().UseIndexes(index.Maintenance())
		if fmt.Sprint(with) != fmt.Sprint(without) || len(with) != 10 {
			t.Fatalf("refresh %d, %s: %v vs %v", round, filter, with, without)
		}
	}
}
