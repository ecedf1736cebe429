package jobs

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// chain is table docs$articles → docs$chunks (chunker) → docs$mid (query
// over the chunks) → docs$top (query over mid), every view auto_refresh,
// with the client's commit hook installed on the catalog.
type chain struct {
	*warehouse
	b      *bundle
	levels [][]string
}

func newChain(t *testing.T, rows int, cfg AutoConfig) *chain {
	t.Helper()
	ctx := context.Background()
	w := newWarehouse(t, rows)
	b := setup(t, w.eng)
	b.client.auto = cfg.withDefaults()
	c := &chain{warehouse: w, b: b, levels: [][]string{w.view, {"docs", "mid"}, {"docs", "top"}}}
	for i, q := range []string{`SELECT id, chunk FROM "docs$chunks"`, `SELECT id, chunk FROM "docs$mid" WHERE id > 0`} {
		if _, err := w.eng.CreateView(ctx, c.levels[i+1], refresh.CreateRequest{Kind: "query", SourceQuery: q, AutoRefresh: true}); err != nil {
			t.Fatal(err)
		}
	}
	for i, v := range c.levels {
		src := srcID
		if i > 0 {
			src = c.levels[i-1]
		}
		if err := b.client.RegisterView(ctx, v, src, true); err != nil {
			t.Fatal(err)
		}
	}
	w.cat.OnCommit(b.client.CommitHook())
	t.Cleanup(func() { w.cat.OnCommit(nil) })
	b.startServer(t)
	return c
}

// chunks renders a view's rows as "id|chunk", sorted.
func (c *chain) chunks(t testing.TB, view []string) []string {
	t.Helper()
	tb, err := c.cat.OpenTable(context.Background(), view)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := tb.Query(context.Background(), table.QueryOptions{Columns: []string{"id", "chunk"}})
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
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// expected is every level's content for source rows 1..n.
func expected(n int64) []string {
	var out []string
	for id := int64(1); id <= n; id++ {
		b := body(id)
		for _, ch := range []string{b[:4], b[4:8], b[8:]} {
			out = append(out, fmt.Sprintf("%d|%s", id, ch))
		}
	}
	sort.Strings(out)
	return out
}

// settled waits until every level holds the rows of source rows 1..n and
// no job of any level is unfinished.
func (c *chain) settled(t *testing.T, n int64) {
	t.Helper()
	want := expected(n)
	waitFor(t, fmt.Sprintf("all levels to hold %d source rows", n), 90*time.Second, func() (bool, error) {
		for _, v := range c.levels {
			if !slices.Equal(c.chunks(t, v), want) {
				return false, nil
			}
			js, _, err := c.b.client.List(context.Background(), ListFilter{View: v})
			if err != nil {
				return false, err
			}
			for _, j := range js {
				if !Terminal(j.State) {
					return false, nil
				}
				if j.State != StateDone {
					return false, fmt.Errorf("job %s of %s is %s: %+v", j.ID, j.View, j.State, j.Failure)
				}
			}
		}
		return true, nil
	})
}

// autoJobs lists a view's automatic jobs.
func (c *chain) autoJobs(t *testing.T, view []string) []*Job {
	t.Helper()
	js, _, err := c.b.client.List(context.Background(), ListFilter{View: view, Limit: MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	var out []*Job
	for _, j := range js {
		if j.Cause == CauseAuto {
			out = append(out, j)
		}
	}
	return out
}

func TestAutoRefreshChainFollowsOneInsert(t *testing.T) {
	t.Parallel()
	c := newChain(t, 200, AutoConfig{MinInterval: -1})
	ctx := context.Background()
	// The first refresh of every level, by hand, top-down.
	for _, v := range c.levels {
		j, err := c.b.client.Submit(ctx, v, refresh.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c.b.waitState(t, j.ID, StateDone)
	}
	// The manual refreshes committed views, which made the downstream
	// levels refresh automatically too: let that settle first.
	c.settled(t, 200)
	before := make([]int, len(c.levels))
	for i, v := range c.levels {
		before[i] = len(c.autoJobs(t, v))
	}

	c.insert(t, 2) // 1% of the rows
	srcVersion, err := c.src.LatestVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.settled(t, 202)
	for i, v := range c.levels {
		js := c.autoJobs(t, v)
		if got := len(js) - before[i]; got != 1 {
			t.Fatalf("level %d (%s): %d automatic refreshes after one insert, want 1", i+1, table.JoinID(v), got)
		}
		j := js[0] // newest first
		if j.Result == nil || j.Result.Mode != refresh.ModeIncremental || j.Result.RowsAdded != 6 {
			t.Fatalf("level %d: result %+v, want an incremental refresh adding 6 rows", i+1, j.Result)
		}
		src := table.JoinID(srcID)
		if i > 0 {
			src = table.JoinID(c.levels[i-1])
		}
		if j.Trigger == nil || j.Trigger.Source != src {
			t.Fatalf("level %d: trigger %+v, want source %s", i+1, j.Trigger, src)
		}
		if i == 0 && j.Trigger.Version != srcVersion.Version {
			t.Fatalf("level 1: triggered by version %d, want %d", j.Trigger.Version, srcVersion.Version)
		}
	}
}

func TestAutoRefreshBurstCoalesces(t *testing.T) {
	t.Parallel()
	// The property: a burst shorter than the minimum interval costs each
	// level at most two refreshes (one started by the first change, one
	// that waits out the interval and takes the rest). The interval is 5s
	// so that 50 inserts fit in it on a loaded machine (they took 3.7s on
	// two cores busy with other suites; under a second when idle).
	const interval = 5 * time.Second
	c := newChain(t, 10, AutoConfig{MinInterval: interval})
	start := time.Now()
	for range 50 {
		c.insert(t, 1)
	}
	if d := time.Since(start); d >= interval {
		t.Fatalf("the burst of 50 inserts took %v, longer than the %v interval the test relies on", d, interval)
	}
	c.settled(t, 60)
	for i, v := range c.levels {
		js := c.autoJobs(t, v)
		if len(js) == 0 || len(js) > 2 {
			for _, j := range js {
				t.Logf("job %s created %s started %v trigger %+v result %+v", j.ID, j.CreatedAt.Format("15:04:05.000"), j.StartedAt, j.Trigger, j.Result)
			}
			t.Fatalf("level %d (%s): %d automatic refreshes for one burst, want 1 or 2", i+1, table.JoinID(v), len(js))
		}
		for _, j := range js {
			if j.Trigger == nil || j.Trigger.Version == 0 {
				t.Fatalf("level %d: job %s has no trigger: %+v", i+1, j.ID, j)
			}
		}
	}
}

// TestAutoRefreshBurstAtDefaultInterval: the same burst at the deployed
// default (MVQ_AUTO_REFRESH_MIN_INTERVAL unset, 1s): a burst within a
// second costs each level at most two refreshes; on a machine too loaded
// to insert 50 times in a second, each level still refreshes at most once
// per interval the burst spanned, plus the one that takes the rest.
func TestAutoRefreshBurstAtDefaultInterval(t *testing.T) {
	t.Parallel()
	c := newChain(t, 10, AutoConfig{})
	start := time.Now()
	for range 50 {
		c.insert(t, 1)
	}
	d := time.Since(start)
	c.settled(t, 60)
	most := int(d/DefaultAutoMinInterval) + 2
	for i, v := range c.levels {
		js := c.autoJobs(t, v)
		if len(js) == 0 || len(js) > most {
			t.Fatalf("level %d (%s): %d automatic refreshes for a burst of %v, want 1..%d", i+1, table.JoinID(v), len(js), d, most)
		}
	}
	t.Logf("50 inserts in %v: at most %d refreshes per level allowed", d, most)
}

func TestAutoRefreshOffAndForgotten(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 5)
	b := setup(t, w.eng)
	ctx := context.Background()
	if err := b.client.RegisterView(ctx, w.view, srcID, false); err != nil {
		t.Fatal(err)
	}
	b.startServer(t)
	js, err := b.client.Changed(ctx, srcID, 2, CauseAuto)
	if err != nil || len(js) != 0 {
		t.Fatalf("a view without auto_refresh got jobs %v (%v)", js, err)
	}
	// A schedule refreshes it all the same, and coalesces while pending.
	j, err := b.client.SubmitAuto(ctx, w.view, CauseSchedule, nil)
	if err != nil || j == nil || j.Cause != CauseSchedule {
		t.Fatalf("schedule job %+v (%v)", j, err)
	}
	b.waitState(t, j.ID, StateDone)
	if err := b.client.ForgetView(ctx, w.view); err != nil {
		t.Fatal(err)
	}
	if deps, err := b.client.Dependents(ctx, srcID); err != nil || len(deps) != 0 {
		t.Fatalf("dependents after forget: %v (%v)", deps, err)
	}
	if j, err := b.client.SubmitAuto(ctx, w.view, CauseSchedule, nil); err != nil || j != nil {
		t.Fatalf("an unregistered view got job %+v (%v)", j, err)
	}
}

func TestStalenessReporter(t *testing.T) {
	t.Parallel()
	c := newChain(t, 5, AutoConfig{MinInterval: -1})
	ctx := context.Background()
	r1 := c.b.client.NewStalenessReporter(c.eng, time.Minute)
	r2 := c.b.client.NewStalenessReporter(c.eng, time.Minute)
	// Never refreshed: the namespace is as stale as its source's first
	// version is old.
	got, err := r1.Pass(ctx)
	if err != nil || len(got) != 1 || got["docs"] <= 0 {
		t.Fatalf("first pass: %v %v", got, err)
	}
	if got, err := r2.Pass(ctx); err != nil || got != nil || r2.Values(ctx) != nil {
		t.Fatalf("a second reporter computed while the first holds the lock: %v %v", got, err)
	}
	j, err := c.b.client.Submit(ctx, c.levels[0], refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.b.waitState(t, j.ID, StateDone)
	c.settled(t, 5) // the levels above follow automatically
	if got, err := r1.Pass(ctx); err != nil || got["docs"] != 0 || r1.Values(ctx)["docs"] != 0 {
		t.Fatalf("after every level refreshed: %v %v", got, err)
	}
}
