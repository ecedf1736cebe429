package table

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/errs"
)

// sealFilesLeft lists the seal markers and seals left under key.
func sealFilesLeft(t testing.TB, c *Catalog, key string) []string {
	t.Helper()
	files, err := c.wh.Walk(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, sealExt) {
			out = append(out, f)
		}
	}
	return out
}

// raceInserts runs writers inserting one row each (distinct ids from
// 1000 on) into docs.a while move runs, until move returned and each
// writer tried a few more times. It returns the ids whose insert
// succeeded; every failure must be the clear error of a moved table (409
// naming the move) or the old name not found.
func raceInserts(t *testing.T, c *Catalog, tb *Table, move func() error) []int64 {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var ok []int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			after := 0
			for i := 0; after < 3 && i < 200; i++ {
				select {
				case <-done:
					after++
				default:
				}
				id := 1000 + w*1000 + i
				_, _, err := tb.Insert(ctx, rows(t, id, id+1), "append")
				switch {
				case err == nil:
					mu.Lock()
					ok = append(ok, int64(id))
					mu.Unlock()
				case errs.CodeOf(err) == errs.CodeTableNotFound:
				case errs.CodeOf(err) == errs.CodeConcurrentModification && strings.Contains(err.Error(), "while this write ran"):
				default:
					t.Errorf("insert %d: %v (code %d)", id, err, errs.CodeOf(err))
				}
			}
		}()
	}
	err := move()
	close(done)
	wg.Wait()
	if err != nil {
		t.Fatalf("move: %v", err)
	}
	sort.Slice(ok, func(i, j int) bool { return ok[i] < ok[j] })
	return ok
}

// checkMoved asserts the moved table holds the first 10 rows and exactly
// the inserts that succeeded, one dense version each, no seal came
// along, and nothing is left under the old name.
func checkMoved(t *testing.T, c *Catalog, moved *Table, ok []int64) {
	t.Helper()
	ctx := context.Background()
	got := ids(t, moved, QueryOptions{})
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	if want := append(seq(0, 10), ok...); !eq(got, want) {
		t.Fatalf("moved table holds %v, want %v", got, want)
	}
	vs, err := moved.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1+len(ok) || vs[len(vs)-1].Version != uint64(1+len(ok)) {
		t.Fatalf("moved table has %d versions up to v%d, want %d dense", len(vs), vs[len(vs)-1].Version, 1+len(ok))
	}
	if left := sealFilesLeft(t, c, moved.key); len(left) != 0 {
		t.Fatalf("seals copied along: %v", left)
	}
	old := tableKey([]string{"docs", "a"})
	if n := versionFiles(t, c, old); n != 0 {
		t.Fatalf("%d manifests left under the old name", n)
	}
	if left := sealFilesLeft(t, c, old); len(left) != 0 {
		t.Fatalf("seals left under the old name: %v", left)
	}
	if _, err := c.OpenTable(ctx, []string{"docs", "a"}); errs.CodeOf(err) != errs.CodeTableNotFound {
		t.Fatalf("old name after the move: %v", err)
	}
}

// TestRenameRacesInserts renames a table while writers insert into it
// under its old name, many times: every insert either succeeded and its
// row is in the renamed table, or failed with the clear error; the row
// count is exact and nothing is left under the old name.
func TestRenameRacesInserts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{TxnTimeout: 10 * time.Second})
	total := 0
	for i := range 12 {
		tb := docsTable(t, c, "a")
		to := []string{"docs", fmt.Sprintf("a%d", i)}
		ok := raceInserts(t, c, tb, func() error { return c.RenameTable(ctx, tb.ID(), to) })
		moved, err := c.OpenTable(ctx, to)
		if err != nil {
			t.Fatal(err)
		}
		checkMoved(t, c, moved, ok)
		total += len(ok)
	}
	t.Logf("%d inserts landed before the renames", total)
}

// TestDeregisterRacesInserts: the same with deregister, plain and as a
// batch's deregister_table (which copies only a seal grace after its
// decision, else an insert that listed before it lands behind the copy);
// registering the folder again shows exactly the inserts that succeeded.
func TestDeregisterRacesInserts(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := newCatalog(t, t.TempDir(), Options{TxnTimeout: 10 * time.Second})
			if err := c.CreateNamespace(ctx, []string{"docs"}, "", nil); err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				tb := docsTable(t, c, "a")
				var loc string
				ok := raceInserts(t, c, tb, func() (err error) {
					if !batch {
						loc, err = c.DeregisterTable(ctx, tb.ID())
						return err
					}
					_, res, err := c.CommitBatch(ctx, "batch-commit", []BatchVersion{{Field: "d", ID: tb.ID(), Kind: BatchDeregister}})
					if err == nil {
						loc = res[0].Location
					}
					return err
				})
				moved, err := c.RegisterTable(ctx, []string{"docs", fmt.Sprintf("r%d", i)}, loc, "", nil)
				if err != nil {
					t.Fatal(err)
				}
				checkMoved(t, c, moved, ok)
			}
		})
	}
}

// TestBranchDeleteDuringMove: deleting a branch while a move holds the
// table's name is a conflict that leaves the branch whole; a move waits
// for a branch deletion under way (it holds the name as a batch does).
func TestBranchDeleteDuringMove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	tb := docsTable(t, c, "a")
	if _, err := tb.CreateBranch(ctx, "dev", "", 0); err != nil {
		t.Fatal(err)
	}
	mc, err := c.claimMove(ctx, tb.key, tableKey([]string{"docs", "b"}), []string{"docs", "b"}, tb.key)
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.DeleteBranch(ctx, "dev"); errs.CodeOf(err) != errs.CodeConcurrentModification {
		t.Fatalf("branch deleted during a move: %v", err)
	}
	mc.Release(ctx)
	dev, err := tb.OnBranch(ctx, "dev")
	if err != nil {
		t.Fatalf("the branch after the refused delete: %v", err)
	}
	if n, err := dev.CountRows(ctx, 0, ""); err != nil || n != 10 {
		t.Fatalf("the branch after the refused delete: %d rows, %v", n, err)
	}
	if err := tb.DeleteBranch(ctx, "dev"); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.OnBranch(ctx, "dev"); err == nil {
		t.Fatal("the branch is still there")
	}
}

// TestCommitLosesToSeal: a commit whose version a move's seal took
// answers the clear error at once, readers never see the seal, and
// unsealing makes the table writable again.
func TestCommitLosesToSeal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	tb := docsTable(t, c, "a")
	if _, err := tb.CreateBranch(ctx, "dev", "", 0); err != nil {
		t.Fatal(err)
	}
	dev, err := tb.OnBranch(ctx, "dev")
	if err != nil {
		t.Fatal(err)
	}
	id := newIdentity()
	if err := c.seal(ctx, tb.key, id, "docs.b"); err != nil {
		t.Fatal(err)
	}
	for _, line := range []*Table{tb, dev} {
		if v := latest(t, line); v != 1 {
			t.Fatalf("line %q: latest v%d while sealed, want the seal hidden", line.branch, v)
		}
		if n, err := line.CountRows(ctx, 0, ""); err != nil || n != 10 {
			t.Fatalf("line %q: %d rows (%v) while sealed", line.branch, n, err)
		}
		_, _, err := line.Insert(ctx, rows(t, 10, 11), "append")
		if errs.CodeOf(err) != errs.CodeConcurrentModification || !strings.Contains(err.Error(), "renamed to docs.b") {
			t.Fatalf("line %q: insert into a sealed table: %v", line.branch, err)
		}
	}
	// A tag or branch created meanwhile is taken back: the move may
	// have walked the folder before it.
	if err := tb.CreateTag(ctx, "t1", 1); errs.CodeOf(err) != errs.CodeConcurrentModification {
		t.Fatalf("tag created on a sealed table: %v", err)
	}
	if _, err := tb.TagVersion(ctx, "t1"); errs.CodeOf(err) != errs.CodeTableTagNotFound {
		t.Fatalf("tag left after the refused create: %v", err)
	}
	if _, err := tb.CreateBranch(ctx, "dev2", "", 0); errs.CodeOf(err) != errs.CodeConcurrentModification {
		t.Fatalf("branch created on a sealed table: %v", err)
	}
	if bs, err := tb.Branches(ctx); err != nil || len(bs) != 1 {
		t.Fatalf("branches after the refused create: %v (%v)", BranchNames(bs), err)
	}
	if err := c.unseal(ctx, tb.key, id); err != nil {
		t.Fatal(err)
	}
	if left := sealFilesLeft(t, c, tb.key); len(left) != 0 {
		t.Fatalf("unseal left %v", left)
	}
	if err := tb.CreateTag(ctx, "t1", 1); err != nil {
		t.Fatalf("tag after unseal: %v", err)
	}
	for _, line := range []*Table{tb, dev} {
		if _, _, err := line.Insert(ctx, rows(t, 10, 11), "append"); err != nil {
			t.Fatalf("line %q: insert after unseal: %v", line.branch, err)
		}
		if v := latest(t, line); v != 2 {
			t.Fatalf("line %q at v%d after unseal and insert", line.branch, v)
		}
	}
}

// TestTagChangesDuringSeal: a tag update or delete while a move has
// sealed the table is taken back (the move may have copied the tag
// already) and answers the move's conflict; after unsealing both work.
func TestTagChangesDuringSeal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	tb := docsTable(t, c, "a")
	if _, _, err := tb.Insert(ctx, rows(t, 10, 11), "append"); err != nil {
		t.Fatal(err)
	}
	if err := tb.CreateTag(ctx, "t0", 1); err != nil {
		t.Fatal(err)
	}
	tagAt := func(want uint64) {
		t.Helper()
		got, err := tb.TagVersion(ctx, "t0")
		if err != nil || got.Version != want {
			t.Fatalf("tag t0: %+v (%v), want version %d", got, err, want)
		}
	}
	id := newIdentity()
	if err := c.seal(ctx, tb.key, id, "docs.b"); err != nil {
		t.Fatal(err)
	}
	if err := tb.UpdateTag(ctx, "t0", 2); errs.CodeOf(err) != errs.CodeConcurrentModification {
		t.Fatalf("tag update on a sealed table: %v", err)
	}
	tagAt(1)
	if err := tb.DeleteTag(ctx, "t0"); errs.CodeOf(err) != errs.CodeConcurrentModification {
		t.Fatalf("tag delete on a sealed table: %v", err)
	}
	tagAt(1)
	if err := c.unseal(ctx, tb.key, id); err != nil {
		t.Fatal(err)
	}
	if err := tb.UpdateTag(ctx, "t0", 2); err != nil {
		t.Fatal(err)
	}
	tagAt(2)
	if err := tb.DeleteTag(ctx, "t0"); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.TagVersion(ctx, "t0"); errs.CodeOf(err) != errs.CodeTableTagNotFound {
		t.Fatalf("tag after delete: %v", err)
	}
}
