package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hibiken/asynq"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// These tests run jobs through the real refresh engine over a file://
// warehouse in t.TempDir(): a chunker view ("docs$chunks") cuts the body
// of each source row ("docs$articles") into chunks of 4 characters.

var (
	duckOnce sync.Once
	duckDB   *duck.DB
	duckErr  error
)

func testDuck(t testing.TB) *duck.DB {
	t.Helper()
	duckOnce.Do(func() { duckDB, duckErr = duck.Open(duck.Options{Threads: 1}) })
	if duckErr != nil {
		t.Fatal(duckErr)
	}
	return duckDB
}

// warehouse is a real catalog with the source table and the chunker view.
type warehouse struct {
	cat  *table.Catalog
	eng  *refresh.Engine
	src  *table.Table
	view []string
	next int64 // next source row id
}

var (
	srcID         = []string{"docs", "articles"}
	articleSchema = arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "body", Type: arrow.BinaryTypes.String},
	}, nil)
)

// body of source row id: 10 characters, so 3 chunks ("0007", "xxxx", "yy").
func body(id int64) string { return fmt.Sprintf("%04dxxxxyy", id) }

func newWarehouse(t testing.TB, rows int) *warehouse {
	t.Helper()
	ctx := context.Background()
	wh, err := table.OpenWarehouse(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	w := &warehouse{cat: table.NewCatalog(wh, testDuck(t), table.Options{Indexes: index.Maintenance()}), view: []string{"docs", "chunks"}}
	w.eng = refresh.NewEngine(w.cat)
	if err := w.cat.CreateNamespace(ctx, []string{"docs"}, "", nil); err != nil {
		t.Fatal(err)
	}
	w.src, _, err = w.cat.CreateTable(ctx, srcID, articleSchema, w.batch(t, rows), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := `{"chunker":"fixed","input_column":"body","output_column":"chunk","chunk_size":4,"chunk_overlap":0}`
	sum := sha256.Sum256([]byte(spec))
	_, err = w.eng.CreateView(ctx, w.view, refresh.CreateRequest{
		Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$articles"`,
		UDTFSpec: &refresh.UDTFEntry{Kind: "chunker", UDTF: base64.StdEncoding.EncodeToString([]byte(spec)),
			UDTFSha: hex.EncodeToString(sum[:]), UDTFName: "fixed", UDTFVersion: "1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// batch makes the next n source rows.
func (w *warehouse) batch(t testing.TB, n int) array.RecordReader {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, articleSchema)
	defer b.Release()
	for range n {
		w.next++
		b.Field(0).(*array.Int64Builder).Append(w.next)
		b.Field(1).(*array.StringBuilder).Append(body(w.next))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(articleSchema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	return rdr
}

// insert appends n source rows as a new source fragment.
func (w *warehouse) insert(t testing.TB, n int) {
	t.Helper()
	if _, _, err := w.src.Insert(context.Background(), w.batch(t, n), "append"); err != nil {
		t.Fatal(err)
	}
}

// want is the view's exact content after refreshing source rows 1..upTo,
// inserted as fragments of the given sizes: "frag:offset|chunk#|id|chunk".
func want(fragSizes ...int) []string {
	var out []string
	id := int64(0)
	for f, n := range fragSizes {
		for o := range n {
			id++
			b := body(id)
			for k, c := range []string{b[:4], b[4:8], b[8:]} {
				out = append(out, fmt.Sprintf("%d:%d|%d|%d|%s", f, o, k, id, c))
			}
		}
	}
	return out
}

// rows renders the view's latest version in table order.
func (w *warehouse) rows(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	tb, err := w.cat.OpenTable(ctx, w.view)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := tb.Query(ctx, table.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := duck.Collect(rdr)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, r := range recs {
		for i := range int(r.NumRows()) {
			var parts []string
			for _, c := range r.Columns() {
				switch c := c.(type) {
				case *array.Uint64:
					f, o := table.SplitRowAddress(c.Value(i))
					parts = append(parts, fmt.Sprintf("%d:%d", f, o))
				case *array.String:
					parts = append(parts, c.Value(i))
				default:
					parts = append(parts, c.ValueStr(i))
				}
			}
			out = append(out, strings.Join(parts, "|"))
		}
		r.Release()
	}
	return out
}

func (w *warehouse) version(t *testing.T) uint64 {
	t.Helper()
	tb, err := w.cat.OpenTable(context.Background(), w.view)
	if err != nil {
		t.Fatal(err)
	}
	vf, err := tb.LatestVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return vf.Version
}

// staged counts a job's staged files in the view folder.
func (w *warehouse) staged(t *testing.T, jobID string) int {
	t.Helper()
	tb, err := w.cat.OpenTable(context.Background(), w.view)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := w.cat.Warehouse().List(context.Background(), tb.Key("data/_staging-"+jobID+"-"))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func eqRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got  %d rows %q\n want %d rows %q", what, len(got), got, len(want), want)
	}
}

func TestRefreshJobsEndToEnd(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 12)
	b := setup(t, w.eng)
	b.startServer(t)
	ctx := context.Background()

	j, err := b.client.Submit(ctx, w.view, refresh.Options{SourceTaskSize: 5, Concurrency: 2, MaxRowsPerFragment: 7})
	if err != nil {
		t.Fatal(err)
	}
	if j.Request.IntraApplierConcurrency == 0 || j.Request.MaxRowsPerFragment != 7 || j.View != "docs$chunks" {
		t.Fatalf("effective request not recorded: %+v", j)
	}
	j = b.waitState(t, j.ID, StateDone)
	if *j.Result != (refresh.Result{Mode: refresh.ModeFull, SourceVersion: 1, ViewVersion: 2, RowsAdded: 36}) {
		t.Fatalf("result %+v", *j.Result)
	}
	if p := j.Progress; p.WorkItemsTotal != 3 || p.WorkItemsDone != 3 || p.RowsRead != 12 || p.RowsWritten != 36 || p.MaxRunning > 2 {
		t.Fatalf("progress %+v", p)
	}
	eqRows(t, "view after the first refresh", w.rows(t), want(12))

	// New source rows: the next refresh is incremental and adds only them.
	w.insert(t, 4)
	j2, err := b.client.Submit(ctx, w.view, refresh.Options{SourceTaskSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	j2 = b.waitState(t, j2.ID, StateDone)
	if *j2.Result != (refresh.Result{Mode: refresh.ModeIncremental, SourceVersion: 2, ViewVersion: 3, RowsAdded: 12}) {
		t.Fatalf("second result %+v", *j2.Result)
	}
	eqRows(t, "view after the incremental refresh", w.rows(t), want(12, 4))

	// Nothing new: a no-op keeps the version.
	j3, err := b.client.Submit(ctx, w.view, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if j3 = b.waitState(t, j3.ID, StateDone); j3.Result.Mode != refresh.ModeNoOp || j3.Result.ViewVersion != 3 {
		t.Fatalf("no-op result %+v", j3.Result)
	}

	// Validation happens at Submit.
	lim := int64(-1)
	if _, err := b.client.Submit(ctx, w.view, refresh.Options{OutputLimit: &lim}); errs.CodeOf(err) != errs.CodeInvalidInput {
		t.Fatalf("negative output_limit: %v", err)
	}
	if _, err := b.client.Submit(ctx, w.view, refresh.Options{Cluster: "elsewhere"}); errs.CodeOf(err) != errs.CodeInvalidInput ||
		!strings.Contains(err.Error(), `no worker serves cluster "elsewhere"`) {
		t.Fatalf("unserved cluster: %v", err)
	}
	if _, err := b.client.Submit(ctx, []string{"docs", "nope"}, refresh.Options{}); errs.CodeOf(err) != errs.CodeTableNotFound {
		t.Fatalf("missing view: %v", err)
	}
}

func TestRefreshConcurrencyBoundTwoWorkers(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 10)
	b := setup(t, w.eng)
	// Every Expand waits (up to 5s) until two items expand at once: the
	// peak of two is then certain, and a third would be seen.
	var once sync.Once
	two := make(chan struct{})
	b.eng.beforeExpand = func(ctx context.Context, _ *refresh.Plan, _ int) error {
		if b.eng.peakInFlight() >= 2 {
			once.Do(func() { close(two) })
		}
		select {
		case <-two:
		case <-time.After(5 * time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	s1, s2 := b.startServer(t), b.startServer(t)
	if n, _ := b.client.st.liveWorkers(context.Background(), "default"); n != 2 || s1.ID() == s2.ID() {
		t.Fatalf("%d live workers", n)
	}
	j, err := b.client.Submit(context.Background(), w.view, refresh.Options{SourceTaskSize: 1, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	j = b.waitState(t, j.ID, StateDone)
	if j.Progress.WorkItemsTotal != 10 || j.Progress.WorkItemsDone != 10 {
		t.Fatalf("progress %+v", j.Progress)
	}
	if j.Progress.MaxRunning != 2 {
		t.Fatalf("max_running = %d, want 2", j.Progress.MaxRunning)
	}
	if p := b.eng.peakInFlight(); p != 2 {
		t.Fatalf("engine saw %d items at once, want 2", p)
	}
	for i := range 10 {
		if n := b.eng.calls(j.ID, i); n != 1 {
			t.Fatalf("item %d expanded %d times", i, n)
		}
	}
	eqRows(t, "view", w.rows(t), want(10))
}

func TestRefreshTwoJobsOfOneViewRunInOrder(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 6)
	b := setup(t, w.eng)
	started := make(chan string, 16)
	release := make(chan struct{})
	b.eng.beforeExpand = func(ctx context.Context, p *refresh.Plan, _ int) error {
		started <- p.JobID
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	b.startServer(t)
	b.startServer(t)
	ctx := context.Background()
	j1, err := b.client.Submit(ctx, w.view, refresh.Options{SourceTaskSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := <-started; got != j1.ID {
		t.Fatalf("first expanding job %s, want %s", got, j1.ID)
	}
	// While job 1 expands, the source grows and job 2 is submitted.
	w.insert(t, 3)
	j2, err := b.client.Submit(ctx, w.view, refresh.Options{SourceTaskSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "job 2's plan to wait its turn", 10*time.Second, func() (bool, error) {
		info, err := asynq.NewInspectorFromRedisClient(b.rdb).GetTaskInfo(QueueName("default"), "plan:"+j2.ID)
		return err == nil && strings.Contains(info.LastErr, "earlier refresh"), nil
	})
	if j, _ := b.client.Get(ctx, j2.ID); j.State != StatePending {
		t.Fatalf("job 2 is %s while job 1 runs", j.State)
	}
	close(release)
	d1 := b.waitState(t, j1.ID, StateDone)
	d2 := b.waitState(t, j2.ID, StateDone)
	if *d1.Result != (refresh.Result{Mode: refresh.ModeFull, SourceVersion: 1, ViewVersion: 2, RowsAdded: 18}) {
		t.Fatalf("job 1 result %+v", *d1.Result)
	}
	if *d2.Result != (refresh.Result{Mode: refresh.ModeIncremental, SourceVersion: 2, ViewVersion: 3, RowsAdded: 9}) {
		t.Fatalf("job 2 result %+v", *d2.Result)
	}
	if d2.StartedAt.Before(*d1.FinishedAt) {
		t.Fatalf("job 2 started at %v, before job 1 finished at %v", d2.StartedAt, d1.FinishedAt)
	}
	eqRows(t, "view", w.rows(t), want(6, 3))
}

func TestRefreshCancelWhileItemsRun(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 2000)
	b := setup(t, w.eng)
	// Item 0 expands for real and finishes; items from 1 on expand for real
	// (their staged files exist) and then hang until their job is stopped.
	b.eng.beforeExpand = nil
	hang := make(chan int, 64)
	b.eng.engine = &hangAfterExpand{engine: w.eng, from: 1, hung: hang}
	b.startServer(t)
	ctx := context.Background()
	before := w.version(t)
	j, err := b.client.Submit(ctx, w.view, refresh.Options{SourceTaskSize: 200, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	<-hang
	<-hang // two items staged and hanging; item 0 is done
	if n := w.staged(t, j.ID); n == 0 {
		t.Fatal("no staged files before cancel")
	}
	c, err := b.client.Cancel(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.State != StateCancelled || c.Phase != "" {
		t.Fatalf("cancelled job %+v", c)
	}
	waitFor(t, "the hung items to stop and staged files to go", 15*time.Second, func() (bool, error) {
		n, err := b.rdb.HLen(ctx, activeKey(j.ID)).Result()
		return n == 0 && w.staged(t, j.ID) == 0, err
	})
	j, _ = b.client.Get(ctx, j.ID)
	if j.State != StateCancelled || j.Result != nil || j.Progress.WorkItemsDone != 1 || j.Progress.WorkItemsTotal != 10 {
		t.Fatalf("job after cancel %+v", j)
	}
	if v := w.version(t); v != before {
		t.Fatalf("cancelled job moved the view from version %d to %d", before, v)
	}
	eqRows(t, "view", w.rows(t), []string{})
	if _, err := b.client.Cancel(ctx, j.ID); errs.CodeOf(err) != errs.CodeJobFinished {
		t.Fatalf("cancel of a cancelled job: %v", err)
	}
}

// hangAfterExpand expands items for real, then holds items >= from until
// their context ends (and reports each on hung).
type hangAfterExpand struct {
	engine
	from int
	hung chan int
}

func (h *hangAfterExpand) Expand(ctx context.Context, p *refresh.Plan, i int) (refresh.ItemResult, error) {
	r, err := h.engine.Expand(ctx, p, i)
	if err != nil || i < h.from {
		return r, err
	}
	h.hung <- i
	<-ctx.Done()
	return r, ctx.Err()
}

func TestRefreshDuplicateDeliveryExactlyOnce(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 9)
	b := setup(t, w.eng)
	s := b.newServer(t) // not started: the test delivers the tasks
	ctx := context.Background()
	if err := s.st.heartbeat(ctx, s.id, []string{"default"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	j, err := b.client.Submit(ctx, w.view, refresh.Options{SourceTaskSize: 3, Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(typ string, payload string) error {
		return s.mux().ProcessTask(ctx, asynq.NewTask(typ, []byte(payload)))
	}
	plan := fmt.Sprintf(`{"job_id":%q}`, j.ID)
	for range 2 {
		if err := deliver(TypePlan, plan); err != nil {
			t.Fatal(err)
		}
	}
	// Every item twice at the same time, then once more.
	var wg sync.WaitGroup
	errList := make(chan error, 6)
	for i := range 3 {
		for range 2 {
			wg.Go(func() { errList <- deliver(TypeWorkItem, fmt.Sprintf(`{"job_id":%q,"index":%d}`, j.ID, i)) })
		}
	}
	wg.Wait()
	close(errList)
	for err := range errList {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if err := deliver(TypeWorkItem, fmt.Sprintf(`{"job_id":%q,"index":%d}`, j.ID, i)); err != nil {
			t.Fatal(err)
		}
		if n := b.eng.calls(j.ID, i); n < 1 || n > 2 {
			t.Fatalf("item %d expanded %d times", i, n)
		}
	}
	got, _ := b.client.Get(ctx, j.ID)
	if p := got.Progress; p.WorkItemsDone != 3 || p.RowsRead != 9 || p.RowsWritten != 27 {
		t.Fatalf("progress after duplicate deliveries %+v", p)
	}
	for range 2 {
		if err := deliver(TypeCommit, fmt.Sprintf(`{"job_id":%q}`, j.ID)); err != nil {
			t.Fatal(err)
		}
	}
	got, _ = b.client.Get(ctx, j.ID)
	if got.State != StateDone || got.Result.RowsAdded != 27 || got.Result.ViewVersion != 2 {
		t.Fatalf("job %+v result %+v", got, got.Result)
	}
	eqRows(t, "view", w.rows(t), want(9))
	// A late delivery changes nothing.
	if err := deliver(TypeWorkItem, fmt.Sprintf(`{"job_id":%q,"index":0}`, j.ID)); err != nil {
		t.Fatal(err)
	}
	if err := deliver(TypeCommit, fmt.Sprintf(`{"job_id":%q}`, j.ID)); err != nil {
		t.Fatal(err)
	}
	eqRows(t, "view after late deliveries", w.rows(t), want(9))
	if w.version(t) != 2 {
		t.Fatalf("view version %d", w.version(t))
	}
}

func TestRefreshOutputLimitSkipsLaterItems(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 10)
	b := setup(t, w.eng)
	b.startServer(t)
	limit := int64(7) // 3 chunks a row: rows 1-3 give 9 chunks
	j, err := b.client.Submit(context.Background(), w.view, refresh.Options{SourceTaskSize: 2, Concurrency: 1, OutputLimit: &limit})
	if err != nil {
		t.Fatal(err)
	}
	j = b.waitState(t, j.ID, StateDone)
	if j.Result.RowsAdded != 7 || j.Progress.WorkItemsDone != 5 {
		t.Fatalf("job %+v result %+v", j.Progress, j.Result)
	}
	// With one item at a time, items 0 and 1 (rows 1-4) reach the limit;
	// items 2-4 are skipped without expanding.
	for i, wantCalls := range []int{1, 1, 0, 0, 0} {
		if n := b.eng.calls(j.ID, i); n != wantCalls {
			t.Fatalf("item %d expanded %d times, want %d", i, n, wantCalls)
		}
	}
	eqRows(t, "view", w.rows(t), want(10)[:7])
}
