package refresh

import (
	"context"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// A backfill on a branch (BackfillOptions.Branch, the spec's branch of
// backfill_column): the plan reads the branch's versions and every item
// commits to the branch; main and other branches are untouched. The plan
// records the branch's identity (Plan.SourceBranchID) so items of a
// backfill whose branch was deleted and created again under the same
// name fail (CodeConcurrentModification) instead of writing into the new one.

// backfillTable opens table id on the branch bf fills. With plan set, a
// branch that is no longer the one planned is a conflict.
func (e *Engine) backfillTable(ctx context.Context, id []string, bf *BackfillOptions, plan *Plan) (*table.Table, error) {
	t, err := e.cat.OpenTable(ctx, id)
	if err != nil || bf == nil || bf.Branch == "" {
		return t, err
	}
	b, err := t.OnBranch(ctx, bf.Branch)
	if err != nil {
		return nil, err
	}
	if plan != nil {
		bi, err := b.BranchInfo(ctx, bf.Branch)
		if err != nil {
			return nil, err
		}
		if bi.ID != plan.SourceBranchID {
			return nil, errs.Errorf(errs.CodeConcurrentModification, "branch: branch %q of %s was deleted and created again since the backfill was planned; backfill again", bf.Branch, table.JoinID(id))
		}
	}
	return b, nil
}

// AddColumnsOn is AddColumns on branch b of table id ("" or "main":
// main): the columns are added to that line's latest version only.
func (e *Engine) AddColumnsOn(ctx context.Context, id []string, b string, entries []AddColumnEntry) (*table.Manifest, []ColumnBinding, error) {
	return e.addColumns(ctx, id, b, entries)
}
