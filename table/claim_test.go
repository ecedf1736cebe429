package table

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/internal/testenv"
	"github.com/mvq-dev/mvq/table/internal/claim"
)

// tablesIn makes {ns}.a and {ns}.b with 10 rows each (version 1) and
// stages version 2 of each (a: 2 rows more, b: 3).
func tablesIn(t testing.TB, c *Catalog, ns string) (a, b *Table, ea, eb BatchVersion) {
	t.Helper()
	ctx := context.Background()
	if err := c.CreateNamespace(ctx, []string{ns}, "exist_ok", nil); err != nil {
		t.Fatal(err)
	}
	var err error
	if a, _, err = c.CreateTable(ctx, []string{ns, "a"}, testSchema, rows(t, 0, 10), "", nil); err != nil {
		t.Fatal(err)
	}
	if b, _, err = c.CreateTable(ctx, []string{ns, "b"}, testSchema, rows(t, 0, 10), "", nil); err != nil {
		t.Fatal(err)
	}
	return a, b, stageAppend(t, a, "a2", 100, 102), stageAppend(t, b, "b2", 100, 103)
}

// versionFiles counts the manifests left in a folder's _versions/.
func versionFiles(t testing.TB, c *Catalog, key string) int {
	t.Helper()
	es, err := c.wh.List(context.Background(), key+versionsDir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		if _, _, ok := ParseManifestName(e.Name); ok {
			n++
		}
	}
	return n
}

// requireClaimFree fails when a holder is left on the claim of key.
func requireClaimFree(t testing.TB, c *Catalog, key string) {
	t.Helper()
	st, err := c.claims().Read(context.Background(), claim.Chain(key))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Txns) != 0 || st.Move != nil {
		t.Fatalf("claim of %s still held: %+v", key, st)
	}
}

// checkSerial asserts that a batch (over a and b, 2 and 3 rows more) and
// a rename of a to a9 ended as one of their serial orders: the batch
// first (a9 and b at version 2) or the rename first (the batch failed
// whole: a9 and b at version 1). The old name is empty either way.
func checkSerial(t testing.TB, c *Catalog, ns string, batchErr error) {
	t.Helper()
	ctx := context.Background()
	moved, err := c.OpenTable(ctx, []string{ns, "a9"})
	if err != nil {
		t.Fatalf("renamed table: %v (batch: %v)", err, batchErr)
	}
	b, err := c.OpenTable(ctx, []string{ns, "b"})
	if err != nil {
		t.Fatal(err)
	}
	want, rowsA, rowsB := uint64(2), int64(12), int64(13)
	if batchErr != nil {
		if code := errs.CodeOf(batchErr); code != errs.CodeConcurrentModification && code != errs.CodeTableNotFound {
			t.Fatalf("batch failed with %v, want a conflict or the old name not found", batchErr)
		}
		want, rowsA, rowsB = 1, 10, 10
	}
	if va, vb := latest(t, moved), latest(t, b); va != want || vb != want {
		t.Fatalf("a9 at v%d, b at v%d; want both at v%d (batch: %v)", va, vb, want, batchErr)
	}
	if n, err := moved.CountRows(ctx, 0, ""); err != nil || n != rowsA {
		t.Fatalf("a9 has %d rows (%v), want %d", n, err, rowsA)
	}
	if n, err := b.CountRows(ctx, 0, ""); err != nil || n != rowsB {
		t.Fatalf("b has %d rows (%v), want %d", n, err, rowsB)
	}
	if _, err := c.OpenTable(ctx, []string{ns, "a"}); errs.CodeOf(err) != errs.CodeTableNotFound {
		t.Fatalf("old name after the rename: %v", err)
	}
	if n := versionFiles(t, c, tableKey([]string{ns, "a"})); n != 0 {
		t.Fatalf("%d manifests left under the old name", n)
	}
	for _, id := range [][]string{{ns, "a"}, {ns, "a9"}, {ns, "b"}} {
		requireClaimFree(t, c, tableKey(id))
	}
}

// TestRenameRacesBatch starts a batch commit over two tables and a
// rename of one of them at the same moment, many times: the outcome is
// always one of the two serial orders, never a mix, and nothing is lost.
func TestRenameRacesBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{TxnTimeout: 10 * time.Second})
	outcomes := map[string]int{}
	for i := range 30 {
		ns := fmt.Sprintf("r%d", i)
		_, _, ea, eb := tablesIn(t, c, ns)
		start := make(chan struct{})
		var wg sync.WaitGroup
		var batchErr, renameErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, _, batchErr = c.CommitBatch(ctx, "batch-create", []BatchVersion{ea, eb})
		}()
		go func() {
			defer wg.Done()
			<-start
			renameErr = c.RenameTable(ctx, []string{ns, "a"}, []string{ns, "a9"})
		}()
		close(start)
		wg.Wait()
		if renameErr != nil {
			t.Fatalf("iteration %d: rename: %v", i, renameErr)
		}
		checkSerial(t, c, ns, batchErr)
		for _, id := range [][]string{{ns, "a9"}, {ns, "b"}} {
			if m := markers(t, c.handle(id)); len(m) != 0 {
				t.Fatalf("iteration %d: markers left in %s: %v", i, JoinID(id), m)
			}
		}
		if batchErr == nil {
			outcomes["batch first"]++
		} else {
			outcomes[fmt.Sprintf("rename first (code %d)", errs.CodeOf(batchErr))]++
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

// TestBatchRefusedDuringRename: a batch started while a move holds one of
// its names is refused with a conflict and applies nothing, and goes
// through once the move released it.
func TestBatchRefusedDuringRename(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{TxnTimeout: 10 * time.Second})
	_, _, ea, eb := tablesIn(t, c, "docs")
	mc, err := c.claimMove(ctx, tableKey([]string{"docs", "a"}), tableKey([]string{"docs", "a9"}), []string{"docs", "a9"}, tableKey([]string{"docs", "a"}))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.CommitBatch(ctx, "batch-create", []BatchVersion{ea, eb})
	if errs.CodeOf(err) != errs.CodeConcurrentModification {
		t.Fatalf("batch during a move: %v, want a conflict", err)
	}
	mc.Release(ctx)
	if v := latest(t, c.handle([]string{"docs", "b"})); v != 1 {
		t.Fatalf("b at v%d after the refused batch", v)
	}
	if _, _, err := c.CommitBatch(ctx, "batch-create", []BatchVersion{ea, eb}); err != nil {
		t.Fatalf("batch after the move released the name: %v", err)
	}
}

// TestRenameHelperProcess is the mover the rename kill test runs in a
// subprocess: it renames docs.a to docs.a9 and pauses at the failpoint.
func TestRenameHelperProcess(t *testing.T) {
	dir := os.Getenv("MVQ_RENAME_HELPER_DIR")
	if dir == "" {
		t.Skip("run by TestRenameKilledMidway")
	}
	c := newCatalog(t, dir, Options{TxnTimeout: 500 * time.Millisecond, StepHook: testenv.PauseAtEnv()})
	err := c.RenameTable(context.Background(), []string{"docs", "a"}, []string{"docs", "a9"})
	fmt.Fprintf(os.Stderr, "renamed %v\n", err)
}

// killAt runs the test helper helper with env in a subprocess, waits for
// it to pause at failpoint step and SIGKILLs it.
func killAt(t *testing.T, helper, step string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), env...), testenv.FailpointEnv+"="+step)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	paused := false
	var seen []string
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if sc.Text() == "mvq-txn-failpoint "+step {
			paused = true
			break
		}
	}
	if !paused {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the helper never reached %s: %v", step, seen)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper ended with %v, want SIGKILL", err)
	}
}

// TestRenameKilledMidway SIGKILLs a rename (after it claimed its names,
// before and after the copy of the manifests) and a batch (in the middle
// of its commit) racing a rename: the names stay claimed while the killed
// holder's lease runs, then the janitor's RecoverTransactions releases
// them, completing a rename that had copied the table, and the outcome is
// a serial order of the rename and the batch.
func TestRenameKilledMidway(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocesses")
	}
	t.Parallel()
	for _, tc := range []struct {
		step    string
		rename  bool // the killed process renames (else it commits a batch)
		forward bool // recovery completes what the killed process began
	}{
		{"move-started", true, false},
		{"move-sealed", true, false},
		{"move-copied", true, true},
		{"marker-0", false, false},
		{"manifest-1", false, true},
	} {
		t.Run(tc.step, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			opts := Options{TxnTimeout: 500 * time.Millisecond}
			c := newCatalog(t, dir, opts)
			a, _, ea, eb := tablesIn(t, c, "docs")
			if tc.rename {
				killAt(t, "TestRenameHelperProcess", tc.step, "MVQ_RENAME_HELPER_DIR="+dir)
			} else {
				// The helper commits staged/{a,b}2.manifest as version 2.
				killAt(t, "TestTxnHelperProcess", tc.step, "MVQ_TXN_HELPER_DIR="+dir)
			}
			fresh := NewCatalog(mustOpen(t, c.wh.URI()), c.sql, opts)
			if tc.rename {
				// While the killed mover's lease runs, a batch is refused.
				if _, _, err := fresh.CommitBatch(ctx, "batch-create", []BatchVersion{ea, eb}); errs.CodeOf(err) != errs.CodeConcurrentModification {
					t.Fatalf("batch while the killed rename holds the name: %v", err)
				}
				var res TxnRecovery
				for end := time.Now().Add(10 * time.Second); res.Claims == 0; {
					var err error
					if res, err = fresh.RecoverTransactions(ctx, 0); err != nil {
						t.Fatal(err)
					}
					if time.Now().After(end) {
						t.Fatal("the killed rename's claim was never released")
					}
					time.Sleep(20 * time.Millisecond)
				}
				if left := sealFilesLeft(t, fresh, a.key); len(left) != 0 {
					t.Fatalf("seals left after recovery: %v", left)
				}
				_, err := fresh.OpenTable(ctx, a.ID())
				if tc.forward != (errs.CodeOf(err) == errs.CodeTableNotFound) {
					t.Fatalf("old name after recovery: %v (renamed: %v)", err, tc.forward)
				}
				if !tc.forward {
					// Not moved: the rename runs again, racing the batch
					// (with a deadline a loaded machine cannot miss).
					fresh := NewCatalog(mustOpen(t, c.wh.URI()), c.sql, Options{TxnTimeout: 10 * time.Second})
					var wg sync.WaitGroup
					var batchErr, renameErr error
					wg.Add(2)
					go func() {
						defer wg.Done()
						_, _, batchErr = fresh.CommitBatch(ctx, "batch-create", []BatchVersion{ea, eb})
					}()
					go func() {
						defer wg.Done()
						renameErr = fresh.RenameTable(ctx, a.ID(), []string{"docs", "a9"})
					}()
					wg.Wait()
					if renameErr != nil {
						t.Fatal(renameErr)
					}
					checkSerial(t, fresh, "docs", batchErr)
					return
				}
				// Moved: the batch over the old name finds no table (the
				// rename came first), and one over the new name works.
				if _, _, err := fresh.CommitBatch(ctx, "batch-create", []BatchVersion{ea, eb}); errs.CodeOf(err) != errs.CodeTableNotFound {
					t.Fatalf("batch over the old name after the rename: %v", err)
				}
				checkSerial(t, fresh, "docs", errs.Errorf(errs.CodeTableNotFound, "rename first"))
				return
			}
			// A killed batch: a rename waits for its deadline, recovers it
			// (forward when it had written every version, else back) and
			// moves the table with the batch's version or without it.
			if err := fresh.RenameTable(ctx, a.ID(), []string{"docs", "a9"}); err != nil {
				t.Fatal(err)
			}
			if _, err := fresh.RecoverTransactions(ctx, 0); err != nil {
				t.Fatal(err)
			}
			var batchErr error
			if !tc.forward {
				batchErr = errs.Errorf(errs.CodeConcurrentModification, "rolled back by recovery")
			}
			checkSerial(t, fresh, "docs", batchErr)
		})
	}
}
