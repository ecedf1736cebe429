package iceberg_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/iceberg"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/internal/icebergtest"
	"github.com/mvq-dev/mvq/table"
)

// registrar is a registrar over a catalog on the warehouse folder wh
// (what a restarted process opens again), counting the versions it
// commits through the commit hook that drives automatic refreshes.
func registrar(t *testing.T, wh, lakeDir string, commits *atomic.Int64) (*iceberg.Registrar, *table.Catalog) {
	t.Helper()
	ctx := context.Background()
	w, err := table.OpenWarehouse(ctx, "file://"+wh)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	db, err := duck.Open(duck.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cat := table.NewCatalog(w, db, table.Options{Indexes: index.Maintenance()})
	if err := cat.CreateNamespace(ctx, []string{"db"}, "", nil); err != nil && errs.CodeOf(err) != errs.CodeNamespaceAlreadyExists {
		t.Fatal(err)
	}
	cat.OnCommit(func(context.Context, []string, *table.Manifest) { commits.Add(1) })
	allowed, err := iceberg.ParseAllowed("file://" + lakeDir)
	if err != nil {
		t.Fatal(err)
	}
	return iceberg.NewRegistrar(cat, allowed), cat
}

func notifyAt(t *testing.T, reg *iceberg.Registrar, lake *icebergtest.Lake, typ string, ts int64) error {
	t.Helper()
	var req iceberg.Request
	if err := json.Unmarshal(lake.Notification(typ, ts), &req); err != nil {
		t.Fatal(err)
	}
	return reg.Notify(context.Background(), []string{"db", "docs"}, req)
}

func latestVersion(t *testing.T, cat *table.Catalog) uint64 {
	t.Helper()
	tb, err := cat.OpenTable(context.Background(), []string{"db", "docs"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := tb.Load(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return m.Version
}

// TestUnchangedSnapshotCommitsNothing: a notification for the snapshot
// mirrored already commits no version (so no automatic refresh follows)
// but its timestamp is admitted: older and equal ones are refused after
// it, also after a restart, also once the snapshot did change, and of
// concurrent ones only the newest timestamp stays admitted.
func TestUnchangedSnapshotCommitsNothing(t *testing.T) {
	t.Parallel()
	wh, lakeDir := t.TempDir(), t.TempDir()
	lake := icebergtest.NewLake(t, lakeDir, "docs", true)
	var commits atomic.Int64
	reg, cat := registrar(t, wh, lakeDir, &commits)
	lake.Append(icebergtest.Row{ID: 1, Text: "one"})
	if err := notifyAt(t, reg, lake, "CREATE", 1000); err != nil {
		t.Fatal(err)
	}
	if v, n := latestVersion(t, cat), commits.Load(); v != 1 || n != 1 {
		t.Fatalf("after CREATE: version %d, %d commits", v, n)
	}
	refused := func(ts int64) {
		t.Helper()
		if err := notifyAt(t, reg, lake, "UPDATE", ts); errs.CodeOf(err) != errs.CodeTableAlreadyExists {
			t.Fatalf("timestamp %d: %v, want already exists", ts, err)
		}
	}
	// Same snapshot, newer timestamp: admitted, nothing committed.
	for _, ts := range []int64{2000, 2500} {
		if err := notifyAt(t, reg, lake, "UPDATE", ts); err != nil {
			t.Fatalf("unchanged snapshot at %d: %v", ts, err)
		}
	}
	if v, n := latestVersion(t, cat), commits.Load(); v != 1 || n != 1 {
		t.Fatalf("after unchanged notifications: version %d, %d commits", v, n)
	}
	refused(2500)
	refused(2200)
	// A CREATE of the registered table acts as UPDATE: the same.
	if err := notifyAt(t, reg, lake, "CREATE", 2600); err != nil || latestVersion(t, cat) != 1 {
		t.Fatalf("unchanged CREATE: %v", err)
	}

	// The snapshot changes: an older timestamp than the admitted one is
	// still refused, a newer one commits.
	lake.Append(icebergtest.Row{ID: 2, Text: "two"})
	refused(2550)
	if v := latestVersion(t, cat); v != 1 {
		t.Fatalf("a refused notification committed version %d", v)
	}
	if err := notifyAt(t, reg, lake, "UPDATE", 3000); err != nil {
		t.Fatal(err)
	}
	if v, n := latestVersion(t, cat), commits.Load(); v != 2 || n != 2 {
		t.Fatalf("after a change: version %d, %d commits", v, n)
	}

	// After a restart the admitted timestamps hold.
	if err := notifyAt(t, reg, lake, "UPDATE", 4000); err != nil {
		t.Fatal(err)
	}
	var commits2 atomic.Int64
	reg2, cat2 := registrar(t, wh, lakeDir, &commits2)
	refusedBy := func(r *iceberg.Registrar, ts int64) {
		t.Helper()
		if err := notifyAt(t, r, lake, "UPDATE", ts); errs.CodeOf(err) != errs.CodeTableAlreadyExists {
			t.Fatalf("after restart, timestamp %d: %v, want already exists", ts, err)
		}
	}
	refusedBy(reg2, 4000)
	refusedBy(reg2, 3500)

	// Concurrent unchanged notifications: none commits, and afterwards
	// the newest of them is the admitted one.
	var wg sync.WaitGroup
	errList := make([]error, 8)
	for i := range errList {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errList[i] = notifyAt(t, reg2, lake, "UPDATE", int64(5000+i))
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errList {
		switch {
		case err == nil:
			ok++
		case errs.CodeOf(err) == errs.CodeTableAlreadyExists:
		default:
			t.Fatalf("concurrent unchanged notification: %v", err)
		}
	}
	if ok == 0 || commits2.Load() != 0 || latestVersion(t, cat2) != 2 {
		t.Fatalf("concurrent: %d admitted, %d commits, version %d", ok, commits2.Load(), latestVersion(t, cat2))
	}
	refusedBy(reg2, 5007)
	// DROP is ordered against the admitted timestamps too.
	if err := notifyAt(t, reg2, lake, "DROP", 5005); errs.CodeOf(err) != errs.CodeTableAlreadyExists {
		t.Fatalf("DROP older than an admitted notification: %v", err)
	}
	if err := notifyAt(t, reg2, lake, "DROP", 6000); err != nil {
		t.Fatal(fmt.Errorf("DROP: %w", err))
	}
}
