package refresh

import (
	"context"
	"fmt"
	"slices"

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

// checkFilled rejects options no Plan filled.
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
// opts should have been through Prepare; numbers left at zero take their
// defaults.
func (e *Engine) Plan(ctx context.Context, id []string, jobID string, opts Options) (*Plan, error) {
	if err := checkJobID(jobID); err != nil {
		return nil, err
	}
	if err := e.fillDefaults(&opts); err != nil {
		return nil, err
	}
	v, err := e.View(ctx, id)
	if err != nil {
		return nil, err
	}
	if opts.OutputLimit != nil && v.Def.Kind != KindChunker {
		return nil, invalid("output_limit: only chunker views take an output_limit")
	}
	src, err := e.source(ctx, v)
	if err != nil {
		return nil, err
	}
	sm, err := src.Load(ctx, opts.SrcVersion)
	if err != nil {
		if table.ErrorCode(err) == table.CodeTableVersionNotFound {
			return nil, invalid("src_version: source table %s has no version %d", table.JoinID(v.Def.Source), opts.SrcVersion)
		}
		return nil, fmt.Errorf("plan %s: %w", table.JoinID(id), err)
	}
	created := sourceCreated(ctx, src)
	p := &Plan{
		JobID:           jobID,
		View:            v.ID,
		Kind:            v.Def.Kind,
		SourceVersion:   sm.Version,
		BaseViewVersion: v.Manifest.Version,
		Options:         opts,
		SourceCreated:   created,
	}
	frags := slices.Clone(sm.Fragments)
	slices.SortFunc(frags, func(a, b table.Fragment) int { return int(int64(a.ID) - int64(b.ID)) })

	wm := v.Watermark
	if v.Def.Kind == KindUDTF {
		if wm != nil && wm.SourceVersion == sm.Version && wm.SourceCreated == created {
			p.Mode = ModeNoOp
			return p, nil
		}
		// One item over the whole source, even an empty one: a query
		// such as SELECT count(*) has rows over no rows.
		item := WorkItem{Index: 0, Ranges: []Range{}}
		for _, f := range frags {
			if f.Rows > 0 {
				item.Ranges = append(item.Ranges, Range{Fragment: f.ID, Start: 0, End: uint32(f.Rows)})
				item.Rows += f.Rows
			}
		}
		p.Mode, p.Reason, p.Items = ModeFull, "udtf views are recomputed from the whole source", []WorkItem{item}
		return p, nil
	}

	ids := make([]uint32, len(frags))
	for i, f := range frags {
		ids[i] = f.ID
	}
	target := NewIDSet(ids)
	p.Mode, p.Reason = ModeIncremental, ""
	var gone, added IDSet
	switch {
	case wm == nil:
		p.Mode, p.Reason = ModeFull, "first refresh"
	case wm.SourceCreated != created || table.JoinID(wm.Source) != table.JoinID(v.Def.Source):
		p.Mode, p.Reason = ModeFull, "the source table was created again"
	case !sameLimit(wm.OutputLimit, opts.OutputLimit):
		p.Mode, p.Reason = ModeFull, fmt.Sprintf("output_limit changed (%s to %s)", limitString(wm.OutputLimit), limitString(opts.OutputLimit))
	default:
		gone, added = wm.Fragments.Minus(target), target.Minus(wm.Fragments)
		kept := wm.Fragments.Minus(gone)
		switch {
		case len(gone) == 0 && len(added) == 0:
			p.Mode = ModeNoOp
			return p, nil
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
			if added.Has(f.ID) {
				expand = append(expand, f)
			}
		}
		p.RemovedSourceFragments = []uint32(gone)
		if existing, err = e.keptRows(ctx, v, gone); err != nil {
			return nil, fmt.Errorf("plan %s: %w", table.JoinID(id), err)
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

// sourceCreated is the timestamp of the source's version 1 (0 when it is
// gone): it tells a table created again under the same name apart.
func sourceCreated(ctx context.Context, src *table.Table) int64 {
	m, err := src.Load(ctx, 1)
	if err != nil {
		return 0
	}
	return m.TimestampMillis
}
