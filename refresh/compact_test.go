package refresh

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/table"
)

// manySmall is a source of 24 rows over 6 fragments and a chunker view
// refreshed one source row per item: about one view fragment per row.
func manySmall(t *testing.T) (*bundle, *table.Table, []string) {
	b := setup(t, table.Options{})
	var frags [][]article
	for f := range 6 {
		var rows []article
		for r := range 4 {
			id := int64(f*4 + r + 1)
			body := strings.Repeat(string(rune('a'+id%26)), int(id%7)) // 0..6 characters: 0..2 chunks
			rows = append(rows, article{id, fmt.Sprint("t", id), "en", body})
		}
		frags = append(frags, rows)
	}
	src := b.source(t, frags...)
	id := b.chunkerView(t, "chunks")
	b.refresh(t, id, "j1", Options{SourceTaskSize: 1})
	return b, src, id
}

// fresh is what a full refresh of a new view over the same source holds.
func (b *bundle) fresh(t *testing.T, name string) []string {
	t.Helper()
	id := b.chunkerView(t, name)
	b.refresh(t, id, "full-"+name, Options{})
	return b.rows(t, id)
}

// checkLineage fails unless every fragment of view id has a lineage entry
// whose span holds the source fragments of its rows.
func (b *bundle) checkLineage(t *testing.T, id []string) {
	t.Helper()
	v, err := b.e.View(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	lin := map[uint32]Lineage{}
	for _, l := range v.Watermark.Lineage {
		lin[l.Fragment] = l
	}
	for _, f := range v.Manifest.Fragments {
		l, ok := lin[f.ID]
		if !ok {
			t.Fatalf("view fragment %d has no lineage", f.ID)
		}
		span, err := b.e.spanOf(b.ctx, v.Table, f)
		if err != nil {
			t.Fatal(err)
		}
		if span.Lo < l.Lo || span.Hi > l.Hi {
			t.Fatalf("view fragment %d holds source fragments %d..%d, lineage says %d..%d", f.ID, span.Lo, span.Hi, l.Lo, l.Hi)
		}
	}
}

// TestCompactViewThenIncremental: source_task_size 1 leaves a fragment per
// row; compaction makes a few with the same content, keeps the lineage
// true, and the incremental refreshes after it are exact.
func TestCompactViewThenIncremental(t *testing.T) {
	t.Parallel()
	b, src, id := manySmall(t)
	before := b.rows(t, id)
	m := b.manifest(t, id)
	if len(m.Fragments) < 15 {
		t.Fatalf("only %d view fragments", len(m.Fragments))
	}
	res, err := b.cat.Compact(b.ctx, id, table.CompactOptions{TargetRows: 8, MinFragments: 4})
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != m.Version+1 || res.FragmentsAfter > len(m.Fragments)/3 {
		t.Fatalf("compact: %+v from %d fragments", res, len(m.Fragments))
	}
	eqRows(t, "view after compaction", b.rows(t, id), before)
	b.checkLineage(t, id)

	// Removals in the middle and at the end, an update, an append.
	for _, pred := range []string{"id = 6", "id >= 22"} {
		if _, _, err := src.Delete(b.ctx, pred); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := src.Update(b.ctx, "id = 13", [][2]string{{"body", "'zzzzzzzzz'"}}); err != nil {
		t.Fatal(err)
	}
	b.insert(t, src, article{30, "t30", "en", "qqqqqq"})
	p, _ := b.refresh(t, id, "j2", Options{SourceTaskSize: 1})
	if p.Mode != ModeIncremental {
		t.Fatalf("after compaction the refresh is %s (%s)", p.Mode, p.Reason)
	}
	eqRows(t, "view after incremental refresh", b.rows(t, id), b.fresh(t, "fresh1"))
	b.checkLineage(t, id)
	b.checkHistory(t, id)
}

// TestCompactDuringRefresh: a compaction committed between a refresh's
// plan and its commit is rebased on: the refresh keeps the merged
// fragments (an append) and the compaction stays.
func TestCompactDuringRefresh(t *testing.T) {
	t.Parallel()
	b, src, id := manySmall(t)
	b.insert(t, src, article{40, "t40", "en", "rrrrr"})
	p := b.plan(t, id, "j2", Options{})
	results := b.expandAll(t, p)
	cres, err := b.cat.Compact(b.ctx, id, table.CompactOptions{MinFragments: 2})
	if err != nil || cres.Version == 0 {
		t.Fatalf("compact: %+v, %v", cres, err)
	}
	res, err := b.e.Commit(b.ctx, p, results)
	if err != nil {
		t.Fatalf("commit over a compaction: %v", err)
	}
	if res.ViewVersion != p.BaseViewVersion+2 || res.RowsAdded != 2 {
		t.Fatalf("result %+v", res)
	}
	if n := len(b.manifest(t, id).Fragments); n != cres.FragmentsAfter+len(results[0].Fragments) {
		t.Fatalf("%d fragments after the commit; the compaction left %d and the refresh added %d", n, cres.FragmentsAfter, len(results[0].Fragments))
	}
	eqRows(t, "view after the rebased commit", b.rows(t, id), b.fresh(t, "fresh1"))
	b.checkLineage(t, id)
	b.checkHistory(t, id)

}

// TestCompactUndoneByRefreshRemovingRows: a compaction that merged view
// fragments a refresh drops with fragments it keeps is undone by the
// refresh's commit, which holds exactly what the refresh computed.
func TestCompactUndoneByRefreshRemovingRows(t *testing.T) {
	t.Parallel()
	b, src, id := manySmall(t)
	if _, _, err := src.Delete(b.ctx, "id = 2"); err != nil {
		t.Fatal(err)
	}
	p := b.plan(t, id, "j2", Options{})
	if p.Mode != ModeIncremental || len(p.RemovedSourceRows) != 1 {
		t.Fatalf("plan %+v", p)
	}
	results := b.expandAll(t, p)
	if res, err := b.cat.Compact(b.ctx, id, table.CompactOptions{MinFragments: 2}); err != nil || res.Version == 0 {
		t.Fatalf("compact: %+v, %v", res, err)
	}
	if _, err := b.e.Commit(b.ctx, p, results); err != nil {
		t.Fatalf("commit over a compaction of fragments it drops: %v", err)
	}
	eqRows(t, "view after the commit", b.rows(t, id), b.fresh(t, "fresh"))
	b.checkLineage(t, id)
	b.checkHistory(t, id)
	b.insert(t, src, article{50, "t50", "en", "vvvv"})
	if p, _ = b.refresh(t, id, "j3", Options{}); p.Mode != ModeIncremental {
		t.Fatalf("plan %+v", p)
	}
	eqRows(t, "view after the next refresh", b.rows(t, id), b.fresh(t, "fresh2"))
	b.checkLineage(t, id)
}

// TestCompactSourceThenIncremental: compacting the source rewrites its
// fragments; the view's next refresh, incremental, is exact.
func TestCompactSourceThenIncremental(t *testing.T) {
	t.Parallel()
	b, src, id := manySmall(t)
	for i := int64(50); i < 60; i++ {
		b.insert(t, src, article{i, fmt.Sprint("t", i), "en", "xyzxyz"})
	}
	b.refresh(t, id, "j2", Options{SourceTaskSize: 1})
	res, err := b.cat.Compact(b.ctx, srcID, table.CompactOptions{TargetRows: 8, MinFragments: 4})
	if err != nil || res.Version == 0 {
		t.Fatalf("compact source: %+v, %v", res, err)
	}
	b.insert(t, src, article{70, "t70", "en", "uuuuu"})
	p, _ := b.refresh(t, id, "j3", Options{SourceTaskSize: 3})
	if p.Mode != ModeIncremental {
		t.Fatalf("plan %s (%s)", p.Mode, p.Reason)
	}
	eqRows(t, "view after the source was compacted", b.rows(t, id), b.fresh(t, "fresh"))
	b.checkLineage(t, id)
}
