package jobs

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// planLog records the plans an engine makes.
type planLog struct {
	engine
	mu    sync.Mutex
	plans []*refresh.Plan
}

func (p *planLog) Plan(ctx context.Context, id []string, jobID string, o refresh.Options) (*refresh.Plan, error) {
	pl, err := p.engine.Plan(ctx, id, jobID, o)
	if err == nil {
		p.mu.Lock()
		p.plans = append(p.plans, pl)
		p.mu.Unlock()
	}
	return pl, err
}

func (p *planLog) last() *refresh.Plan {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.plans[len(p.plans)-1]
}

// oracle is the chunker view recomputed from the source's latest version:
// "frag:offset|chunk#|id|chunk" for each source row, sorted.
func (w *warehouse) oracle(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	m, err := w.src.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A row's identity is its position in its data file: a fragment with
	// a deletion file reads its live rows at other offsets.
	rids, err := w.src.RowIDs(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := w.src.Query(ctx, table.QueryOptions{Version: m.Version, RowAddr: true})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := duck.Collect(rdr)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		for i := range int(r.NumRows()) {
			id := r.Column(0).(*array.Int64).Value(i)
			body := r.Column(1).(*array.String).Value(i)
			f, o := table.SplitRowAddress(r.Column(2).(*array.Uint64).Value(i))
			if ids, ok := rids[f]; ok {
				f, o = ids.Origin, uint32(ids.Position(uint64(o)))
			}
			for k := 0; k*4 < len(body); k++ {
				out = append(out, fmt.Sprintf("%d:%d|%d|%d|%s", f, o, k, id, body[k*4:min(len(body), k*4+4)]))
			}
		}
		r.Release()
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// articlesOf makes source rows id -> body.
func articlesOf(t *testing.T, rows map[int64]string) array.RecordReader {
	t.Helper()
	ids := make([]int64, 0, len(rows))
	for id := range rows {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b := array.NewRecordBuilder(memory.DefaultAllocator, articleSchema)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(rows[id])
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(articleSchema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	return rdr
}

// TestRefreshAfterMergeInsertIsIncremental: a chunker view over a source
// of five fragments, refreshed by a real worker on a real Redis. A
// merge_insert updates rows in two fragments, deletes (by source, with a
// filter) rows of a third and inserts new rows: the three get deletion
// files, the updated and inserted rows one new fragment. The next refresh
// is incremental, expands exactly the new fragment (the merged rows),
// removes the view rows of the updated and deleted source rows by
// position, and leaves the view equal to the view recomputed from the
// source.
func TestRefreshAfterMergeInsertIsIncremental(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 10)
	for range 4 {
		w.insert(t, 10) // fragments 1..4: ids 11..50
	}
	log := &planLog{engine: w.eng}
	b := setup(t, log)
	b.startServer(t)
	ctx := context.Background()

	j, err := b.client.Submit(ctx, w.view, refresh.Options{SourceTaskSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	if j = b.waitState(t, j.ID, StateDone); j.Result.Mode != refresh.ModeFull || j.Result.RowsAdded != 150 {
		t.Fatalf("first refresh: %+v", j.Result)
	}
	eqRows(t, "view after the first refresh", sorted(w.rows(t)), w.oracle(t))

	before, err := w.src.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Update 3 and 5 (fragment 0) and 42 (fragment 4), insert 100 and
	// 101; delete by source the unmatched rows with id 21..23 (fragment 2).
	m, r, err := w.src.MergeInsert(ctx, articlesOf(t, map[int64]string{3: "MERGEDxx03", 5: "MERGEDxx05", 42: "MERGEDxx42", 100: "NEWROWxx00", 101: "NEWROWxx01"}),
		table.MergeOptions{On: []string{"id"}, WhenMatchedUpdateAll: true, WhenNotMatchedInsertAll: true,
			WhenNotMatchedBySourceDelete: true, WhenNotMatchedBySourceDeleteFilt: "id BETWEEN 21 AND 23"})
	if err != nil || r.Updated != 3 || r.Inserted != 2 || r.Deleted != 3 || r.FragmentsRewritten != 3 || m.Version != before.Version+1 {
		t.Fatalf("merge_insert: v%d %+v %v", m.Version, r, err)
	}
	// The fragment the refresh must expand: the new one, with the 3
	// updated and 2 inserted rows; 6 source rows lose their view rows.
	old := map[uint32]bool{}
	for _, f := range before.Fragments {
		old[f.ID] = true
	}
	var fresh []uint32
	var freshRows int64
	withDel := 0
	for _, f := range m.Fragments {
		if !old[f.ID] {
			fresh = append(fresh, f.ID)
			freshRows += f.Rows
		} else if f.HasDeletions() {
			withDel++
		}
	}
	if len(fresh) != 1 || freshRows != 3+2 || withDel != 3 {
		t.Fatalf("merge wrote fragments %v (%d rows), %d fragments with deletion files", fresh, freshRows, withDel)
	}

	j, err = b.client.Submit(ctx, w.view, refresh.Options{SourceTaskSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	j = b.waitState(t, j.ID, StateDone)
	if j.Result.Mode != refresh.ModeIncremental || j.Result.RowsRemoved != 3*6 || j.Result.RowsAdded != 3*freshRows {
		t.Fatalf("refresh after merge_insert: %+v", j.Result)
	}
	if j.Progress.RowsRead != freshRows {
		t.Fatalf("refresh read %d source rows, want only the %d of the merged fragments", j.Progress.RowsRead, freshRows)
	}
	p := log.last()
	var expanded []uint32
	for _, it := range p.Items {
		for _, rg := range it.Ranges {
			if !slices.Contains(expanded, rg.Fragment) {
				expanded = append(expanded, rg.Fragment)
			}
		}
	}
	slices.Sort(expanded)
	if !slices.Equal(expanded, fresh) || len(p.RemovedSourceFragments) != 0 || len(p.RemovedSourceRows) != 3 {
		t.Fatalf("refresh expanded fragments %v and removed %v and rows of %v; the merge wrote %v", expanded, p.RemovedSourceFragments, p.RemovedSourceRows, fresh)
	}
	got := sorted(w.rows(t))
	eqRows(t, "view after merge_insert and refresh", got, w.oracle(t))
	if !strings.Contains(strings.Join(got, " "), "|42|MERG") || strings.Contains(strings.Join(got, " "), "|22|0022") {
		t.Fatalf("merged rows missing from the view: %v", got)
	}
}
