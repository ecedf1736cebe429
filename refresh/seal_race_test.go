package refresh

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// TestViewRefreshAfterInsertsRaceRename: writers insert into a view's
// source under its old name while it is renamed (back and forth), many
// times. Every insert either succeeded, and its row reaches the view, or
// failed with the clear error of a moved table; the next refresh (by
// identity, under the new name) is incremental and the view holds exactly
// the source's rows.
func TestViewRefreshAfterInsertsRaceRename(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0)
	view := b.create(t, "q", CreateRequest{Kind: "query", SourceQuery: `SELECT id, title FROM "docs$articles"`})
	b.refresh(t, view, "j0", Options{})
	names := [][]string{srcID, {"docs", "articles2"}}
	want := len(b.rows(t, view))
	landed := 0
	for i := range 8 {
		cur, next := names[i%2], names[(i+1)%2]
		src, err := b.cat.OpenTable(b.ctx, cur)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		ok := 0
		var wg sync.WaitGroup
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range 6 {
					id := int64(1000*(i+1) + 10*w + k)
					_, _, err := src.Insert(b.ctx, articles(t, article{id, fmt.Sprintf("T%d", id), "en", "x"}), "append")
					switch {
					case err == nil:
						mu.Lock()
						ok++
						mu.Unlock()
					case errs.CodeOf(err) == errs.CodeTableNotFound:
					case errs.CodeOf(err) == errs.CodeConcurrentModification && strings.Contains(err.Error(), "while this write ran"):
					default:
						t.Errorf("round %d: insert %d: %v", i, id, err)
					}
				}
			}()
		}
		if err := b.cat.RenameTable(b.ctx, cur, next); err != nil {
			t.Fatalf("round %d: rename: %v", i, err)
		}
		wg.Wait()
		p, res, err := b.tryRefresh(view, fmt.Sprintf("j%d", i+1))
		if err != nil {
			t.Fatalf("round %d: refresh after the rename: %v", i, err)
		}
		mode := ModeIncremental
		if ok == 0 {
			mode = ModeNoOp // every insert lost to the rename
		}
		if p.Mode != mode || res.RowsAdded != int64(ok) {
			t.Fatalf("round %d: plan %s (%s), result %+v; %d inserts landed", i, p.Mode, p.Reason, res, ok)
		}
		want += ok
		landed += ok
		moved, err := b.cat.OpenTable(b.ctx, next)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := moved.CountRows(b.ctx, 0, ""); err != nil || int(n) != want {
			t.Fatalf("round %d: source has %d rows (%v), want %d", i, n, err, want)
		}
		if got := len(b.rows(t, view)); got != want {
			t.Fatalf("round %d: view has %d rows, want %d", i, got, want)
		}
	}
	t.Logf("%d inserts landed across the renames", landed)
}
