package table

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/internal/testenv"
)

// stageAppend writes rows [from, to) as data files of tb and a manifest of
// the next version appending them at staged/{name}.manifest; it returns
// the batch entry that publishes it.
func stageAppend(t testing.TB, tb *Table, name string, from, to int) BatchVersion {
	t.Helper()
	ctx := context.Background()
	base, err := tb.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	frags, err := tb.WriteFragments(ctx, testSchema, rows(t, from, to), 0)
	if err != nil {
		t.Fatal(err)
	}
	next := base.clone()
	assignIDs(next, frags)
	next.Version = base.Version + 1
	next.ParentVersion = base.Version
	next.Operation = "append"
	next.TimestampMillis = time.Now().UnixMilli()
	data, err := next.Encode()
	if err != nil {
		t.Fatal(err)
	}
	path := "staged/" + name + ".manifest"
	if err := tb.c.wh.Write(ctx, tb.key+path, data); err != nil {
		t.Fatal(err)
	}
	return BatchVersion{Field: name, ID: tb.ID(), Version: next.Version, ManifestPath: path, Scheme: NamingV2}
}

// twoTables makes docs.a and docs.b with 10 rows each (version 1).
func twoTables(t testing.TB, c *Catalog) (*Table, *Table) {
	t.Helper()
	return docsTable(t, c, "a"), docsTable(t, c, "b")
}

// docsTable makes table docs.{name} (and namespace docs if need be) with
// 10 rows (version 1).
func docsTable(t testing.TB, c *Catalog, name string) *Table {
	t.Helper()
	ctx := context.Background()
	if err := c.CreateNamespace(ctx, []string{"docs"}, "exist_ok", nil); err != nil {
		t.Fatal(err)
	}
	tb, _, err := c.CreateTable(ctx, []string{"docs", name}, testSchema, rows(t, 0, 10), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func latest(t testing.TB, tb *Table) uint64 {
	t.Helper()
	vf, err := tb.LatestVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return vf.Version
}

// markers lists the transaction markers left in tb's main _versions/.
func markers(t testing.TB, tb *Table) []string {
	t.Helper()
	return lineMarkers(t, tb.Main())
}

func TestBatchCommitPublishesEveryTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	a, b := twoTables(t, c)
	var hooked []string
	var mu sync.Mutex
	fresh := NewCatalog(mustOpen(t, c.wh.URI()), c.sql, Options{})
	c.OnCommit(func(_ context.Context, id []string, m *Manifest) {
		// The hook runs once the batch is committed: a fresh reader
		// already sees both tables at their new version.
		for _, other := range [][]string{a.ID(), b.ID()} {
			if v := latest(t, fresh.handle(other)); m.Transaction != "" && v != 2 {
				t.Errorf("hook for %s ran while %s was at version %d", JoinID(id), JoinID(other), v)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		hooked = append(hooked, fmt.Sprintf("%s@%d", JoinID(id), m.Version))
	})
	// Entries in reverse key order: results come back in request order.
	entries := []BatchVersion{stageAppend(t, b, "b2", 100, 105), stageAppend(t, a, "a2", 200, 203)}
	id, res, err := c.CommitBatch(ctx, "batch-create", entries)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || JoinID(res[0].Table.ID()) != "docs$b" || res[0].File.Version != 2 || res[1].File.Version != 2 {
		t.Fatalf("results %+v", res)
	}
	if got := ids(t, a, QueryOptions{}); len(got) != 13 || got[10] != 200 {
		t.Fatalf("a rows %v", got)
	}
	if got := ids(t, b, QueryOptions{}); len(got) != 15 || got[14] != 104 {
		t.Fatalf("b rows %v", got)
	}
	tx, err := c.Transaction(ctx, id)
	if err != nil || tx.Status != TxnSucceeded || len(tx.Entries) != 2 || tx.Operation != "batch-create" {
		t.Fatalf("transaction %+v %v", tx, err)
	}
	if m := append(markers(t, a), markers(t, b)...); len(m) != 0 {
		t.Fatalf("markers left: %v", m)
	}
	mu.Lock()
	if fmt.Sprint(hooked) != "[docs$a@2 docs$b@2]" {
		t.Fatalf("commit hook saw %v", hooked)
	}
	mu.Unlock()
	// The published manifests are ordinary versions of their tables.
	m, err := a.Load(ctx, 2)
	if err != nil || m.Transaction != id {
		t.Fatalf("a v2 %+v %v", m, err)
	}
	// A normal commit builds on them and does not carry the transaction.
	m3, _, err := a.Insert(ctx, rows(t, 300, 301), "append")
	if err != nil || m3.Version != 3 || m3.Transaction != "" {
		t.Fatalf("insert after batch: %+v %v", m3, err)
	}
}

func TestBatchRefusesBadEntriesBeforeWriting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	a, b := twoTables(t, c)
	good := stageAppend(t, a, "a2", 10, 11)
	for _, tc := range []struct {
		name  string
		bad   BatchVersion
		code  errs.Code
		field string
	}{
		{"missing table", BatchVersion{Field: "entries[1]", ID: []string{"docs", "nope"}, Version: 2, ManifestPath: "x", Scheme: NamingV2}, errs.CodeTableNotFound, "entries[1]: "},
		{"existing version", BatchVersion{Field: "entries[1]", ID: b.ID(), Version: 1, ManifestPath: "x", Scheme: NamingV2}, errs.CodeConcurrentModification, "entries[1]: "},
		{"gap", BatchVersion{Field: "entries[1]", ID: b.ID(), Version: 5, ManifestPath: good.ManifestPath, Scheme: NamingV2}, errs.CodeInvalidInput, "entries[1]: "},
		{"same table twice", BatchVersion{Field: "entries[1]", ID: a.ID(), Version: 2, ManifestPath: good.ManifestPath, Scheme: NamingV2}, errs.CodeInvalidInput, "entries[1]: "},
		{"wrong size", func() BatchVersion {
			e := stageAppend(t, b, "bsize", 1, 2)
			n := int64(3)
			e.ManifestSize, e.Field = &n, "entries[1]"
			return e
		}(), errs.CodeInvalidInput, "entries[1].manifest_size"},
	} {
		_, _, err := c.CommitBatch(ctx, "batch-create", []BatchVersion{good, tc.bad})
		if errs.CodeOf(err) != tc.code || !strings.HasPrefix(err.Error(), tc.field) {
			t.Errorf("%s: %v (code %d), want code %d starting %q", tc.name, err, errs.CodeOf(err), tc.code, tc.field)
		}
	}
	if latest(t, a) != 1 || latest(t, b) != 1 {
		t.Fatal("a refused batch wrote a version")
	}
	if es, _ := c.wh.List(ctx, txnDir); len(es) != 0 {
		t.Fatalf("a refused batch left a record: %v", es)
	}
	if _, _, err := c.CommitBatch(ctx, "batch-create", nil); errs.CodeOf(err) != errs.CodeInvalidInput {
		t.Fatalf("empty batch: %v", err)
	}
}

func TestBatchLosingToACommitAppliesNothing(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	a, b := twoTables(t, c)
	entries := []BatchVersion{stageAppend(t, a, "a2", 10, 11), stageAppend(t, b, "b2", 10, 11)}
	// After the batch claimed a's version 2, an insert takes b's.
	hookOnce := sync.Once{}
	stepHook := func(step string) {
		if step == "manifest-0" {
			hookOnce.Do(func() {
				if _, _, err := b.Insert(ctx, rows(t, 50, 51), "append"); err != nil {
					t.Error(err)
				}
			})
		}
	}
	id, _, err := withStepHook(c, stepHook, func() (string, []BatchResult, error) { return c.CommitBatch(ctx, "batch-create", entries) })
	if !IsConflict(err) || !strings.Contains(err.Error(), "nothing applied") || id == "" {
		t.Fatalf("batch against a concurrent insert: %v", err)
	}
	if latest(t, a) != 1 || latest(t, b) != 2 {
		t.Fatalf("a at %d, b at %d; want 1 and 2", latest(t, a), latest(t, b))
	}
	if m := append(markers(t, a), markers(t, b)...); len(m) != 0 {
		t.Fatalf("markers left: %v", m)
	}
	tx, err := c.Transaction(ctx, id)
	if err != nil || tx.Status != TxnFailed || !strings.Contains(tx.Reason, "already exists") {
		t.Fatalf("transaction %+v %v", tx, err)
	}
	// a's version 2 is free again.
	if m, _, err := a.Insert(ctx, rows(t, 60, 61), "append"); err != nil || m.Version != 2 {
		t.Fatalf("insert into a: %v %v", m, err)
	}
}

// withStepHook runs fn with c's StepHook set to h.
func withStepHook(c *Catalog, h func(string), fn func() (string, []BatchResult, error)) (string, []BatchResult, error) {
	c.opts.StepHook = h
	defer func() { c.opts.StepHook = nil }()
	return fn()
}

func TestBatchReadersAndWritersDuringCommit(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	a, b := twoTables(t, c)
	entries := []BatchVersion{stageAppend(t, a, "a2", 100, 101), stageAppend(t, b, "b2", 100, 101)}
	insertDone := make(chan *Manifest, 1)
	h := func(step string) {
		if step != "manifest-1" {
			return
		}
		// Every version is written, nothing decided: readers see the
		// tables as they were, in this process and in a fresh catalog.
		fresh := NewCatalog(mustOpen(t, c.wh.URI()), c.sql, Options{})
		for _, cat := range []*Catalog{c, fresh} {
			for _, tb := range []*Table{a, b} {
				h := cat.handle(tb.ID())
				if v := latest(t, h); v != 1 {
					t.Errorf("a reader sees %s at version %d during the commit", JoinID(tb.ID()), v)
				}
				if _, err := h.Load(ctx, 2); errs.CodeOf(err) != errs.CodeTableVersionNotFound {
					t.Errorf("version 2 of %s during the commit: %v", JoinID(tb.ID()), err)
				}
				if n, err := h.CountRows(ctx, 0, ""); err != nil || n != 10 {
					t.Errorf("count during the commit: %d %v", n, err)
				}
			}
		}
		// A single-table commit waits for the batch and lands after it.
		go func() {
			m, _, err := a.Insert(ctx, rows(t, 500, 501), "append")
			if err != nil {
				t.Error(err)
			}
			insertDone <- m
		}()
		select {
		case m := <-insertDone:
			t.Errorf("insert committed v%d while the batch was undecided", m.Version)
			insertDone <- m
		case <-time.After(50 * time.Millisecond): // it must still be waiting
		}
	}
	if _, _, err := withStepHook(c, h, func() (string, []BatchResult, error) { return c.CommitBatch(ctx, "batch-create", entries) }); err != nil {
		t.Fatal(err)
	}
	m := <-insertDone
	if m == nil || m.Version != 3 {
		t.Fatalf("insert landed at %+v, want version 3", m)
	}
	if got := ids(t, a, QueryOptions{}); len(got) != 12 || got[10] != 100 || got[11] != 500 {
		t.Fatalf("a rows %v", got)
	}
}

func mustOpen(t testing.TB, uri string) *Warehouse {
	t.Helper()
	wh, err := OpenWarehouse(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	return wh
}

func TestConcurrentBatchesOneWins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	c := newCatalog(t, dir, Options{})
	a, b := twoTables(t, c)
	const n = 6
	var batches [][]BatchVersion
	for i := 0; i < n; i++ {
		batches = append(batches, []BatchVersion{stageAppend(t, a, fmt.Sprintf("a%d", i), 100*i, 100*i+1), stageAppend(t, b, fmt.Sprintf("b%d", i), 100*i, 100*i+1)})
	}
	// Each batch in its own catalog over its own warehouse handle, as
	// separate processes would be.
	var wg sync.WaitGroup
	errList := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cat := NewCatalog(mustOpen(t, c.wh.URI()), c.sql, Options{})
			_, _, errList[i] = cat.CommitBatch(ctx, "batch-create", batches[i])
		}(i)
	}
	wg.Wait()
	won := -1
	for i, err := range errList {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("batches %d and %d both won", won, i)
		case err == nil:
			won = i
		case !IsConflict(err):
			t.Fatalf("batch %d: %v", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no batch won")
	}
	if latest(t, a) != 2 || latest(t, b) != 2 {
		t.Fatalf("a at %d, b at %d", latest(t, a), latest(t, b))
	}
	ga, gb := ids(t, a, QueryOptions{}), ids(t, b, QueryOptions{})
	if ga[10] != int64(100*won) || gb[10] != int64(100*won) {
		t.Fatalf("winner %d but a has %v, b has %v", won, ga[10:], gb[10:])
	}
	if m := append(markers(t, a), markers(t, b)...); len(m) != 0 {
		t.Fatalf("markers left: %v", m)
	}
}

func TestAlterTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	a, b := twoTables(t, c)
	id, _, err := c.CommitBatch(ctx, "batch-create", []BatchVersion{stageAppend(t, a, "a2", 1, 2), stageAppend(t, b, "b2", 1, 2)})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := c.AlterTransaction(ctx, id, []TxnAction{{Field: "actions[0]", Key: "k", Value: "1", Mode: "overwrite"}, {Field: "actions[1]", Key: "j", Value: "2", Mode: "skip"}})
	if err != nil || tx.Properties["k"] != "1" || tx.Properties["j"] != "2" {
		t.Fatalf("set properties: %+v %v", tx, err)
	}
	// All or nothing: the failing second action leaves k as it was.
	_, err = c.AlterTransaction(ctx, id, []TxnAction{{Field: "actions[0]", Key: "k", Value: "9", Mode: "overwrite"}, {Field: "actions[1]", Key: "j", Value: "3", Mode: "fail"}})
	if !IsConflict(err) || !strings.Contains(err.Error(), "actions[1]") {
		t.Fatalf("set with fail on an existing key: %v", err)
	}
	if tx, _ := c.Transaction(ctx, id); tx.Properties["k"] != "1" {
		t.Fatalf("a failed alter applied an action: %v", tx.Properties)
	}
	if _, err := c.AlterTransaction(ctx, id, []TxnAction{{Field: "actions[0]", Key: "zz", Unset: true, Mode: "fail"}}); !IsConflict(err) {
		t.Fatalf("unset of a missing key with fail: %v", err)
	}
	if tx, err := c.AlterTransaction(ctx, id, []TxnAction{{Field: "actions[0]", Key: "k", Unset: true, Mode: "skip"}, {Field: "actions[1]", Key: "zz", Unset: true, Mode: "skip"}}); err != nil || len(tx.Properties) != 1 {
		t.Fatalf("unset: %+v %v", tx, err)
	}
	// A committed transaction cannot be cancelled; its own status is a no-op.
	if _, err := c.AlterTransaction(ctx, id, []TxnAction{{Field: "actions[0]", SetStatus: TxnCanceled}}); !IsConflict(err) {
		t.Fatalf("cancel a committed transaction: %v", err)
	}
	if tx, err := c.AlterTransaction(ctx, id, []TxnAction{{Field: "actions[0]", SetStatus: TxnSucceeded}}); err != nil || tx.Status != TxnSucceeded {
		t.Fatalf("set Succeeded on a succeeded transaction: %v", err)
	}
	if _, err := c.AlterTransaction(ctx, "4b4ab4a0-35a4-4d8f-9b4c-1f6a1f2b3c4d", []TxnAction{{SetStatus: TxnCanceled}}); errs.CodeOf(err) != errs.CodeTransactionNotFound {
		t.Fatalf("alter a missing transaction: %v", err)
	}
	if _, err := c.Transaction(ctx, "../../docs"); errs.CodeOf(err) != errs.CodeTransactionNotFound {
		t.Fatalf("describe a path: %v", err)
	}
}

func TestCancelRunningTransaction(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	a, b := twoTables(t, c)
	entries := []BatchVersion{stageAppend(t, a, "a2", 1, 2), stageAppend(t, b, "b2", 1, 2)}
	var cancelErr error
	h := func(step string) {
		if step != "manifest-0" {
			return
		}
		es, err := c.wh.List(ctx, txnDir)
		if err != nil || len(es) != 1 {
			cancelErr = fmt.Errorf("records %v %v", es, err)
			return
		}
		tx, err := c.AlterTransaction(ctx, es[0].Name, []TxnAction{{Field: "actions[0]", SetStatus: TxnCanceled}})
		if err == nil && tx.Status != TxnCanceled {
			err = fmt.Errorf("status %s", tx.Status)
		}
		cancelErr = err
	}
	id, _, err := withStepHook(c, h, func() (string, []BatchResult, error) { return c.CommitBatch(ctx, "batch-create", entries) })
	if cancelErr != nil {
		t.Fatal(cancelErr)
	}
	if !IsConflict(err) || !strings.Contains(err.Error(), "canceled") {
		t.Fatalf("batch cancelled midway: %v", err)
	}
	if latest(t, a) != 1 || latest(t, b) != 1 {
		t.Fatal("a cancelled batch published a version")
	}
	if m := append(markers(t, a), markers(t, b)...); len(m) != 0 {
		t.Fatalf("markers left: %v", m)
	}
	if tx, _ := c.Transaction(ctx, id); tx.Status != TxnCanceled {
		t.Fatalf("status %s", tx.Status)
	}
}

// TestTxnHelperProcess is the writer the kill test runs in a subprocess:
// it commits the batch the parent staged and pauses at the failpoint.
func TestTxnHelperProcess(t *testing.T) {
	dir := os.Getenv("MVQ_TXN_HELPER_DIR")
	if dir == "" {
		t.Skip("run by TestBatchKilledMidway")
	}
	ctx := context.Background()
	// Long enough that a loaded machine (or a slow S3) still reaches the
	// failpoint before the batch's deadline; the parent's recovery waits
	// for it.
	c := newCatalog(t, dir, Options{TxnTimeout: 2 * time.Second, StepHook: testenv.PauseAtEnv()})
	var entries []BatchVersion
	for _, name := range []string{"a", "b"} {
		entries = append(entries, BatchVersion{Field: name, ID: []string{"docs", name}, Version: 2, ManifestPath: "staged/" + name + "2.manifest", Scheme: NamingV2})
	}
	id, _, err := c.CommitBatch(ctx, "batch-create", entries)
	fmt.Fprintf(os.Stderr, "committed %s %v\n", id, err)
}

// TestBatchKilledMidway SIGKILLs a process committing a batch over two
// tables at each step of the commit and checks, from this process, that
// either both tables show the batch or neither does, and that recovery
// (a writer of one table, the janitor's RecoverTransactions for the
// other) completes or aborts it.
func TestBatchKilledMidway(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocesses")
	}
	t.Parallel()
	for _, tc := range []struct {
		step    string
		forward bool // all versions were written: recovery completes it
		visible bool // visible right after the kill
	}{
		{"record", false, false},
		{"marker-0", false, false},
		{"manifest-0", false, false},
		{"marker-1", false, false},
		{"manifest-1", true, false},
		{"decided", true, true},
	} {
		t.Run(tc.step, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			c := newCatalog(t, dir, Options{TxnTimeout: 500 * time.Millisecond})
			a, b := twoTables(t, c)
			stageAppend(t, a, "a2", 100, 102)
			stageAppend(t, b, "b2", 100, 103)

			cmd := exec.Command(os.Args[0], "-test.run=^TestTxnHelperProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), "MVQ_TXN_HELPER_DIR="+dir, testenv.FailpointEnv+"="+tc.step)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(stderr)
			paused := false
			var said []string
			for sc.Scan() {
				if sc.Text() == "mvq-txn-failpoint "+tc.step {
					paused = true
					break
				}
				said = append(said, sc.Text())
			}
			if !paused {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the writer never reached %s; it said:\n%s", tc.step, strings.Join(said, "\n"))
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			var ee *exec.ExitError
			if err := cmd.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("writer ended with %v, want SIGKILL", err)
			}

			// A fresh catalog (no cached state) sees all or nothing.
			fresh := NewCatalog(mustOpen(t, c.wh.URI()), c.sql, Options{TxnTimeout: 500 * time.Millisecond})
			fa, fb := fresh.handle(a.ID()), fresh.handle(b.ID())
			va, vb := latest(t, fa), latest(t, fb)
			if va != vb {
				t.Fatalf("after a kill at %s: a at version %d, b at %d", tc.step, va, vb)
			}
			if want := map[bool]uint64{false: 1, true: 2}[tc.visible]; va != want {
				t.Fatalf("after a kill at %s: version %d, want %d", tc.step, va, want)
			}

			// Recovery: a writer of a waits for the deadline and settles
			// the batch, then commits after it.
			m, _, err := fa.Insert(ctx, rows(t, 900, 901), "append")
			if err != nil {
				t.Fatal(err)
			}
			wantA := uint64(2)
			if tc.forward {
				wantA = 3
			}
			if m.Version != wantA {
				t.Fatalf("insert after recovery landed at v%d, want v%d", m.Version, wantA)
			}
			// The janitor's pass settles what is left (b's side); a
			// transaction killed right after its record is only overdue
			// once its deadline passes.
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
			wantB := uint64(1)
			if tc.forward {
				wantB = 2
			}
			if vb := latest(t, fb); vb != wantB {
				t.Fatalf("b at %d after recovery, want %d", vb, wantB)
			}
			if n, err := fb.CountRows(ctx, 0, ""); err != nil || (tc.forward && n != 13) || (!tc.forward && n != 10) {
				t.Fatalf("b has %d rows (%v)", n, err)
			}
			if tc.forward {
				if m := append(markers(t, fa), markers(t, fb)...); len(m) != 0 {
					t.Fatalf("markers left: %v", m)
				}
			}
		})
	}
}
