package table

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/internal/testenv"
)

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func rows(t testing.TB, from, to int) array.RecordReader {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for i := from; i < to; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.Float64Builder).Append(float64(i) / 2)
		b.Field(2).(*array.StringBuilder).Append("n" + strconv.Itoa(i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(testSchema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	return rdr
}

var (
	sharedDBOnce sync.Once
	sharedDB     *duck.DB
)

func testDB(t testing.TB) *duck.DB {
	sharedDBOnce.Do(func() {
		db, err := duck.Open(duck.Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		sharedDB = db
	})
	return sharedDB
}

func newCatalog(t testing.TB, dir string, opts Options) *Catalog {
	t.Helper()
	// In S3 mode (make test-s3) dir names a prefix of the test bucket.
	wh, err := OpenWarehouse(context.Background(), testenv.WarehouseFor(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	if opts.SealGrace == 0 {
		opts.SealGrace = 200 * time.Millisecond // moves wait it out
	}
	return NewCatalog(wh, testDB(t), opts)
}

// ids reads the id column of version v in table order.
func ids(t testing.TB, tb *Table, q QueryOptions) []int64 {
	t.Helper()
	q.Columns = []string{"id"}
	rdr, err := tb.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := duck.Collect(rdr)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, r := range recs {
		out = append(out, r.Column(0).(*array.Int64).Int64Values()...)
		r.Release()
	}
	return out
}

func seq(from, to int) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, int64(i))
	}
	return out
}

func eq(a, b []int64) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// sorted answers a sorted copy of ids: for reads after an update, which
// moves the updated rows to the end of table order.
func sorted(ids []int64) []int64 {
	out := append([]int64(nil), ids...)
	slices.Sort(out)
	return out
}

func TestCreateInsertQuery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{MaxRowsPerFragment: 100})
	if err := c.CreateNamespace(ctx, []string{"docs"}, "", nil); err != nil {
		t.Fatal(err)
	}
	tb, m, err := c.CreateTable(ctx, []string{"docs", "t"}, testSchema, rows(t, 0, 250), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != 1 || len(m.Fragments) != 3 || m.NumRows() != 250 {
		t.Fatalf("created v%d with %d fragments, %d rows", m.Version, len(m.Fragments), m.NumRows())
	}
	if _, _, err := c.CreateTable(ctx, []string{"docs", "t"}, testSchema, nil, "", nil); errs.CodeOf(err) != errs.CodeTableAlreadyExists {
		t.Fatalf("second create: %v", err)
	}
	m2, n, err := tb.Insert(ctx, rows(t, 250, 300), "")
	if err != nil || n != 50 || m2.Version != 2 {
		t.Fatalf("insert: v%v n=%d err=%v", m2, n, err)
	}
	if got := ids(t, tb, QueryOptions{}); !eq(got, seq(0, 300)) {
		t.Fatalf("ids = %v", got)
	}
	if got := ids(t, tb, QueryOptions{Filter: "id % 100 = 7"}); !eq(got, []int64{7, 107, 207}) {
		t.Fatalf("filtered ids = %v", got)
	}
	if got := ids(t, tb, QueryOptions{Offset: 95, Limit: 10}); !eq(got, seq(95, 105)) {
		t.Fatalf("offset/limit ids = %v", got)
	}
	if got := ids(t, tb, QueryOptions{Version: 1, Filter: "id >= 240"}); !eq(got, seq(240, 250)) {
		t.Fatalf("v1 ids = %v", got)
	}
	if n, err := tb.CountRows(ctx, 0, "name LIKE 'n1%'"); err != nil || n != 111 {
		t.Fatalf("count = %d, %v", n, err)
	}
	// Row addresses are (fragment << 32) | offset.
	rdr, err := tb.Query(ctx, QueryOptions{Columns: []string{"id"}, RowAddr: true, Filter: "id = 101"})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := duck.Collect(rdr)
	if err != nil || len(recs) != 1 {
		t.Fatal(err)
	}
	if addr := recs[0].Column(1).(*array.Uint64).Value(0); addr != RowAddress(1, 1) {
		t.Fatalf("row address of id 101 = %x", addr)
	}
	recs[0].Release()

	// A predicate over every column reads every column.
	if _, _, err := tb.Insert(ctx, func() array.RecordReader {
		b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).Append(1000)
		b.Field(1).AppendNull()
		b.Field(2).AppendNull()
		rec := b.NewRecordBatch()
		defer rec.Release()
		r, _ := array.NewRecordReader(testSchema, []arrow.RecordBatch{rec})
		return r
	}(), ""); err != nil {
		t.Fatal(err)
	}
	if n, err := tb.CountRows(ctx, 0, "COLUMNS('sc.*') IS NULL"); err != nil || n != 1 {
		t.Fatalf("COLUMNS predicate counted %d, %v", n, err)
	}
	// A filter cannot append rows of its own, and errors do not show the
	// SQL mvq wraps around it.
	_, err = tb.Query(ctx, QueryOptions{Filter: "id = 1 UNION ALL SELECT 424242"})
	if errs.CodeOf(err) != errs.CodeInvalidInput || strings.Contains(err.Error(), "__mvq_in") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("filter with UNION: %v", err)
	}

	// Bad input is a coded error, never a panic.
	for _, bad := range []string{"id > 0) UNION SELECT * FROM read_csv('/etc/passwd') --", "nope > 1", "id >", "id IN (SELECT * FROM read_csv('/etc/passwd'))"} {
		if _, err := tb.CountRows(ctx, 0, bad); errs.CodeOf(err) != errs.CodeInvalidInput {
			t.Errorf("count_rows %q: %v", bad, err)
		}
	}
	if _, err := tb.Query(ctx, QueryOptions{Columns: []string{"nope"}}); errs.CodeOf(err) != errs.CodeTableColumnNotFound {
		t.Errorf("unknown column: %v", err)
	}
}

func TestUpdateTouchesOnlyMatchingFragments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{MaxRowsPerFragment: 100})
	tb, m1, err := c.CreateTable(ctx, []string{"t"}, testSchema, rows(t, 0, 1000), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Every expression sees the old row: swap-like semantics.
	m2, n, err := tb.Update(ctx, "id >= 150 AND id < 160", [][2]string{{"score", "id * 10"}, {"id", "id + 1000000"}, {"name", "name || '-' || CAST(score AS VARCHAR)"}})
	if err != nil || n != 10 {
		t.Fatalf("update n=%d err=%v", n, err)
	}
	if m2.Version != 2 {
		t.Fatalf("version %d", m2.Version)
	}
	// Only fragment 1 (ids 100..199) changed: the same data file with a
	// deletion file of the 10 rows, which are appended as a new fragment.
	if len(m2.Fragments) != 11 {
		t.Fatalf("update left %d fragments, want 11", len(m2.Fragments))
	}
	for i, f := range m2.Fragments[:10] {
		want := m1.Fragments[i]
		if i == 1 {
			want.DeletedRows, want.Rows = 10, 90
			if f.Path != want.Path || f.ID != want.ID || f.DeletedRows != 10 || f.Rows != 90 || f.DeletionReadVersion != 1 {
				t.Fatalf("updated fragment: %+v, was %+v", f, m1.Fragments[i])
			}
			if ok, err := c.Warehouse().Exists(ctx, tb.Key(f.deletionPath())); !ok || err != nil {
				t.Fatalf("deletion file %s: %v %v", f.deletionPath(), ok, err)
			}
			continue
		}
		if f.Key() != want.Key() || f.ID != want.ID {
			t.Fatalf("fragment %d changed: %+v, was %+v", i, f, want)
		}
	}
	if nf := m2.Fragments[10]; nf.Rows != 10 || nf.ID != 10 || nf.HasDeletions() {
		t.Fatalf("new fragment: %+v", nf)
	}
	rdr, err := tb.Query(ctx, QueryOptions{Filter: "id >= 1000000"})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := duck.Collect(rdr)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		for i := 0; i < int(r.NumRows()); i++ {
			got = append(got, fmt.Sprintf("%d/%g/%s", r.Column(0).(*array.Int64).Value(i), r.Column(1).(*array.Float64).Value(i), r.Column(2).(*array.String).Value(i)))
		}
		r.Release()
	}
	if len(got) != 10 || got[0] != "1000150/1500/n150-75.0" {
		t.Fatalf("updated rows = %v", got)
	}
	// No match: nothing committed, current version answered.
	m3, n, err := tb.Update(ctx, "id < 0", [][2]string{{"score", "0"}})
	if err != nil || n != 0 || m3.Version != 2 {
		t.Fatalf("no-op update: v%d n=%d err=%v", m3.Version, n, err)
	}
	for _, c := range []struct {
		pred    string
		updates [][2]string
		code    errs.Code
	}{
		{"id > 0", [][2]string{{"nope", "1"}}, errs.CodeTableColumnNotFound},
		{"id > 0", [][2]string{{"id", "'abc'"}}, errs.CodeInvalidInput},
		{"id >", [][2]string{{"id", "1"}}, errs.CodeInvalidInput},
		{"id > 0", [][2]string{{"id", "1; DROP"}}, errs.CodeInvalidInput},
		{"id > 0", [][2]string{{"id", "no_such_fn(1)"}}, errs.CodeInvalidInput},
		{"id > 0", nil, errs.CodeInvalidInput},
	} {
		if _, _, err := tb.Update(ctx, c.pred, c.updates); errs.CodeOf(err) != c.code {
			t.Errorf("update %q %v: %v, want code %d", c.pred, c.updates, err, c.code)
		}
	}
	if v, _ := tb.LatestVersion(ctx); v.Version != 2 {
		t.Fatalf("failed updates committed: latest v%d", v.Version)
	}
	// Delete and restore.
	m4, n, err := tb.Delete(ctx, "id < 250")
	if err != nil || n != 240 {
		t.Fatalf("delete n=%d err=%v", n, err)
	}
	if cnt, _ := tb.CountRows(ctx, 0, ""); cnt != 760 {
		t.Fatalf("after delete %d rows", cnt)
	}
	if _, err := tb.Restore(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, tb, QueryOptions{}); !eq(got, seq(0, 1000)) {
		t.Fatalf("restored ids wrong (%d rows)", len(got))
	}
	_ = m4
}

// TestConcurrentAppends: many goroutines and two extra processes append to
// one table; every acknowledged append is present exactly once.
func TestConcurrentAppends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	c := newCatalog(t, dir, Options{})
	if _, _, err := c.CreateTable(ctx, []string{"race"}, testSchema, nil, "", nil); err != nil {
		t.Fatal(err)
	}
	const goroutines, perWriter = 8, 5
	procs := make([]*exec.Cmd, 2)
	outs := make([]*strings.Builder, 2)
	for p := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAppender$")
		cmd.Env = append(os.Environ(), "MVQ_TEST_APPENDER="+dir, fmt.Sprintf("MVQ_TEST_APPENDER_BASE=%d", 100000*(p+1)))
		outs[p] = &strings.Builder{}
		cmd.Stdout, cmd.Stderr = outs[p], outs[p]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[p] = cmd
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var acked []int64
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tb, err := c.OpenTable(ctx, []string{"race"})
			if err != nil {
				t.Error(err)
				return
			}
			for i := 0; i < perWriter; i++ {
				base := 1000*g + 10*i
				if _, _, err := tb.Insert(ctx, rows(t, base, base+3), ""); err != nil {
					t.Error(err)
					continue
				}
				mu.Lock()
				acked = append(acked, seq(base, base+3)...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for p, cmd := range procs {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("appender process %d: %v\n%s", p, err, outs[p])
		}
		for _, line := range strings.Fields(outs[p].String()) {
			if v, ok := strings.CutPrefix(line, "ACK:"); ok {
				n, _ := strconv.Atoi(v)
				acked = append(acked, seq(n, n+3)...)
			}
		}
	}
	tb, _ := c.OpenTable(ctx, []string{"race"})
	got := ids(t, tb, QueryOptions{})
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	sort.Slice(acked, func(i, j int) bool { return acked[i] < acked[j] })
	if want := goroutines*perWriter*3 + 2*perWriter*3; len(acked) != want {
		t.Fatalf("acked %d rows, want %d", len(acked), want)
	}
	if !eq(got, acked) {
		t.Fatalf("table holds %d rows, acked %d", len(got), len(acked))
	}
	vs, _ := tb.Versions(ctx)
	if len(vs) != 1+goroutines*perWriter+2*perWriter {
		t.Fatalf("%d versions", len(vs))
	}
}

// TestHelperAppender is the body of the appender processes of
// TestConcurrentAppends; it does nothing in a normal run.
func TestHelperAppender(t *testing.T) {
	dir := os.Getenv("MVQ_TEST_APPENDER")
	if dir == "" {
		t.Skip("helper process only")
	}
	base, _ := strconv.Atoi(os.Getenv("MVQ_TEST_APPENDER_BASE"))
	c := newCatalog(t, dir, Options{})
	tb, err := c.OpenTable(context.Background(), []string{"race"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		n := base + 10*i
		if _, _, err := tb.Insert(context.Background(), rows(t, n, n+3), ""); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("ACK:%d\n", n)
	}
}

// TestRewriteConflicts: two deletes of the same fragment race; one wins,
// the other reports a conflict and changes nothing.
func TestRewriteConflicts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	tb, m, err := c.CreateTable(ctx, []string{"t"}, testSchema, rows(t, 0, 10), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	f := m.Fragments[0]
	a, errA := tb.Commit(ctx, RewriteOp("delete", []Replacement{{Old: f.ID}}))
	_, errB := tb.Commit(ctx, RewriteOp("delete", []Replacement{{Old: f.ID}}))
	if errA != nil || a.Version != 2 || !IsConflict(errB) {
		t.Fatalf("first: %v, second: %v", errA, errB)
	}
}

func TestNamespaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.CreateNamespace(ctx, []string{"a"}, "", map[string]string{"owner": "x"}))
	must(c.CreateNamespace(ctx, []string{"a", "b"}, "", nil))
	must(c.CreateNamespace(ctx, []string{"c"}, "", nil))
	if err := c.CreateNamespace(ctx, []string{"a"}, "", nil); errs.CodeOf(err) != errs.CodeNamespaceAlreadyExists {
		t.Fatalf("dup namespace: %v", err)
	}
	must(c.CreateNamespace(ctx, []string{"a"}, "exist_ok", nil))
	if err := c.CreateNamespace(ctx, []string{"x", "y"}, "", nil); errs.CodeOf(err) != errs.CodeNamespaceNotFound {
		t.Fatalf("orphan namespace: %v", err)
	}
	names, err := c.ListNamespaces(ctx, nil)
	if err != nil || strings.Join(names, ",") != "a,c" {
		t.Fatalf("root children %v %v", names, err)
	}
	page, next := Page(names, "", 1)
	if len(page) != 1 || next != "a" {
		t.Fatalf("page %v next %q", page, next)
	}
	if page, next = Page(names, next, 1); len(page) != 1 || page[0] != "c" || next != "" {
		t.Fatalf("page 2 %v %q", page, next)
	}
	props, err := c.DescribeNamespace(ctx, []string{"a"})
	if err != nil || props["owner"] != "x" {
		t.Fatalf("props %v %v", props, err)
	}
	_, _, err = c.CreateTable(ctx, []string{"a", "tbl"}, testSchema, rows(t, 0, 3), "", nil)
	must(err)
	if tables, _ := c.ListTables(ctx, []string{"a"}); strings.Join(tables, ",") != "tbl" {
		t.Fatalf("tables %v", tables)
	}
	if err := c.DropNamespace(ctx, []string{"a"}, "", ""); errs.CodeOf(err) != errs.CodeNamespaceNotEmpty {
		t.Fatalf("restrict drop: %v", err)
	}
	must(c.DropNamespace(ctx, []string{"a"}, "", "cascade"))
	if ok, _ := c.NamespaceExists(ctx, []string{"a", "b"}); ok {
		t.Fatal("cascade left a child")
	}
	if _, err := c.OpenTable(ctx, []string{"a", "tbl"}); errs.CodeOf(err) != errs.CodeTableNotFound {
		t.Fatalf("cascade left the table: %v", err)
	}
}

// TestWarehouseSchemes: mem:// holds tables with the same commit rules;
// s3:// and gs:// open through gocloud (no network is touched until a
// read or write; S3 itself is exercised elsewhere); unknown schemes fail.
func TestWarehouseSchemes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	wh, err := OpenWarehouse(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	c := NewCatalog(wh, testDB(t), Options{})
	tb, _, err := c.CreateTable(ctx, []string{"t"}, testSchema, rows(t, 0, 5), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.CreateTable(ctx, []string{"t"}, testSchema, nil, "", nil); errs.CodeOf(err) != errs.CodeTableAlreadyExists {
		t.Fatalf("mem:// second create: %v", err)
	}
	if _, _, err := tb.Insert(ctx, rows(t, 5, 8), ""); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, tb, QueryOptions{}); !eq(got, seq(0, 8)) {
		t.Fatalf("mem:// rows %v", got)
	}
	if err := wh.PutIfNotExists(ctx, "x", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := wh.PutIfNotExists(ctx, "x", []byte("2")); err != ErrExists {
		t.Fatalf("mem:// put-if-not-exists twice: %v", err)
	}
	for _, u := range []string{"s3://bucket/prefix?region=us-east-1", "gs://bucket/prefix?anonymous=true"} {
		w, err := OpenWarehouse(ctx, u)
		if err != nil {
			t.Errorf("open %s: %v", u, err)
			continue
		}
		w.Close()
	}
	for _, u := range []string{"ftp://x", "warehouse", "file://"} {
		if _, err := OpenWarehouse(ctx, u); err == nil {
			t.Errorf("open %q succeeded", u)
		}
	}
}

// TestCleanupOrphans: files no version references (a writer that died
// before committing) are removed once past the grace period; every
// version still reads.
func TestCleanupOrphans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{MaxRowsPerFragment: 10})
	tb, _, err := c.CreateTable(ctx, []string{"t"}, testSchema, rows(t, 0, 25), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Delete(ctx, "id < 5"); err != nil { // v2 rewrites a fragment; v1 still uses the old one
		t.Fatal(err)
	}
	// A writer that wrote data and died before its commit.
	orphan, err := tb.WriteFile(ctx, testSchema, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tb.CleanupOrphans(ctx, time.Hour)
	if err != nil || res.Removed != 0 || res.Recent != 1 {
		t.Fatalf("within grace: %+v %v", res, err)
	}
	res, err = tb.CleanupOrphans(ctx, 0)
	if err != nil || res.Removed != 1 || res.Referenced != 4 {
		t.Fatalf("cleanup: %+v %v", res, err)
	}
	if ok, _ := c.Warehouse().Exists(ctx, tb.Key(orphan.Path)); ok {
		t.Fatal("orphan still there")
	}
	for v, want := range map[uint64][]int64{1: seq(0, 25), 2: seq(5, 25)} {
		if got := ids(t, tb, QueryOptions{Version: v}); !eq(got, want) {
			t.Fatalf("v%d after cleanup: %v", v, got)
		}
	}
}

// TestCleanupRacesCommit: a writer's old staged files, which keep still
// protected when cleanup read the versions, are committed and the writer
// finishes (keep then gives them up) before cleanup asks keep about
// them: cleanup reads the versions again before deleting and keeps them,
// and the committed version reads whole. A file no version took is still
// removed in the same pass.
func TestCleanupRacesCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{MaxRowsPerFragment: 10})
	tb, m, err := c.CreateTable(ctx, []string{"t"}, testSchema, rows(t, 0, 5), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	frags, err := tb.WriteFragments(ctx, testSchema, rows(t, 5, 8), 0)
	if err != nil {
		t.Fatal(err)
	}
	lost, err := tb.WriteFile(ctx, testSchema, nil)
	if err != nil {
		t.Fatal(err)
	}
	committed := false
	res, err := tb.CleanupOrphansKeep(ctx, 0, func(name string) bool {
		if !committed {
			committed = true
			if _, err := tb.Commit(ctx, AppendOp(m.Schema, frags)); err != nil {
				t.Fatal(err)
			}
		}
		return false // the writer has finished: its files are no longer kept
	})
	if err != nil || res.Removed != 1 {
		t.Fatalf("cleanup: %+v %v", res, err)
	}
	for _, f := range frags {
		if ok, _ := c.Warehouse().Exists(ctx, tb.Key(f.Path)); !ok {
			t.Fatalf("cleanup removed %s, which the version committed meanwhile uses", f.Path)
		}
	}
	if ok, _ := c.Warehouse().Exists(ctx, tb.Key(lost.Path)); ok {
		t.Fatal("the file no version took is still there")
	}
	if got := ids(t, tb, QueryOptions{}); !eq(got, seq(0, 8)) {
		t.Fatalf("latest after cleanup: %v", got)
	}
}

// TestAppendConflictsWithSchemaChange: an append prepared against one
// schema never lands on a version with another.
func TestAppendConflictsWithSchemaChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	tb, m, err := c.CreateTable(ctx, []string{"t"}, testSchema, rows(t, 0, 3), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	frags, err := tb.WriteFragments(ctx, testSchema, rows(t, 3, 5), 0)
	if err != nil {
		t.Fatal(err)
	}
	other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.BinaryTypes.String}}, nil)
	if _, err := tb.Commit(ctx, OverwriteOp(other, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Commit(ctx, AppendOp(m.Schema, frags)); !IsConflict(err) {
		t.Fatalf("append across a schema change: %v", err)
	}
}

func TestUnsupportedTypesRefused(t *testing.T) {
	t.Parallel()
	c := newCatalog(t, t.TempDir(), Options{})
	for _, typ := range []arrow.DataType{arrow.FixedWidthTypes.Float16, arrow.FixedWidthTypes.Duration_s, arrow.FixedWidthTypes.MonthInterval,
		arrow.ListOf(arrow.FixedWidthTypes.Float16)} {
		s := arrow.NewSchema([]arrow.Field{{Name: "x", Type: typ, Nullable: true}}, nil)
		if _, _, err := c.CreateTable(context.Background(), []string{"t"}, s, nil, "", nil); errs.CodeOf(err) != errs.CodeSchemaValidation {
			t.Errorf("create with %s: %v", typ, err)
		}
	}
}

// TestFragmentQueriesShareSessions: delete, update and count_rows run one
// query per fragment, all of the same text, so they reuse the sessions
// the first fragments opened instead of opening one per fragment.
func TestFragmentQueriesShareSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := duck.Open(duck.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	wh, err := OpenWarehouse(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	c := NewCatalog(wh, db, Options{MaxRowsPerFragment: 10})
	frags := max(40, 10*runtime.GOMAXPROCS(0))
	tb, _, err := c.CreateTable(ctx, []string{"t"}, testSchema, rows(t, 0, 10*frags), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	before := db.SessionsOpened()
	if n, err := tb.CountRows(ctx, 0, "id % 10 = 3"); err != nil || n != int64(frags) {
		t.Fatalf("count = %d, %v", n, err)
	}
	if _, n, err := tb.Update(ctx, "id % 10 = 4", [][2]string{{"score", "score + 1"}}); err != nil || n != int64(frags) {
		t.Fatalf("update = %d, %v", n, err)
	}
	if _, n, err := tb.Delete(ctx, "id % 10 = 5"); err != nil || n != int64(frags) {
		t.Fatalf("delete = %d, %v", n, err)
	}
	// 5 query texts, one fragment query per fragment for count, two for
	// update and for delete: 5*frags queries.
	if opened := db.SessionsOpened() - before; opened >= int64(frags) {
		t.Fatalf("%d sessions opened for 5×%d fragment queries", opened, frags)
	}
	if n, err := tb.CountRows(ctx, 0, "id % 10 = 5"); err != nil || n != 0 {
		t.Fatalf("after delete: %d, %v", n, err)
	}
}
