package refresh

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// TestChunkPanicFailsTheItem: a panic in a chunking goroutine (injected
// here; in life a row that trips a bug) fails the work item with an
// internal error instead of killing the process, and the item succeeds
// when it is run again without the fault.
func TestChunkPanicFailsTheItem(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0, frag1)
	id := b.create(t, "chunks", CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$articles"`, UDTFSpec: chunkerEntry(fixed4)})
	var calls atomic.Int32
	b.e.chunkHook = func() {
		if calls.Add(1) == 1 {
			panic("bad row")
		}
	}
	p := b.plan(t, id, "j1", Options{IntraApplierConcurrency: 2})
	_, err := b.e.Expand(b.ctx, p, 0)
	if err == nil {
		t.Fatal("the item succeeded despite the panic")
	}
	if errs.CodeOf(err) != errs.CodeInternal || !strings.Contains(err.Error(), "chunk rows failed") {
		t.Fatalf("err = %v (code %v), want an internal chunk rows error", err, errs.CodeOf(err))
	}
	if !strings.Contains(err.Error(), "bad row") {
		t.Fatalf("err = %v does not carry the panic", err)
	}
	if calls.Load() < 1 {
		t.Fatal("the hook never ran")
	}
	res, err := b.e.Commit(b.ctx, p, b.expandAll(t, p))
	if err != nil {
		t.Fatal(err)
	}
	// aaaa bbbb cc, dddd, eeee ffff, g.
	if got := len(b.rows(t, id)); got != 7 || res.RowsAdded != 7 {
		t.Fatalf("view has %d rows, commit added %d", got, res.RowsAdded)
	}
}
