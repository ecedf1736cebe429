package table

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/lance/dataset"
	"github.com/mvq-dev/mvq/lance/pb/tablepb"
)

// deletionFiles lists the names under the table's _deletions/.
func deletionFiles(t *testing.T, c *Catalog, tb *Table) []string {
	t.Helper()
	ents, err := c.Warehouse().List(context.Background(), tb.Key(deletionsDir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name)
	}
	return out
}

// TestDeleteWritesDeletionFiles: a delete keeps the fragments it touches
// (id, data file) and gives each a deletion file of the Lance form — the
// Arrow kind under dataset.BitmapThreshold deleted rows, the roaring kind
// from there on — merged with the one it had; a fragment that loses every
// row leaves the version; the data reads exactly right at every version.
func TestDeleteWritesDeletionFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{MaxRowsPerFragment: 6000})
	tb, m1, err := c.CreateTable(ctx, []string{"t"}, testSchema, rows(t, 0, 12000), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(m1.Fragments) != 2 {
		t.Fatalf("%d fragments", len(m1.Fragments))
	}
	// A few rows of fragment 0: the Arrow kind.
	m2, n, err := tb.Delete(ctx, "id IN (3, 5, 7)")
	if err != nil || n != 3 {
		t.Fatalf("delete: %d %v", n, err)
	}
	f := m2.Fragments[0]
	if len(m2.Fragments) != 2 || f.ID != 0 || f.Path != m1.Fragments[0].Path || f.Rows != 5997 || f.DeletedRows != 3 || f.DeletionBitmap || f.DeletionReadVersion != 1 {
		t.Fatalf("after the first delete: %+v", m2.Fragments)
	}
	if g, w := m2.Fragments[1], m1.Fragments[1]; g.ID != w.ID || g.Key() != w.Key() || g.Rows != w.Rows {
		t.Fatalf("an untouched fragment changed: %+v", m2.Fragments[1])
	}
	if got := deletionFiles(t, c, tb); len(got) != 1 || got[0] != fmt.Sprintf("0-1-%d.arrow", f.DeletionID) {
		t.Fatalf("deletion files %v", got)
	}
	// The version records a Lance Delete transaction naming the fragment.
	if tx := lanceTxn(t, c, tb, 2); tx.GetDelete() == nil || len(tx.GetDelete().GetUpdatedFragments()) != 1 ||
		tx.GetDelete().GetUpdatedFragments()[0].GetDeletionFile().GetNumDeletedRows() != 3 || tx.GetReadVersion() != 1 {
		t.Fatalf("transaction of v2: %v", tx)
	}
	// More rows of the same fragment: merged with the old positions, now
	// over the threshold, so a roaring bitmap.
	m3, n, err := tb.Delete(ctx, "id >= 100 AND id < 5200")
	if err != nil || n != 5100 {
		t.Fatalf("delete: %d %v", n, err)
	}
	f = m3.Fragments[0]
	if f.ID != 0 || f.DeletedRows != 5103 || f.Rows != 897 || !f.DeletionBitmap || f.DeletionReadVersion != 2 {
		t.Fatalf("after the second delete: %+v", f)
	}
	b, err := c.Warehouse().Read(ctx, tb.Key(f.deletionPath()))
	if err != nil {
		t.Fatal(err)
	}
	bm, err := dataset.DecodeDeletionBitmap(b)
	if err != nil || bm.GetCardinality() != 5103 || !bm.Contains(3) || !bm.Contains(5199) || bm.Contains(4) {
		t.Fatalf("the bitmap: %v %v", bm.GetCardinality(), err)
	}
	if got := dataset.DeletionFileName(0, f.deletionFile()); !strings.HasSuffix(got, ".bin") || f.deletionFile().GetFileType() != tablepb.DeletionFile_BITMAP {
		t.Fatalf("name %s", got)
	}
	// Every row of fragment 1: it leaves the version.
	m4, n, err := tb.Delete(ctx, "id >= 6000")
	if err != nil || n != 6000 {
		t.Fatalf("delete: %d %v", n, err)
	}
	if len(m4.Fragments) != 1 || m4.Fragments[0].ID != 0 {
		t.Fatalf("after deleting fragment 1's rows: %+v", m4.Fragments)
	}
	if tx := lanceTxn(t, c, tb, 4); tx.GetDelete() == nil || fmt.Sprint(tx.GetDelete().GetDeletedFragmentIds()) != "[1]" || len(tx.GetDelete().GetUpdatedFragments()) != 0 {
		t.Fatalf("transaction of v4: %v", tx)
	}
	var want []int64
	for i := int64(0); i < 6000; i++ {
		if i != 3 && i != 5 && i != 7 && (i < 100 || i >= 5200) {
			want = append(want, i)
		}
	}
	if got := ids(t, tb, QueryOptions{}); !eq(got, want) {
		t.Fatalf("ids after the deletes: %d of them", len(got))
	}
	if got := ids(t, tb, QueryOptions{Filter: "id BETWEEN 4 AND 101"}); !eq(got, append([]int64{4, 6}, seq(8, 100)...)) {
		t.Fatalf("filtered ids %v", got)
	}
	if n, err := tb.CountRows(ctx, 2, ""); err != nil || n != 11997 {
		t.Fatalf("v2 counts %d, %v", n, err)
	}
	// Delete by the new layout once more: positions are live offsets
	// mapped through the existing deletion file.
	if _, n, err := tb.Delete(ctx, "id = 5200 OR id = 8"); err != nil || n != 2 {
		t.Fatalf("delete: %d %v", n, err)
	}
	want = want[:0]
	for i := int64(0); i < 6000; i++ {
		if i != 3 && i != 5 && i != 7 && i != 8 && (i < 100 || i > 5200) {
			want = append(want, i)
		}
	}
	if got := ids(t, tb, QueryOptions{}); !eq(got, want) {
		t.Fatalf("ids after the last delete: %d of them", len(got))
	}
}

// lanceTxn reads the inline Lance transaction of version v.
func lanceTxn(t *testing.T, c *Catalog, tb *Table, v uint64) *tablepb.Transaction {
	t.Helper()
	b, err := c.Warehouse().Read(context.Background(), tb.versionsKey()+ManifestName(v, NamingV2))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := dataset.DecodeManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if mf.Transaction == nil {
		t.Fatalf("v%d records no transaction", v)
	}
	return mf.Transaction
}

// TestUpdateRecordsLanceUpdate: an update's version records a Lance Update
// transaction: the fragment with the new deletion file, the new one.
func TestUpdateRecordsLanceUpdate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{MaxRowsPerFragment: 10})
	tb, _, err := c.CreateTable(ctx, []string{"t"}, testSchema, rows(t, 0, 30), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, n, err := tb.Update(ctx, "id = 12 OR id >= 20", [][2]string{{"name", "'u'"}}); err != nil || n != 11 {
		t.Fatalf("update: %d %v", n, err)
	}
	u := lanceTxn(t, c, tb, 2).GetUpdate()
	if u == nil || fmt.Sprint(u.GetRemovedFragmentIds()) != "[2]" || len(u.GetUpdatedFragments()) != 1 || u.GetUpdatedFragments()[0].GetId() != 1 ||
		len(u.GetNewFragments()) != 2 || u.GetNewFragments()[0].GetPhysicalRows()+u.GetNewFragments()[1].GetPhysicalRows() != 11 {
		t.Fatalf("transaction: %v", u)
	}
}

// TestConcurrentDeletesOneFragment: deletes racing on the same fragment
// each write a deletion file from the version they read; the loser of a
// commit sees the fragment's deletion file changed, computes its delete
// again on the new version and lands. No delete is lost.
func TestConcurrentDeletesOneFragment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	tb, _, err := c.CreateTable(ctx, []string{"t"}, testSchema, rows(t, 0, 200), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	const writers = 6
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, n, err := tb.Delete(ctx, fmt.Sprintf("id %% %d = %d", writers, w)); err != nil || n == 0 {
				errc <- fmt.Errorf("writer %d: %d rows, %v", w, n, err)
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	m, err := tb.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.NumRows() != 0 || len(m.Fragments) != 0 || m.Version != writers+1 {
		t.Fatalf("after %d deletes of all the rows: v%d, %d rows in %+v", writers, m.Version, m.NumRows(), m.Fragments)
	}
}

// TestUpdateVsConcurrentDelete: an update that read a fragment before a
// delete gave it another deletion file recomputes on the new version: the
// deleted row stays deleted and the update applies to the others.
func TestUpdateVsConcurrentDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	tb, _, err := c.CreateTable(ctx, []string{"t"}, testSchema, rows(t, 0, 10), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The update's commit finds version 2 there: the delete's.
	var once sync.Once
	hooked := context.WithValue(ctx, rewriteHookKey{}, func() {
		once.Do(func() {
			if _, n, err := tb.Delete(ctx, "id = 4"); err != nil || n != 1 {
				t.Errorf("delete: %d %v", n, err)
			}
		})
	})
	m, n, err := tb.Update(hooked, "id < 6", [][2]string{{"name", "'u'"}})
	if err != nil || n != 5 {
		t.Fatalf("update: %d %v", n, err)
	}
	if m.Version != 3 {
		t.Fatalf("update committed v%d", m.Version)
	}
	got := content(t, tb)
	slices.Sort(got)
	want := "0|0|u;1|0.5|u;2|1|u;3|1.5|u;5|2.5|u;6|3|n6;7|3.5|n7;8|4|n8;9|4.5|n9"
	if strings.Join(got, ";") != want {
		t.Fatalf("rows %v, want %s", got, want)
	}
}

// TestCleanupRemovesSupersededDeletionFiles: the deletion file a later
// delete replaced stays while a version (or tag) names it, goes once the
// versions naming it are deleted and the grace period passed; the current
// one always stays.
func TestCleanupRemovesSupersededDeletionFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	tb, _, err := c.CreateTable(ctx, []string{"t"}, testSchema, rows(t, 0, 20), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	m2, _, err := tb.Delete(ctx, "id = 1")
	if err != nil {
		t.Fatal(err)
	}
	m3, _, err := tb.Delete(ctx, "id = 2")
	if err != nil {
		t.Fatal(err)
	}
	m4, _, err := tb.Delete(ctx, "id = 3")
	if err != nil {
		t.Fatal(err)
	}
	if got := deletionFiles(t, c, tb); len(got) != 3 {
		t.Fatalf("deletion files %v", got)
	}
	if err := tb.CreateTag(ctx, "keep", 2); err != nil {
		t.Fatal(err)
	}
	res, err := tb.CleanupOrphans(ctx, -time.Hour)
	if err != nil || res.Removed != 0 || res.Referenced != 4 {
		t.Fatalf("cleanup with every version: %+v %v", res, err)
	}
	if _, err := tb.DeleteVersions(ctx, []VersionRange{{Start: 3, End: 4}}); err != nil {
		t.Fatal(err)
	}
	// Within the grace period: kept.
	if res, err := tb.CleanupOrphans(ctx, time.Hour); err != nil || res.Removed != 0 || res.Recent != 1 {
		t.Fatalf("cleanup within grace: %+v %v", res, err)
	}
	res, err = tb.CleanupOrphans(ctx, -time.Hour)
	if err != nil || res.Removed != 1 {
		t.Fatalf("cleanup: %+v %v", res, err)
	}
	exists := func(f Fragment) bool {
		ok, err := c.Warehouse().Exists(ctx, tb.Key(f.deletionPath()))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !exists(m2.Fragments[0]) || exists(m3.Fragments[0]) || !exists(m4.Fragments[0]) {
		t.Fatal("cleanup removed the wrong deletion file")
	}
	if got := ids(t, tb, QueryOptions{Version: 2}); !eq(got, append([]int64{0}, seq(2, 20)...)) {
		t.Fatalf("tagged v2 reads %v", got)
	}
	if got := ids(t, tb, QueryOptions{}); !eq(got, append([]int64{0}, seq(4, 20)...)) {
		t.Fatalf("latest reads %v", got)
	}
}

// TestCompactMaterializesDeletions: a fragment whose deletion file
// deletes a tenth of its rows or more is rewritten by Compact without
// them, even alone; one with fewer deletions is left as it is.
func TestCompactMaterializesDeletions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{MaxRowsPerFragment: 100})
	tb, _, err := c.CreateTable(ctx, []string{"t"}, testSchema, rows(t, 0, 200), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Delete(ctx, "id < 20 OR id = 150"); err != nil {
		t.Fatal(err)
	}
	before := content(t, tb)
	res, err := tb.Compact(ctx, CompactOptions{})
	if err != nil || res.Version != 3 || res.Merged != 1 || res.Written != 1 || res.Rows != 80 {
		t.Fatalf("compact: %+v %v", res, err)
	}
	m, err := tb.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Fragments) != 2 || m.Fragments[0].HasDeletions() || m.Fragments[0].Rows != 80 || m.Fragments[1].DeletedRows != 1 {
		t.Fatalf("after compact: %+v", m.Fragments)
	}
	if after := content(t, tb); strings.Join(after, ";") != strings.Join(before, ";") {
		t.Fatal("compaction changed the content")
	}
}
