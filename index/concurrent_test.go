package index_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/table"
)

// checkFullCoverage asserts that every index of tb covers every fragment
// of its latest version and that filtered queries answer the same with
// and without the indexes.
func checkFullCoverage(t *testing.T, tb *table.Table, wantRows int64) {
	t.Helper()
	ctx := context.Background()
	m, err := tb.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.NumRows() != wantRows {
		t.Fatalf("table has %d rows, want %d", m.NumRows(), wantRows)
	}
	metas, err := index.List(ctx, tb)
	if err != nil || len(metas) != 2 {
		t.Fatalf("list: %d indexes, %v", len(metas), err)
	}
	for _, im := range metas {
		if ix, unix := im.Coverage(m); unix != 0 || ix != wantRows {
			t.Fatalf("index %s covers %d rows, %d not (%d fragments, %d covered): an extension was lost", im.Name, ix, unix, len(m.Fragments), len(im.Fragments))
		}
	}
	for _, filter := range []string{"id >= 100 AND id < 140", "k = 3", "k IN (1, 7) AND id % 3 = 0", fmt.Sprintf("id > %d", wantRows-25)} {
		with := rowsOf(t, tb, filter, 0)
		tb.Catalog().UseIndexes(scanOnly)
		without := rowsOf(t, tb, filter, 0)
		tb.Catalog().UseIndexes(index.Maintenance())
		if strings.Join(with, "\n") != strings.Join(without, "\n") || len(with) == 0 {
			t.Fatalf("filter %q: %d rows with the indexes, %d by a scan", filter, len(with), len(without))
		}
	}
}

// twoIndexTable makes table ns.{name} of rows 0-999 with a BTREE index on
// id and a BITMAP index on k.
func twoIndexTable(t *testing.T, cat *table.Catalog, name string) *table.Table {
	t.Helper()
	ctx := context.Background()
	rec := scalarRows(0, 1000)
	tb, _, err := cat.CreateTable(ctx, []string{"ns", name}, scalarSchema, reader(rec), "", nil)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range []index.Spec{{Column: "id", Type: "BTREE"}, {Column: "k", Type: "BITMAP"}} {
		if _, err := index.Create(ctx, tb, sp); err != nil {
			t.Fatal(err)
		}
	}
	return tb
}

// TestConcurrentExtensionsAllLand: commits made at once by several
// writers each extend the table's indexes (the maintainer runs after
// every commit); no writer's extension may overwrite another's, so
// afterwards every fragment is covered without a further extension.
func TestConcurrentExtensionsAllLand(t *testing.T) {
	ctx := context.Background()
	cat := newCatalog(t, table.Options{MaxRowsPerFragment: 1000})
	tb := twoIndexTable(t, cat, "c")
	const writers, rounds, batch = 6, 4, 50
	var wg sync.WaitGroup
	errList := make(chan error, writers*rounds)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				from := 1000 + (w*rounds+r)*batch
				rec := scalarRows(from, from+batch)
				_, _, err := tb.Insert(ctx, reader(rec), "")
				rec.Release()
				if err != nil {
					errList <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errList)
	for err := range errList {
		t.Fatal(err)
	}
	checkFullCoverage(t, tb, 1000+writers*rounds*batch)

	// Extensions racing on one index directly, each from its own view of
	// the table (inserts made without the maintainer, one extension
	// started after each).
	tb.Catalog().UseIndexes(unmaintained)
	defer tb.Catalog().UseIndexes(index.Maintenance())
	base := 1000 + writers*rounds*batch
	for r := 0; r < 8; r++ {
		from := base + r*batch
		rec := scalarRows(from, from+batch)
		if _, _, err := tb.Insert(ctx, reader(rec), ""); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		for _, name := range []string{"id_idx", "k_idx"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := index.Extend(ctx, tb, name); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	checkFullCoverage(t, tb, int64(base+8*batch))

	// A drop racing with extensions stays dropped.
	rec := scalarRows(base+8*batch, base+9*batch)
	if _, _, err := tb.Insert(ctx, reader(rec), ""); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = index.Extend(ctx, tb, "k_idx") }()
	go func() {
		defer wg.Done()
		if err := index.Drop(ctx, tb, "k_idx"); err != nil {
			t.Error(err)
		}
	}()
	wg.Wait()
	if _, err := index.Load(ctx, tb, "k_idx"); errs.CodeOf(err) != errs.CodeTableIndexNotFound {
		t.Fatalf("k_idx after a drop racing an extension: %v", err)
	}
}

// TestConcurrentExtensionsAcrossProcesses: two processes insert into one
// table at once, each extending its indexes after its commits.
func TestConcurrentExtensionsAcrossProcesses(t *testing.T) {
	if os.Getenv("MVQ_INDEX_WRITER_WAREHOUSE") != "" {
		return // the helper runs as TestIndexWriterHelper
	}
	ctx := context.Background()
	dir := t.TempDir()
	wh, err := table.OpenWarehouse(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	db, err := duck.Open(duck.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cat := table.NewCatalog(wh, db, table.Options{MaxRowsPerFragment: 1000, Indexes: index.Maintenance()})
	if err := cat.CreateNamespace(ctx, []string{"ns"}, "", nil); err != nil {
		t.Fatal(err)
	}
	tb := twoIndexTable(t, cat, "p")
	const procs, rounds, batch = 2, 6, 40
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for p := 0; p < procs; p++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestIndexWriterHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), "MVQ_INDEX_WRITER_WAREHOUSE="+wh.URI(),
			"MVQ_INDEX_WRITER_FROM="+strconv.Itoa(1000+p*rounds*batch),
			"MVQ_INDEX_WRITER_ROUNDS="+strconv.Itoa(rounds), "MVQ_INDEX_WRITER_BATCH="+strconv.Itoa(batch))
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("writer process: %v\n%s", err, outs[i])
		}
	}
	checkFullCoverage(t, tb, 1000+procs*rounds*batch)
}

// TestIndexWriterHelper is the writer process of
// TestConcurrentExtensionsAcrossProcesses: inserts in rounds, each commit
// extending the indexes (index.Maintain, registered by the package).
func TestIndexWriterHelper(t *testing.T) {
	uri := os.Getenv("MVQ_INDEX_WRITER_WAREHOUSE")
	if uri == "" {
		t.Skip("run by TestConcurrentExtensionsAcrossProcesses")
	}
	num := func(k string) int {
		n, err := strconv.Atoi(os.Getenv(k))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	from, rounds, batch := num("MVQ_INDEX_WRITER_FROM"), num("MVQ_INDEX_WRITER_ROUNDS"), num("MVQ_INDEX_WRITER_BATCH")
	ctx := context.Background()
	wh, err := table.OpenWarehouse(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	db, err := duck.Open(duck.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cat := table.NewCatalog(wh, db, table.Options{MaxRowsPerFragment: 1000, Indexes: index.Maintenance()})
	tb, err := cat.OpenTable(ctx, []string{"ns", "p"})
	if err != nil {
		t.Fatal(err)
	}
	for r := 0; r < rounds; r++ {
		rec := scalarRows(from+r*batch, from+(r+1)*batch)
		_, _, err := tb.Insert(ctx, reader(rec), "")
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
}
