package refresh

import (
	"slices"
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// keys answers the checkpoint key of every item of p.
func (b *bundle) keys(t *testing.T, p *Plan) []string {
	t.Helper()
	out := make([]string, len(p.Items))
	for i := range p.Items {
		k, err := b.e.CheckpointKey(b.ctx, p, i)
		if err != nil {
			t.Fatal(err)
		}
		if len(k) != 64 {
			t.Fatalf("item %d: key %q", i, k)
		}
		out[i] = k
	}
	return out
}

// TestCheckpointKey: two jobs planned against the same view, source
// version, definition and options have equal keys per item and distinct
// keys across items; a new source version, another manifest, other file
// options or a changed definition (a column added) change every key.
func TestCheckpointKey(t *testing.T) {
	b := setup(t, table.Options{})
	src := b.source(t, frag0)
	id := b.chunkerView(t, "chunks")
	o := Options{SourceTaskSize: 2}
	k1 := b.keys(t, b.plan(t, id, "j1", o))
	k2 := b.keys(t, b.plan(t, id, "j2", o))
	if len(k1) != 2 || strings.Join(k1, ",") != strings.Join(k2, ",") || k1[0] == k1[1] {
		t.Fatalf("keys of two identical plans: %q and %q", k1, k2)
	}
	differ := func(what string, got []string) {
		t.Helper()
		for i := range min(len(got), len(k1)) {
			if got[i] == k1[i] {
				t.Fatalf("%s: item %d keeps its key", what, i)
			}
		}
	}
	differ("another manifest", b.keys(t, b.plan(t, id, "j3", Options{SourceTaskSize: 2, Manifest: `{"env_vars": {"A": "1"}}`})))
	differ("max_rows_per_fragment", b.keys(t, b.plan(t, id, "j4", Options{SourceTaskSize: 2, MaxRowsPerFragment: 3})))
	limit := int64(100)
	differ("output_limit", b.keys(t, b.plan(t, id, "j5", Options{SourceTaskSize: 2, OutputLimit: &limit})))
	if _, _, err := b.e.AddColumns(b.ctx, id, []AddColumnEntry{{Name: "n", Computed: str("length(chunk)")}}); err != nil {
		t.Fatal(err)
	}
	k6 := b.keys(t, b.plan(t, id, "j6", o))
	differ("a column added to the view", k6)
	b.insert(t, src, frag1...)
	p7 := b.plan(t, id, "j7", o)
	if len(p7.Items) != 3 || p7.Items[0].Ranges[0] != (Range{Fragment: 0, Start: 0, End: 2}) {
		t.Fatalf("plan after the insert: %+v", p7.Items)
	}
	for i, k := range b.keys(t, p7)[:2] {
		if k == k6[i] {
			t.Fatalf("a new source version: item %d (the same rows) keeps its key", i)
		}
	}
	// A backfill does not checkpoint.
	if k, err := b.e.CheckpointKey(b.ctx, &Plan{JobID: "bf", Items: []WorkItem{{}}, Options: Options{Backfill: &BackfillOptions{Column: "n"}}}, 0); err != nil || k != "" {
		t.Fatalf("backfill key %q, %v", k, err)
	}
}

// TestReuse: a second job copies the first one's staged output into its
// own names and commits what a refresh from scratch commits; a checkpoint
// whose file is missing or has changed, or that names other files, is
// refused (and leaves no copy behind).
func TestReuse(t *testing.T) {
	b := setup(t, table.Options{})
	b.source(t, frag0, frag1)
	id := b.chunkerView(t, "chunks")
	ref := b.chunkerView(t, "reference")
	b.refresh(t, ref, "r1", Options{SourceTaskSize: 2})

	o := Options{SourceTaskSize: 2, MaxRowsPerFragment: 3}
	p1 := b.plan(t, id, "j1", o)
	r1 := b.expandAll(t, p1) // j1 then fails: nothing committed
	p2 := b.plan(t, id, "j2", o)
	if len(p2.Items) != 3 || len(r1[0].Fragments) < 2 {
		t.Fatalf("plan %+v, item 0 result %+v: want 3 items, item 0 in several files", p2.Items, r1[0])
	}
	tb, err := b.cat.OpenTable(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	wh := b.cat.Warehouse()
	refused := func(what string, index int, prior ItemResult, from string) {
		t.Helper()
		_, err := b.e.Reuse(b.ctx, p2, index, from, prior)
		if errs.CodeOf(err) != errs.CodeInvalidTableState && errs.CodeOf(err) != errs.CodeInvalidInput {
			t.Fatalf("%s: err %v, want a refusal", what, err)
		}
		ents, lerr := wh.List(b.ctx, tb.Key(itemPrefix("j2", index)))
		if lerr != nil || len(ents) != 0 {
			t.Fatalf("%s: copies left behind: %v %v", what, ents, lerr)
		}
	}
	refused("its own job", 0, r1[0], "j2")
	refused("another item's result", 2, r1[0], "j1")
	other := r1[2]
	other.Fragments = append([]table.Fragment(nil), other.Fragments...)
	other.Fragments[0].Path = "data/_staging-j1-1-0.parquet"
	refused("a file of another item", 2, other, "j1")
	short := r1[0]
	short.Fragments = append([]table.Fragment(nil), short.Fragments...)
	short.Fragments[len(short.Fragments)-1].Bytes++
	refused("a size that does not match (after copying the first file)", 0, short, "j1")
	if err := wh.Delete(b.ctx, tb.Key(r1[2].Fragments[0].Path)); err != nil {
		t.Fatal(err)
	}
	refused("a missing file", 2, r1[2], "j1")

	var rs []ItemResult
	for i := range 2 {
		r, err := b.e.Reuse(b.ctx, p2, i, "j1", r1[i])
		if err != nil {
			t.Fatalf("reuse item %d: %v", i, err)
		}
		for k, f := range r.Fragments {
			if !strings.HasPrefix(f.Path, itemPrefix("j2", i)) || f.Rows != r1[i].Fragments[k].Rows {
				t.Fatalf("item %d reused as %+v", i, r.Fragments)
			}
		}
		rs = append(rs, r)
	}
	// A duplicate reuse of item 0 copies under names of its own, and one
	// that fails removes only its own copies: the recorded ones stay.
	dup, err := b.e.Reuse(b.ctx, p2, 0, "j1", r1[0])
	if err != nil {
		t.Fatal(err)
	}
	for k, f := range dup.Fragments {
		if f.Path == rs[0].Fragments[k].Path {
			t.Fatalf("the duplicate reuse copied to %s, a file of the first reuse", f.Path)
		}
	}
	if _, err := b.e.Reuse(b.ctx, p2, 0, "j1", short); err == nil {
		t.Fatal("a checkpoint with a wrong size was reused")
	}
	for _, f := range append(slices.Clone(rs[0].Fragments), dup.Fragments...) {
		if size, err := wh.Size(b.ctx, tb.Key(f.Path)); err != nil || size != f.Bytes {
			t.Fatalf("%s after a failed duplicate reuse: %d bytes (%v), recorded %d", f.Path, size, err, f.Bytes)
		}
	}
	r, err := b.e.Expand(b.ctx, p2, 2)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.e.Commit(b.ctx, p2, append(rs, r))
	if err != nil {
		t.Fatal(err)
	}
	if res.RowsAdded != int64(len(b.rows(t, ref))) {
		t.Fatalf("result %+v", res)
	}
	eqRows(t, "view built from checkpoints", b.rows(t, id), b.rows(t, ref))
	// Discarding j1 now, keeping nothing, leaves the committed view whole.
	if err := b.e.Discard(b.ctx, p1, nil); err != nil {
		t.Fatal(err)
	}
	eqRows(t, "view after the first job's files went", b.rows(t, id), b.rows(t, ref))
}

// TestDiscardKeeps: Discard leaves the staged output of the items it is
// told to keep, and StagedItem names their item.
func TestDiscardKeeps(t *testing.T) {
	b := setup(t, table.Options{})
	b.source(t, frag0, frag1)
	id := b.chunkerView(t, "chunks")
	job := "0b5e1b7e-6d7e-4c55-9a43-3c6a2a1b0f00"
	p := b.plan(t, id, job, Options{SourceTaskSize: 2})
	rs := b.expandAll(t, p)
	if err := b.e.Discard(b.ctx, p, []int{1}); err != nil {
		t.Fatal(err)
	}
	tb, err := b.cat.OpenTable(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := b.cat.Warehouse().List(b.ctx, tb.Key(stagingPrefix(job)))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(rs[1].Fragments) {
		t.Fatalf("after Discard keeping item 1: %v, want its %d files", ents, len(rs[1].Fragments))
	}
	for _, e := range ents {
		j, i, ok := StagedItem("_staging-" + job + "-" + e.Name)
		if !ok || j != job || i != 1 {
			t.Fatalf("StagedItem(%s) = %q %d %v", e.Name, j, i, ok)
		}
	}
	for _, name := range []string{"_staging-" + job + "-c0-0.parquet", "_staging-" + job + "-b3-0.parquet", "other.parquet"} {
		if _, _, ok := StagedItem(name); ok {
			t.Fatalf("StagedItem(%s) is an item's", name)
		}
	}
}
