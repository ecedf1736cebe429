package refresh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// oldAction is what removing source fragments does to a view fragment.
type oldAction uint8

const (
	keepOld   oldAction = iota // holds no row of a removed source fragment
	dropOld                    // holds only rows of removed source fragments
	filterOld                  // holds some: rewrite it without them
)

// classify decides, from the lineage alone, what removing the rows of
// source fragments removed does to each fragment of view version v. A
// fragment without lineage is filtered (read to find out).
func classify(v *View, rm removal) []oldAction {
	acts := make([]oldAction, len(v.Manifest.Fragments))
	if rm.empty() {
		return acts
	}
	removed := rm.frags
	var known IDSet
	lineage := map[uint32]Lineage{}
	if wm := v.Watermark; wm != nil {
		known = wm.Fragments
		for _, l := range wm.Lineage {
			lineage[l.Fragment] = l
		}
	}
	for i, f := range v.Manifest.Fragments {
		l, ok := lineage[f.ID]
		if !ok {
			acts[i] = filterOld
			continue
		}
		switch r := removed.CountIn(l.Lo, l.Hi); {
		case r >= known.CountIn(l.Lo, l.Hi) && r > 0:
			acts[i] = dropOld
		case rm.touches(l.Lo, l.Hi):
			acts[i] = filterOld
		case r == 0:
			acts[i] = keepOld
		default:
			acts[i] = filterOld
		}
	}
	return acts
}

// keptRows counts the rows of view v not derived from removed source
// fragments, reading only the __source_row_id column of the view
// fragments that mix kept and removed rows.
func (e *Engine) keptRows(ctx context.Context, v *View, removed removal) (int64, error) {
	var n int64
	for i, act := range classify(v, removed) {
		f := v.Manifest.Fragments[i]
		switch act {
		case keepOld:
			n += f.Rows
		case filterOld:
			recs, err := e.readRows(ctx, v.Table, f, 0, f.Rows, []int{0})
			if err != nil {
				return 0, err
			}
			for _, r := range recs {
				for _, addr := range r.Column(0).(*array.Uint64).Uint64Values() {
					if !removed.has(addr) {
						n++
					}
				}
				r.Release()
			}
		}
	}
	return n, nil
}

// piece is one fragment of the view version being built.
type piece struct {
	frag   table.Fragment // the file; ID meaningful only when old
	old    bool           // an unchanged fragment of the base version
	staged bool           // rows new in this refresh
	span   Span
	rows   int64
	recs   []arrow.RecordBatch // rewritten content; nil: the file as is
}

func (p *piece) release() {
	for _, r := range p.recs {
		r.Release()
	}
	p.recs = nil
}

// Commit builds and commits the view version of a refresh: the base
// version's fragments minus the rows derived from RemovedSourceFragments
// (fragments holding some are rewritten, those holding only such rows
// dropped; a full refresh drops them all), plus the items' staged
// fragments, cut to output_limit rows in (__source_row_id,
// __chunk_index) order. The commit conflicts (CodeConcurrentModification)
// when the view has moved since BaseViewVersion. It is idempotent: when a
// version after the base already records the job, Commit answers that
// version's result. A no_op plan commits nothing and answers the current
// version.
func (j viewRefresh) Commit(ctx context.Context, plan *Plan, results []ItemResult) (Result, error) {
	e := j.e
	t, err := e.cat.OpenTable(ctx, plan.View)
	if err != nil {
		return Result{}, stateErr(err)
	}
	latest, err := t.Load(ctx, 0)
	if err != nil {
		return Result{}, stateErr(err)
	}
	if plan.ViewUUID != "" {
		id, err := identity(ctx, t, latest)
		if err != nil {
			return Result{}, err
		}
		if id != plan.ViewUUID {
			return Result{}, viewReplaced(plan.View)
		}
	}
	if res, ok, err := e.committed(ctx, t, plan, latest.Version); err != nil || ok {
		return res, stateErr(err)
	}
	if plan.Mode == ModeNoOp {
		return Result{Mode: ModeNoOp, SourceVersion: plan.SourceVersion, ViewVersion: latest.Version}, nil
	}
	compactions, err := e.compactionsSince(ctx, t, plan, latest)
	if err != nil {
		return Result{}, err
	}
	if err := checkFilled(plan.Options); err != nil {
		return Result{}, err
	}
	results, err = checkResults(plan, results)
	if err != nil {
		return Result{}, err
	}
	v, err := e.planView(ctx, plan)
	if err != nil {
		return Result{}, err
	}
	// The source is checked afresh: the cached one is as the job first saw
	// it.
	if want := plan.sourceIdentity(); want != "" {
		st, err := e.source(ctx, v)
		if err != nil {
			return Result{}, stateErr(err)
		}
		got, err := currentIdentity(ctx, st)
		if err != nil {
			return Result{}, err
		}
		if got != want {
			return Result{}, sourceReplaced(plan.View, v.Def.Source)
		}
	}
	src, err := e.planSource(ctx, plan, v)
	if err != nil {
		return Result{}, err
	}
	b := &build{e: e, plan: plan, v: v, res: Result{Mode: plan.Mode, SourceVersion: plan.SourceVersion, ManifestChecksum: plan.Options.ManifestChecksum}, expect: latest.Version, compactions: compactions}
	for _, r := range results {
		b.res.SkippedPartitions += r.SkippedPartitions
	}
	b.res.SourceFilesRecomputed = e.externalRecomputed(ctx, v, plan.SourceVersion)
	defer b.release()
	if err := b.keepOld(ctx); err != nil {
		return Result{}, err
	}
	if err := b.addStaged(ctx, results); err != nil {
		return Result{}, err
	}
	if err := b.trim(ctx); err != nil {
		return Result{}, err
	}
	if err := b.write(ctx); err != nil {
		return Result{}, err
	}
	wm := b.watermark(ctx, src)
	m, err := t.Commit(ctx, b.op(wm))
	if err != nil {
		if table.IsConflict(err) {
			// A twin of this commit (a redelivered task) may have won.
			if latest, lerr := t.LatestVersion(ctx); lerr == nil {
				if res, ok, cerr := e.committed(ctx, t, plan, latest.Version); cerr == nil && ok {
					return res, nil
				}
			}
		}
		return Result{}, fmt.Errorf("commit %s job %s: %w", table.JoinID(plan.View), plan.JobID, err)
	}
	b.res.ViewVersion = m.Version
	e.removeUnused(ctx, t, results, m)
	return b.res, nil
}

// committed looks for a version after the plan's base made by its job and
// answers that version's recorded result.
func (e *Engine) committed(ctx context.Context, t *table.Table, plan *Plan, latest uint64) (Result, bool, error) {
	for v := latest; v > plan.BaseViewVersion; v-- {
		m, err := t.Load(ctx, v)
		if err != nil {
			return Result{}, false, err
		}
		if m.Metadata[metaJobID] != plan.JobID {
			continue
		}
		var res Result
		if err := json.Unmarshal([]byte(m.Metadata[metaResult]), &res); err != nil {
			return Result{}, false, &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("view %s v%d: refresh result unreadable", table.JoinID(t.ID()), v), Err: err}
		}
		res.ViewVersion = m.Version
		return res, true, nil
	}
	return Result{}, false, nil
}

// checkResults answers the results in item order, one per item, each
// naming only its own staged files.
func checkResults(plan *Plan, results []ItemResult) ([]ItemResult, error) {
	if len(results) != len(plan.Items) {
		return nil, invalid("commit: %d item results for %d items", len(results), len(plan.Items))
	}
	out := slices.Clone(results)
	slices.SortFunc(out, func(a, b ItemResult) int { return a.Index - b.Index })
	for i, r := range out {
		if r.Index != i {
			return nil, invalid("commit: no result for item %d", i)
		}
		prefix := itemPrefix(plan.JobID, i)
		for _, f := range r.Fragments {
			if !strings.HasPrefix(f.Path, prefix) || f.Rows <= 0 {
				return nil, invalid("commit: item %d result names fragment %q (%d rows), not one of its staged files", i, f.Path, f.Rows)
			}
		}
		if len(r.Spans) != 0 && len(r.Spans) != len(r.Fragments) {
			return nil, invalid("commit: item %d has %d spans for %d fragments", i, len(r.Spans), len(r.Fragments))
		}
	}
	return out, nil
}

// build assembles the fragments of the new view version.
type build struct {
	e      *Engine
	plan   *Plan
	v      *View
	pieces []*piece
	cut    *uint32 // first source fragment with rows left out by output_limit
	res    Result
	// expect is the version the commit goes on top of: the plan's base,
	// or the last of the compactions made since.
	expect      uint64
	compactions []*table.Manifest
}

func (b *build) release() {
	for _, p := range b.pieces {
		p.release()
	}
}

func (b *build) rowwise() bool { return traitsOf(b.plan.Kind).RowWise }

func (b *build) cutAt(frag uint32) {
	if b.cut == nil || frag < *b.cut {
		b.cut = &frag
	}
}

// keepOld adds the base version's fragments, without the rows of removed
// source fragments; a full refresh keeps none.
func (b *build) keepOld(ctx context.Context) error {
	frags := b.v.Manifest.Fragments
	if b.plan.Mode == ModeFull {
		b.res.RowsRemoved = b.v.Manifest.NumRows()
		return nil
	}
	removed := newRemoval(b.plan.RemovedSourceFragments, b.plan.RemovedSourceRows)
	lineage := map[uint32]Lineage{}
	if wm := b.v.Watermark; wm != nil {
		for _, l := range wm.Lineage {
			lineage[l.Fragment] = l
		}
		if wm.LimitCut != nil {
			b.cutAt(*wm.LimitCut)
		}
	}
	for i, act := range classify(b.v, removed) {
		f := frags[i]
		l, known := lineage[f.ID]
		switch {
		case act == dropOld:
			b.res.RowsRemoved += f.Rows
		case act == keepOld && known:
			b.pieces = append(b.pieces, &piece{frag: f, old: true, span: Span{Lo: l.Lo, Hi: l.Hi}, rows: f.Rows})
		default:
			recs, err := b.e.readRows(ctx, b.v.Table, f, 0, f.Rows, nil)
			if err != nil {
				return err
			}
			kept, err := b.e.filterRemoved(ctx, recs, removed)
			if err != nil {
				return err
			}
			p := &piece{frag: f, recs: kept}
			for _, r := range kept {
				p.rows += r.NumRows()
			}
			b.res.RowsRemoved += f.Rows - p.rows
			if p.rows == 0 {
				p.release()
				continue
			}
			if p.rows == f.Rows {
				// Nothing removed after all: keep the file.
				p.span = spanOfRecs(p.recs)
				p.release()
				p.old = true
			}
			b.pieces = append(b.pieces, p)
		}
	}
	return nil
}

// filterRemoved keeps the rows of recs not derived from removed source
// fragments. It releases recs.
func (e *Engine) filterRemoved(ctx context.Context, recs []arrow.RecordBatch, removed removal) ([]arrow.RecordBatch, error) {
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	ctx = compute.WithAllocator(ctx, e.mem)
	var out []arrow.RecordBatch
	for _, r := range recs {
		mb := array.NewBooleanBuilder(e.mem)
		for _, addr := range r.Column(0).(*array.Uint64).Uint64Values() {
			mb.Append(!removed.has(addr))
		}
		mask := mb.NewArray()
		mb.Release()
		kept, err := compute.FilterRecordBatch(ctx, r, mask, compute.DefaultFilterOptions())
		mask.Release()
		if err != nil {
			for _, k := range out {
				k.Release()
			}
			return nil, err
		}
		out = append(out, kept)
	}
	return out, nil
}

// addStaged appends the items' staged fragments in item order.
func (b *build) addStaged(ctx context.Context, results []ItemResult) error {
	for i, r := range results {
		if r.Skipped {
			if item := b.plan.Items[i]; len(item.Ranges) > 0 {
				b.cutAt(item.Ranges[0].Fragment)
			}
			continue
		}
		if r.LimitCut != nil {
			b.cutAt(uint32(*r.LimitCut >> 32))
		}
		for k, f := range r.Fragments {
			p := &piece{frag: f, staged: true, rows: f.Rows}
			switch {
			case len(r.Spans) == len(r.Fragments):
				p.span = r.Spans[k]
			case b.rowwise():
				span, err := b.e.spanOf(ctx, b.v.Table, f)
				if err != nil {
					return err
				}
				p.span = span
			}
			b.pieces = append(b.pieces, p)
		}
	}
	return nil
}

// spanOf reads the source span of a view fragment from its rows.
func (e *Engine) spanOf(ctx context.Context, t *table.Table, f table.Fragment) (Span, error) {
	recs, err := e.readRows(ctx, t, f, 0, f.Rows, []int{0})
	if err != nil {
		return Span{}, err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	return spanOfRecs(recs), nil
}

// spanOfRecs is the source span of rows in __source_row_id order (the
// first column); recs hold at least one row.
func spanOfRecs(recs []arrow.RecordBatch) Span {
	var span Span
	seen := false
	for _, r := range recs {
		if r.NumRows() == 0 {
			continue
		}
		ids := r.Column(0).(*array.Uint64)
		if !seen {
			span.Lo, seen = uint32(ids.Value(0)>>32), true
		}
		span.Hi = uint32(ids.Value(ids.Len()-1) >> 32)
	}
	return span
}

// trim keeps the first output_limit rows: the pieces are in
// (__source_row_id, __chunk_index) order, so it rewrites the piece that
// straddles the limit and drops the ones after it.
func (b *build) trim(ctx context.Context) error {
	limit := b.plan.Options.OutputLimit
	if limit == nil {
		return nil
	}
	var total int64
	for i, p := range b.pieces {
		if total+p.rows <= *limit {
			total += p.rows
			continue
		}
		keep := *limit - total
		rest := b.pieces[i+1:]
		if keep > 0 {
			if p.recs == nil {
				recs, err := b.e.readRows(ctx, b.v.Table, p.frag, 0, p.rows, nil)
				if err != nil {
					return err
				}
				p.recs = recs
			}
			kept, first := sliceRows(p.recs, keep)
			b.cutAt(uint32(first >> 32))
			p.release()
			p.recs, p.old = kept, false
			if !p.staged {
				b.res.RowsRemoved += p.rows - keep
			}
			p.rows = keep
		} else {
			rest = b.pieces[i:]
			b.cutAt(p.span.Lo)
		}
		for _, r := range rest {
			if !r.staged {
				b.res.RowsRemoved += r.rows
			}
			r.release()
		}
		b.pieces = b.pieces[:len(b.pieces)-len(rest)]
		return nil
	}
	return nil
}

// sliceRows returns the first n rows of recs (retained slices) and the
// __source_row_id of the row after them.
func sliceRows(recs []arrow.RecordBatch, n int64) ([]arrow.RecordBatch, uint64) {
	var out []arrow.RecordBatch
	for _, r := range recs {
		if n < r.NumRows() {
			next := r.Column(0).(*array.Uint64).Value(int(n))
			if n > 0 {
				out = append(out, r.NewSlice(0, n))
			}
			return out, next
		}
		r.Retain()
		out = append(out, r)
		n -= r.NumRows()
	}
	return out, 0 // not reached: n is below the rows of recs
}

// write stores the rewritten pieces as staged files of at most
// MaxRowsPerFragment rows, data/_staging-{job}-c{n}-{k}.parquet.
func (b *build) write(ctx context.Context) error {
	var out []*piece
	for n, p := range b.pieces {
		if p.recs == nil {
			out = append(out, p)
			continue
		}
		w := b.e.newFragWriter(b.v, commitPrefix(b.plan.JobID, n), b.plan.Options.MaxRowsPerFragment)
		for _, r := range p.recs {
			if err := w.write(ctx, r); err != nil {
				w.release()
				return err
			}
		}
		if err := w.close(ctx); err != nil {
			return err
		}
		p.release()
		for k, f := range w.frags {
			np := &piece{frag: f, staged: p.staged, rows: f.Rows}
			if k < len(w.spans) {
				np.span = w.spans[k]
			}
			out = append(out, np)
		}
	}
	b.pieces = out
	for _, p := range b.pieces {
		if p.staged {
			b.res.RowsAdded += p.rows
		}
	}
	return nil
}

// watermark records what this refresh read; Lineage is filled by op.
func (b *build) watermark(ctx context.Context, src *sourceVersion) *Watermark {
	wm := &Watermark{
		Source:        b.v.Def.Source,
		SourceVersion: b.plan.SourceVersion,
		SourceUUID:    b.plan.sourceIdentity(),
		OutputLimit:   b.plan.Options.OutputLimit,
	}
	wm.SourceBranch, wm.SourceBranchID = b.plan.Options.SrcBranch, b.plan.SourceBranchID
	if b.rowwise() {
		wm.Fragments = src.rid.origins(src.m.Fragments)
		if wm.OutputLimit != nil {
			wm.LimitCut = b.cut
		}
	}
	return wm
}

// op derives the new version from the base: it conflicts if the base is
// not the version the plan started from.
func (b *build) op(wm *Watermark) table.Op {
	return func(base *table.Manifest) (*table.Manifest, error) {
		if b.plan.ViewUUID != "" && base.UUID != "" && base.UUID != b.plan.ViewUUID {
			return nil, viewReplaced(b.plan.View)
		}
		if base.Version != b.expect {
			return nil, moved(b.plan, base.Version)
		}
		pieces, err := b.rebase()
		if err != nil {
			return nil, err
		}
		base.Operation = "refresh"
		base.Fragments = make([]table.Fragment, 0, len(pieces))
		w := *wm
		w.Lineage = nil
		var added []uint32 // fragments of rows this refresh computed
		for _, p := range pieces {
			f := p.frag
			if !p.old {
				f.ID = base.NextFragmentID
				base.NextFragmentID++
			}
			if p.staged {
				added = append(added, f.ID)
			}
			base.Fragments = append(base.Fragments, f)
			if b.rowwise() {
				w.Lineage = append(w.Lineage, Lineage{Fragment: f.ID, Lo: p.span.Lo, Hi: p.span.Hi})
			}
		}
		raw, err := json.Marshal(&w)
		if err != nil {
			return nil, err
		}
		if base.Properties == nil {
			base.Properties = map[string]json.RawMessage{}
		}
		base.Properties[propWatermark] = raw
		// The rows this refresh added carry their virtual columns.
		ids := map[string][]uint32{}
		for _, c := range b.v.Columns {
			ids[c.Name] = added
		}
		if err := markFilled(base, b.v.Columns, ids); err != nil {
			return nil, err
		}
		res := b.res
		res.ViewVersion = base.Version + 1
		rawRes, err := json.Marshal(res)
		if err != nil {
			return nil, err
		}
		base.Metadata = map[string]string{metaJobID: b.plan.JobID, metaResult: string(rawRes)}
		if sum := b.plan.Options.ManifestChecksum; sum != "" {
			base.Metadata[metaManifestChecksum] = sum
		}
		return base, nil
	}
}

// moved is the conflict of a commit that finds view version v on top of
// the plan's base, made by something other than compaction.
func moved(plan *Plan, v uint64) error {
	return &errs.Error{Code: errs.CodeConcurrentModification, Message: fmt.Sprintf("view %s moved from version %d to %d since the refresh was planned", table.JoinID(plan.View), plan.BaseViewVersion, v)}
}

// compactionsSince answers the versions of view t after the plan's base
// up to latest, which must all be compactions (table.Compact): a refresh
// rebases on those, and conflicts with any other commit.
func (e *Engine) compactionsSince(ctx context.Context, t *table.Table, plan *Plan, latest *table.Manifest) ([]*table.Manifest, error) {
	var out []*table.Manifest
	for v := plan.BaseViewVersion + 1; v <= latest.Version; v++ {
		m := latest
		if v != latest.Version {
			var err error
			if m, err = t.Load(ctx, v); err != nil {
				return nil, stateErr(err)
			}
		}
		if _, ok, err := m.Compaction(); err != nil {
			return nil, stateErr(err)
		} else if !ok {
			return nil, moved(plan, latest.Version)
		}
		out = append(out, m)
	}
	return out, nil
}

// rebase answers the pieces of the new version on top of the compactions
// made since the plan's base: a merge of old fragments the refresh keeps
// as they are becomes the merged fragment; a merge of fragments the
// refresh drops or rewrites, all of them, goes with them; and a merge of
// fragments some of which the refresh keeps and some not is undone: the
// kept ones stay as they were in the base version (their files are still
// there, under their ids). Compaction never changes content, so the new
// version holds exactly what the refresh computed, and a compaction never
// makes a refresh conflict.
func (b *build) rebase() ([]*piece, error) {
	pieces := b.pieces
	for _, cm := range b.compactions {
		merges, _, err := cm.Compaction()
		if err != nil {
			return nil, err
		}
		byID := make(map[uint32]table.Fragment, len(cm.Fragments))
		for _, f := range cm.Fragments {
			byID[f.ID] = f
		}
		owner := map[uint32]int{} // merged fragment id → its merge
		for m, mg := range merges {
			for _, id := range mg.From {
				owner[id] = m
			}
		}
		present := make([]int, len(merges))
		for _, p := range pieces {
			if m, ok := owner[p.frag.ID]; ok && p.old {
				present[m]++
			}
		}
		out := make([]*piece, 0, len(pieces))
		for i := 0; i < len(pieces); {
			p := pieces[i]
			m, ok := owner[p.frag.ID]
			if !ok || !p.old {
				out = append(out, p)
				i++
				continue
			}
			mg := merges[m]
			f, ok := byID[mg.To]
			whole := ok && present[m] == len(mg.From) && i+len(mg.From) <= len(pieces)
			merged := &piece{frag: f, old: true, rows: f.Rows, span: p.span}
			for k := 0; whole && k < len(mg.From); k++ {
				q := pieces[i+k]
				whole = q.old && q.frag.ID == mg.From[k]
				merged.span.Lo, merged.span.Hi = min(merged.span.Lo, q.span.Lo), max(merged.span.Hi, q.span.Hi)
			}
			if !whole {
				out = append(out, p) // the merge is undone
				i++
				continue
			}
			out = append(out, merged)
			i += len(mg.From)
		}
		pieces = out
	}
	return pieces, nil
}

// removeUnused deletes, after a commit, the job's staged files the new
// version does not use (cut by output_limit, or rewritten). Failures
// leave orphans that no version references; they are not errors.
func (e *Engine) removeUnused(ctx context.Context, t *table.Table, results []ItemResult, m *table.Manifest) {
	used := make(map[string]bool, len(m.Fragments))
	for _, f := range m.Fragments {
		used[f.Path] = true
	}
	for _, r := range results {
		for _, f := range r.Fragments {
			if !used[f.Path] {
				_ = e.cat.Warehouse().Delete(ctx, t.Key(f.Path))
			}
		}
	}
}

// Discard removes the staged files of a job that did not commit (cancel,
// failure), but those of the work items in keep: finished items whose
// results the orchestrator keeps as checkpoints, for a later job to reuse
// (checkpoint.go; the janitor removes them once their records expire).
// Missing files are fine. A job that did commit keeps its files: the view
// references them.
func (j viewRefresh) Discard(ctx context.Context, plan *Plan, keep []int) error {
	e := j.e
	t, err := e.cat.OpenTable(ctx, plan.View)
	if errs.CodeOf(err) == errs.CodeTableNotFound {
		return nil // the view is gone, and its folder with it
	}
	if err != nil {
		return err
	}
	latest, err := t.LatestVersion(ctx)
	if err != nil {
		return err
	}
	if _, ok, err := e.committed(ctx, t, plan, latest.Version); err != nil || ok {
		return err
	}
	if plan.ViewUUID != "" {
		// Files a job of a view dropped since wrote into the new one's
		// folder can never be reused (the key names the view's identity).
		if id, err := currentIdentity(ctx, t); err != nil {
			return err
		} else if id != plan.ViewUUID {
			keep = nil
		}
	}
	prefix := stagingPrefix(plan.JobID)
	entries, err := e.cat.Warehouse().List(ctx, t.Key(prefix))
	if err != nil {
		return fmt.Errorf("discard %s job %s: %w", table.JoinID(plan.View), plan.JobID, err)
	}
	kept := make(map[int]bool, len(keep))
	for _, i := range keep {
		kept[i] = true
	}
	var errList []error
	for _, ent := range entries {
		if i, ok := stagedItem(ent.Name); ok && kept[i] {
			continue
		}
		if !ent.IsDir && stagedName.MatchString(ent.Name) {
			if err := e.cat.Warehouse().Delete(ctx, t.Key(prefix+ent.Name)); err != nil {
				errList = append(errList, err)
			}
		}
	}
	return errors.Join(errList...)
}
