package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/jobs"
)

// How a view refreshes by itself, besides auto_refresh (mvq extensions of
// the view create request):
//
//   - refresh_every refreshes it on a schedule, with cause "schedule",
//     even when nothing announces a change of its source;
//   - target_lag keeps it at most that far behind its source in time: the
//     first change it has not seen sets a deadline, and one refresh (cause
//     "target_lag") covers every change up to it; an unchanged source
//     causes none (jobs/lag.go).
//
// A view has at most one of them; target_lag and auto_refresh (a refresh
// on every change) together are a 400. Both are set at create and
// changed with
//
//	POST /v1/materialized_view/{id}/refresh_settings {"refresh_every": "15m"}
//	POST /v1/materialized_view/{id}/refresh_settings {"target_lag": "5m"}
//
// ("" stops it; setting one stops the other), and every automatic refresh
// of a view stops and starts again with
//
//	POST /v1/materialized_view/{id}/suspend {}
//	POST /v1/materialized_view/{id}/resume {}
//
// (a resumed view behind its source gets one catch-up refresh, cause
// "resume"). All of it is kept in Redis with the dependency registry
// (jobs/schedule.go, jobs/lag.go) and fired by the workers' schedulers,
// once in the pool.

// refreshEvery reads a request's refresh_every: nil is no schedule (0);
// "" is none too when clear allows it; anything else must be a duration
// jobs.ParseRefreshEvery accepts, or a 400 naming the field.
func refreshEvery(s *string, clear bool) (time.Duration, error) {
	if s == nil || (clear && *s == "") {
		return 0, nil
	}
	d, err := jobs.ParseRefreshEvery(*s)
	if err != nil {
		return 0, badInput("refresh_every: %v", err)
	}
	return d, nil
}

// targetLag reads a request's target_lag like refreshEvery reads
// refresh_every.
func targetLag(s *string, clear bool) (time.Duration, error) {
	if s == nil || (clear && *s == "") {
		return 0, nil
	}
	d, err := jobs.ParseTargetLag(*s)
	if err != nil {
		return 0, badInput("target_lag: %v", err)
	}
	return d, nil
}

// checkLagWith refuses a target_lag together with auto_refresh or
// refresh_every (lag > 0 only).
func checkLagWith(lag, every time.Duration, auto bool) error {
	switch {
	case lag > 0 && auto:
		return badInput("target_lag: not with auto_refresh, which refreshes on every change of the source; a view has one or the other")
	case lag > 0 && every > 0:
		return badInput("target_lag: not with refresh_every; a view has one or the other")
	}
	return nil
}

// refreshSettings is a view's schedule as the API shows it.
type refreshSettings struct {
	RefreshEvery string `json:"refresh_every,omitempty"`
	TargetLag    string `json:"target_lag,omitempty"`
	// NextRefreshAt is the next scheduled refresh: one period on, or the
	// deadline a change the view has not seen set for its target lag.
	NextRefreshAt *time.Time `json:"next_refresh_at,omitempty"`
}

func settingsOf(s *jobs.Schedule) refreshSettings {
	if s == nil {
		return refreshSettings{}
	}
	var out refreshSettings
	if s.Every > 0 {
		out.RefreshEvery = s.Every.String()
	}
	if s.TargetLag > 0 {
		out.TargetLag = s.TargetLag.String()
	}
	if !s.Next.IsZero() {
		next := s.Next.UTC()
		out.NextRefreshAt = &next
	}
	return out
}

// updateRefreshSettings sets or stops a view's refresh_every or
// target_lag; a new period starts from now. It answers the settings.
func (v *ViewRoutes) updateRefreshSettings(c *gin.Context) error {
	ctx := c.Request.Context()
	var req struct {
		ID           []string `json:"id"`
		RefreshEvery *string  `json:"refresh_every"`
		TargetLag    *string  `json:"target_lag"`
	}
	id, err := pathAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	if req.RefreshEvery == nil && req.TargetLag == nil {
		return badInput(`refresh_every: required, or target_lag (a duration such as "15m", or "" to stop it)`)
	}
	every, err := refreshEvery(req.RefreshEvery, true)
	if err != nil {
		return err
	}
	lag, err := targetLag(req.TargetLag, true)
	if err != nil {
		return err
	}
	vw, err := v.Engine.View(ctx, id)
	if err != nil {
		return err
	}
	if err := checkLagWith(lag, every, vw.Def.AutoRefresh); err != nil {
		return err
	}
	if err := v.registered(ctx, id, func() error {
		// Clearing first, so a request that stops one and sets the other
		// ends with the one set.
		if req.RefreshEvery != nil && every == 0 {
			if err := v.Jobs.SetSchedule(ctx, id, 0); err != nil {
				return err
			}
		}
		if req.TargetLag != nil && lag == 0 {
			if err := v.Jobs.SetTargetLag(ctx, id, 0, false); err != nil {
				return err
			}
		}
		if every > 0 {
			return v.Jobs.SetSchedule(ctx, id, every)
		}
		if lag > 0 {
			return v.Jobs.SetTargetLag(ctx, id, lag, true)
		}
		return nil
	}); err != nil {
		return err
	}
	s, err := v.Jobs.Schedule(ctx, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, settingsOf(s))
	return nil
}

// suspendView stops (suspend) or restarts every automatic refresh of a
// view. It answers {"suspended": bool} and, for a resume that started a
// catch-up refresh, its "job_id".
func (v *ViewRoutes) suspendView(suspend bool) func(c *gin.Context) error {
	return func(c *gin.Context) error {
		ctx := c.Request.Context()
		var req struct {
			ID []string `json:"id"`
		}
		id, err := pathAndBody(c, &req, func() []string { return req.ID })
		if err != nil {
			return err
		}
		if _, err := v.Engine.View(ctx, id); err != nil {
			return err
		}
		var job *jobs.Job
		if err := v.registered(ctx, id, func() error {
			if suspend {
				return v.Jobs.Suspend(ctx, id)
			}
			job, err = v.Jobs.Resume(ctx, id)
			return err
		}); err != nil {
			return err
		}
		resp := gin.H{"suspended": suspend}
		if job != nil {
			resp["job_id"] = job.ID
		}
		c.JSON(http.StatusOK, resp)
		return nil
	}
}

// registered runs set, a change of view id's registry record, registering
// the view first when the registry does not know it (created before it
// kept views) and set says so (CodeTableNotFound). The caller has loaded
// the view (not a view: CodeInvalidInput; no such table:
// CodeTableNotFound).
func (v *ViewRoutes) registered(ctx context.Context, id []string, set func() error) error {
	err := set()
	if errs.CodeOf(err) == errs.CodeTableNotFound {
		vw, verr := v.Engine.View(ctx, id)
		if verr != nil {
			return verr
		}
		if err := v.Jobs.RegisterView(ctx, id, vw.Def.Source, vw.Def.AutoRefresh); err != nil {
			return err
		}
		err = set()
	}
	return err
}
