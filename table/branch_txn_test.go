package table

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/errs"
)

// lineMarkers lists the transaction markers left in tb's line's
// _versions/.
func lineMarkers(t testing.TB, tb *Table) []string {
	t.Helper()
	es, err := tb.c.wh.List(context.Background(), tb.versionsKey())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if _, ok := parseTxnMarker(e.Name); ok {
			out = append(out, e.Name)
		}
	}
	return out
}

// TestBatchOnBranch: a batch entry on a branch writes its marker and
// manifest into the branch's line; while the batch runs the branch hides
// the version, a cancelled batch leaves the branch as it was, a committed
// one changes the branch and never main, a deletion entry on a branch
// removes only that line's versions, and an unknown branch names the
// entry's branch field.
func TestBatchOnBranch(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	a, b := twoTables(t, c)
	if _, err := a.CreateBranch(ctx, "dev", "", 0); err != nil {
		t.Fatal(err)
	}
	dev, err := a.OnBranch(ctx, "dev")
	if err != nil {
		t.Fatal(err)
	}
	onDev := func(e BatchVersion) BatchVersion { e.Branch = "dev"; return e }

	// Cancelled after both manifests are written.
	entries := []BatchVersion{onDev(stageAppend(t, dev, "dev2", 100, 102)), stageAppend(t, b, "b2", 100, 101)}
	var during uint64
	var hookErr error
	h := func(step string) {
		if step != "manifest-1" {
			return
		}
		vf, err := dev.LatestVersion(ctx)
		if err != nil {
			hookErr = err
			return
		}
		during = vf.Version
		if len(lineMarkers(t, dev)) != 1 || len(lineMarkers(t, a)) != 0 {
			hookErr = fmt.Errorf("markers: dev %v, main %v", lineMarkers(t, dev), lineMarkers(t, a))
			return
		}
		es, err := c.wh.List(ctx, txnDir)
		if err != nil || len(es) != 1 {
			hookErr = fmt.Errorf("records %v %v", es, err)
			return
		}
		_, hookErr = c.AlterTransaction(ctx, es[0].Name, []TxnAction{{Field: "actions[0]", SetStatus: TxnCanceled}})
	}
	_, _, err = withStepHook(c, h, func() (string, []BatchResult, error) { return c.CommitBatch(ctx, "batch-create", entries) })
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	if !IsConflict(err) || during != 1 {
		t.Fatalf("cancelled batch: %v; dev showed version %d while it ran", err, during)
	}
	if latest(t, dev) != 1 || latest(t, a) != 1 || latest(t, b) != 1 || len(lineMarkers(t, dev)) != 0 {
		t.Fatalf("a cancelled batch left dev %d, main %d, b %d, markers %v", latest(t, dev), latest(t, a), latest(t, b), lineMarkers(t, dev))
	}

	// Committed.
	entries = []BatchVersion{onDev(stageAppend(t, dev, "dev2b", 100, 102)), stageAppend(t, b, "b2b", 100, 101)}
	id, res, err := c.CommitBatch(ctx, "batch-create", entries)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Table.Branch() != "dev" || latest(t, dev) != 2 || latest(t, a) != 1 || latest(t, b) != 2 {
		t.Fatalf("committed batch: result on %q, dev %d, main %d, b %d", res[0].Table.Branch(), latest(t, dev), latest(t, a), latest(t, b))
	}
	if n, err := dev.CountRows(ctx, 0, ""); err != nil || n != 12 {
		t.Fatalf("dev rows %d %v", n, err)
	}
	if n, err := a.CountRows(ctx, 0, ""); err != nil || n != 10 {
		t.Fatalf("main rows %d %v", n, err)
	}
	if m := append(lineMarkers(t, dev), lineMarkers(t, a)...); len(m) != 0 {
		t.Fatalf("markers left: %v", m)
	}
	tx, err := c.Transaction(ctx, id)
	if err != nil || len(tx.Entries) != 2 || tx.Entries[0].Branch+tx.Entries[1].Branch != "dev" {
		t.Fatalf("the record does not name the branch: %+v", tx.Entries)
	}

	// A deletion on the branch.
	_, _, err = c.CommitBatch(ctx, "batch-commit", []BatchVersion{{Field: "operations[0]", ID: a.ID(), Kind: BatchDeleteVersions, Branch: "dev", Ranges: []VersionRange{{Start: 1, End: 2}}}})
	if err != nil {
		t.Fatal(err)
	}
	dvs, err := dev.Versions(ctx)
	if err != nil || len(dvs) != 1 || dvs[0].Version != 2 {
		t.Fatalf("dev versions after the deletion: %v %v", dvs, err)
	}
	if mvs, err := a.Versions(ctx); err != nil || len(mvs) != 1 || mvs[0].Version != 1 {
		t.Fatalf("main versions after a deletion on dev: %v %v", mvs, err)
	}

	// Unknown branches.
	bad := onDev(stageAppend(t, b, "b3", 1, 2))
	bad.Field = "entries[0]"
	if _, _, err := c.CommitBatch(ctx, "batch-create", []BatchVersion{bad}); errs.CodeOf(err) != errs.CodeTableBranchNotFound || !strings.Contains(err.Error(), "entries[0].branch") {
		t.Fatalf("entry on a missing branch: %v", err)
	}
	if _, _, err := c.CommitBatch(ctx, "batch-commit", []BatchVersion{{Field: "operations[0]", ID: a.ID(), Kind: BatchDeregister, Branch: "dev"}}); errs.CodeOf(err) != errs.CodeInvalidInput {
		t.Fatalf("deregister on a branch: %v", err)
	}
	if latest(t, b) != 2 || latest(t, dev) != 2 {
		t.Fatal("a refused batch changed a table")
	}
}
