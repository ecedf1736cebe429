package httpapi

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// Virtual and computed columns (spec add_columns, backfill_column): the
// engine adds them; a backfill is a job on the same orchestrator as a
// refresh. Both take the spec's branch: the columns are added to, and
// filled on, that branch only.

type addColumnsRequest struct {
	ID         []string                 `json:"id"`
	Branch     *string                  `json:"branch"`
	NewColumns []refresh.AddColumnEntry `json:"new_columns"`
}

// columnsBranch is the branch a request names ("" for main); a bad name
// is a 400 naming the field. The engine opens the branch (an unknown one
// is a 404).
func columnsBranch(b *string) (string, error) {
	if b == nil || *b == "" || *b == table.MainBranch {
		return "", nil
	}
	if err := table.ValidateBranch(*b); err != nil {
		return "", err
	}
	return *b, nil
}

// addColumns adds the columns, then submits a backfill for each virtual
// column with auto_backfill. It answers the new version and those jobs.
func (v *ViewRoutes) addColumns(c *gin.Context) error {
	ctx := c.Request.Context()
	var req addColumnsRequest
	id, err := pathAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	branch, err := columnsBranch(req.Branch)
	if err != nil {
		return err
	}
	if req.NewColumns == nil {
		return badInput("new_columns: required")
	}
	auto := false
	for _, e := range req.NewColumns {
		auto = auto || e.VirtualColumn != nil && e.VirtualColumn.AutoBackfill != nil && *e.VirtualColumn.AutoBackfill
	}
	if auto {
		// A full backlog refuses the request before the columns exist.
		if err := v.Jobs.Admit(ctx, ""); err != nil {
			retryAfter(c, err)
			return err
		}
	}
	m, added, err := v.Engine.AddColumnsOn(ctx, id, branch, req.NewColumns)
	if err != nil {
		return err
	}
	resp := gin.H{"version": m.Version}
	var jobIDs []string
	for _, b := range added {
		if !b.AutoBackfill {
			continue
		}
		job, err := v.Jobs.Submit(ctx, id, refresh.Options{Backfill: &refresh.BackfillOptions{Column: b.Name, Branch: branch}})
		if err != nil {
			// The columns exist; say which backfill did not start.
			resp["backfill_error"] = b.Name + ": " + err.Error()
			break
		}
		jobIDs = append(jobIDs, job.ID)
	}
	if jobIDs != nil {
		resp["job_ids"] = jobIDs
	}
	c.JSON(http.StatusOK, resp)
	return nil
}

type backfillRequest struct {
	ID                      []string `json:"id"`
	Branch                  *string  `json:"branch"`
	Column                  *string  `json:"column"`
	Where                   *string  `json:"where"`
	Concurrency             *int64   `json:"concurrency"`
	IntraApplierConcurrency *int64   `json:"intra_applier_concurrency"`
	MinCheckpointSize       *int64   `json:"min_checkpoint_size"`
	MaxCheckpointSize       *int64   `json:"max_checkpoint_size"`
	FlushInterval           *float64 `json:"batch_checkpoint_flush_interval_seconds"`
	ReadVersion             *int64   `json:"read_version"`
	TaskSize                *int64   `json:"task_size"`
	NumFrags                *int64   `json:"num_frags"`
	CheckpointSize          *int64   `json:"checkpoint_size"`
	CommitGranularity       *int64   `json:"commit_granularity"`
	Cluster                 *string  `json:"cluster"`
	Manifest                *string  `json:"manifest"`
}

func (r *backfillRequest) options() (refresh.Options, error) {
	var o refresh.Options
	switch {
	case r.Column == nil || strings.TrimSpace(*r.Column) == "":
		return o, badInput("column: required")
	case r.MinCheckpointSize != nil, r.MaxCheckpointSize != nil:
		return o, badInput("min_checkpoint_size, max_checkpoint_size: not supported; use checkpoint_size")
	case r.FlushInterval != nil:
		return o, badInput("batch_checkpoint_flush_interval_seconds: not supported; checkpoints are written as they fill (checkpoint_size)")
	case r.NumFrags != nil:
		return o, badInput("num_frags: not supported; use where or task_size")
	}
	branch, err := columnsBranch(r.Branch)
	if err != nil {
		return o, err
	}
	bf := &refresh.BackfillOptions{Column: *r.Column, Branch: branch}
	if r.Where != nil {
		bf.Where = *r.Where
	}
	if err := setPositiveInts([]intOption{
		{"concurrency", r.Concurrency, &o.Concurrency},
		{"intra_applier_concurrency", r.IntraApplierConcurrency, &o.IntraApplierConcurrency},
		{"task_size", r.TaskSize, &o.SourceTaskSize},
		{"checkpoint_size", r.CheckpointSize, &bf.CheckpointSize},
		{"commit_granularity", r.CommitGranularity, &bf.CommitGranularity},
	}); err != nil {
		return o, err
	}
	if r.ReadVersion != nil {
		if *r.ReadVersion <= 0 {
			return o, badInput("read_version: must be a positive version (got %d)", *r.ReadVersion)
		}
		bf.ReadVersion = uint64(*r.ReadVersion)
	}
	if r.Cluster != nil {
		if strings.TrimSpace(*r.Cluster) == "" {
			return o, badInput("cluster: empty")
		}
		o.Cluster = *r.Cluster
	}
	if r.Manifest != nil {
		o.Manifest = *r.Manifest
	}
	o.Backfill = bf
	return o, nil
}

func (v *ViewRoutes) backfillColumn(c *gin.Context) error {
	var req backfillRequest
	id, err := pathAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	opts, err := req.options()
	if err != nil {
		return err
	}
	job, err := v.Jobs.Submit(c.Request.Context(), id, opts)
	if err != nil {
		retryAfter(c, err)
		return err
	}
	c.JSON(http.StatusAccepted, gin.H{"job_id": job.ID})
	return nil
}
