package table

import (
	"bufio"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/internal/testenv"
)

// mixedBatch sets up, in c, a batch over four tables of every kind:
// delete version 1 of docs.a (which has 2), version 2 of docs.b (staged),
// deregister docs.c, declare docs.d. It returns the entries.
func mixedBatch(t testing.TB, c *Catalog, stage bool) []BatchVersion {
	t.Helper()
	ctx := context.Background()
	if stage {
		a, b := twoTables(t, c)
		if _, _, err := a.Insert(ctx, rows(t, 10, 11), "append"); err != nil {
			t.Fatal(err)
		}
		stageAppend(t, b, "b2", 100, 103)
		if _, _, err := c.CreateTable(ctx, []string{"docs", "c"}, testSchema, rows(t, 0, 5), "", nil); err != nil {
			t.Fatal(err)
		}
	}
	return []BatchVersion{
		{Field: "op0", ID: []string{"docs", "d"}, Kind: BatchDeclare, Properties: map[string]string{"k": "v"}},
		{Field: "op1", ID: []string{"docs", "c"}, Kind: BatchDeregister},
		{Field: "op2", ID: []string{"docs", "b"}, Version: 2, ManifestPath: "staged/b2.manifest", Scheme: NamingV2},
		{Field: "op3", ID: []string{"docs", "a"}, Kind: BatchDeleteVersions, Ranges: []VersionRange{{Start: 0, End: 2}}},
	}
}

// mixedState reads the four effects of mixedBatch: how many of them are
// visible (0 or 4 when atomic).
func mixedState(t testing.TB, c *Catalog) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	if _, err := c.handle([]string{"docs", "a"}).Version(ctx, 1); err != nil {
		n++
	}
	if latest(t, c.handle([]string{"docs", "b"})) == 2 {
		n++
	}
	if ok, err := c.tableExists(ctx, []string{"docs", "c"}); err != nil {
		t.Fatal(err)
	} else if !ok {
		n++
	}
	if ok, err := c.Declared(ctx, []string{"docs", "d"}); err != nil {
		t.Fatal(err)
	} else if ok {
		n++
	}
	return n
}

func TestBatchMixedOperations(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	entries := mixedBatch(t, c, true)
	if mixedState(t, c) != 0 {
		t.Fatal("effects before the batch")
	}
	id, res, err := c.CommitBatch(ctx, "batch-commit", entries)
	if err != nil {
		t.Fatal(err)
	}
	if got := mixedState(t, c); got != 4 {
		t.Fatalf("%d of 4 effects after the batch", got)
	}
	if res[3].Kind != BatchDeleteVersions || res[3].Deleted != 1 || res[0].Location == "" || res[1].Location == "" {
		t.Fatalf("results %+v", res)
	}
	// The deregistered table went where register finds it, whole, with
	// a record of the table it was.
	name := strings.TrimSuffix(res[1].Location[strings.LastIndexByte(res[1].Location, '/')+1:], tableSuffix)
	if from, err := c.readOrigin(ctx, name); err != nil || JoinID(from) != "docs$c" {
		t.Fatalf("origin of %s: %q (%v), want docs$c", res[1].Location, from, err)
	}
	rt, err := c.RegisterTable(ctx, []string{"docs", "c2"}, res[1].Location, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := rt.CountRows(ctx, 0, ""); err != nil || n != 5 {
		t.Fatalf("registered c has %d rows (%v)", n, err)
	}
	for _, n := range []string{"a", "b"} {
		if m := markers(t, c.handle([]string{"docs", n})); len(m) != 0 {
			t.Fatalf("%s: markers left %v", n, m)
		}
	}
	if tx, _ := c.Transaction(ctx, id); tx.Status != TxnSucceeded {
		t.Fatalf("status %s", tx.Status)
	}
	// Declaring d again is a conflict: it is declared.
	if _, err := c.DeclareTable(ctx, []string{"docs", "d"}, nil); errs.CodeOf(err) != errs.CodeTableAlreadyExists {
		t.Fatalf("declare again: %v", err)
	}
}

// A batch whose last entry fails leaves none of the others applied.
func TestBatchMixedAllOrNothing(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	entries := mixedBatch(t, c, true)
	// A concurrent declare of d between the checks and the write.
	hook := func(step string) {
		if step == "record" {
			if _, err := c.DeclareTable(ctx, []string{"docs", "d"}, nil); err != nil {
				t.Error(err)
			}
		}
	}
	id, _, err := withStepHook(c, hook, func() (string, []BatchResult, error) { return c.CommitBatch(ctx, "batch-commit", entries) })
	if errs.CodeOf(err) != errs.CodeTableAlreadyExists || id == "" {
		t.Fatalf("want a conflict on d, got %v", err)
	}
	// d is declared by the other declare; nothing of the batch applied.
	if _, err := c.handle([]string{"docs", "a"}).Version(ctx, 1); err != nil {
		t.Fatalf("a lost version 1: %v", err)
	}
	if latest(t, c.handle([]string{"docs", "b"})) != 1 {
		t.Fatal("b moved")
	}
	if ok, _ := c.tableExists(ctx, []string{"docs", "c"}); !ok {
		t.Fatal("c deregistered")
	}
	if tx, _ := c.Transaction(ctx, id); tx.Status != TxnFailed {
		t.Fatalf("status %s", tx.Status)
	}
}

// TestTxnMixedHelperProcess is the writer of TestBatchMixedKilledMidway.
func TestTxnMixedHelperProcess(t *testing.T) {
	dir := os.Getenv("MVQ_TXN_MIXED_DIR")
	if dir == "" {
		t.Skip("run by TestBatchMixedKilledMidway")
	}
	c := newCatalog(t, dir, Options{TxnTimeout: 500 * time.Millisecond, StepHook: testenv.PauseAtEnv()})
	_, _, err := c.CommitBatch(context.Background(), "batch-commit", mixedBatch(t, c, false))
	t.Log(err)
}

// TestBatchMixedKilledMidway kills a process committing a batch of every
// operation kind at each step and checks that all four effects or none
// are visible, then that recovery completes or undoes all of them.
func TestBatchMixedKilledMidway(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocesses")
	}
	// Entries run in table order: a (delete), b (version), c
	// (deregister), d (declare).
	for _, tc := range []struct {
		step             string
		forward, visible bool
	}{
		{"record", false, false},
		{"marker-0", false, false},
		{"manifest-1", false, false},
		{"marker-2", false, false},
		{"marker-3", true, false},
		{"decided", true, true},
	} {
		t.Run(tc.step, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			c := newCatalog(t, dir, Options{TxnTimeout: 500 * time.Millisecond})
			mixedBatch(t, c, true)
			cmd := exec.Command(os.Args[0], "-test.run=^TestTxnMixedHelperProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), "MVQ_TXN_MIXED_DIR="+dir, testenv.FailpointEnv+"="+tc.step)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(stderr)
			paused := false
			for sc.Scan() {
				if sc.Text() == "mvq-txn-failpoint "+tc.step {
					paused = true
					break
				}
			}
			cmd.Process.Signal(syscall.SIGKILL)
			var ee *exec.ExitError
			if err := cmd.Wait(); !paused || !errors.As(err, &ee) {
				t.Fatalf("writer: paused %v, ended %v", paused, err)
			}
			fresh := NewCatalog(mustOpen(t, c.wh.URI()), c.sql, Options{TxnTimeout: 500 * time.Millisecond})
			want := map[bool]int{false: 0, true: 4}
			if got := mixedState(t, fresh); got != want[tc.visible] {
				t.Fatalf("after a kill at %s: %d of 4 effects visible", tc.step, got)
			}
			es, err := fresh.wh.List(ctx, txnDir)
			if err != nil || len(es) != 1 {
				t.Fatalf("records %v %v", es, err)
			}
			var tx *Transaction
			for end := time.Now().Add(10 * time.Second); ; {
				if _, err := fresh.RecoverTransactions(ctx, 0); err != nil {
					t.Fatal(err)
				}
				if tx, err = fresh.Transaction(ctx, es[0].Name); err != nil {
					t.Fatal(err)
				}
				if tx.Status.Final() || time.Now().After(end) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if tc.forward != (tx.Status == TxnSucceeded) || !tx.Status.Final() {
				t.Fatalf("transaction %s (%s) after recovery", tx.Status, tx.Reason)
			}
			if got := mixedState(t, fresh); got != want[tc.forward] {
				t.Fatalf("after recovery (%s): %d of 4 effects", tx.Status, got)
			}
			// Recovery left nothing behind: no markers in the table
			// folders, c's folder gone (forward) or intact.
			for _, n := range []string{"a", "b", "c"} {
				if m := markers(t, fresh.handle([]string{"docs", n})); tc.forward && len(m) != 0 {
					t.Fatalf("%s: markers left %v", n, m)
				}
			}
			if tc.forward {
				// Files, not listing entries: an S3 server backed by a
				// filer (SeaweedFS) lists emptied folders as prefixes.
				if fs, _ := fresh.wh.Walk(ctx, tableKey([]string{"docs", "c"})); len(fs) != 0 {
					t.Fatalf("c's folder still holds %v", fs)
				}
			} else if ok, _ := fresh.Declared(ctx, []string{"docs", "d"}); ok {
				t.Fatal("d declared after a rollback")
			} else if _, err := fresh.DeclareTable(ctx, []string{"docs", "d"}, nil); err != nil {
				t.Fatalf("declare d after a rollback: %v", err)
			}
		})
	}
}

// Renaming or deregistering a table while a batch over it is undecided
// waits for the decision: the batch's version moves with the table.
func TestRenameWaitsForBatch(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{TxnTimeout: 5 * time.Second})
	a, b := twoTables(t, c)
	ea, eb := stageAppend(t, a, "a2", 100, 102), stageAppend(t, b, "b2", 100, 103)
	release := make(chan struct{})
	renamed := make(chan error, 1)
	hook := func(step string) {
		if step == "manifest-0" {
			go func() { renamed <- c.RenameTable(ctx, []string{"docs", "a"}, []string{"docs", "a9"}) }()
			select {
			case err := <-renamed:
				renamed <- err
				t.Error("rename finished while the batch was undecided")
			case <-time.After(200 * time.Millisecond):
			}
			close(release)
		}
	}
	_, _, err := withStepHook(c, hook, func() (string, []BatchResult, error) {
		return c.CommitBatch(ctx, "batch-create", []BatchVersion{ea, eb})
	})
	if err != nil {
		t.Fatal(err)
	}
	<-release
	if err := <-renamed; err != nil {
		t.Fatal(err)
	}
	moved, err := c.OpenTable(ctx, []string{"docs", "a9"})
	if err != nil {
		t.Fatal(err)
	}
	if v := latest(t, moved); v != 2 {
		t.Fatalf("renamed table at v%d, want the batch's v2", v)
	}
	if n, err := moved.CountRows(ctx, 0, ""); err != nil || n != 12 {
		t.Fatalf("renamed table has %d rows (%v)", n, err)
	}
	if m := markers(t, moved); len(m) != 0 {
		t.Fatalf("markers carried along: %v", m)
	}
	if _, err := c.DeregisterTable(ctx, []string{"docs", "b"}); err != nil {
		t.Fatal(err)
	}
}

// An entry's e_tag must be the staged manifest's (hex MD5, quoted or
// not); a stale one is a conflict and applies nothing.
func TestBatchETag(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	a, b := twoTables(t, c)
	ea, eb := stageAppend(t, a, "a2", 100, 102), stageAppend(t, b, "b2", 100, 103)
	data, err := c.wh.Read(ctx, a.key+ea.ManifestPath)
	if err != nil {
		t.Fatal(err)
	}
	sum := md5.Sum(data)
	ea.ETag, eb.ETag = `"`+hex.EncodeToString(sum[:])+`"`, `"0123"`
	if _, _, err := c.CommitBatch(ctx, "batch-create", []BatchVersion{ea, eb}); errs.CodeOf(err) != errs.CodeConcurrentModification || !strings.Contains(err.Error(), "b2.e_tag") {
		t.Fatalf("stale e_tag: %v", err)
	}
	if latest(t, a) != 1 || latest(t, b) != 1 {
		t.Fatal("a batch with a stale e_tag applied")
	}
	eb.ETag = ""
	ea.ETag = hex.EncodeToString(sum[:])
	if _, _, err := c.CommitBatch(ctx, "batch-create", []BatchVersion{ea, eb}); err != nil {
		t.Fatal(err)
	}
	if latest(t, a) != 2 || latest(t, b) != 2 {
		t.Fatal("batch not applied")
	}
}
