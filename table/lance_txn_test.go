package table

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/lance/dataset"
	"github.com/mvq-dev/mvq/lance/pb/tablepb"
)

// TestLanceCommitCarriesTransaction: each version mvq commits to a Lance
// table carries its Lance transaction inline, read from its parent, so a
// Lance writer that lost the race to it can check its own commit against
// it and rebase (LanceDB refuses to commit over a version without one;
// service/TestConcurrentWritersLanceDBAndMVQ races the two). An insert is
// an Append of just its new fragments, a delete a Delete (fragments whose
// every row went removed, the others given deletion files), the first
// version an Overwrite.
func TestLanceCommitCarriesTransaction(t *testing.T) {
	ctx := context.Background()
	root, c := lanceCatalog(t)
	tb, _, err := c.CreateTable(ctx, []string{"docs", "t"}, lanceTestSchema, lanceRows(t, 0, 150), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	m2, _, err := tb.Insert(ctx, lanceRows(t, 150, 230), "")
	if err != nil {
		t.Fatal(err)
	}
	m3, n, err := tb.Delete(ctx, "id < 120")
	if err != nil || n != 120 {
		t.Fatalf("delete: %d rows, %v", n, err)
	}
	for _, c := range []struct {
		v         uint64
		op        string
		fragments int // new fragments (Append), removed ones (Update, Delete)
	}{{1, "overwrite", 2}, {m2.Version, "append", 1}, {m3.Version, "delete", 1}} {
		txn := inlineTxn(t, root, c.v)
		if txn == nil {
			t.Fatalf("version %d has no transaction", c.v)
		}
		if got := dataset.OperationName(txn); got != c.op || txn.GetReadVersion() != c.v-1 || txn.GetUuid() == "" {
			t.Fatalf("version %d: transaction %s reading %d, want %s reading %d", c.v, got, txn.GetReadVersion(), c.op, c.v-1)
		}
		var got int
		switch c.op {
		case "overwrite":
			got = len(txn.GetOverwrite().GetFragments())
		case "append":
			got = len(txn.GetAppend().GetFragments())
		case "update":
			got = len(txn.GetUpdate().GetRemovedFragmentIds())
		case "delete":
			got = len(txn.GetDelete().GetDeletedFragmentIds())
			if u := len(txn.GetDelete().GetUpdatedFragments()); u != 1 {
				t.Fatalf("version %d: a delete updating %d fragments, want 1 (ids 100..119 of the second)", c.v, u)
			}
		}
		if got != c.fragments {
			t.Fatalf("version %d: %s of %d fragments, want %d", c.v, c.op, got, c.fragments)
		}
	}
}

// TestLanceStagedVersionsCarryTransaction: a version a client staged and
// mvq re-encoded on publishing (a batch's, which mvq marks with its
// transaction, and a version/create with metadata) carries its Lance
// transaction too, worked out against the version it follows: a Lance
// writer behind it rebases over it instead of failing.
func TestLanceStagedVersionsCarryTransaction(t *testing.T) {
	ctx := context.Background()
	root, c := lanceCatalog(t)
	tb, _, err := c.CreateTable(ctx, []string{"docs", "t"}, lanceTestSchema, lanceRows(t, 0, 100), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	stage := func(name string, from, to int) string {
		t.Helper()
		base, err := tb.Load(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		frags, err := tb.WriteFragments(ctx, lanceTestSchema, lanceRows(t, from, to), 0)
		if err != nil {
			t.Fatal(err)
		}
		next := base.clone()
		assignIDs(next, frags)
		next.Version, next.ParentVersion, next.Operation = base.Version+1, base.Version, "append"
		next.TimestampMillis = time.Now().UnixMilli()
		data, err := next.Encode()
		if err != nil {
			t.Fatal(err)
		}
		path := "staged/" + name + ".manifest"
		if err := c.wh.Write(ctx, tb.key+path, data); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if _, _, err := c.CommitBatch(ctx, "batch-create", []BatchVersion{{Field: "b", ID: tb.ID(), Version: 2, ManifestPath: stage("b", 100, 150), Scheme: NamingV2}}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := tb.CreateVersion(ctx, 3, stage("m", 150, 170), NamingV2, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	for v := uint64(2); v <= 3; v++ {
		txn := inlineTxn(t, root, v)
		if got := dataset.OperationName(txn); txn == nil || got != "append" || txn.GetReadVersion() != v-1 || len(txn.GetAppend().GetFragments()) != 1 {
			t.Fatalf("version %d: transaction %v", v, txn)
		}
	}
}

// inlineTxn is the inline Lance transaction of version v of docs.t under
// warehouse root (nil when it has none).
func inlineTxn(t *testing.T, root string, v uint64) *tablepb.Transaction {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "t.lance", "_versions", ManifestName(v, NamingV2)))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := dataset.DecodeManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	return mf.Transaction
}
