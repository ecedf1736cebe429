package refresh

import (
	"context"
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/internal/testenv"
	"github.com/mvq-dev/mvq/table"
)

// TestViewSQLMemoryBomb: a udtf view whose source_query builds a string of
// about 1 GB per source row (under DuckDB's default memory_limit it
// OOM-killed the worker, and each worker the task was handed to next;
// per row, so the view's checks at create pass) fails its own work item, not retryable, with an out-of-memory error naming the share of
// MVQ_QUERY_MEMORY, when the worker's engine runs under a memory budget;
// the engine serves the next view.
func TestViewSQLMemoryBomb(t *testing.T) {
	t.Parallel()
	db, err := duck.Open(duck.Options{Threads: 1, Sessions: 2, MemoryBudget: 2 * duck.MinSessionMemory})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	wh, err := table.OpenWarehouse(ctx, testenv.Warehouse(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	cat := table.NewCatalog(wh, db, table.Options{Indexes: index.Maintenance()})
	if err := cat.CreateNamespace(ctx, []string{"docs"}, "", nil); err != nil {
		t.Fatal(err)
	}
	b := &bundle{ctx: ctx, cat: cat, e: NewEngine(cat)}
	b.source(t, frag0)
	id := b.create(t, "bomb", CreateRequest{Kind: "udtf",
		SourceQuery: `SELECT id FROM "docs$articles" WHERE (SELECT length(string_agg(repeat('x', 1000000), '')) FROM range(id * 1000)) > 0`})
	p := b.plan(t, id, "job-bomb", Options{})
	_, err = b.e.Expand(ctx, p, 0)
	if err == nil || errs.CodeOf(err) != errs.CodeInvalidInput || retryable(err) ||
		!strings.Contains(err.Error(), "out of memory") || !strings.Contains(err.Error(), "MVQ_QUERY_MEMORY") {
		t.Fatalf("expand the bomb: %v, want a non-retryable out-of-memory error naming MVQ_QUERY_MEMORY", err)
	}
	ok := b.create(t, "fine", CreateRequest{Kind: "udtf", SourceQuery: `SELECT lang, count(*)::INT AS n FROM "docs$articles" GROUP BY lang`})
	if _, res := b.refresh(t, ok, "job-fine", Options{}); res.RowsAdded == 0 {
		t.Fatalf("next view: %+v", res)
	}
}
