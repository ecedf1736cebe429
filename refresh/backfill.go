package refresh

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// A backfill (spec backfill_column) fills a virtual or computed column's
// existing rows. It is a Job like a refresh (job.go): the Engine's
// Prepare, Plan, Expand, Commit and Discard dispatch to columnBackfill
// when Options.Backfill is set:
//
//   - Plan cuts the fragments of read_version (the latest by default)
//     into work items of whole fragments, up to task_size rows each (a
//     larger fragment is an item alone).
//   - Expand computes, for each fragment of its item still in the table,
//     the rows that match where and are not filled yet, feeding the user
//     code checkpoint_size rows at a time (each checkpoint is kept as a
//     staged file, so a retried item does not compute it again), writes
//     the fragment again with the values and commits every
//     commit_granularity fragments: a long backfill shows its progress,
//     and what it committed survives a failure, a cancel or a killed
//     worker. A rewritten fragment gets a new id, as after an update, so
//     views reading the table see the new values.
//   - A row counts as filled when its fragment is recorded (property
//     "mvq.filled") as computed by the column's current version and its
//     value is not null: those rows are not computed again. A fragment an
//     update or delete rewrote is not recorded, so it is computed again.
//   - Commit answers what the items did; the table was committed already.

// KindBackfill is the Kind of a backfill job's plan.
const KindBackfill Kind = "backfill"

// ModeBackfill is the mode of a backfill's plan and result.
const ModeBackfill = "backfill"

// Backfill defaults and caps.
const (
	DefaultCheckpointSize    = 1024
	DefaultCommitGranularity = 1
	MaxCheckpointSize        = 1 << 20
	MaxCommitGranularity     = 1 << 16
)

// BackfillOptions are what a backfill job adds to Options (task_size is
// SourceTaskSize; concurrency, intra_applier_concurrency, cluster and
// manifest are the Options fields of the same names).
type BackfillOptions struct {
	// Column is the virtual or computed column (an output column or the
	// binding's name); a binding's outputs are filled together.
	Column string `json:"column"`
	// Where restricts the rows filled (SQL predicate over the table).
	Where string `json:"where,omitempty"`
	// ReadVersion is the version whose fragments are filled (0: the
	// latest at plan time). Fragments rewritten since are left out.
	ReadVersion uint64 `json:"read_version,omitempty"`
	// CheckpointSize is the rows computed between checkpoints.
	CheckpointSize int `json:"checkpoint_size"`
	// CommitGranularity is the fragments an item commits at once.
	CommitGranularity int `json:"commit_granularity"`
	// Branch is the branch of the table filled ("": main; see
	// backfill_branch.go).
	Branch string `json:"branch,omitempty"`
}

// columnBackfill is the Job of a backfill (Options.Backfill set).
type columnBackfill struct{ e *Engine }

// Prepare prepares a backfill of table id: the column must be virtual or
// computed, where a predicate over the table, read_version one of its
// versions; checkpoint_size and commit_granularity take their defaults.
func (j columnBackfill) Prepare(ctx context.Context, id []string, opts *Options) error {
	e := j.e
	bf := opts.Backfill
	switch {
	case opts.OutputLimit != nil:
		return invalid("output_limit: not an option of a backfill")
	case opts.SrcVersion != 0:
		return invalid("src_version: not an option of a backfill (use read_version)")
	case opts.SrcBranch != "":
		return invalid("src_branch: not an option of a backfill")
	}
	err := fillBounded([]boundedInt{
		{"checkpoint_size", &bf.CheckpointSize, DefaultCheckpointSize, MaxCheckpointSize},
		{"commit_granularity", &bf.CommitGranularity, DefaultCommitGranularity, MaxCommitGranularity},
	})
	if err != nil {
		return err
	}
	t, err := e.backfillTable(ctx, id, bf, nil)
	if err != nil {
		return err
	}
	m, err := t.Load(ctx, 0)
	if err != nil {
		return err
	}
	b, schema, err := backfillBinding(m, bf.Column)
	if err != nil {
		return err
	}
	if bf.ReadVersion != 0 {
		if _, err := t.Version(ctx, bf.ReadVersion); err != nil {
			if errs.CodeOf(err) == errs.CodeTableVersionNotFound {
				return invalid("read_version: table %s has no version %d", table.JoinID(id), bf.ReadVersion)
			}
			return err
		}
	}
	if strings.TrimSpace(bf.Where) != "" {
		if err := e.db.CheckExpression(ctx, bf.Where); err != nil {
			return invalid("where: %v", err)
		}
		if _, err := e.bind(ctx, computedInput, schema, whereQuery(bf.Where)); err != nil {
			return invalid("where: %s", strings.TrimPrefix(tableMessage(err), "source_query: "))
		}
	}
	opts.ManifestChecksum, opts.ManifestNotHonoured, opts.UDTFSpecNotHonoured = "", nil, nil
	text := opts.Manifest
	if text != "" {
		mf, err := e.checkManifestText("manifest", text, "")
		if err != nil {
			return err
		}
		opts.ManifestNotHonoured = mf.NotHonoured()
	} else if text = b.Manifest; text != "" {
		if mf, err := ParseManifest(text); err == nil {
			opts.ManifestNotHonoured = mf.NotHonoured()
		}
	}
	opts.ManifestChecksum = ManifestChecksum(text)
	return e.checkColumns([]ColumnBinding{*b}, schema, opts.Manifest)
}

// backfillBinding finds the binding of column col in version m.
func backfillBinding(m *table.Manifest, col string) (*ColumnBinding, *arrow.Schema, error) {
	schema, err := m.ArrowSchema()
	if err != nil {
		return nil, nil, err
	}
	if strings.TrimSpace(col) == "" {
		return nil, nil, invalid("column: required")
	}
	cols, err := tableColumns(m)
	if err != nil {
		return nil, nil, err
	}
	for i := range cols {
		if cols[i].has(col) {
			return &cols[i], schema, nil
		}
	}
	if len(schema.FieldIndices(col)) > 0 {
		return nil, nil, invalid("column: %q is not a virtual or computed column (add one with add_columns)", col)
	}
	return nil, nil, errs.Errorf(errs.CodeTableColumnNotFound, "column: %q not found", col)
}

func whereQuery(where string) string {
	return "SELECT coalesce((" + where + ")::BOOLEAN, false) AS " + duck.QuoteIdent("m") + " FROM " + duck.QuoteIdent(computedInput)
}

// Plan cuts the fragments of read_version into items of whole fragments.
func (j columnBackfill) Plan(ctx context.Context, id []string, jobID string, opts Options) (*Plan, error) {
	e := j.e
	t, err := e.backfillTable(ctx, id, opts.Backfill, nil)
	if err != nil {
		return nil, stateErr(err)
	}
	bid, err := sourceBranchID(ctx, t)
	if err != nil {
		return nil, stateErr(err)
	}
	latest, err := t.Load(ctx, 0)
	if err != nil {
		return nil, stateErr(err)
	}
	if _, _, err := backfillBinding(latest, opts.Backfill.Column); err != nil {
		return nil, err
	}
	m := latest
	if v := opts.Backfill.ReadVersion; v != 0 && v != latest.Version {
		if m, err = t.Load(ctx, v); err != nil {
			if errs.CodeOf(err) == errs.CodeTableVersionNotFound {
				return nil, invalid("read_version: table %s has no version %d", table.JoinID(id), v)
			}
			return nil, stateErr(err)
		}
	}
	tid, err := identity(ctx, t, latest)
	if err != nil {
		return nil, err
	}
	if err := checkFilled(opts); err != nil {
		return nil, err
	}
	p := &Plan{JobID: jobID, View: t.ID(), Kind: KindBackfill, Mode: ModeBackfill, SourceVersion: m.Version,
		BaseViewVersion: latest.Version, Options: opts, ViewUUID: tid, SourceBranchID: bid, Items: []WorkItem{}}
	cur := WorkItem{}
	for _, f := range m.Fragments {
		if f.Rows == 0 {
			continue
		}
		if cur.Rows > 0 && cur.Rows+f.Rows > int64(opts.SourceTaskSize) {
			cur.Index = len(p.Items)
			p.Items = append(p.Items, cur)
			cur = WorkItem{}
		}
		cur.Ranges = append(cur.Ranges, Range{Fragment: f.ID, Start: 0, End: uint32(f.Rows)})
		cur.Rows += f.Rows
	}
	if cur.Rows > 0 {
		cur.Index = len(p.Items)
		p.Items = append(p.Items, cur)
	}
	if len(p.Items) == 0 {
		p.Mode = ModeNoOp
	}
	return p, nil
}

// rewrite is one fragment a backfill item wrote again.
type rewrite struct {
	old    uint32
	frag   table.Fragment
	filled bool // every non-null value is the current version's
}

// Expand fills the fragments of a backfill item and commits them.
func (j columnBackfill) Expand(ctx context.Context, plan *Plan, index int) (ItemResult, error) {
	e := j.e
	res := ItemResult{Index: index, Fragments: []table.Fragment{}}
	bf := plan.Options.Backfill
	t, err := e.backfillTable(ctx, plan.View, bf, plan)
	if err != nil {
		return res, stateErr(err)
	}
	latest, err := t.Load(ctx, 0)
	if err != nil {
		return res, stateErr(err)
	}
	if id, err := identity(ctx, t, latest); err != nil {
		return res, err
	} else if plan.ViewUUID != "" && id != plan.ViewUUID {
		return res, errs.Errorf(errs.CodeTableNotFound, "table %s was dropped and created again since the backfill was planned", table.JoinID(plan.View))
	}
	b, schema, err := backfillBinding(latest, bf.Column)
	if err != nil {
		return res, err
	}
	filled, err := filledMap(latest)
	if err != nil {
		return res, stateErr(err)
	}
	byID := make(map[uint32]table.Fragment, len(latest.Fragments))
	for _, f := range latest.Fragments {
		byID[f.ID] = f
	}
	events := eventsFrom(ctx)
	cc := &columnCtx{e: e, jobManifest: plan.Options.Manifest, workers: plan.Options.IntraApplierConcurrency, events: events}
	var pending []rewrite
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		v, err := e.commitRewrites(ctx, t, plan, b, latest.Schema, pending)
		if err != nil {
			return err
		}
		ids := make([]string, len(pending))
		for i, r := range pending {
			ids[i] = strconv.FormatUint(uint64(r.old), 10)
		}
		events(fmt.Sprintf("item %d: committed fragments %s as version %d", index, strings.Join(ids, ", "), v))
		pending = pending[:0]
		return nil
	}
	for _, rg := range plan.Items[index].Ranges {
		f, ok := byID[rg.Fragment]
		if !ok {
			// Rewritten since it was planned. By this job before a retry
			// (a commit the killed attempt made): done. By anything else
			// (a compaction, an update): its rows are in other fragments
			// this plan does not name, so the job cannot finish them.
			ours, err := e.replacedByJob(ctx, t, plan)
			if err != nil {
				return res, err
			}
			if ours[rg.Fragment] {
				continue
			}
			return res, errs.Errorf(errs.CodeConcurrentModification,
				"fragment %d of %s was rewritten (compacted or updated) since the backfill was planned: backfill again (filled fragments are kept)", rg.Fragment, table.JoinID(plan.View))
		}
		wasFilled := filled[b.Name][strconv.FormatUint(uint64(f.ID), 10)] == b.Version()
		rw, read, computed, err := e.backfillFragment(ctx, t, plan, f, b, schema, wasFilled, cc)
		if err != nil {
			return res, fmt.Errorf("backfill %s job %s fragment %d: %w", table.JoinID(plan.View), plan.JobID, f.ID, err)
		}
		res.RowsRead += read
		res.RowsWritten += computed
		if rw != nil {
			pending = append(pending, *rw)
			if len(pending) >= bf.CommitGranularity {
				if err := flush(); err != nil {
					return res, err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return res, err
	}
	return res, nil
}

// checkpointName is the staged file of checkpoint k of fragment frag.
func checkpointName(jobID string, frag uint32, k int, ext string) string {
	return stagingPrefix(jobID) + "b" + strconv.FormatUint(uint64(frag), 10) + "-" + strconv.Itoa(k) + ext
}

// backfillFragment computes the rows of fragment f to fill and writes the
// fragment again; nil when no row needed it. It answers the rows read and
// computed.
func (e *Engine) backfillFragment(ctx context.Context, t *table.Table, plan *Plan, f table.Fragment, b *ColumnBinding, schema *arrow.Schema, wasFilled bool, cc *columnCtx) (*rewrite, int64, int64, error) {
	bf := plan.Options.Backfill
	recs, err := t.ReadFragmentAs(ctx, f, schema, nil, e.mem)
	if err != nil {
		return nil, 0, 0, stateErr(err)
	}
	all, err := e.concatAll(schema, recs)
	releaseAll(recs)
	if err != nil {
		return nil, 0, 0, err
	}
	defer all.Release()
	n := int(all.NumRows())
	outIdx := make([]int, len(b.Outputs))
	types := make([]arrow.DataType, len(b.Outputs))
	for k, o := range b.Outputs {
		idx := schema.FieldIndices(o.Column)
		if len(idx) == 0 {
			return nil, 0, 0, errs.Errorf(errs.CodeInvalidTableState, "column %q is not in the schema", o.Column)
		}
		outIdx[k], types[k] = idx[0], schema.Field(idx[0]).Type
	}
	match, err := e.whereMask(ctx, all, bf.Where)
	if err != nil {
		return nil, 0, 0, err
	}
	var sel []int64
	staleLeft := false // a value outside sel that no version recorded
	for i := 0; i < n; i++ {
		null := false
		for _, c := range outIdx {
			null = null || all.Column(c).IsNull(i)
		}
		switch {
		case match[i] && (!wasFilled || null):
			sel = append(sel, int64(i))
		case !wasFilled && !null:
			staleLeft = true
		}
	}
	if len(sel) == 0 {
		return nil, int64(n), 0, nil
	}
	// Compute the selected rows, checkpoint_size at a time.
	step := bf.CheckpointSize
	parts := make([][]arrow.Array, 0, (len(sel)+step-1)/step)
	defer func() {
		for _, p := range parts {
			for _, c := range p {
				c.Release()
			}
		}
	}()
	for k, lo := 0, 0; lo < len(sel); k, lo = k+1, lo+step {
		hi := min(lo+step, len(sel))
		cols, err := e.checkpoint(ctx, t, plan, f.ID, k, all, sel[lo:hi], b, types, cc)
		if err != nil {
			return nil, 0, 0, err
		}
		parts = append(parts, cols)
	}
	// Merge: selected rows take the computed values.
	pos := make([]int64, n)
	for i := range pos {
		pos[i] = int64(i)
	}
	for j, i := range sel {
		pos[i] = int64(n + j)
	}
	ib := array.NewInt64Builder(e.mem)
	ib.AppendValues(pos, nil)
	take := ib.NewArray()
	ib.Release()
	defer take.Release()
	cols := append([]arrow.Array(nil), all.Columns()...)
	var made []arrow.Array
	defer func() {
		for _, c := range made {
			c.Release()
		}
	}()
	cctx := compute.WithAllocator(ctx, e.mem)
	for k, c := range outIdx {
		chunks := []arrow.Array{all.Column(c)}
		for _, p := range parts {
			chunks = append(chunks, p[k])
		}
		joined, err := array.Concatenate(chunks, e.mem)
		if err != nil {
			return nil, 0, 0, err
		}
		merged, err := compute.TakeArray(cctx, joined, take)
		joined.Release()
		if err != nil {
			return nil, 0, 0, err
		}
		made = append(made, merged)
		cols[c] = merged
	}
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: schema.Field(i).Name, Type: c.DataType(), Nullable: true}
	}
	raw := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(n))
	defer raw.Release()
	rec, err := table.Conform(ctx, raw, schema, e.mem)
	if err != nil {
		return nil, 0, 0, err
	}
	defer rec.Release()
	nf, err := t.WriteFile(ctx, schema, []arrow.RecordBatch{rec})
	if err != nil {
		return nil, 0, 0, err
	}
	return &rewrite{old: f.ID, frag: nf, filled: wasFilled || !staleLeft}, int64(n), int64(len(sel)), nil
}

// whereMask evaluates where over rec; "" matches every row.
func (e *Engine) whereMask(ctx context.Context, rec arrow.RecordBatch, where string) ([]bool, error) {
	n := int(rec.NumRows())
	out := make([]bool, n)
	if strings.TrimSpace(where) == "" {
		for i := range out {
			out[i] = true
		}
		return out, nil
	}
	rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	q, err := e.db.Query(ctx, map[string]array.RecordReader{computedInput: rdr}, whereQuery(where))
	if err != nil {
		return nil, whereErr(err)
	}
	recs, err := duck.Collect(q)
	q.Release()
	if err != nil {
		return nil, whereErr(err)
	}
	defer releaseAll(recs)
	i := 0
	for _, r := range recs {
		col, ok := r.Column(0).(*array.Boolean)
		if !ok {
			return nil, invalid("where: not a predicate")
		}
		for k := 0; k < col.Len() && i < n; k, i = k+1, i+1 {
			out[i] = col.IsValid(k) && col.Value(k)
		}
	}
	if i != n {
		return nil, fmt.Errorf("where: %d answers for %d rows", i, n)
	}
	return out, nil
}

func whereErr(err error) error {
	if e := table.EngineErr(err); e != nil {
		return e
	}
	return invalid("where: %v", err)
}

// checkpoint answers the outputs of rows sel of rec: read back from
// checkpoint k of the fragment when a previous try of the item wrote it,
// else computed and written as that checkpoint.
func (e *Engine) checkpoint(ctx context.Context, t *table.Table, plan *Plan, frag uint32, k int, rec arrow.RecordBatch, sel []int64, b *ColumnBinding, types []arrow.DataType, cc *columnCtx) ([]arrow.Array, error) {
	fields := make([]arrow.Field, len(b.Outputs))
	for i, o := range b.Outputs {
		fields[i] = arrow.Field{Name: o.Column, Type: types[i], Nullable: true}
	}
	cs := arrow.NewSchema(fields, nil)
	name := checkpointName(plan.JobID, frag, k, e.cat.DataExt())
	// A schema the Lance writer cannot hold was written as Parquet
	// (WriteFileAt): look for either name.
	saved := name
	if alt := strings.TrimSuffix(name, ".lance") + ".parquet"; alt != name {
		if ok, _ := e.cat.Warehouse().Exists(ctx, t.Key(alt)); ok {
			saved = alt
		}
	}
	if ok, _ := e.cat.Warehouse().Exists(ctx, t.Key(saved)); ok {
		recs, err := t.ReadFragment(ctx, table.Fragment{ID: frag, Path: saved}, nil, e.mem)
		if err == nil {
			got, cerr := e.concatAll(cs, recs)
			releaseAll(recs)
			if cerr == nil && got.NumRows() == int64(len(sel)) {
				defer got.Release()
				out := make([]arrow.Array, got.NumCols())
				for i := range out {
					out[i] = got.Column(i)
					out[i].Retain()
				}
				return out, nil
			}
			if cerr == nil {
				got.Release()
			}
		}
	}
	ib := array.NewInt64Builder(e.mem)
	ib.AppendValues(sel, nil)
	idx := ib.NewArray()
	ib.Release()
	in, err := table.TakeRecord(compute.WithAllocator(ctx, e.mem), rec, idx)
	idx.Release()
	if err != nil {
		return nil, err
	}
	defer in.Release()
	cols, err := cc.compute(ctx, b, in, types)
	if err != nil {
		return nil, err
	}
	out := array.NewRecordBatch(cs, cols, int64(len(sel)))
	defer out.Release()
	if _, err := t.WriteFileAt(ctx, name, cs, []arrow.RecordBatch{out}); err != nil {
		for _, c := range cols {
			c.Release()
		}
		return nil, err
	}
	return cols, nil
}

// commitRewrites commits fragments rewritten by a backfill in place of
// the ones they replace, with new ids, and answers the version. A
// fragment another writer replaced meanwhile is left out (its file is
// an orphan). A view's lineage follows its fragments.
func (e *Engine) commitRewrites(ctx context.Context, t *table.Table, plan *Plan, b *ColumnBinding, schema string, reps []rewrite) (uint64, error) {
	m, err := t.Commit(ctx, func(base *table.Manifest) (*table.Manifest, error) {
		if base.Schema != schema {
			return nil, errs.Errorf(errs.CodeConcurrentModification, "the columns of %s changed while it was backfilled: backfill again", table.JoinID(plan.View))
		}
		pos := make(map[uint32]int, len(base.Fragments))
		for i, f := range base.Fragments {
			pos[f.ID] = i
		}
		filled, err := filledMap(base)
		if err != nil {
			return nil, err
		}
		remap := map[uint32]uint32{}
		var replaced []string
		ids := map[string][]uint32{}
		carried := map[string]map[string]string{}
		for _, r := range reps {
			i, ok := pos[r.old]
			if !ok {
				// Rewritten by another commit (a compaction, an update)
				// since this item read it: its computed values would be
				// lost, so the item fails and runs again on what is there.
				return nil, errs.Errorf(errs.CodeConcurrentModification,
					"fragment %d of %s was rewritten (compacted or updated) while it was backfilled: the item runs again", r.old, table.JoinID(plan.View))
			}
			nf := r.frag
			nf.ID = base.NextFragmentID
			base.NextFragmentID++
			base.Fragments[i] = nf
			remap[r.old] = nf.ID
			replaced = append(replaced, fmt.Sprintf("%d:%d", r.old, nf.ID))
			if r.filled {
				ids[b.Name] = append(ids[b.Name], nf.ID)
			}
			// Other columns' values are as they were.
			for name, frags := range filled {
				if v, ok := frags[strconv.FormatUint(uint64(r.old), 10)]; ok && name != b.Name {
					if carried[name] == nil {
						carried[name] = map[string]string{}
					}
					carried[name][strconv.FormatUint(uint64(nf.ID), 10)] = v
				}
			}
		}
		for name, frags := range carried {
			for id, v := range frags {
				filled[name][id] = v
			}
		}
		raw, err := json.Marshal(filled)
		if err != nil {
			return nil, err
		}
		if base.Properties == nil {
			base.Properties = map[string]json.RawMessage{}
		}
		base.Properties[propFilled] = raw
		if err := markFilled(base, []ColumnBinding{*b}, ids); err != nil {
			return nil, err
		}
		if err := remapLineage(base, remap); err != nil {
			return nil, err
		}
		base.Operation = "backfill"
		base.Metadata = map[string]string{metaJobID: plan.JobID, "mvq.backfill_column": b.Name, "mvq.udf_version": b.Version(),
			metaBackfillReplaced: strings.Join(replaced, ",")}
		if sum := plan.Options.ManifestChecksum; sum != "" {
			base.Metadata[metaManifestChecksum] = sum
		}
		return base, nil
	})
	if err != nil {
		return 0, fmt.Errorf("commit backfill of %s: %w", table.JoinID(plan.View), err)
	}
	return m.Version, nil
}

// remapLineage renames view fragments in the watermark's lineage.
func remapLineage(base *table.Manifest, remap map[uint32]uint32) error {
	raw, ok := base.Properties[propWatermark]
	if !ok || len(remap) == 0 {
		return nil
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return err
	}
	l, ok := doc["lineage"]
	if !ok {
		return nil
	}
	var lineage []Lineage
	if err := json.Unmarshal(l, &lineage); err != nil {
		return err
	}
	for i := range lineage {
		if to, ok := remap[lineage[i].Fragment]; ok {
			lineage[i].Fragment = to
		}
	}
	if doc["lineage"], ok = marshalRaw(lineage); !ok {
		return fmt.Errorf("lineage")
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	base.Properties[propWatermark] = out
	return nil
}

func marshalRaw(v any) (json.RawMessage, bool) {
	b, err := json.Marshal(v)
	return b, err == nil
}

// Commit answers the table's version and what was filled: the items
// committed already.
func (j columnBackfill) Commit(ctx context.Context, plan *Plan, results []ItemResult) (Result, error) {
	e := j.e
	t, err := e.backfillTable(ctx, plan.View, plan.Options.Backfill, plan)
	if err != nil {
		return Result{}, stateErr(err)
	}
	latest, err := t.LatestVersion(ctx)
	if err != nil {
		return Result{}, stateErr(err)
	}
	res := Result{Mode: plan.Mode, SourceVersion: plan.SourceVersion, ViewVersion: latest.Version, ManifestChecksum: plan.Options.ManifestChecksum}
	for _, r := range results {
		res.RowsUpdated += r.RowsWritten
	}
	return res, nil
}

// Discard removes a backfill's checkpoints; what it committed stays.
// keep is ignored: a backfill's items are never reused by another job.
func (j columnBackfill) Discard(ctx context.Context, plan *Plan, _ []int) error {
	e := j.e
	t, err := e.cat.OpenTable(ctx, plan.View)
	if errs.CodeOf(err) == errs.CodeTableNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	prefix := stagingPrefix(plan.JobID)
	entries, err := e.cat.Warehouse().List(ctx, t.Key(prefix))
	if err != nil {
		return err
	}
	for _, ent := range entries {
		if !ent.IsDir && stagedName.MatchString(ent.Name) {
			_ = e.cat.Warehouse().Delete(ctx, t.Key(prefix+ent.Name))
		}
	}
	return nil
}

// metaBackfillReplaced lists, on a version a backfill committed, the
// fragments it replaced as "old:new" pairs.
const metaBackfillReplaced = "mvq.backfill_replaced"

// replacedByJob returns the fragment ids the job's own commits replaced
// since it was planned.
func (e *Engine) replacedByJob(ctx context.Context, t *table.Table, plan *Plan) (map[uint32]bool, error) {
	vfs, err := t.Versions(ctx)
	if err != nil {
		return nil, stateErr(err)
	}
	out := map[uint32]bool{}
	for _, vf := range vfs {
		if vf.Version <= plan.BaseViewVersion {
			continue
		}
		m, err := t.LoadFile(ctx, vf)
		if err != nil {
			return nil, stateErr(err)
		}
		if m.Metadata[metaJobID] != plan.JobID {
			continue
		}
		for _, pair := range strings.Split(m.Metadata[metaBackfillReplaced], ",") {
			old, _, ok := strings.Cut(pair, ":")
			if n, err := strconv.ParseUint(old, 10, 32); ok && err == nil {
				out[uint32(n)] = true
			}
		}
	}
	return out, nil
}
