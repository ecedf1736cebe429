package table

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table/internal/records"
)

// MergeOptions say what MergeInsert does with each row (the spec's
// MergeInsertIntoTable). At least one of the three actions must be on; a
// filter is refused without its action.
type MergeOptions struct {
	// On names the key columns: a target row and an input row match when
	// every key column is equal and not null (null keys never match).
	On []string
	// WhenMatchedUpdateAll replaces each matched target row with its input
	// row; WhenMatchedUpdateAllFilt, when set, only where it holds. The
	// filter is a SQL expression over target.<column> and source.<column>.
	WhenMatchedUpdateAll     bool
	WhenMatchedUpdateAllFilt string
	// WhenNotMatchedInsertAll appends the input rows that match no target
	// row (those with a null key among them).
	WhenNotMatchedInsertAll bool
	// WhenNotMatchedBySourceDelete deletes the target rows no input row
	// matches; WhenNotMatchedBySourceDeleteFilt, when set, only where it
	// holds (a SQL expression over the target's columns).
	WhenNotMatchedBySourceDelete     bool
	WhenNotMatchedBySourceDeleteFilt string
	// UseIndex matches through a BTREE or BITMAP index on a one-column
	// key where one covers a fragment (see KeyIndex) instead of reading
	// the fragment's key column; fragments it does not cover, and merges
	// it cannot serve (several key columns, delete-by-source), scan.
	UseIndex bool
}

// MergeResult counts what a merge did.
type MergeResult struct {
	Updated, Inserted, Deleted int64
	// FragmentsRewritten is how many fragments the committed version
	// changed (a new deletion file, a rewritten copy in its place, or
	// dropped); FragmentsAdded how many new fragments hold the updated
	// and inserted rows.
	FragmentsRewritten, FragmentsAdded int
	// Attempts counts the merges computed: more than one when a
	// concurrent commit changed rows the merge had to see again.
	Attempts int
	// FragmentsIndexed is how many fragments the last attempt matched
	// through a key index (UseIndex) rather than by reading their keys.
	FragmentsIndexed int
}

// maxMergeAttempts bounds how often a merge is computed again after a
// concurrent commit invalidated what it read.
const maxMergeAttempts = 6

// mergeInput is the input of a merge, conformed to the table's schema and
// indexed by key.
type mergeInput struct {
	rec  arrow.RecordBatch // every input row, one batch
	keys []int             // key column indices (table and input agree)
	// index maps an encoded non-null key to its input row.
	index map[string]int32
}

func (in *mergeInput) release() {
	if in.rec != nil {
		in.rec.Release()
	}
}

// fragMatch is what the match pass found in one fragment.
type fragMatch struct {
	off []uint32 // matched target offsets, ascending
	src []int32  // the input row of each
	del []uint32 // offsets to delete (not matched by the input), ascending
	// indexed: found through a KeyIndex, not by reading the keys.
	indexed bool
}

// MergeInsert upserts the rows of rdr by the key columns o.On (the spec's
// merge_insert) and commits one new version, as Lance's merge_insert
// does: a fragment holding updated or deleted rows gets a deletion file
// for them (deletion.go; same id and data file, dropped when no row is
// left), and the updated rows' new values are appended with the inserted
// rows as new fragments, so updated rows move to the end of table order.
// A fragment that cannot take a deletion file (a Parquet file) is
// rewritten in its place instead (a new id). Matching reads only the key
// columns (and the delete filter's, and with an update filter the
// matched fragments' rows). Nothing to change commits nothing and answers
// the current version.
//
// The input must have the table's columns (trailing nullable ones may be
// left out, as for Insert). Errors: a key column missing from the table
// or the input, two input rows with one key, a bad filter, no action:
// errs.CodeInvalidInput naming the parameter. A concurrent commit that changed
// a fragment the merge rewrites, or added rows it would have to match, has
// the merge computed again on the new version (up to maxMergeAttempts,
// then errs.CodeConcurrentModification); concurrent appends that hold none of
// the input's keys are rebased on.
func (t *Table) MergeInsert(ctx context.Context, rdr array.RecordReader, o MergeOptions) (*Manifest, MergeResult, error) {
	ctx, span := tracer.Start(ctx, "table.merge_insert", trace.WithAttributes(attribute.String("mvq.table", JoinID(t.id))))
	defer span.End()
	ctx = compute.WithAllocator(ctx, t.c.opts.Mem)
	if err := checkMergeOptions(o); err != nil {
		return nil, MergeResult{}, err
	}
	m, err := t.Load(ctx, 0)
	if err != nil {
		return nil, MergeResult{}, err
	}
	if err := t.c.guardWrite(t.id, m, "merge_insert"); err != nil {
		return nil, MergeResult{}, err
	}
	schema, err := m.ArrowSchema()
	if err != nil {
		return nil, MergeResult{}, err
	}
	in, err := t.c.mergeInput(ctx, t.id, schema, rdr, o)
	if err != nil {
		return nil, MergeResult{}, err
	}
	defer in.release()
	if err := t.c.checkMergeFilters(ctx, schema, o); err != nil {
		return nil, MergeResult{}, err
	}
	var res MergeResult
	for {
		res.Attempts++
		nm, r, err := t.mergeOnce(ctx, m, in, o)
		if err == nil {
			r.Attempts = res.Attempts
			span.SetAttributes(attribute.Int64("mvq.updated", r.Updated), attribute.Int64("mvq.inserted", r.Inserted), attribute.Int64("mvq.deleted", r.Deleted))
			return nm, r, nil
		}
		if !errors.Is(err, errMergeStale) && !IsConflict(err) || res.Attempts >= maxMergeAttempts {
			if errors.Is(err, errMergeStale) {
				err = &errs.Error{Code: errs.CodeConcurrentModification, Message: fmt.Sprintf("merge_insert %s: concurrent commits kept changing the rows to merge (%d attempts); retry", JoinID(t.id), res.Attempts)}
			}
			return nil, res, err
		}
		if m, err = t.Load(ctx, 0); err != nil {
			return nil, res, err
		}
		if err := t.c.guardWrite(t.id, m, "merge_insert"); err != nil {
			return nil, res, err
		}
		if s, err := m.ArrowSchema(); err != nil {
			return nil, res, err
		} else if !s.Equal(in.rec.Schema()) {
			return nil, res, &errs.Error{Code: errs.CodeConcurrentModification, Message: "merge_insert: the table schema changed in a concurrent commit; retry"}
		}
	}
}

// MergeCreate answers a merge_insert into table id declared without data
// (DeclareTable): it creates the table with the input's schema at version
// 1, holding the input rows when o.WhenNotMatchedInsertAll (there is no
// row to match), none otherwise. The options and input are checked as
// MergeInsert checks them.
func (c *Catalog) MergeCreate(ctx context.Context, id []string, rdr array.RecordReader, o MergeOptions) (*Table, *Manifest, MergeResult, error) {
	ctx = compute.WithAllocator(ctx, c.opts.Mem)
	if err := checkMergeOptions(o); err != nil {
		return nil, nil, MergeResult{}, err
	}
	schema := rdr.Schema()
	in, err := c.mergeInput(ctx, id, schema, rdr, o)
	if err != nil {
		return nil, nil, MergeResult{}, err
	}
	defer in.release()
	if err := c.checkMergeFilters(ctx, schema, o); err != nil {
		return nil, nil, MergeResult{}, err
	}
	res := MergeResult{Attempts: 1}
	var recs []arrow.RecordBatch
	if o.WhenNotMatchedInsertAll {
		recs, res.Inserted = []arrow.RecordBatch{in.rec}, in.rec.NumRows()
	}
	rows, _ := array.NewRecordReader(schema, recs)
	defer rows.Release()
	t, m, err := c.CreateDeclared(ctx, id, func() (*Table, *Manifest, error) {
		return c.CreateTable(ctx, id, schema, rows, "", nil)
	})
	if err != nil {
		return nil, nil, MergeResult{}, err
	}
	res.FragmentsAdded = len(m.Fragments)
	return t, m, res, nil
}

// mergeHookKey keys a func() in a merge's context (tests only) that runs
// between computing a merge and committing it: a concurrent commit can be
// made there.
type mergeHookKey struct{}

// errMergeStale says a concurrent commit added rows the merge has not
// matched against: the merge must be computed again.
var errMergeStale = errors.New("merge_insert: concurrent commit added rows to match")

func checkMergeOptions(o MergeOptions) error {
	if len(o.On) == 0 {
		return errs.Errorf(errs.CodeInvalidInput, "on: name at least one key column")
	}
	seen := map[string]bool{}
	for _, k := range o.On {
		if k == "" {
			return errs.Errorf(errs.CodeInvalidInput, "on: a key column name is empty")
		}
		if seen[k] {
			return errs.Errorf(errs.CodeInvalidInput, "on: key column %q named twice", k)
		}
		seen[k] = true
	}
	if o.WhenMatchedUpdateAllFilt != "" && !o.WhenMatchedUpdateAll {
		return errs.Errorf(errs.CodeInvalidInput, "when_matched_update_all_filt: set only with when_matched_update_all=true")
	}
	if o.WhenNotMatchedBySourceDeleteFilt != "" && !o.WhenNotMatchedBySourceDelete {
		return errs.Errorf(errs.CodeInvalidInput, "when_not_matched_by_source_delete_filt: set only with when_not_matched_by_source_delete=true")
	}
	if !o.WhenMatchedUpdateAll && !o.WhenNotMatchedInsertAll && !o.WhenNotMatchedBySourceDelete {
		return errs.Errorf(errs.CodeInvalidInput, "merge_insert does nothing: set when_matched_update_all, when_not_matched_insert_all or when_not_matched_by_source_delete")
	}
	return nil
}

// keyColumn resolves a key name of on against schema: the exact field
// name, or one backtick-quoted path segment (`a.b` names the field "a.b";
// doubled backticks are one). Nested paths are not keys here.
func keyColumn(schema *arrow.Schema, name string) (int, bool) {
	if i := schema.FieldIndices(name); len(i) > 0 {
		return i[0], true
	}
	if len(name) >= 2 && name[0] == '`' && name[len(name)-1] == '`' {
		if i := schema.FieldIndices(strings.ReplaceAll(name[1:len(name)-1], "``", "`")); len(i) > 0 {
			return i[0], true
		}
	}
	return 0, false
}

// mergeInput checks the key columns, conforms rdr's rows to the table's
// schema, collects them into one batch and indexes them by key.
func (c *Catalog) mergeInput(ctx context.Context, id []string, schema *arrow.Schema, rdr array.RecordReader, o MergeOptions) (*mergeInput, error) {
	in := &mergeInput{}
	for _, k := range o.On {
		i, ok := keyColumn(schema, k)
		if !ok {
			return nil, errs.Errorf(errs.CodeInvalidInput, "on: key column %q not found in table %s (columns: %s)", k, JoinID(id), records.FieldNames(schema))
		}
		if _, ok := keyColumn(rdr.Schema(), schema.Field(i).Name); !ok {
			return nil, errs.Errorf(errs.CodeInvalidInput, "on: key column %q is missing from the input (columns: %s)", k, records.FieldNames(rdr.Schema()))
		}
		if !records.KeyType(schema.Field(i).Type) {
			return nil, errs.Errorf(errs.CodeInvalidInput, "on: key column %q has type %s, which cannot be a key", k, schema.Field(i).Type)
		}
		in.keys = append(in.keys, i)
	}
	if n := rdr.Schema().NumFields(); n < schema.NumFields() && n > 0 && records.NullableFrom(schema, n) {
		if err := records.CheckSameFields(rdr.Schema(), arrow.NewSchema(schema.Fields()[:n], nil)); err != nil {
			return nil, err
		}
		rdr = records.PadReader(rdr, schema, c.opts.Mem)
		defer rdr.Release()
	} else if err := records.CheckSameFields(rdr.Schema(), schema); err != nil {
		return nil, err
	}
	recs, err := duck.Collect(records.ConformReader(ctx, rdr, schema, c.opts.Mem))
	if err != nil {
		return nil, err
	}
	in.rec, err = records.Concat(c.opts.Mem, schema, recs)
	for _, r := range recs {
		r.Release()
	}
	if err != nil {
		return nil, err
	}
	n := int(in.rec.NumRows())
	if n > math.MaxInt32 {
		in.release()
		return nil, errs.Errorf(errs.CodeInvalidInput, "body: more than %d rows", math.MaxInt32)
	}
	in.index = make(map[string]int32, n)
	cols := records.KeyCols(in.rec, in.keys)
	var buf []byte
	for i := range n {
		var ok bool
		if buf, ok = records.AppendKey(buf[:0], cols, i); !ok {
			continue
		}
		if j, dup := in.index[string(buf)]; dup {
			in.release()
			return nil, errs.Errorf(errs.CodeInvalidInput, "body: rows %d and %d have the same key (%s); merge_insert needs each key at most once", j, i, records.KeyString(schema, in.keys, cols, i))
		}
		in.index[string(buf)] = int32(i)
	}
	return in, nil
}

// checkMergeFilters checks the filters' SQL and binds each over an empty
// input of its shape.
func (c *Catalog) checkMergeFilters(ctx context.Context, schema *arrow.Schema, o MergeOptions) error {
	if f := o.WhenMatchedUpdateAllFilt; f != "" {
		if err := c.checkExpr(ctx, "when_matched_update_all_filt", f); err != nil {
			return err
		}
		ps := pairSchema(schema)
		if err := c.bindInputs(ctx, "when_matched_update_all_filt", map[string]array.RecordReader{pairsInput: emptyReader(ps)}, updateFilterSQL(f)); err != nil {
			return err
		}
	}
	if f := o.WhenNotMatchedBySourceDeleteFilt; f != "" {
		if err := c.checkExpr(ctx, "when_not_matched_by_source_delete_filt", f); err != nil {
			return err
		}
		ts, _, _ := ProjectSchema(schema, nil, true)
		if err := c.bindInputs(ctx, "when_not_matched_by_source_delete_filt", map[string]array.RecordReader{targetInput: emptyReader(ts)}, deleteFilterSQL(f)); err != nil {
			return err
		}
	}
	return nil
}

// bindInputs runs query over empty inputs so bad SQL is a 400 even when no
// row would reach it.
func (c *Catalog) bindInputs(ctx context.Context, what string, inputs map[string]array.RecordReader, query string) error {
	rdr, err := c.sql.Query(ctx, inputs, query)
	if err != nil {
		return sqlErr(what, err)
	}
	recs, err := duck.Collect(rdr)
	for _, r := range recs {
		r.Release()
	}
	if err != nil {
		return sqlErr(what, err)
	}
	return nil
}

// The inputs the filters see: the update filter sees one row per matched
// pair, with the target and source rows as structs (so target.price and
// source.price name their fields) and the target offset; the delete
// filter sees the target's rows (target.price or price).
const (
	pairsInput  = "mvq_merge_pairs"
	targetInput = "target"
	pairOffset  = "_mvq_offset"
)

func pairSchema(schema *arrow.Schema) *arrow.Schema {
	st := arrow.StructOf(schema.Fields()...)
	return arrow.NewSchema([]arrow.Field{
		{Name: "target", Type: st},
		{Name: "source", Type: st},
		{Name: pairOffset, Type: arrow.PrimitiveTypes.Uint32},
	}, nil)
}

func updateFilterSQL(filt string) string {
	return fmt.Sprintf("SELECT %s FROM %s WHERE COALESCE((%s), false)", pairOffset, pairsInput, filt)
}

func deleteFilterSQL(filt string) string {
	return fmt.Sprintf("SELECT %s FROM %s WHERE COALESCE((%s), false)", RowAddrColumn, targetInput, filt)
}

// mergeOnce computes the merge against version m and commits it.
func (t *Table) mergeOnce(ctx context.Context, m *Manifest, in *mergeInput, o MergeOptions) (*Manifest, MergeResult, error) {
	var res MergeResult
	matches, err := t.mergeMatch(ctx, m, in, o, m.Fragments)
	if err != nil {
		return nil, res, err
	}
	// The fragments to rewrite and the input rows that matched.
	matched := make([]bool, in.rec.NumRows())
	var touched []int
	for i, fm := range matches {
		if fm.indexed {
			res.FragmentsIndexed++
		}
		for _, s := range fm.src {
			matched[s] = true
		}
		if (o.WhenMatchedUpdateAll && len(fm.off) > 0) || len(fm.del) > 0 {
			touched = append(touched, i)
		}
	}
	var written []Fragment // data files of this attempt, removed if it fails
	var delFiles []string  // deletion files of this attempt, likewise
	ok := false
	defer func() {
		if !ok {
			for _, f := range written {
				_ = t.c.wh.Delete(context.WithoutCancel(ctx), t.key+f.Path)
			}
			for _, k := range delFiles {
				_ = t.c.wh.Delete(context.WithoutCancel(ctx), k)
			}
		}
	}()

	type rewritten struct {
		frag             Fragment
		changed, dropped bool
		updated, deleted int64
		// inPlace: frag is the fragment with a new deletion file
		// (canDelete); the updated rows are the input rows src, written
		// with the inserted ones.
		inPlace bool
		src     []int32
	}
	outs := make([]rewritten, len(touched))
	frags := make([]Fragment, len(touched))
	for i, fi := range touched {
		frags[i] = m.Fragments[fi]
	}
	schema := in.rec.Schema()
	err = forEachFragment(ctx, frags, func(ctx context.Context, i int, f Fragment) error {
		fm := matches[touched[i]]
		if canDelete(m, f) {
			// A deletion file for the matched and deleted rows; the
			// updated rows are appended with the inserted ones.
			off, src := fm.off, fm.src
			if !o.WhenMatchedUpdateAll {
				off, src = nil, nil
			} else if o.WhenMatchedUpdateAllFilt != "" && len(off) > 0 {
				rec, err := t.readWhole(ctx, m, f, schema)
				if err != nil {
					return err
				}
				off, src, err = t.filterPairs(ctx, rec, in.rec, off, src, o.WhenMatchedUpdateAllFilt)
				rec.Release()
				if err != nil {
					return err
				}
			}
			if len(off) == 0 && len(fm.del) == 0 {
				return nil
			}
			live := append(slices.Clone(off), fm.del...)
			slices.Sort(live)
			nf, gone, err := t.withDeletions(ctx, m, f, slices.Compact(live))
			if err != nil {
				return err
			}
			outs[i] = rewritten{frag: nf, changed: true, dropped: gone, inPlace: !gone, src: src,
				updated: int64(len(off)), deleted: int64(len(fm.del))}
			return nil
		}
		rec, err := t.readWhole(ctx, m, f, schema)
		if err != nil {
			return err
		}
		defer rec.Release()
		off, src := fm.off, fm.src
		if !o.WhenMatchedUpdateAll {
			off, src = nil, nil
		} else if o.WhenMatchedUpdateAllFilt != "" && len(off) > 0 {
			if off, src, err = t.filterPairs(ctx, rec, in.rec, off, src, o.WhenMatchedUpdateAllFilt); err != nil {
				return err
			}
		}
		if len(off) == 0 && len(fm.del) == 0 {
			return nil // every match filtered out: the fragment stays
		}
		out, err := records.MergeFragment(ctx, rec, in.rec, off, src, fm.del)
		if err != nil {
			return err
		}
		defer out.Release()
		r := rewritten{changed: true, updated: int64(len(off)), deleted: int64(len(fm.del))}
		if out.NumRows() == 0 {
			r.dropped = true
		} else if r.frag, err = t.WriteFile(ctx, schema, []arrow.RecordBatch{out}); err != nil {
			return err
		}
		outs[i] = r
		return nil
	})
	for _, r := range outs {
		switch {
		case r.inPlace:
			delFiles = append(delFiles, t.key+r.frag.deletionPath())
		case r.changed && !r.dropped:
			written = append(written, r.frag)
		}
	}
	if err != nil {
		return nil, res, err
	}
	var reps []Replacement
	var updIdx []int64 // input rows of updates done by a deletion file
	for i, r := range outs {
		if !r.changed {
			continue
		}
		res.Updated += r.updated
		res.Deleted += r.deleted
		rep := Replacement{Old: frags[i].ID, OldKey: frags[i].Key(), InPlace: r.inPlace}
		if !r.dropped {
			rep.New = &r.frag
		}
		for _, s := range r.src {
			updIdx = append(updIdx, int64(s))
		}
		reps = append(reps, rep)
	}
	res.FragmentsRewritten = len(reps)

	var added []Fragment
	{
		idx := updIdx
		if o.WhenNotMatchedInsertAll {
			for i, hit := range matched {
				if !hit {
					idx = append(idx, int64(i))
				}
			}
			res.Inserted = int64(len(idx) - len(updIdx))
		}
		if len(idx) > 0 {
			ins, err := records.TakeRows(ctx, in.rec, idx)
			if err != nil {
				return nil, res, err
			}
			rdr, _ := array.NewRecordReader(schema, []arrow.RecordBatch{ins})
			ins.Release()
			added, err = t.WriteFragments(ctx, schema, rdr, 0)
			rdr.Release()
			written = append(written, added...)
			if err != nil {
				return nil, res, err
			}
		}
	}
	res.FragmentsAdded = len(added)
	if len(reps) == 0 && len(added) == 0 {
		ok = true
		return m, res, nil
	}
	if hook, _ := ctx.Value(mergeHookKey{}).(func()); hook != nil {
		hook()
	}
	nm, err := t.Commit(ctx, t.mergeOp(ctx, m, in, o, reps, added))
	if err != nil {
		return nil, res, err
	}
	ok = true
	return nm, res, nil
}

// mergeOp commits a merge computed against version snap: the rewritten
// fragments in place of theirs (RewriteOp: a concurrent commit that
// removed one is a conflict) and the inserted ones appended. Fragments a
// concurrent commit added (appends, others' rewrites) are kept when none
// of their rows matches an input key and no delete-by-source applies to
// them; otherwise errMergeStale has the merge computed again.
func (t *Table) mergeOp(ctx context.Context, snap *Manifest, in *mergeInput, o MergeOptions, reps []Replacement, added []Fragment) Op {
	known := make(map[uint32]bool, len(snap.Fragments))
	for _, f := range snap.Fragments {
		known[f.ID] = true
	}
	clear := map[uint32]bool{} // new fragments found without a match
	return func(base *Manifest) (*Manifest, error) {
		if base.Schema != snap.Schema {
			return nil, &errs.Error{Code: errs.CodeConcurrentModification, Message: "merge_insert: the table schema changed in a concurrent commit; retry"}
		}
		var fresh []Fragment
		for _, f := range base.Fragments {
			if !known[f.ID] && !clear[f.ID] && f.Rows > 0 {
				fresh = append(fresh, f)
			}
		}
		if len(fresh) > 0 {
			if o.WhenNotMatchedBySourceDelete {
				return nil, errMergeStale
			}
			ms, err := t.mergeMatch(ctx, base, in, MergeOptions{On: o.On, UseIndex: o.UseIndex}, fresh)
			if err != nil {
				return nil, err
			}
			for i, fm := range ms {
				if len(fm.off) > 0 {
					return nil, errMergeStale
				}
				clear[fresh[i].ID] = true
			}
		}
		nextID := base.NextFragmentID
		next, err := RewriteOp("merge_insert", reps)(base)
		if err != nil {
			return nil, err
		}
		assignIDs(next, added)
		next.lanceOp = rewriteLanceOp("", reps, nextID, next)
		return next, nil
	}
}

// mergeMatch finds, in each of frags (of version m), the target rows the
// input matches and, with delete-by-source, the unmatched rows to delete,
// reading only the key columns and the delete filter's — or, with
// o.UseIndex, looking the input keys up in a key index where it covers
// the fragment (mergeKeyIndex).
func (t *Table) mergeMatch(ctx context.Context, m *Manifest, in *mergeInput, o MergeOptions, frags []Fragment) ([]fragMatch, error) {
	schema, err := m.ArrowSchema()
	if err != nil {
		return nil, err
	}
	var cols []string
	for _, k := range in.keys {
		cols = append(cols, schema.Field(k).Name)
	}
	nk := len(cols)
	filt := o.WhenNotMatchedBySourceDeleteFilt
	if o.WhenNotMatchedBySourceDelete && filt != "" {
		for _, c := range referencedColumns(schema, filt) {
			if !containsString(cols, c) {
				cols = append(cols, c)
			}
		}
	}
	ki, err := t.mergeKeyIndex(ctx, m, in, o)
	if err != nil {
		return nil, err
	}
	out := make([]fragMatch, len(frags))
	err = forEachFragment(ctx, frags, func(ctx context.Context, i int, f Fragment) error {
		if ki != nil {
			off, src, ok, err := ki.Match(ctx, f)
			if err != nil {
				return err
			}
			if ok {
				out[i] = fragMatch{off: off, src: src, indexed: true}
				return nil
			}
		}
		scan, err := t.Scan(ctx, m, ScanOptions{Columns: cols, Fragments: []Fragment{f}, Prefetch: 1, RowAddr: filt != ""})
		if err != nil {
			return err
		}
		recs, err := duck.Collect(scan)
		scan.Release()
		if err != nil {
			return err
		}
		defer func() {
			for _, r := range recs {
				r.Release()
			}
		}()
		var fm fragMatch
		var unmatched []uint32
		var buf []byte
		base := uint32(0)
		for _, r := range recs {
			kc := make([]arrow.Array, nk)
			for j := range nk {
				kc[j] = r.Column(j)
			}
			for row := range int(r.NumRows()) {
				var ok bool
				buf, ok = records.AppendKey(buf[:0], kc, row)
				if ok {
					if s, hit := in.index[string(buf)]; hit {
						fm.off = append(fm.off, base+uint32(row))
						fm.src = append(fm.src, s)
						continue
					}
				}
				if o.WhenNotMatchedBySourceDelete {
					unmatched = append(unmatched, base+uint32(row))
				}
			}
			base += uint32(r.NumRows())
		}
		switch {
		case len(unmatched) == 0:
		case filt == "":
			fm.del = unmatched
		default:
			hit, err := t.deleteCandidates(ctx, recs, filt)
			if err != nil {
				return err
			}
			for _, u := range unmatched {
				if hit[u] {
					fm.del = append(fm.del, u)
				}
			}
		}
		out[i] = fm
		return nil
	})
	return out, err
}

// deleteCandidates answers the offsets (within the fragment recs came
// from, recs carrying _rowaddr last) of the rows where filt holds.
func (t *Table) deleteCandidates(ctx context.Context, recs []arrow.RecordBatch, filt string) (map[uint32]bool, error) {
	for _, r := range recs {
		r.Retain()
	}
	src, err := array.NewRecordReader(recs[0].Schema(), recs)
	if err != nil {
		return nil, err
	}
	defer src.Release()
	rdr, err := t.c.sql.Query(ctx, map[string]array.RecordReader{targetInput: src}, deleteFilterSQL(filt))
	if err != nil {
		return nil, sqlErr("when_not_matched_by_source_delete_filt", err)
	}
	res, err := duck.Collect(rdr)
	if err != nil {
		return nil, sqlErr("when_not_matched_by_source_delete_filt", err)
	}
	hit := map[uint32]bool{}
	for _, r := range res {
		a := r.Column(0).(*array.Uint64)
		for i := range a.Len() {
			_, o := SplitRowAddress(a.Value(i))
			hit[o] = true
		}
		r.Release()
	}
	return hit, nil
}

// filterPairs keeps the matched pairs (target offset, input row) where
// filt holds over target.* and source.*.
func (t *Table) filterPairs(ctx context.Context, target, source arrow.RecordBatch, off []uint32, src []int32, filt string) ([]uint32, []int32, error) {
	ti := make([]int64, len(off))
	si := make([]int64, len(src))
	for i := range off {
		ti[i], si[i] = int64(off[i]), int64(src[i])
	}
	tr, err := records.TakeRows(ctx, target, ti)
	if err != nil {
		return nil, nil, err
	}
	defer tr.Release()
	sr, err := records.TakeRows(ctx, source, si)
	if err != nil {
		return nil, nil, err
	}
	defer sr.Release()
	ps := pairSchema(target.Schema())
	ta, err := array.NewStructArrayWithFields(tr.Columns(), target.Schema().Fields())
	if err != nil {
		return nil, nil, err
	}
	defer ta.Release()
	sa, err := array.NewStructArrayWithFields(sr.Columns(), target.Schema().Fields())
	if err != nil {
		return nil, nil, err
	}
	defer sa.Release()
	ob := array.NewUint32Builder(t.c.opts.Mem)
	ob.AppendValues(off, nil)
	oa := ob.NewArray()
	ob.Release()
	defer oa.Release()
	pairs := array.NewRecordBatch(ps, []arrow.Array{ta, sa, oa}, int64(len(off)))
	rdr, _ := array.NewRecordReader(ps, []arrow.RecordBatch{pairs})
	pairs.Release()
	defer rdr.Release()
	q, err := t.c.sql.Query(ctx, map[string]array.RecordReader{pairsInput: rdr}, updateFilterSQL(filt))
	if err != nil {
		return nil, nil, sqlErr("when_matched_update_all_filt", err)
	}
	res, err := duck.Collect(q)
	if err != nil {
		return nil, nil, sqlErr("when_matched_update_all_filt", err)
	}
	keep := map[uint32]bool{}
	for _, r := range res {
		a := r.Column(0).(*array.Uint32)
		for i := range a.Len() {
			keep[a.Value(i)] = true
		}
		r.Release()
	}
	var ko []uint32
	var ks []int32
	for i, o := range off {
		if keep[o] {
			ko, ks = append(ko, o), append(ks, src[i])
		}
	}
	return ko, ks, nil
}

// readWhole reads fragment f of version m whole, as one batch of schema.
func (t *Table) readWhole(ctx context.Context, m *Manifest, f Fragment, schema *arrow.Schema) (arrow.RecordBatch, error) {
	scan, err := t.Scan(ctx, m, ScanOptions{Fragments: []Fragment{f}, Prefetch: 1})
	if err != nil {
		return nil, err
	}
	recs, err := duck.Collect(scan)
	scan.Release()
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	return records.Concat(t.c.opts.Mem, schema, recs)
}

func containsString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
