package refresh

import (
	"fmt"
	"sync"
	"testing"

	"github.com/mvq-dev/mvq/table"
)

// TestViewRefreshRacesSourceRename renames a view's source (back and
// forth between two names) while the view refreshes, many times. A
// refresh that loses the race fails as a whole, without committing, and
// its retry (as the job system retries) succeeds; every refresh that
// commits reads the source by its identity (never an empty or other
// table), incrementally, and after each round the view holds exactly the
// source's rows.
func TestViewRefreshRacesSourceRename(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0)
	view := b.create(t, "q", CreateRequest{Kind: "query", SourceQuery: `SELECT id, title FROM "docs$articles"`})
	b.refresh(t, view, "j0", Options{})
	names := [][]string{srcID, {"docs", "articles2"}}
	retried := 0
	for i := range 12 {
		cur, next := names[i%2], names[(i+1)%2]
		src, err := b.cat.OpenTable(b.ctx, cur)
		if err != nil {
			t.Fatal(err)
		}
		b.insert(t, src, article{int64(100 + i), fmt.Sprintf("T%d", i), "en", "x"})
		var wg sync.WaitGroup
		var renameErr error
		start := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			renameErr = b.cat.RenameTable(b.ctx, cur, next)
		}()
		var res Result
		var p *Plan
		var lastErr error
		close(start)
		for attempt := 0; attempt < 5; attempt++ {
			if p, res, lastErr = b.tryRefresh(view, fmt.Sprintf("j%d-%d", i+1, attempt)); lastErr == nil {
				break
			}
			retried++
		}
		wg.Wait()
		if renameErr != nil {
			t.Fatalf("round %d: rename: %v", i, renameErr)
		}
		if lastErr != nil {
			t.Fatalf("round %d: refresh failed on every retry: %v", i, lastErr)
		}
		if p.Mode != ModeIncremental || res.RowsAdded != 1 {
			t.Fatalf("round %d: plan %s (%s), result %+v", i, p.Mode, p.Reason, res)
		}
		if got, want := len(b.rows(t, view)), 5+i; got != want {
			t.Fatalf("round %d: view has %d rows, want %d", i, got, want)
		}
	}
	t.Logf("refreshes retried after losing to a rename: %d", retried)
}

// tryRefresh is refresh returning the error instead of failing the test.
func (b *bundle) tryRefresh(id []string, job string) (*Plan, Result, error) {
	opts := Options{}
	if err := b.e.Prepare(b.ctx, id, &opts); err != nil {
		return nil, Result{}, err
	}
	p, err := b.e.Plan(b.ctx, id, job, opts)
	if err != nil {
		return nil, Result{}, err
	}
	var items []ItemResult
	for i := range p.Items {
		r, err := b.e.Expand(b.ctx, p, i)
		if err != nil {
			return p, Result{}, err
		}
		items = append(items, r)
	}
	res, err := b.e.Commit(b.ctx, p, items)
	return p, res, err
}
