package jobs

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/internal/testenv"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// recordingCompactor is the real TableCompactor, recording the ids the
// janitor offered it.
type recordingCompactor struct {
	TableCompactor
	mu  sync.Mutex
	ids []string
}

func (m *recordingCompactor) Compact(ctx context.Context, id []string) (bool, error) {
	m.mu.Lock()
	m.ids = append(m.ids, table.JoinID(id))
	m.mu.Unlock()
	return m.TableCompactor.Compact(ctx, id)
}

func (m *recordingCompactor) called() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.ids)
}

// dataFiles lists the names under a table's data/ folder.
func dataFiles(t *testing.T, cat *table.Catalog, id []string) []string {
	t.Helper()
	tb, err := cat.OpenTable(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := cat.Warehouse().List(context.Background(), tb.Key("data/"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name)
	}
	return out
}

func sourceRows(t *testing.T, w *warehouse) []string {
	t.Helper()
	rdr, err := w.src.Query(context.Background(), table.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var out []string
	for rdr.Next() {
		r := rdr.RecordBatch()
		for i := range int(r.NumRows()) {
			out = append(out, r.Column(0).ValueStr(i)+"|"+r.Column(1).ValueStr(i))
		}
	}
	slices.Sort(out)
	return out
}

// TestJanitorCleansOrphansAndCompacts: one pass removes unreferenced files
// past the grace period (a killed writer's file, staged files of jobs
// that ended or that Redis no longer knows), keeps staged files of a
// RUNNING job and every referenced file, compacts the source table (ten
// one-row appends) into one fragment with the same rows, and leaves the
// view alone while it has an unfinished job.
func TestJanitorCleansOrphansAndCompacts(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 1)
	b := setup(t, w.eng)
	ctx := context.Background()
	for range 9 {
		w.insert(t, 1)
	}
	before := sourceRows(t, w)
	if len(before) != 10 {
		t.Fatalf("source rows %d", len(before))
	}
	// A RUNNING job of the view, and the files to judge.
	if err := b.client.st.heartbeat(ctx, "placeholder", []string{"default"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	live, err := b.client.Submit(ctx, w.view, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.st.transition(ctx, live, transition{from: []State{StatePending}, set: []string{fState, string(StateRunning)}}); err != nil {
		t.Fatal(err)
	}
	view, err := w.cat.OpenTable(ctx, w.view)
	if err != nil {
		t.Fatal(err)
	}
	rec := w.batch(t, 1)
	rec.Next()
	one := []arrow.RecordBatch{rec.RecordBatch()}
	write := func(tb *table.Table, name string) {
		if _, err := tb.WriteFileAt(ctx, "data/"+name, articleSchema, one); err != nil {
			t.Fatal(err)
		}
	}
	liveStaged := "_staging-" + live.ID + "-0-0.parquet"
	goneStaged := "_staging-" + uuid.NewString() + "-3-0.parquet"
	write(view, liveStaged)
	write(view, goneStaged)
	write(w.src, "killed-writer.parquet")
	rec.Release()
	viewBefore := w.rows(t)

	comp := &recordingCompactor{TableCompactor: TableCompactor{Catalog: w.cat, Options: table.CompactOptions{MinFragments: 4}}}
	j := newJanitor(b.client.st, "w1", JanitorConfig{Catalog: w.cat, OrphanGrace: time.Nanosecond, Compactor: comp}, testLogger)
	res, err := j.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Ran || res.Tables != 2 || res.OrphansRemoved != 2 || res.Compacted != 1 {
		t.Fatalf("pass %+v", res)
	}
	vf := dataFiles(t, w.cat, w.view)
	if !slices.Contains(vf, liveStaged) || slices.Contains(vf, goneStaged) {
		t.Fatalf("view data files after the pass: %v", vf)
	}
	if got := comp.called(); !slices.Equal(got, []string{"docs$articles"}) {
		t.Fatalf("compactor called for %v (the view has a running job)", got)
	}
	src, _ := w.src.Load(ctx, 0)
	if len(src.Fragments) != 1 {
		t.Fatalf("source has %d fragments after compaction", len(src.Fragments))
	}
	if after := sourceRows(t, w); !slices.Equal(after, before) {
		t.Fatalf("compaction changed the rows:\n%v\n%v", after, before)
	}
	eqRows(t, "view after the pass", w.rows(t), viewBefore)

	// The next pass removes the ten replaced fragments (unreferenced only
	// by the latest version are still referenced by history: kept).
	res, err = j.Pass(ctx)
	if err != nil || res.OrphansRemoved != 0 {
		t.Fatalf("second pass %+v %v", res, err)
	}
	// Once the job ends, its staged file goes too.
	if _, err := b.client.Cancel(ctx, live.ID); err != nil {
		t.Fatal(err)
	}
	res, err = j.Pass(ctx)
	if err != nil || res.OrphansRemoved != 1 || slices.Contains(dataFiles(t, w.cat, w.view), liveStaged) {
		t.Fatalf("pass after the job ended %+v %v: %v", res, err, dataFiles(t, w.cat, w.view))
	}
}

// TestJanitorGraceAndLock: files younger than the grace period stay; a
// pass is skipped while another worker holds the janitor lock.
func TestJanitorGraceAndLock(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 2)
	b := setup(t, w.eng)
	ctx := context.Background()
	rec := w.batch(t, 1)
	rec.Next()
	if _, err := w.src.WriteFileAt(ctx, "data/young.parquet", articleSchema, []arrow.RecordBatch{rec.RecordBatch()}); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	j := newJanitor(b.client.st, "w1", JanitorConfig{Catalog: w.cat, OrphanGrace: time.Hour}, testLogger)
	res, err := j.Pass(ctx)
	if err != nil || res.OrphansRemoved != 0 || !slices.Contains(dataFiles(t, w.cat, srcID), "young.parquet") {
		t.Fatalf("pass %+v %v", res, err)
	}
	ok, err := b.client.st.lock(ctx, "janitor", "w2", time.Minute)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if res, err := j.Pass(ctx); err != nil || res.Ran {
		t.Fatalf("pass under another's lock %+v %v", res, err)
	}
	b.client.st.unlock(ctx, "janitor", "w2")
	if res, err := j.Pass(ctx); err != nil || !res.Ran {
		t.Fatalf("pass after unlock %+v %v", res, err)
	}
}

// TestJanitorTrimsIndexes: index entries of jobs older than the retention
// plus a day leave both indexes; newer ones stay.
func TestJanitorTrimsIndexes(t *testing.T) {
	t.Parallel()
	b := setup(t, newFakeEngine())
	ctx := context.Background()
	idAt := func(at time.Time) string {
		ms := uint64(at.UnixMilli())
		return fmt.Sprintf("%08x-%04x-7000-8000-000000000000", ms>>16, ms&0xffff)
	}
	old, recent := idAt(time.Now().Add(-JobRetention-25*time.Hour)), idAt(time.Now().Add(-time.Hour))
	view := []string{"ns", "v"}
	for _, k := range []string{allJobsKey, viewJobsKey(view)} {
		b.rdb.ZAdd(ctx, k, redis.Z{Member: old}, redis.Z{Member: recent})
	}
	j := newJanitor(b.client.st, "w1", JanitorConfig{}, testLogger)
	res, err := j.Pass(ctx)
	if err != nil || res.IndexTrimmed != 2 {
		t.Fatalf("pass %+v %v", res, err)
	}
	for _, k := range []string{allJobsKey, viewJobsKey(view)} {
		if got, _ := b.rdb.ZRange(ctx, k, 0, -1).Result(); !slices.Equal(got, []string{recent}) {
			t.Fatalf("%s = %v", k, got)
		}
	}
}

// TestRedisDataLossMidRefresh: Redis loses everything (FLUSHALL) while a
// refresh has staged files; the view stays at its version with its rows,
// the janitor reclaims the orphaned staged files, and a new refresh gives
// exactly the right content.
func TestRedisDataLossMidRefresh(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 1000)
	r := testenv.StartRedis(t)
	conn := asynq.RedisClientOpt{Addr: r.Addr}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rdb.Close() })
	hang := make(chan int, 64)
	release := make(chan struct{})
	p := newProbe(&hangUntil{engine: w.eng, from: 1, hung: hang, release: release})
	c := newClient(rdb, conn, p)
	t.Cleanup(func() { c.Close() })
	b := &bundle{client: c, rdb: rdb, conn: conn, eng: p}
	b.startServerCfg(t, func(c *ServerConfig) { c.Heartbeat = HeartbeaterConfig{Interval: 100 * time.Millisecond} })
	ctx := context.Background()
	before, beforeRows := w.version(t), w.rows(t)
	j, err := c.Submit(ctx, w.view, refresh.Options{SourceTaskSize: 100, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	<-hang
	<-hang
	if n := w.staged(t, j.ID); n == 0 {
		t.Fatal("no staged files before the data loss")
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	close(release) // the hung items go on against an empty Redis
	// The workers re-register; the job is gone and nothing commits.
	waitFor(t, "the worker to re-register", 10*time.Second, func() (bool, error) {
		n, err := c.st.liveWorkers(ctx, "default")
		return n > 0, err
	})
	if _, err := c.Get(ctx, j.ID); errs.CodeOf(err) != errs.CodeJobNotFound {
		t.Fatalf("job after FLUSHALL: %v", err)
	}
	if v := w.version(t); v != before {
		t.Fatalf("view moved from %d to %d", before, v)
	}
	eqRows(t, "view after the data loss", w.rows(t), beforeRows)
	jan := newJanitor(c.st, "w1", JanitorConfig{Catalog: w.cat, OrphanGrace: time.Nanosecond}, testLogger)
	waitFor(t, "the janitor to reclaim the staged files", 15*time.Second, func() (bool, error) {
		if _, err := jan.Pass(ctx); err != nil {
			return false, err
		}
		return w.staged(t, j.ID) == 0, nil
	})
	j2, err := c.Submit(ctx, w.view, refresh.Options{SourceTaskSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	b.waitState(t, j2.ID, StateDone)
	eqRows(t, "view after a new refresh", w.rows(t), want(1000))
}

// hangUntil expands items for real, then holds items >= from until
// release is closed (and reports each on hung).
type hangUntil struct {
	engine
	from    int
	hung    chan int
	release chan struct{}
}

func (h *hangUntil) Expand(ctx context.Context, p *refresh.Plan, i int) (refresh.ItemResult, error) {
	r, err := h.engine.Expand(ctx, p, i)
	if err != nil || i < h.from {
		return r, err
	}
	h.hung <- i
	<-h.release
	return r, nil
}

// panickyCompactor panics on one table and compacts the others for real.
type panickyCompactor struct {
	recordingCompactor
	on string
}

func (p *panickyCompactor) Compact(ctx context.Context, id []string) (bool, error) {
	if table.JoinID(id) == p.on {
		panic("bad row in " + p.on)
	}
	return p.recordingCompactor.Compact(ctx, id)
}

// TestJanitorSurvivesAPanic: a panic while a table is compacted is that
// table's error in the pass; the worker lives and the other tables are
// still cleaned and compacted.
func TestJanitorSurvivesAPanic(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 1)
	b := setup(t, w.eng)
	ctx := context.Background()
	for range 4 {
		w.insert(t, 1)
	}
	comp := &panickyCompactor{recordingCompactor: recordingCompactor{TableCompactor: TableCompactor{Catalog: w.cat, Options: table.CompactOptions{MinFragments: 2}}}, on: table.JoinID(w.view)}
	j := newJanitor(b.client.st, "w1", JanitorConfig{Catalog: w.cat, OrphanGrace: time.Hour, Compactor: comp}, testLogger)
	res, err := j.Pass(ctx)
	if err == nil || errs.CodeOf(err) != errs.CodeInternal {
		t.Fatalf("pass err = %v, want the view's internal error", err)
	}
	if res.Tables != 2 || res.Compacted != 1 || !slices.Equal(comp.called(), []string{"docs$articles"}) {
		t.Fatalf("pass %+v, compacted %v", res, comp.called())
	}
	src, _ := w.src.Load(ctx, 0)
	if len(src.Fragments) != 1 {
		t.Fatalf("source has %d fragments after the pass", len(src.Fragments))
	}
}
