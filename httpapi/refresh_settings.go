package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/jobs"
)

// A view's refresh_every (an mvq extension of the view create request)
// refreshes it on a schedule, with cause "schedule", even when nothing
// announces a change of its source. It is set at create and changed with
//
//	POST /v1/materialized_view/{id}/refresh_settings {"refresh_every": "15m"}
//
// ("" stops the schedule). The schedule is kept in Redis with the
// dependency registry (jobs/schedule.go) and fired by the workers'
// schedulers, once per period in the pool.

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

// refreshSettings is a view's schedule as the API shows it.
type refreshSettings struct {
	RefreshEvery  string     `json:"refresh_every,omitempty"`
	NextRefreshAt *time.Time `json:"next_refresh_at,omitempty"`
}

func settingsOf(s *jobs.Schedule) refreshSettings {
	if s == nil {
		return refreshSettings{}
	}
	next := s.Next.UTC()
	return refreshSettings{RefreshEvery: s.Every.String(), NextRefreshAt: &next}
}

// updateRefreshSettings sets or stops a view's schedule; the next
// scheduled refresh is one period from now. It answers the settings.
func (v *ViewRoutes) updateRefreshSettings(c *gin.Context) error {
	ctx := c.Request.Context()
	var req struct {
		ID           []string `json:"id"`
		RefreshEvery *string  `json:"refresh_every"`
	}
	id, err := pathAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	if req.RefreshEvery == nil {
		return badInput(`refresh_every: required (a duration such as "15m", or "" to stop the schedule)`)
	}
	every, err := refreshEvery(req.RefreshEvery, true)
	if err != nil {
		return err
	}
	if err := v.setSchedule(ctx, id, every); err != nil {
		return err
	}
	s, err := v.Jobs.Schedule(ctx, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, settingsOf(s))
	return nil
}

// setSchedule sets view id's schedule, registering the view first when
// the registry does not know it (created before it kept views). Not a
// view: CodeInvalidInput; no such table: CodeTableNotFound.
func (v *ViewRoutes) setSchedule(ctx context.Context, id []string, every time.Duration) error {
	vw, err := v.Engine.View(ctx, id)
	if err != nil {
		return err
	}
	err = v.Jobs.SetSchedule(ctx, id, every)
	if errs.CodeOf(err) == errs.CodeTableNotFound {
		if err := v.Jobs.RegisterView(ctx, id, vw.Def.Source, vw.Def.AutoRefresh); err != nil {
			return err
		}
		err = v.Jobs.SetSchedule(ctx, id, every)
	}
	return err
}
