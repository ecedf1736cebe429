package refresh

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// maxJobID bounds a job id (it becomes part of file names).
const maxJobID = 128

// checkJobID accepts ids of letters, digits, '-', '_' and '.': they name
// staging files.
func checkJobID(id string) error {
	if id == "" || len(id) > maxJobID {
		return invalid("job id: must be 1 to %d characters", maxJobID)
	}
	for _, c := range []byte(id) {
		ok := c == '-' || c == '_' || c == '.' || ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		if !ok {
			return invalid("job id %q: only letters, digits, '-', '_' and '.' are allowed", id)
		}
	}
	return nil
}

// checkFilled rejects options no Prepare filled.
func checkFilled(o Options) error {
	if o.SourceTaskSize <= 0 || o.MaxRowsPerFragment <= 0 || o.IntraApplierConcurrency <= 0 {
		return invalid("plan options: source_task_size, max_rows_per_fragment and intra_applier_concurrency must be > 0")
	}
	return nil
}

// Plan diffs the view's source against its watermark and splits the work
// into items (see the package documentation). The mode is full when the
// view was never refreshed, is kind udtf, or output_limit differs from
// the one the view was last refreshed with (and in the rarer cases Reason
// names); incremental otherwise; no_op when nothing changed, with no items.
// opts are as Prepare left them.
func (j viewRefresh) Plan(ctx context.Context, id []string, jobID string, opts Options) (*Plan, error) {
	e := j.e
	v, err := e.View(ctx, id)
	if err != nil {
		return nil, stateErr(err)
	}
	if err := checkOutputLimit(v, opts.OutputLimit); err != nil {
		return nil, err
	}
	viewID, err := identity(ctx, v.Table, v.Manifest)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", table.JoinID(id), err)
	}
	src, err := e.source(ctx, v)
	if err == nil {
		src, err = sourceBranch(ctx, src, v, opts.SrcBranch)
	}
	var branchID string
	if err == nil {
		branchID, err = sourceBranchID(ctx, src)
	}
	if err != nil {
		return nil, stateErr(err)
	}
	sm, err := src.Load(ctx, opts.SrcVersion)
	if err != nil {
		if opts.SrcVersion != 0 && errs.CodeOf(err) == errs.CodeTableVersionNotFound {
			return nil, invalid("src_version: source table %s has no version %d", table.JoinID(v.Def.Source), opts.SrcVersion)
		}
		return nil, fmt.Errorf("plan %s: %w", table.JoinID(id), stateErr(err))
	}
	srcID, err := identity(ctx, src, sm)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", table.JoinID(id), err)
	}
	if wm := v.Watermark; wm != nil && wm.sourceIdentity() == srcID {
		// A column the view reads was dropped, renamed or retyped.
		if err := e.sourceSchemaProblem(ctx, v, src, wm.SourceVersion, sm); err != nil {
			return nil, err
		}
	}
	// Checked once the view and source are read, so that failing to read
	// them (retried) is what a plan of unprepared options answers first.
	if err := checkFilled(opts); err != nil {
		return nil, err
	}
	p := &Plan{
		JobID:           jobID,
		View:            v.ID,
		Kind:            v.Def.Kind,
		SourceVersion:   sm.Version,
		BaseViewVersion: v.Manifest.Version,
		Options:         opts,
		ViewUUID:        viewID,
		SourceUUID:      srcID,
		SourceBranchID:  branchID,
	}
	frags := slices.Clone(sm.Fragments)
	slices.SortFunc(frags, func(a, b table.Fragment) int { return int(int64(a.ID) - int64(b.ID)) })
	rid, err := rowIDsOf(ctx, src, sm)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", table.JoinID(id), stateErr(err))
	}

	wm := v.Watermark
	if !traitsOf(v.Def.Kind).Incremental {
		if wm != nil && wm.SourceVersion == sm.Version && wm.sourceIdentity() == srcID && wm.SourceBranch == opts.SrcBranch && wm.SourceBranchID == branchID {
			p.Mode = ModeNoOp
			return p, nil
		}
		// One item over the whole source, even an empty one: a query
		// such as SELECT count(*) has rows over no rows; user code run
		// per partition_by value, one per value (kind_udtf_runtime.go).
		item := WorkItem{Index: 0, Ranges: []Range{}}
		for _, f := range frags {
			if f.Rows > 0 {
				item.Ranges = append(item.Ranges, Range{Fragment: f.ID, Start: 0, End: uint32(f.Rows)})
				item.Rows += f.Rows
			}
		}
		items, more, err := e.partitionItems(ctx, v, src, sm, frags, item)
		if err != nil {
			return nil, fmt.Errorf("plan %s: %w", table.JoinID(id), err)
		}
		p.Mode, p.Reason, p.Items = ModeFull, fmt.Sprintf("%s views are recomputed from the whole source%s", v.Def.Kind, more), items
		return p, nil
	}

	// Row-wise views see each source fragment as the origin its rows are
	// numbered under (rowids.go), and read them in that order.
	slices.SortStableFunc(frags, func(a, b table.Fragment) int { return int(int64(rid.origin(a.ID)) - int64(rid.origin(b.ID))) })
	target := rid.origins(frags)
	p.Mode, p.Reason = ModeIncremental, ""
	var gone, added IDSet
	var changed []RemovedRows
	switch {
	case wm == nil:
		p.Mode, p.Reason = ModeFull, "first refresh"
	case wm.sourceIdentity() != srcID || table.JoinID(wm.Source) != table.JoinID(v.Def.Source):
		p.Mode, p.Reason = ModeFull, "the source table was created again"
	case wm.SourceBranch != opts.SrcBranch || wm.SourceBranchID != branchID:
		p.Mode, p.Reason = ModeFull, branchChange(wm.SourceBranch, opts.SrcBranch)
	case !sameLimit(wm.OutputLimit, opts.OutputLimit):
		p.Mode, p.Reason = ModeFull, fmt.Sprintf("output_limit changed (%s to %s)", limitString(wm.OutputLimit), limitString(opts.OutputLimit))
	default:
		gone, added = wm.Fragments.Minus(target), target.Minus(wm.Fragments)
		kept := wm.Fragments.Minus(gone)
		changed, err = changedOrigins(ctx, src, wm.SourceVersion, sm, rid)
		lost := errs.CodeOf(err) == errs.CodeTableVersionNotFound
		if err != nil && !lost && !errors.Is(err, errRevived) && !errors.Is(err, errReplaced) {
			return nil, fmt.Errorf("plan %s: %w", table.JoinID(id), stateErr(err))
		}
		switch {
		case lost:
			// Which rows deletes removed since cannot be told.
			p.Mode, p.Reason = ModeFull, fmt.Sprintf("source version %d, the one last refreshed from, is gone", wm.SourceVersion)
		case errors.Is(err, errRevived):
			p.Mode, p.Reason = ModeFull, "rows deleted from the source came back (a restore)"
		case errors.Is(err, errReplaced):
			p.Mode, p.Reason = ModeFull, "a source fragment holds other data under the same id (an overwrite by another Lance writer)"
		}
		if p.Mode == ModeIncremental {
			// Another Lance writer may rewrite a column under the same
			// fragment ids (alter_columns writes it to a new data file):
			// rows the view holds may then differ, with no deletion.
			why, err := e.rewrittenReads(ctx, v, src, wm.SourceVersion, sm)
			if err != nil {
				return nil, fmt.Errorf("plan %s: %w", table.JoinID(id), stateErr(err))
			}
			if why != "" {
				p.Mode, p.Reason = ModeFull, why
			}
		}
		switch {
		case p.Mode != ModeIncremental:
		case len(gone) == 0 && len(added) == 0 && len(changed) == 0:
			p.Mode = ModeNoOp
			return p, nil
		case wm.LimitCut != nil && len(changed) > 0:
			p.Mode, p.Reason = ModeFull, "rows were removed from a view trimmed by output_limit"
		case wm.LimitCut != nil && len(gone) > 0 && gone[0] <= *wm.LimitCut:
			// Rows output_limit left out would move up into the view.
			p.Mode, p.Reason = ModeFull, "rows were removed from a view trimmed by output_limit"
		case len(added) > 0 && len(kept) > 0 && added[0] < kept[len(kept)-1]:
			// A restore brought back older fragments: new rows would not
			// sort after the kept ones.
			p.Mode, p.Reason = ModeFull, "the source brought back older fragments"
		}
	}

	var existing int64
	expand := frags
	if p.Mode == ModeIncremental {
		expand = expand[:0:0]
		for _, f := range frags {
			if added.Has(rid.origin(f.ID)) {
				expand = append(expand, f)
			}
		}
		p.RemovedSourceFragments = []uint32(gone)
		p.RemovedSourceRows = changed
		if existing, err = e.keptRows(ctx, v, newRemoval(gone, changed)); err != nil {
			return nil, fmt.Errorf("plan %s: %w", table.JoinID(id), stateErr(err))
		}
	}
	p.Items = cutItems(expand, opts.SourceTaskSize, existing)
	return p, nil
}

// cutItems splits the rows of frags (in id order) into items of at most
// size rows; an item may span fragments and a fragment items.
func cutItems(frags []table.Fragment, size int, existing int64) []WorkItem {
	items := []WorkItem{}
	cur := WorkItem{ExistingRowsBefore: existing}
	flush := func() {
		if cur.Rows > 0 {
			cur.Index = len(items)
			items = append(items, cur)
		}
		cur = WorkItem{ExistingRowsBefore: existing}
	}
	for _, f := range frags {
		for off := int64(0); off < f.Rows; {
			n := min(f.Rows-off, int64(size)-cur.Rows)
			cur.Ranges = append(cur.Ranges, Range{Fragment: f.ID, Start: uint32(off), End: uint32(off + n)})
			cur.Rows += n
			off += n
			if cur.Rows == int64(size) {
				flush()
			}
		}
	}
	flush()
	return items
}

// Skippable reports whether item index cannot add a row to the view:
// output_limit is set and the view rows before it (kept ones plus
// writtenBefore, the rows the earlier items wrote) already reach it. An
// orchestrator that knows writtenBefore may then record the item as
// ItemResult{Index: index, Skipped: true} without expanding it; Expand
// itself skips when ExistingRowsBefore alone reaches the limit.
func (p *Plan) Skippable(index int, writtenBefore int64) bool {
	if p.Options.OutputLimit == nil || index < 0 || index >= len(p.Items) {
		return false
	}
	return p.Items[index].ExistingRowsBefore+writtenBefore >= *p.Options.OutputLimit
}

func sameLimit(a, b *int64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func limitString(l *int64) string {
	if l == nil {
		return "none"
	}
	return fmt.Sprint(*l)
}

// stateErr classifies an error met while reading the state a refresh
// computes from (versions, manifests, the view's definition and
// watermark, view fragments): such an error fails the step, and the job,
// as retryable, never changes what the refresh computes. A manifest or
// file that does not decode (CodeInvalidTableState) may be a torn or
// half-synced read of an object store; it becomes CodeServiceUnavailable,
// which the orchestrator retries. A version that vanished while being
// read is the same. Uncoded I/O errors are retried already; coded answers
// about what exists (not found, not a view) pass through.
func stateErr(err error) error {
	switch errs.CodeOf(err) {
	case errs.CodeInvalidTableState, errs.CodeTableVersionNotFound:
		return &errs.Error{Code: errs.CodeServiceUnavailable, Message: "reading table state failed; the step will be retried", Err: err}
	}
	return err
}

// identity is the identity of table t (m is one of its versions); an
// error reading it is a state error.
func identity(ctx context.Context, t *table.Table, m *table.Manifest) (string, error) {
	id, err := t.Identity(ctx, m)
	if err != nil {
		return "", stateErr(err)
	}
	return id, nil
}

// currentIdentity reads table t's latest version afresh (never from a
// cache) and answers its identity.
func currentIdentity(ctx context.Context, t *table.Table) (string, error) {
	m, err := t.Load(ctx, 0)
	if err != nil {
		return "", stateErr(err)
	}
	return identity(ctx, t, m)
}

// sourceIdentity is the identity of the source the plan was made
// against: SourceUUID, or the legacy identity of SourceCreated for a plan
// made before identities were stored; "" when it records neither.
func (p *Plan) sourceIdentity() string {
	switch {
	case p.SourceUUID != "":
		return p.SourceUUID
	case p.SourceCreated != 0:
		return table.LegacyIdentity(p.SourceCreated)
	}
	return ""
}

// viewReplaced and sourceReplaced are the errors of a job whose view or
// source was dropped and created again after it was planned. They are
// not retryable: the table the job worked for is gone, and a retry would
// only find the same.
func viewReplaced(view []string) error {
	return errs.Errorf(errs.CodeTableNotFound, "view %s was dropped and created again since this refresh was planned; nothing of this refresh was written to the new view: refresh it again", table.JoinID(view))
}

func sourceReplaced(view, source []string) error {
	return errs.Errorf(errs.CodeTableNotFound, "source %s of view %s was dropped and created again since this refresh was planned; nothing was committed: refresh again", table.JoinID(source), table.JoinID(view))
}
