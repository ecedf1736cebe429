package refresh

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"

	"github.com/mvq-dev/mvq/errs"
	lancefile "github.com/mvq-dev/mvq/lance/file"
	"github.com/mvq-dev/mvq/table"
)

// Expand computes work item index of plan: it reads the item's source
// rows, applies the view (the chunker with IntraApplierConcurrency
// goroutines) and writes the output as staged files of at most
// MaxRowsPerFragment rows, data/_staging-{job}-{index}-{k}-{run}.EXT in
// the view folder. Its rows are a function of the plan alone; each run
// writes files of its own names (its bytes may differ: FSST tables are
// shared by the view's items in the process), so items may run again, and
// in any number of processes at once, without replacing a file another
// run recorded. With output_limit, an item whose ExistingRowsBefore reaches the
// limit is Skipped without reading, and an item writes no more rows than
// the limit leaves room for. Errors in the user's SQL that only rows
// reveal (a failed cast) are CodeInvalidInput; they will not go away on a
// retry.
func (j viewRefresh) Expand(ctx context.Context, plan *Plan, index int) (ItemResult, error) {
	e := j.e
	item := plan.Items[index]
	res := ItemResult{Index: index, Fragments: []table.Fragment{}}
	limit := plan.Options.OutputLimit
	if limit != nil && item.ExistingRowsBefore >= *limit {
		res.Skipped = true
		return res, nil
	}
	v, err := e.planView(ctx, plan)
	if err != nil {
		return ItemResult{}, err
	}
	src, err := e.planSource(ctx, plan, v)
	if err != nil {
		return ItemResult{}, err
	}
	w := e.newItemWriter(v, itemPrefix(plan.JobID, index), plan.Options.MaxRowsPerFragment)
	defer w.release()
	if !traitsOf(plan.Kind).RowWise {
		env := e.applyEnv(ctx, plan, index, v)
		err = e.expandWhole(ctx, env, v, src, item, w)
		res.SkippedPartitions = env.Skipped.Load()
		if err == nil {
			err = w.close(ctx)
		}
	} else {
		err = e.expandRows(ctx, plan, v, src, item, w, &res) // closes w
	}
	if err != nil {
		return ItemResult{}, fmt.Errorf("expand %s job %s item %d: %w", table.JoinID(plan.View), plan.JobID, index, err)
	}
	res.Fragments = append(res.Fragments, w.frags...)
	res.Spans, res.RowsRead = w.spans, item.Rows
	for _, f := range w.frags {
		res.RowsWritten += f.Rows
	}
	return res, nil
}

// planView is the view as the plan saw it (its base version), cached per
// job.
func (e *Engine) planView(ctx context.Context, plan *Plan) (*View, error) {
	key := "view|" + plan.JobID + "|" + table.JoinID(plan.View) + "|" + plan.ViewUUID + "|" + strconv.FormatUint(plan.BaseViewVersion, 10)
	if v, ok := e.cache.get(key); ok {
		return v.(*View), nil
	}
	v, err := e.loadView(ctx, plan.View, plan.BaseViewVersion)
	if errs.CodeOf(err) == errs.CodeTableVersionNotFound && plan.ViewUUID != "" {
		return nil, viewReplaced(plan.View) // versions are never removed
	}
	if err != nil {
		return nil, stateErr(err)
	}
	if plan.ViewUUID != "" {
		id, err := identity(ctx, v.Table, v.Manifest)
		if err != nil {
			return nil, err
		}
		if id != plan.ViewUUID {
			return nil, viewReplaced(plan.View)
		}
	}
	e.cache.put(key, v)
	return v, nil
}

// sourceVersion is a source table at the plan's version.
type sourceVersion struct {
	t     *table.Table
	m     *table.Manifest
	byID  map[uint32]table.Fragment
	rid   rowIDs        // the ids of the rows of m's fragments (rowids.go)
	input *arrow.Schema // row-wise kinds: the projected columns plus _rowaddr
	cols  []int         // the projected columns' indices
}

func (e *Engine) planSource(ctx context.Context, plan *Plan, v *View) (*sourceVersion, error) {
	// The projection is the view's: the key names the view (and its
	// identity) as well as the job and the source version.
	key := "src|" + plan.JobID + "|" + table.JoinID(plan.View) + "|" + plan.ViewUUID + "|" + strconv.FormatUint(plan.BaseViewVersion, 10) + "|" +
		table.JoinID(v.Def.Source) + "|" + plan.Options.SrcBranch + "|" + strconv.FormatUint(plan.SourceVersion, 10)
	if s, ok := e.cache.get(key); ok {
		return s.(*sourceVersion), nil
	}
	t, err := e.source(ctx, v)
	if err == nil {
		t, err = sourceBranch(ctx, t, v, plan.Options.SrcBranch)
	}
	if err == nil {
		err = sameBranch(ctx, t, plan)
	}
	if err != nil {
		return nil, stateErr(err)
	}
	want := plan.sourceIdentity()
	m, err := t.Load(ctx, plan.SourceVersion)
	if errs.CodeOf(err) == errs.CodeTableVersionNotFound && want != "" {
		return nil, sourceReplaced(plan.View, v.Def.Source) // versions are never removed
	}
	if err != nil {
		return nil, stateErr(err)
	}
	if want != "" {
		id, err := identity(ctx, t, m)
		if err != nil {
			return nil, err
		}
		if id != want {
			return nil, sourceReplaced(plan.View, v.Def.Source)
		}
	}
	rid, err := rowIDsOf(ctx, t, m)
	if err != nil {
		return nil, stateErr(err)
	}
	s := &sourceVersion{t: t, m: m, rid: rid, byID: make(map[uint32]table.Fragment, len(m.Fragments))}
	for _, f := range m.Fragments {
		s.byID[f.ID] = f
	}
	schema, err := m.ArrowSchema()
	if err != nil {
		return nil, err
	}
	proj, idx, err := table.ProjectSchema(schema, v.query.columns(schema), false)
	if err != nil {
		return nil, err
	}
	s.input, s.cols = withRowAddr(proj), idx
	e.cache.put(key, s)
	return s, nil
}

func (s *sourceVersion) fragment(id uint32) (table.Fragment, error) {
	f, ok := s.byID[id]
	if !ok {
		return f, &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("source %s v%d has no fragment %d", table.JoinID(s.t.ID()), s.m.Version, id)}
	}
	return f, nil
}

// applyEnv is the environment of the applier of item index.
// Its View is the view as the kind sees it (without virtual columns).
func (e *Engine) applyEnv(ctx context.Context, plan *Plan, index int, v *View) *ApplyEnv {
	return &ApplyEnv{Engine: e, View: v.kindView(), Plan: plan, Index: index, Mem: e.mem, Workers: plan.Options.IntraApplierConcurrency,
		Output: e.newBudget("output", plan, index, v), Events: eventsFrom(ctx)}
}

// expandWhole runs view v's query over the whole source (the item's
// fragments), streams its output through the kind's applier (and the
// view's virtual columns) and writes what that makes to w.
func (e *Engine) expandWhole(ctx context.Context, env *ApplyEnv, v *View, src *sourceVersion, item WorkItem, w *fragWriter) (err error) {
	bud := env.Output
	frags := make([]table.Fragment, 0, len(item.Ranges))
	for _, r := range item.Ranges {
		f, err := src.fragment(r.Fragment)
		if err != nil {
			return err
		}
		frags = append(frags, f)
	}
	scan, err := src.t.Scan(ctx, src.m, table.ScanOptions{Fragments: frags})
	if err != nil {
		return err
	}
	defer scan.Release()
	out, err := e.db.Query(ctx, map[string]array.RecordReader{v.query.Name: scan}, v.query.SQL)
	if err != nil {
		return sqlError(err)
	}
	defer out.Release()
	a, err := v.applying().NewApplier(env)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := a.Close(); err == nil {
			err = cerr
		}
	}()
	write := func(recs []arrow.RecordBatch) error {
		defer releaseAll(recs)
		for _, rec := range recs {
			if err := w.write(ctx, rec); err != nil {
				return err
			}
		}
		return nil
	}
	for out.Next() {
		if err := bud.add(out.RecordBatch().NumRows(), recordBytes(out.RecordBatch())); err != nil {
			return err
		}
		recs, err := a.Apply(ctx, out.RecordBatch())
		if err != nil {
			return err
		}
		if err := write(recs); err != nil {
			return err
		}
	}
	if err := out.Err(); err != nil {
		return sqlError(err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	recs, err := a.Finish(ctx)
	if err != nil {
		return err
	}
	return write(recs)
}

// expandRows applies a row-wise view to the item's rows and writes the
// output, cut at the room output_limit leaves.
func (e *Engine) expandRows(ctx context.Context, plan *Plan, v *View, src *sourceVersion, item WorkItem, w *fragWriter, res *ItemResult) error {
	// Applying and encoding are in-process CPU work: at most CPUItems
	// items of the process do them at once, so the memory they hold
	// follows the cores, not the worker's concurrency. User code (a
	// computed column's runtime) gives the token up while it waits.
	// Reading a local source is CPU work too (decoding from the page
	// cache): it takes the token first, and an item waiting for one holds
	// no rows. A remote source is read before, while others compute.
	var (
		hold   *cpuHold
		waited time.Duration
	)
	take := func() (err error) {
		ctx, hold, waited, err = e.holdCPU(ctx)
		return err
	}
	defer func() {
		if hold != nil {
			hold.release()
		}
	}()
	local := src.t.Catalog().Warehouse().Dir() != ""
	if local {
		if err := take(); err != nil {
			return err
		}
	}
	rctx, span := tracer.Start(ctx, "refresh.read")
	in, err := e.readItem(rctx, src, item)
	endSpan(span, err, recordsAttrs(in)...)
	if err != nil {
		return err
	}
	if !local {
		if err := take(); err != nil {
			releaseAll(in)
			return err
		}
	}
	actx, applySpan := tracer.Start(ctx, "refresh.apply", trace.WithAttributes(attribute.String("mvq.view_kind", string(plan.Kind)),
		attribute.Int("mvq.intra_applier_concurrency", plan.Options.IntraApplierConcurrency),
		attribute.Int64("mvq.cpu_wait_ms", waited.Milliseconds())))
	batches, err := e.apply(actx, plan, res.Index, v, src, in)
	endSpan(applySpan, err, recordsAttrs(batches)...)
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	if err != nil {
		return err
	}
	wctx, writeSpan := tracer.Start(ctx, "refresh.write")
	var written, bytes int64
	// The files are synced after the CPU token is given up: a sync waits
	// on the disk, and another item can encode meanwhile.
	w.deferSync = true
	err = e.writeBatches(wctx, plan, item, w, res, batches, &written)
	if err == nil {
		err = w.close(wctx)
	}
	// Written: the FSST codes that came with the strings go now, not a
	// collection after the strings do.
	dropCodes(batches)
	hold.release()
	if err == nil {
		err = w.sync(wctx)
	}
	for _, f := range w.frags {
		bytes += f.Bytes
	}
	endSpan(writeSpan, err, attribute.Int64("mvq.rows", written), attribute.Int64("mvq.bytes", bytes), attribute.Int("mvq.files", len(w.frags)))
	return err
}

// dropCodes forgets the FSST codes that came with the strings of recs
// (lance/file DropCodes).
func dropCodes(recs []arrow.RecordBatch) {
	for _, r := range recs {
		for _, c := range r.Columns() {
			lancefile.DropCodes(c)
		}
	}
}

// apply runs the view's SQL over the rows of item index, then the kind's
// applier (the chunker uses intra_applier_concurrency goroutines). The SQL
// output and the chunks are each held to the item output bounds. It
// releases in.
func (e *Engine) apply(ctx context.Context, plan *Plan, index int, v *View, src *sourceVersion, in []arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	if pt := e.passThroughFor(ctx, v, src.input); pt != nil {
		if out, ok := pt.project(in); ok {
			e.passes.passed.Add(1)
			for _, r := range in {
				r.Release()
			}
			in = out
			rdr, err := array.NewRecordReader(pt.out, in)
			for _, r := range in {
				r.Release()
			}
			if err != nil {
				return nil, err
			}
			return e.applyRows(ctx, plan, index, v, rdr)
		}
	}
	rdr, err := array.NewRecordReader(src.input, in)
	dropCodes(in) // DuckDB's output comes without them
	for _, r := range in {
		r.Release()
	}
	if err != nil {
		return nil, err
	}
	out, err := e.db.Query(ctx, map[string]array.RecordReader{v.query.Name: rdr}, v.query.Rowwise)
	if err != nil {
		rdr.Release()
		return nil, sqlError(err)
	}
	defer rdr.Release()
	return e.applyRows(ctx, plan, index, v, out)
}

// applyRows holds the query output out (which it releases) to the item
// output bounds, sorts it and runs the kind's applier over it.
func (e *Engine) applyRows(ctx context.Context, plan *Plan, index int, v *View, out array.RecordReader) ([]arrow.RecordBatch, error) {
	schema := out.Schema()
	recs, err := collect(out, e.newBudget("SQL output", plan, index, v))
	if err != nil {
		return nil, sqlError(err)
	}
	q, err := e.concatSorted(ctx, schema, recs)
	if err != nil {
		return nil, err
	}
	defer q.Release()
	return runApplier(ctx, v.applying(), e.applyEnv(ctx, plan, index, v), q)
}

// writeBatches writes the view rows, stopping at output_limit's room.
func (e *Engine) writeBatches(ctx context.Context, plan *Plan, item WorkItem, w *fragWriter, res *ItemResult, batches []arrow.RecordBatch, written *int64) error {
	room := int64(-1)
	if l := plan.Options.OutputLimit; l != nil {
		room = *l - item.ExistingRowsBefore
	}
	for _, b := range batches {
		n := b.NumRows()
		if room >= 0 && n > room {
			addr := b.Column(0).(*array.Uint64).Value(int(room))
			res.LimitCut = &addr
			n = room
		}
		if n > 0 {
			s := b.NewSlice(0, n)
			err := w.write(ctx, s)
			s.Release()
			if err != nil {
				return err
			}
			*written += n
		}
		if room >= 0 {
			room -= n
			if res.LimitCut != nil {
				break
			}
		}
	}
	return nil
}

// readItem reads the item's source rows, projected to the columns the
// query uses, with the _rowaddr column appended.
func (e *Engine) readItem(ctx context.Context, src *sourceVersion, item WorkItem) ([]arrow.RecordBatch, error) {
	if e.readHook != nil {
		e.readHook()
	}
	var out []arrow.RecordBatch
	fail := func(err error) ([]arrow.RecordBatch, error) {
		for _, r := range out {
			r.Release()
		}
		return nil, err
	}
	for _, rg := range item.Ranges {
		f, err := src.fragment(rg.Fragment)
		if err != nil {
			return fail(err)
		}
		recs, err := e.readRows(ctx, src.t, f, int64(rg.Start), int64(rg.End), src.cols)
		if err != nil {
			return fail(err)
		}
		off := uint64(rg.Start)
		for i, r := range recs {
			rec, err := e.addRowAddr(ctx, r, src.input, src.rid, f.ID, off)
			if err != nil {
				for _, rest := range recs[i:] {
					rest.Release()
				}
				return fail(err)
			}
			off += uint64(r.NumRows())
			r.Release()
			out = append(out, rec)
		}
	}
	return out, nil
}

// addRowAddr returns rec conformed to schema's leading fields with the
// row ids (frag << 32 | off+i, unless rid maps frag) as the last column.
func (e *Engine) addRowAddr(ctx context.Context, rec arrow.RecordBatch, schema *arrow.Schema, rid rowIDs, frag uint32, off uint64) (arrow.RecordBatch, error) {
	data := arrow.NewSchema(schema.Fields()[:schema.NumFields()-1], nil)
	c, err := table.Conform(ctx, rec, data, e.mem)
	if err != nil {
		return nil, err
	}
	defer c.Release()
	addr := rid.addrs(e.mem, frag, off, int(rec.NumRows()))
	defer addr.Release()
	return array.NewRecordBatch(schema, append(slices.Clone(c.Columns()), addr), rec.NumRows()), nil
}

// concatSorted joins the query output into one record sorted by its first
// column (__source_row_id). DuckDB keeps the input order for a projection,
// so the sort is only a safety net. It releases recs.
func (e *Engine) concatSorted(ctx context.Context, schema *arrow.Schema, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	var rec arrow.RecordBatch
	if len(recs) == 0 {
		b := array.NewRecordBuilder(e.mem, schema)
		rec = b.NewRecordBatch()
		b.Release()
	} else {
		var err error
		if rec, err = e.concatAll(schema, recs); err != nil {
			return nil, err
		}
	}
	ids, ok := rec.Column(0).(*array.Uint64)
	if !ok {
		rec.Release()
		return nil, fmt.Errorf("query output starts with %s, want uint64 %s", rec.Column(0).DataType(), SourceRowIDColumn)
	}
	if slices.IsSorted(ids.Uint64Values()) {
		return rec, nil
	}
	defer rec.Release()
	ctx = compute.WithAllocator(ctx, e.mem)
	perm, err := compute.SortIndicesArray(ctx, ids, compute.SortKey{})
	if err != nil {
		return nil, err
	}
	defer perm.Release()
	return table.TakeRecord(ctx, rec, perm)
}
