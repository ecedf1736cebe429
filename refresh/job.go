package refresh

import "context"

// Job is one job type the orchestrator runs through the Engine: a view
// refresh (viewRefresh: options.go, plan.go, expand.go, commit.go) or a
// column backfill (columnBackfill: backfill.go). The Engine chooses the
// type once from the options (jobFor) and its entry points, which check
// what every type shares (job id, item index), dispatch to it.
//
// Prepare validates opts and fills their defaults when the job is
// accepted; the other steps get opts as Prepare left them (stored with
// the job) and trust them. Plan splits the work into items, Expand
// computes one item (any number at once, in any process), Commit
// publishes the items' results, Discard removes what a job that did not
// commit left behind, but the staged output of the items in keep (their
// results are checkpoints a later job may reuse: checkpoint.go).
type Job interface {
	Prepare(ctx context.Context, id []string, opts *Options) error
	Plan(ctx context.Context, id []string, jobID string, opts Options) (*Plan, error)
	Expand(ctx context.Context, plan *Plan, index int) (ItemResult, error)
	Commit(ctx context.Context, plan *Plan, results []ItemResult) (Result, error)
	Discard(ctx context.Context, plan *Plan, keep []int) error
}

var (
	_ Job = viewRefresh{}
	_ Job = columnBackfill{}
)

// viewRefresh is the Job of a materialized view's refresh.
type viewRefresh struct{ e *Engine }

// jobFor is the job type opts run: a backfill when opts.Backfill is set,
// else a view refresh.
func (e *Engine) jobFor(opts *Options) Job {
	if opts.Backfill != nil {
		return columnBackfill{e}
	}
	return viewRefresh{e}
}

// Prepare validates opts for a job on table id and fills their defaults,
// the one place that does: the numbers every job type takes
// (fillDefaults), then what the type adds (viewRefresh.Prepare,
// columnBackfill.Prepare).
func (e *Engine) Prepare(ctx context.Context, id []string, opts *Options) error {
	if err := e.fillDefaults(opts); err != nil {
		return err
	}
	return e.jobFor(opts).Prepare(ctx, id, opts)
}

// Plan plans job jobID on table id with opts as Prepare left them (the
// orchestrator stores them with the job): Plan neither defaults nor
// bounds them again, and options no Prepare filled are CodeInvalidInput
// (checkFilled). See viewRefresh.Plan and columnBackfill.Plan. A job id
// other than letters, digits, '-', '_' and '.' is CodeInvalidInput.
func (e *Engine) Plan(ctx context.Context, id []string, jobID string, opts Options) (*Plan, error) {
	if err := checkJobID(jobID); err != nil {
		return nil, err
	}
	return e.jobFor(&opts).Plan(ctx, id, jobID, opts)
}

// Expand computes work item index of plan; see viewRefresh.Expand and
// columnBackfill.Expand. An index outside the plan, or a plan whose
// options no Prepare filled, is CodeInvalidInput.
func (e *Engine) Expand(ctx context.Context, plan *Plan, index int) (ItemResult, error) {
	if index < 0 || index >= len(plan.Items) {
		return ItemResult{}, invalid("work item %d: the plan has %d items", index, len(plan.Items))
	}
	if err := checkJobID(plan.JobID); err != nil {
		return ItemResult{}, err
	}
	if err := checkFilled(plan.Options); err != nil {
		return ItemResult{}, err
	}
	return e.jobFor(&plan.Options).Expand(ctx, plan, index)
}

// Commit publishes the results of plan's items; see viewRefresh.Commit
// and columnBackfill.Commit.
func (e *Engine) Commit(ctx context.Context, plan *Plan, results []ItemResult) (Result, error) {
	if err := checkJobID(plan.JobID); err != nil {
		return Result{}, err
	}
	return e.jobFor(&plan.Options).Commit(ctx, plan, results)
}

// Discard removes what a job that did not commit left behind, except the
// staged output of the work items in keep (checkpoints); see
// viewRefresh.Discard and columnBackfill.Discard.
func (e *Engine) Discard(ctx context.Context, plan *Plan, keep []int) error {
	if err := checkJobID(plan.JobID); err != nil {
		return err
	}
	return e.jobFor(&plan.Options).Discard(ctx, plan, keep)
}
