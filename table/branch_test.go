package table

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/errs"
)

// branchFixture is a table "t" with rows 0..10 at v1 and 10..20 at v2.
func branchFixture(t *testing.T) (*Catalog, *Table) {
	t.Helper()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	tb, _, err := c.CreateTable(ctx, []string{"t"}, testSchema, rows(t, 0, 10), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Insert(ctx, rows(t, 10, 20), ""); err != nil {
		t.Fatal(err)
	}
	return c, tb
}

// TestBranchCreateListDelete: a branch starts at its source version with
// that version's content, is listed with where it came from, refuses a
// second create, an unknown source, a bad name; delete refuses a branch
// others were created from or that a tag points into, and then removes it.
func TestBranchCreateListDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, tb := branchFixture(t)
	if _, err := tb.CreateBranch(ctx, "dev", "", 1); err != nil {
		t.Fatal(err)
	}
	dev, err := tb.OnBranch(ctx, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if vs, err := dev.Versions(ctx); err != nil || len(vs) != 1 || vs[0].Version != 1 {
		t.Fatalf("dev versions: %v %v", vs, err)
	}
	if got := ids(t, dev, QueryOptions{}); !eq(got, seq(0, 10)) {
		t.Fatalf("dev reads %v", got)
	}
	if _, err := tb.CreateBranch(ctx, "dev", "", 0); errs.CodeOf(err) != errs.CodeTableBranchAlreadyExists {
		t.Fatalf("second create: %v", err)
	}
	if _, err := tb.CreateBranch(ctx, "x", "nope", 0); errs.CodeOf(err) != errs.CodeTableBranchNotFound {
		t.Fatalf("from an unknown branch: %v", err)
	}
	if _, err := tb.CreateBranch(ctx, "x", "", 9); errs.CodeOf(err) != errs.CodeTableVersionNotFound {
		t.Fatalf("from an unknown version: %v", err)
	}
	for _, bad := range []string{"", "main", "../x", "a/b", ".h", "sp ace"} {
		if _, err := tb.CreateBranch(ctx, bad, "", 0); errs.CodeOf(err) != errs.CodeInvalidInput {
			t.Fatalf("create %q: %v", bad, err)
		}
	}
	if _, err := tb.CreateBranch(ctx, "feat", "dev", 0); err != nil {
		t.Fatal(err)
	}
	bs, err := tb.Branches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 2 || bs["dev"].ParentBranch != "" || bs["dev"].ParentVersion != 1 || bs["feat"].ParentBranch != "dev" || bs["feat"].ParentVersion != 1 || bs["dev"].ManifestSize <= 0 || bs["dev"].CreateAt <= 0 {
		t.Fatalf("branches: %+v", bs)
	}
	if err := tb.DeleteBranch(ctx, "dev"); errs.CodeOf(err) != errs.CodeInvalidInput {
		t.Fatalf("delete a parent: %v", err)
	}
	feat, _ := tb.OnBranch(ctx, "feat")
	if err := feat.CreateTag(ctx, "ft", 1); err != nil {
		t.Fatal(err)
	}
	if tg, err := tb.TagVersion(ctx, "ft"); err != nil || tg.Branch != "feat" || tg.Version != 1 {
		t.Fatalf("tag on feat: %+v %v", tg, err)
	}
	if err := tb.DeleteBranch(ctx, "feat"); errs.CodeOf(err) != errs.CodeInvalidInput {
		t.Fatalf("delete a tagged branch: %v", err)
	}
	if err := tb.DeleteTag(ctx, "ft"); err != nil {
		t.Fatal(err)
	}
	if err := tb.DeleteBranch(ctx, "feat"); err != nil {
		t.Fatal(err)
	}
	if err := tb.DeleteBranch(ctx, "dev"); err != nil {
		t.Fatal(err)
	}
	if err := tb.DeleteBranch(ctx, "dev"); errs.CodeOf(err) != errs.CodeTableBranchNotFound {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := dev.Load(ctx, 0); errs.CodeOf(err) != errs.CodeTableBranchNotFound {
		t.Fatalf("a handle on a deleted branch: %v", err)
	}
	// The name is free again and starts afresh.
	if _, err := tb.CreateBranch(ctx, "dev", "", 0); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, dev, QueryOptions{}); !eq(got, seq(0, 20)) {
		t.Fatalf("dev again reads %v", got)
	}
}

// TestBranchWritesAreIsolated: inserts, deletes, updates, restores and
// version deletes on a branch change no other line; main's writes do not
// reach the branch; versions number on from the fork point per line.
func TestBranchWritesAreIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, tb := branchFixture(t)
	if _, err := tb.CreateBranch(ctx, "dev", "", 0); err != nil {
		t.Fatal(err)
	}
	dev, _ := tb.OnBranch(ctx, "dev")
	m, _, err := dev.Insert(ctx, rows(t, 100, 105), "")
	if err != nil || m.Version != 3 {
		t.Fatalf("insert on dev: %v %v", m, err)
	}
	if _, n, err := dev.Delete(ctx, "id < 5"); err != nil || n != 5 {
		t.Fatalf("delete on dev: %d %v", n, err)
	}
	if _, n, err := dev.Update(ctx, "id = 100", [][2]string{{"id", "1000"}}); err != nil || n != 1 {
		t.Fatalf("update on dev: %d %v", n, err)
	}
	if got := ids(t, tb, QueryOptions{}); !eq(got, seq(0, 20)) {
		t.Fatalf("main after dev's writes: %v", got)
	}
	if vs, _ := tb.Versions(ctx); len(vs) != 2 {
		t.Fatalf("main has %d versions", len(vs))
	}
	if _, _, err := tb.Insert(ctx, rows(t, 50, 52), ""); err != nil { // main v3
		t.Fatal(err)
	}
	want := append(append(seq(5, 20), seq(101, 105)...), 1000)
	if got := sorted(ids(t, dev, QueryOptions{})); !eq(got, want) {
		t.Fatalf("dev reads %v, want %v", got, want)
	}
	if got := ids(t, dev, QueryOptions{Version: 3}); !eq(got, append(seq(0, 20), seq(100, 105)...)) {
		t.Fatalf("dev v3 reads %v", got)
	}
	if got := ids(t, tb, QueryOptions{Version: 3}); !eq(got, append(seq(0, 20), 50, 51)) {
		t.Fatalf("main v3 reads %v", got)
	}
	// Restore on the branch, version delete on the branch.
	if _, err := dev.Restore(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, dev, QueryOptions{}); !eq(got, seq(0, 20)) {
		t.Fatalf("dev after restore: %v", got)
	}
	if n, err := dev.DeleteVersions(ctx, []VersionRange{{Start: 3, End: 5}}); err != nil || n != 2 {
		t.Fatalf("delete dev v3..4: %d %v", n, err)
	}
	if vs, _ := tb.Versions(ctx); len(vs) != 3 {
		t.Fatalf("main lost versions: %d", len(vs))
	}
	// A tag on main's v2 does not protect dev's v2, nor the reverse.
	if err := tb.CreateTag(ctx, "m2", 2); err != nil {
		t.Fatal(err)
	}
	if n, err := dev.DeleteVersions(ctx, []VersionRange{{Start: 2, End: 3}}); err != nil || n != 1 {
		t.Fatalf("delete dev v2 with main v2 tagged: %d %v", n, err)
	}
	if _, err := tb.DeleteVersions(ctx, []VersionRange{{Start: 2, End: 3}}); errs.CodeOf(err) != errs.CodeInvalidInput {
		t.Fatalf("delete main's tagged v2: %v", err)
	}
	// A commit on the branch does not run the commit hook.
	var hooked []uint64
	var mu sync.Mutex
	tb.Catalog().OnCommit(func(_ context.Context, _ []string, m *Manifest) {
		mu.Lock()
		hooked = append(hooked, m.Version)
		mu.Unlock()
	})
	defer tb.Catalog().OnCommit(nil)
	if _, _, err := dev.Insert(ctx, rows(t, 200, 201), ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Insert(ctx, rows(t, 300, 301), ""); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hooked) != 1 || hooked[0] != 4 {
		t.Fatalf("hook saw %v, want main's v4 only", hooked)
	}
}

// TestBranchConcurrentCommits: of creates racing for one name exactly one
// wins; writers racing on one branch each get a
// version of their own (put-if-not-exists), and every acknowledged row is
// there once; main is untouched.
func TestBranchConcurrentCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, tb := branchFixture(t)
	// Racing creates of one name: exactly one wins, the rest are told
	// the branch exists.
	var won, lost int
	var mu sync.Mutex
	var cwg sync.WaitGroup
	for range 8 {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			_, err := tb.CreateBranch(ctx, "dev", "", 0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errs.CodeOf(err) == errs.CodeTableBranchAlreadyExists:
				lost++
			default:
				t.Error(err)
			}
		}()
	}
	cwg.Wait()
	if won != 1 || lost != 7 {
		t.Fatalf("racing creates: %d won, %d lost", won, lost)
	}
	const writers, each = 6, 4
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := c.OpenTable(ctx, []string{"t"})
			if err == nil {
				h, err = h.OnBranch(ctx, "dev")
			}
			if err != nil {
				t.Error(err)
				return
			}
			for i := 0; i < each; i++ {
				base := 1000 + 100*w + 10*i
				if _, _, err := h.Insert(ctx, rows(t, base, base+2), ""); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	dev, _ := tb.OnBranch(ctx, "dev")
	got := ids(t, dev, QueryOptions{})
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	var want []int64
	want = append(want, seq(0, 20)...)
	for w := 0; w < writers; w++ {
		for i := 0; i < each; i++ {
			base := 1000 + 100*w + 10*i
			want = append(want, int64(base), int64(base+1))
		}
	}
	sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
	if !eq(got, want) {
		t.Fatalf("dev holds %d rows, want %d", len(got), len(want))
	}
	vs, _ := dev.Versions(ctx)
	if len(vs) != 1+writers*each || vs[len(vs)-1].Version != uint64(2+writers*each) {
		t.Fatalf("dev versions: %d, latest %d", len(vs), vs[len(vs)-1].Version)
	}
	if got := ids(t, tb, QueryOptions{}); !eq(got, seq(0, 20)) {
		t.Fatalf("main: %v", got)
	}
}

// TestCleanupKeepsBranchData: files only a branch references survive
// cleanup from main (and from the branch), while files no line references
// go; after the branch is deleted, its files go too.
func TestCleanupKeepsBranchData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, tb := branchFixture(t)
	if _, err := tb.CreateBranch(ctx, "dev", "", 1); err != nil {
		t.Fatal(err)
	}
	dev, _ := tb.OnBranch(ctx, "dev")
	if _, _, err := dev.Insert(ctx, rows(t, 100, 103), ""); err != nil {
		t.Fatal(err)
	}
	// Main drops every version but its latest, then rewrites everything:
	// v1's file now lives on only in dev.
	if _, _, err := tb.Delete(ctx, "id >= 0"); err != nil { // main v3
		t.Fatal(err)
	}
	if _, err := tb.DeleteVersions(ctx, []VersionRange{{Start: 1, End: 3}}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*Table{tb, dev} {
		res, err := h.CleanupOrphans(ctx, -time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if res.Referenced != 2 {
			t.Fatalf("cleanup on %q: %+v", h.Branch(), res)
		}
	}
	if got := ids(t, dev, QueryOptions{}); !eq(got, append(seq(0, 10), seq(100, 103)...)) {
		t.Fatalf("dev after cleanup: %v", got)
	}
	if err := tb.DeleteBranch(ctx, "dev"); err != nil {
		t.Fatal(err)
	}
	res, err := tb.CleanupOrphans(ctx, -time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if res.Referenced != 0 || res.Removed != 2 {
		t.Fatalf("cleanup after the branch is gone: %+v", res)
	}
}
