package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/table"
)

// TestJanitorKeepsBranchData: the janitor compacts main and cleans up
// orphans while a branch still reads the fragments compaction replaced
// (main's own older versions deleted): the branch keeps every file and
// row; once the branch is deleted, the next pass removes those files.
func TestJanitorKeepsBranchData(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 1)
	b := setup(t, w.eng)
	ctx := context.Background()
	for range 5 {
		w.insert(t, 1)
	}
	if _, err := w.src.CreateBranch(ctx, "dev", "", 0); err != nil {
		t.Fatal(err)
	}
	dev, err := w.src.OnBranch(ctx, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := dev.Insert(ctx, w.batch(t, 2), "append"); err != nil {
		t.Fatal(err)
	}
	devRows := func() int64 {
		n, err := dev.CountRows(ctx, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if devRows() != 8 {
		t.Fatalf("dev rows %d", devRows())
	}

	comp := &recordingCompactor{TableCompactor: TableCompactor{Catalog: w.cat, Options: table.CompactOptions{MinFragments: 4}}}
	j := newJanitor(b.client.st, "w1", JanitorConfig{Catalog: w.cat, OrphanGrace: time.Nanosecond, Compactor: comp}, testLogger)
	if res, err := j.Pass(ctx); err != nil || res.Compacted < 1 {
		t.Fatalf("pass %+v %v", res, err)
	}
	m, err := w.src.Load(ctx, 0)
	if err != nil || len(m.Fragments) != 1 {
		t.Fatalf("main after compaction: %v %v", m, err)
	}
	// Main forgets its history: the six small fragments now live on only
	// in dev's versions.
	if _, err := w.src.DeleteVersions(ctx, []table.VersionRange{{Start: 0, End: int64(m.Version)}}); err != nil {
		t.Fatal(err)
	}
	before := len(dataFiles(t, w.cat, srcID))
	if res, err := j.Pass(ctx); err != nil || res.OrphansRemoved != 0 {
		t.Fatalf("pass with dev reading the old fragments %+v %v", res, err)
	}
	if after := len(dataFiles(t, w.cat, srcID)); after != before || devRows() != 8 {
		t.Fatalf("files %d -> %d, dev rows %d", before, after, devRows())
	}
	if err := w.src.DeleteBranch(ctx, "dev"); err != nil {
		t.Fatal(err)
	}
	res, err := j.Pass(ctx)
	if err != nil || res.OrphansRemoved != before-1 {
		t.Fatalf("pass after dev is gone %+v %v (files %d)", res, err, before)
	}
	if n, err := w.src.CountRows(ctx, 0, ""); err != nil || n != 6 {
		t.Fatalf("main rows %d %v", n, err)
	}
}
