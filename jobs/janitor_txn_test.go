package jobs

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/internal/testenv"
	"github.com/mvq-dev/mvq/table"
)

// TestJanitorTxnHelper is the batch writer TestJanitorRecoversAbandonedBatch
// runs in a subprocess and kills at a failpoint.
func TestJanitorTxnHelper(t *testing.T) {
	uri := os.Getenv("MVQ_JANITOR_TXN_WAREHOUSE")
	if uri == "" {
		t.Skip("run by TestJanitorRecoversAbandonedBatch")
	}
	ctx := context.Background()
	wh, err := table.OpenWarehouse(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	cat := table.NewCatalog(wh, testDuck(t), table.Options{TxnTimeout: 300 * time.Millisecond, StepHook: testenv.PauseAtEnv(), Indexes: index.Maintenance()})
	var entries []table.BatchVersion
	for _, id := range [][]string{srcID, {"docs", "other"}} {
		entries = append(entries, table.BatchVersion{Field: table.JoinID(id), ID: id, Version: 2, ManifestPath: "staged/next.manifest", Scheme: table.NamingV2})
	}
	_, _, err = cat.CommitBatch(ctx, "batch-create", entries)
	t.Log(err)
}

// TestJanitorRecoversAbandonedBatch: a writer killed after writing every
// version of a batch but before deciding it leaves both tables at their
// old version; a janitor pass (past the batch's deadline) rolls it
// forward, and both tables show the new version together.
func TestJanitorRecoversAbandonedBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess")
	}
	t.Parallel()
	ctx := context.Background()
	w := newWarehouse(t, 1)
	b := setup(t, w.eng)
	other, _, err := w.cat.CreateTable(ctx, []string{"docs", "other"}, articleSchema, w.batch(t, 2), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	wh := w.cat.Warehouse()
	// Stage version 2 of each table: version 1 again under a new number.
	for _, tb := range []*table.Table{w.src, other} {
		m, err := tb.Load(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		next := *m
		next.Version, next.ParentVersion = 2, 1
		data, err := next.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Write(ctx, tb.Key("staged/next.manifest"), data); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestJanitorTxnHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "MVQ_JANITOR_TXN_WAREHOUSE="+wh.URI(), "MVQ_TXN_FAILPOINT=manifest-1")
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
		if sc.Text() == "mvq-txn-failpoint manifest-1" {
			paused = true
			break
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if !paused {
		t.Fatal("the writer never reached its failpoint")
	}
	versions := func() (uint64, uint64) {
		t.Helper()
		var out [2]uint64
		for i, tb := range []*table.Table{w.src, other} {
			vf, err := tb.LatestVersion(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = vf.Version
		}
		return out[0], out[1]
	}
	if a, o := versions(); a != 1 || o != 1 {
		t.Fatalf("undecided batch visible: versions %d, %d", a, o)
	}
	j := newJanitor(b.client.st, "w1", JanitorConfig{Catalog: w.cat, OrphanGrace: time.Hour}, testLogger)
	for end := time.Now().Add(10 * time.Second); ; {
		res, err := j.Pass(ctx)
		if err != nil || !res.Ran {
			t.Fatalf("pass: %+v %v", res, err)
		}
		a, o := versions()
		if a != o {
			t.Fatalf("half a batch visible: versions %d, %d", a, o)
		}
		if a == 2 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the janitor never recovered the batch")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n, err := other.CountRows(ctx, 0, ""); err != nil || n != 2 {
		t.Fatalf("other has %d rows at v2 (%v)", n, err)
	}
}
