package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table/internal/records"
)

// CompactOptions tune Compact. Zero values take the defaults.
type CompactOptions struct {
	// TargetRows caps the rows of a compacted fragment. Default: the
	// catalog's MaxRowsPerFragment.
	TargetRows int64
	// TargetBytes caps the data file bytes merged into one fragment.
	// Default 64 MiB.
	TargetBytes int64
	// MinFragments is the fewest small fragments worth a new version:
	// with fewer to merge, Compact does nothing. Default 8.
	MinFragments int
}

// DefaultCompactTargetBytes is CompactOptions.TargetBytes's default.
const DefaultCompactTargetBytes = 64 << 20

func (o CompactOptions) withDefaults(c *Catalog) CompactOptions {
	if o.TargetRows <= 0 {
		o.TargetRows = int64(c.opts.MaxRowsPerFragment)
	}
	if o.TargetBytes <= 0 {
		o.TargetBytes = DefaultCompactTargetBytes
	}
	if o.MinFragments <= 0 {
		o.MinFragments = 8
	}
	o.MinFragments = max(o.MinFragments, 2)
	return o
}

// CompactResult says what Compact did.
type CompactResult struct {
	// Version is the version Compact committed; 0 when it committed
	// nothing (too few small fragments, or every merge lost to a
	// concurrent rewrite).
	Version uint64
	// FragmentsBefore and FragmentsAfter count the fragments of the
	// version compacted and of the new one.
	FragmentsBefore, FragmentsAfter int
	// Merged fragments were rewritten into Written new ones, holding Rows
	// rows.
	Merged, Written int
	Rows            int64
}

// Merge says that fragments From, consecutive in table order, were
// rewritten into fragment To, their rows in the same order. Compaction
// versions record their merges in their metadata (MetaCompaction), so a
// writer that planned against an older version can rebase on them.
type Merge struct {
	To   uint32   `json:"to"`
	From []uint32 `json:"from"`
}

// MetaCompaction is the version metadata key of a compaction's merges
// (JSON []Merge); OperationCompact is its operation.
const (
	MetaCompaction   = "mvq.compaction"
	OperationCompact = "compact"
)

// Compaction returns the merges of a compaction version; ok is false for
// a version of any other operation.
func (m *Manifest) Compaction() (merges []Merge, ok bool, err error) {
	raw, has := m.Metadata[MetaCompaction]
	if m.Operation != OperationCompact || !has {
		return nil, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &merges); err != nil {
		return nil, false, &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("version %d: compaction metadata unreadable", m.Version), Err: err}
	}
	return merges, true, nil
}

// PropertyRewriter updates a table property that names fragments by id
// after a compaction merged some (Hooks.Rewriters). Package refresh
// installs one for the view watermark, whose lineage maps view fragments
// to source fragments.
type PropertyRewriter func(prop json.RawMessage, merges []Merge) (json.RawMessage, error)

// compactBeforeCommit, when set (tests), runs between writing the merged
// fragments and committing them.
var compactBeforeCommit func()

// Compact rewrites runs of small fragments (adjacent in table order, each
// under half of TargetRows and of TargetBytes) into fragments of up to
// TargetRows rows and TargetBytes bytes, and commits them in a new
// version (operation "compact") with put-if-not-exists. A fragment whose
// deletion file deletes a tenth of its rows or more is rewritten without
// them (materialize), alone if need be. Content and row
// order are kept: each merged fragment takes the place of the run it
// replaces (rows get new addresses, as after any rewrite). Views are
// compacted too, the properties with a rewriter installed on the catalog
// (Hooks.Rewriters) rewritten with the merges.
//
// A concurrent commit is rebased on: appends are kept; a run a concurrent
// delete, update or refresh changed is left out of the compaction (its
// written file becomes an orphan), so no row is lost or brought back.
// When every run was changed, Compact commits nothing.
func (t *Table) Compact(ctx context.Context, opts CompactOptions) (CompactResult, error) {
	ctx, span := tracer.Start(ctx, "table.compact")
	defer span.End()
	opts = opts.withDefaults(t.c)
	m, err := t.Load(ctx, 0)
	if err != nil {
		return CompactResult{}, err
	}
	res := CompactResult{FragmentsBefore: len(m.Fragments), FragmentsAfter: len(m.Fragments)}
	if m.IsExternal() {
		return res, nil // its fragments mirror another engine's files one to one
	}
	if m.StableRowIDs() {
		return res, nil // mvq would drop its row ids (refuseStableRowIDs); LanceDB's optimize() compacts it
	}
	runs := compactionRuns(m.Fragments, opts)
	n, deletions := 0, false
	for _, r := range runs {
		n += len(r)
		deletions = deletions || slices.ContainsFunc(r, materialize)
	}
	if n < opts.MinFragments && !deletions {
		return res, nil
	}
	schema, err := m.ArrowSchema()
	if err != nil {
		return res, err
	}
	written := make([]Fragment, len(runs))
	for i, run := range runs {
		if written[i], err = t.mergeRun(ctx, m, schema, run); err != nil {
			return res, fmt.Errorf("compact %s: %w", JoinID(t.id), err)
		}
	}
	if compactBeforeCommit != nil {
		compactBeforeCommit()
	}
	var applied []bool
	nm, err := t.Commit(ctx, t.c.compactOp(m.Schema, runs, written, &applied))
	if errors.Is(err, errNothingToCompact) {
		err = nil
	}
	for i, ok := range applied {
		if !ok {
			_ = t.c.wh.Delete(ctx, t.key+written[i].Path) // an orphan; best effort
		}
	}
	if err != nil || nm == nil {
		return res, err
	}
	res.Version, res.FragmentsAfter = nm.Version, len(nm.Fragments)
	for i, ok := range applied {
		if ok {
			res.Merged += len(runs[i])
			res.Written++
			res.Rows += written[i].Rows
		}
	}
	return res, nil
}

// Compact compacts table id (see Table.Compact); the maintenance
// janitor calls it by id.
func (c *Catalog) Compact(ctx context.Context, id []string, opts CompactOptions) (CompactResult, error) {
	t, err := c.OpenTable(ctx, id)
	if err != nil {
		return CompactResult{}, err
	}
	return t.Compact(ctx, opts)
}

// materializeThreshold is the share of a fragment's rows its deletion
// file must delete for Compact to rewrite it without them (Lance's
// default materialize_deletions_threshold).
const materializeThreshold = 0.1

// materialize reports whether f deletes enough rows to be rewritten
// without them.
func materialize(f Fragment) bool {
	return f.HasDeletions() && float64(f.DeletedRows) >= materializeThreshold*float64(f.PhysicalRows())
}

// compactionRuns cuts the small fragments of frags into runs to merge:
// adjacent small fragments, greedily, each run within the targets; runs
// of one fragment are left alone, unless it has a deletion file that
// deletes at least materializeThreshold of its rows (materialize): it is
// rewritten with its live rows only. Such a fragment joins a run as a
// small one does.
func compactionRuns(frags []Fragment, o CompactOptions) [][]Fragment {
	var runs [][]Fragment
	var cur []Fragment
	var rows, bytes int64
	flush := func() {
		if len(cur) >= 2 || len(cur) == 1 && materialize(cur[0]) {
			runs = append(runs, cur)
		}
		cur, rows, bytes = nil, 0, 0
	}
	for _, f := range frags {
		size := f.DataBytes()
		small := f.Rows*2 < o.TargetRows && size*2 < o.TargetBytes
		if !small && !materialize(f) {
			flush()
			continue
		}
		if rows+f.Rows > o.TargetRows || bytes+size > o.TargetBytes {
			flush()
		}
		cur = append(cur, f)
		rows += f.Rows
		bytes += size
	}
	flush()
	return runs
}

// mergeRun writes the rows of run, in order, as one new data file.
func (t *Table) mergeRun(ctx context.Context, m *Manifest, schema *arrow.Schema, run []Fragment) (Fragment, error) {
	scan, err := t.Scan(ctx, m, ScanOptions{Fragments: run})
	if err != nil {
		return Fragment{}, err
	}
	defer scan.Release()
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for scan.Next() {
		r, err := records.Conform(ctx, scan.RecordBatch(), schema, t.c.opts.Mem)
		if err != nil {
			return Fragment{}, err
		}
		recs = append(recs, r)
	}
	if err := scan.Err(); err != nil {
		return Fragment{}, err
	}
	f, err := t.WriteFile(ctx, schema, recs)
	if err != nil {
		return Fragment{}, err
	}
	var want int64
	for _, r := range run {
		want += r.Rows
	}
	if f.Rows != want {
		return Fragment{}, &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("compaction read %d rows from fragments holding %d", f.Rows, want)}
	}
	return f, nil
}

var errNothingToCompact = errors.New("every run to compact was changed by a concurrent commit")

// compactOp swaps each run still present in base, whole and in order,
// for its merged fragment; runs a concurrent commit changed are skipped
// (applied[i] false). It conflicts when the schema changed, and answers
// errNothingToCompact when no run is left. Properties with a rewriter
// installed on c (Hooks.Rewriters) are rewritten with the merges.
func (c *Catalog) compactOp(schema string, runs [][]Fragment, written []Fragment, applied *[]bool) Op {
	return func(base *Manifest) (*Manifest, error) {
		*applied = make([]bool, len(runs))
		if base.Schema != schema {
			return nil, &errs.Error{Code: errs.CodeConcurrentModification, Message: "compact: the table schema changed in a concurrent commit"}
		}
		pos := make(map[uint32]int, len(base.Fragments))
		for i, f := range base.Fragments {
			pos[f.ID] = i
		}
		replace := map[int]int{} // base index of a run's first fragment → run
		skip := map[int]bool{}   // base indices of the other fragments of applied runs
		for r, run := range runs {
			start, ok := pos[run[0].ID]
			for k, f := range run {
				if !ok || start+k >= len(base.Fragments) || base.Fragments[start+k] != f {
					ok = false
					break
				}
			}
			if !ok {
				continue
			}
			(*applied)[r] = true
			replace[start] = r
			for k := 1; k < len(run); k++ {
				skip[start+k] = true
			}
		}
		if len(replace) == 0 {
			return nil, errNothingToCompact
		}
		var merges []Merge
		out := make([]Fragment, 0, len(base.Fragments))
		for i, f := range base.Fragments {
			if skip[i] {
				continue
			}
			r, ok := replace[i]
			if !ok {
				out = append(out, f)
				continue
			}
			nf := written[r]
			nf.ID = base.NextFragmentID
			base.NextFragmentID++
			out = append(out, nf)
			mg := Merge{To: nf.ID}
			for _, old := range runs[r] {
				mg.From = append(mg.From, old.ID)
			}
			merges = append(merges, mg)
		}
		for key, prop := range base.Properties {
			fn, ok := c.propertyRewriter(key)
			if !ok {
				continue
			}
			np, err := fn(prop, merges)
			if err != nil {
				return nil, fmt.Errorf("compact: property %s: %w", key, err)
			}
			base.Properties[key] = np
		}
		raw, err := json.Marshal(merges)
		if err != nil {
			return nil, err
		}
		base.Operation = OperationCompact
		base.Fragments = out
		if err := pruneRowIDs(base); err != nil {
			return nil, err
		}
		base.Metadata = map[string]string{MetaCompaction: string(raw)}
		return base, nil
	}
}
