package jobs

import (
	"context"
	"fmt"
	"sync"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// fakeEngine is an in-memory engine for the orchestration tests that need
// failures or timings the real engine cannot be made to show. A view has
// pending source rows; a refresh expands them in SourceTaskSize items (each
// source row gives two view rows) and commits them as one new version.
type fakeEngine struct {
	mu       sync.Mutex
	views    map[string]*fakeView
	discards map[string]int // job -> Discard calls
	staged   map[string]int // job -> items expanded since its last Commit or Discard
}

type fakeView struct {
	version uint64
	rows    int64
	pending int64 // source rows not yet refreshed
	commits map[string]refresh.Result
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{views: map[string]*fakeView{}, discards: map[string]int{}, staged: map[string]int{}}
}

func (e *fakeEngine) addSource(view []string, rows int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v := e.views[table.JoinID(view)]
	if v == nil {
		v = &fakeView{commits: map[string]refresh.Result{}}
		e.views[table.JoinID(view)] = v
	}
	v.pending += rows
}

func (e *fakeEngine) view(id []string) (*fakeView, error) {
	v := e.views[table.JoinID(id)]
	if v == nil {
		return nil, errs.Errorf(errs.CodeTableNotFound, "view %s not found", table.JoinID(id))
	}
	return v, nil
}

func (e *fakeEngine) Prepare(_ context.Context, id []string, o *refresh.Options) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.view(id); err != nil {
		return err
	}
	if o.SourceTaskSize < 0 || o.Concurrency < 0 || o.OutputLimit != nil && *o.OutputLimit < 0 {
		return errs.Errorf(errs.CodeInvalidInput, "negative numbers")
	}
	if o.SourceTaskSize == 0 {
		o.SourceTaskSize = 1024
	}
	if o.Concurrency == 0 {
		o.Concurrency = 8
	}
	if o.IntraApplierConcurrency == 0 {
		o.IntraApplierConcurrency = refresh.DefaultIntraApplierConcurrency
	}
	if o.Cluster == "" {
		o.Cluster = "default"
	}
	return nil
}

func (e *fakeEngine) Plan(_ context.Context, id []string, jobID string, o refresh.Options) (*refresh.Plan, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, err := e.view(id)
	if err != nil {
		return nil, err
	}
	p := &refresh.Plan{JobID: jobID, View: id, Kind: refresh.KindChunker, Mode: refresh.ModeIncremental,
		SourceVersion: v.version + 1, BaseViewVersion: v.version, Options: o}
	if v.pending == 0 {
		p.Mode = refresh.ModeNoOp
	}
	for start := int64(0); start < v.pending; start += int64(o.SourceTaskSize) {
		end := min(start+int64(o.SourceTaskSize), v.pending)
		p.Items = append(p.Items, refresh.WorkItem{Index: len(p.Items), Rows: end - start,
			Ranges: []refresh.Range{{Start: uint32(start), End: uint32(end)}}})
	}
	return p, nil
}

func (e *fakeEngine) Expand(ctx context.Context, p *refresh.Plan, i int) (refresh.ItemResult, error) {
	if err := ctx.Err(); err != nil {
		return refresh.ItemResult{}, err
	}
	it := p.Items[i]
	e.mu.Lock()
	e.staged[p.JobID]++
	e.mu.Unlock()
	return refresh.ItemResult{Index: i, RowsRead: it.Rows, RowsWritten: 2 * it.Rows,
		Fragments: []table.Fragment{{Path: fmt.Sprintf("staging/%s/%d.parquet", p.JobID, i)}}}, nil
}

func (e *fakeEngine) Commit(_ context.Context, p *refresh.Plan, rs []refresh.ItemResult) (refresh.Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, err := e.view(p.View)
	if err != nil {
		return refresh.Result{}, err
	}
	if r, ok := v.commits[p.JobID]; ok {
		return r, nil
	}
	if p.Mode == refresh.ModeNoOp {
		return refresh.Result{Mode: refresh.ModeNoOp, SourceVersion: p.SourceVersion, ViewVersion: v.version}, nil
	}
	if p.BaseViewVersion != v.version {
		return refresh.Result{}, errs.Errorf(errs.CodeConcurrentModification, "view moved from %d to %d", p.BaseViewVersion, v.version)
	}
	var added, read int64
	for _, r := range rs {
		added += r.RowsWritten
		read += r.RowsRead
	}
	v.version++
	v.rows += added
	v.pending -= read
	r := refresh.Result{Mode: p.Mode, SourceVersion: p.SourceVersion, ViewVersion: v.version, RowsAdded: added}
	v.commits[p.JobID] = r
	e.staged[p.JobID] = 0
	return r, nil
}

// CheckpointKey: the fake engine's items are never reused.
func (e *fakeEngine) CheckpointKey(context.Context, *refresh.Plan, int) (string, error) {
	return "", nil
}

func (e *fakeEngine) Reuse(context.Context, *refresh.Plan, int, string, refresh.ItemResult) (refresh.ItemResult, error) {
	return refresh.ItemResult{}, errs.Errorf(errs.CodeInternal, "the fake engine reuses nothing")
}

// Discard keeps the output of the items in keep, as the real engine does.
func (e *fakeEngine) Discard(_ context.Context, p *refresh.Plan, keep []int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.discards[p.JobID]++
	e.staged[p.JobID] = min(e.staged[p.JobID], len(keep))
	return nil
}

func (e *fakeEngine) state(view []string) (version uint64, rows int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v := e.views[table.JoinID(view)]
	return v.version, v.rows
}

func (e *fakeEngine) discardCount(job string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.discards[job]
}

func (e *fakeEngine) stagedCount(job string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.staged[job]
}
