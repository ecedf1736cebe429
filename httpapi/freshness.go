package httpapi

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// ViewStatus is a view's freshness and lineage: what GET
// /v1/materialized_view/{id}/status answers, and "materialized_view" in
// the describe of a view.
type ViewStatus struct {
	*refresh.Freshness
	// LastJob is the view's newest job (nil: none kept).
	LastJob *JobSummary `json:"last_job"`
	// Downstream are the views that read this one.
	Downstream []string `json:"downstream"`
	// The view's refresh_every or target_lag, when it has one.
	refreshSettings
	// Suspended: no automatic refresh of any kind until a resume.
	Suspended bool `json:"suspended"`
}

// JobSummary names a job and where it stands.
type JobSummary struct {
	JobID string     `json:"job_id"`
	State jobs.State `json:"state"`
	Cause string     `json:"cause"`
}

// status builds a view's status from its freshness.
func (v *ViewRoutes) status(ctx context.Context, id []string, f *refresh.Freshness) (*ViewStatus, error) {
	st := &ViewStatus{Freshness: f, Downstream: []string{}}
	list, _, err := v.Jobs.List(ctx, jobs.ListFilter{View: id, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(list) > 0 {
		st.LastJob = &JobSummary{JobID: list[0].ID, State: list[0].State, Cause: list[0].Cause}
	}
	deps, err := v.app().Dependents(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, d := range deps {
		st.Downstream = append(st.Downstream, table.JoinID(d))
	}
	sched, err := v.Jobs.Schedule(ctx, id)
	if err != nil {
		return nil, err
	}
	st.refreshSettings = settingsOf(sched)
	st.Suspended = sched != nil && sched.Suspended
	return st, nil
}

// DescribeView is the status for a table's describe: nil when m is not a
// view's.
func (v *ViewRoutes) DescribeView(ctx context.Context, t *table.Table, m *table.Manifest) (any, error) {
	f, ok, err := v.Engine.FreshnessOf(ctx, t, m, time.Now())
	if err != nil || !ok {
		return nil, err
	}
	return v.status(ctx, t.ID(), f)
}

func (v *ViewRoutes) viewStatus(c *gin.Context) error {
	ctx := c.Request.Context()
	id, err := pathID(c)
	if err != nil {
		return err
	}
	f, err := v.Engine.Freshness(ctx, id, time.Now())
	if err != nil {
		return err
	}
	st, err := v.status(ctx, id, f)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, st)
	return nil
}

// listViews answers every view of a namespace with its status, by name,
// paged like the table list.
func (v *ViewRoutes) listViews(c *gin.Context) error {
	ctx := c.Request.Context()
	var req struct {
		Namespace *string `json:"namespace"`
		PageToken string  `json:"page_token"`
		Limit     *int64  `json:"limit"`
	}
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if req.Namespace == nil || *req.Namespace == "" {
		return badInput("namespace: required")
	}
	ns, err := table.ParseID(*req.Namespace, c.Query("delimiter"))
	if err != nil {
		return badInput("namespace: %v", err)
	}
	limit := 100
	if req.Limit != nil {
		if *req.Limit <= 0 || *req.Limit > 1000 {
			return badInput("limit: must be between 1 and 1000 (got %d)", *req.Limit)
		}
		limit = int(*req.Limit)
	}
	if v.Catalog == nil {
		return errs.Errorf(errs.CodeUnsupported, "listing views needs the catalog")
	}
	names, err := v.Catalog.ListTables(ctx, ns)
	if err != nil {
		return err
	}
	sort.Strings(names)
	// Page over view names: the token is the last name answered.
	now := time.Now()
	out := []*ViewStatus{}
	next, last := "", ""
	for _, name := range names {
		if req.PageToken != "" && name <= req.PageToken {
			continue
		}
		id := append(append([]string(nil), ns...), name)
		f, err := v.Engine.Freshness(ctx, id, now)
		switch {
		case errs.CodeOf(err) == errs.CodeInvalidInput || errs.CodeOf(err) == errs.CodeTableNotFound:
			continue // a plain table, or dropped meanwhile
		case err != nil:
			return err
		}
		if len(out) == limit {
			next = last
			break
		}
		st, err := v.status(ctx, id, f)
		if err != nil {
			return err
		}
		out = append(out, st)
		last = name
	}
	resp := gin.H{"views": out}
	if next != "" {
		resp["page_token"] = next
	}
	c.JSON(http.StatusOK, resp)
	return nil
}
