package refresh

import (
	"context"
	"fmt"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// Refreshing from a branch of the source (Options.SrcBranch): the plan,
// its items and its commit read that branch's versions, and the watermark
// records the branch. Branches number their fragments on from where they
// forked, so the same fragment id on two branches may hold different
// rows: a refresh from another branch than the last one is a full
// recompute, never an incremental diff across lines (Plan says why in
// Reason); so is one from a branch deleted and created again under the
// same name (BranchInfo.ID). Freshness is then measured on the branch last refreshed from.

// sourceBranch moves src, the source of view v, onto branch ("": main).
// An unknown branch is CodeTableBranchNotFound naming src_branch.
func sourceBranch(ctx context.Context, src *table.Table, v *View, branch string) (*table.Table, error) {
	b, err := src.OnBranch(ctx, branch)
	if errs.CodeOf(err) == errs.CodeTableBranchNotFound {
		return nil, errs.Errorf(errs.CodeTableBranchNotFound, "src_branch: source table %s of view %s has no branch %q", table.JoinID(v.Def.Source), table.JoinID(v.ID), branch)
	}
	if errs.CodeOf(err) == errs.CodeInvalidInput {
		return nil, invalid("src_branch: %v", err)
	}
	return b, err
}

// sourceBranchID is the identity of the branch src is on ("" for main).
func sourceBranchID(ctx context.Context, src *table.Table) (string, error) {
	if src.Branch() == "" {
		return "", nil
	}
	bi, err := src.BranchInfo(ctx, src.Branch())
	return bi.ID, err
}

// sameBranch fails when the source branch of plan was deleted and created
// again since the plan was made: its versions are another line's.
func sameBranch(ctx context.Context, src *table.Table, plan *Plan) error {
	id, err := sourceBranchID(ctx, src)
	if err != nil {
		return err
	}
	if id != plan.SourceBranchID {
		return errs.Errorf(errs.CodeInvalidTableState, "src_branch: branch %q of the source of view %s was deleted and created again since the refresh was planned; refresh again", src.Branch(), table.JoinID(plan.View))
	}
	return nil
}

// branchChange is the Reason of a full refresh after a change of branch.
func branchChange(from, to string) string {
	name := func(b string) string {
		if b == "" {
			return table.MainBranch
		}
		return b
	}
	if from == to {
		return fmt.Sprintf("the source branch %s was deleted and created again", name(to))
	}
	return fmt.Sprintf("the source branch changed (%s to %s)", name(from), name(to))
}

// onBranchText qualifies a message about a source version with its branch.
func onBranchText(branch string) string {
	if branch == "" {
		return ""
	}
	return fmt.Sprintf(" on branch %q", branch)
}
