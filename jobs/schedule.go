package jobs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// Bounds of a view's refresh_every.
const (
	// MinRefreshEvery is the shortest schedule: below it a schedule is
	// a busy loop of refreshes, and auto_refresh is the tool for that.
	MinRefreshEvery = time.Second
	// MaxRefreshEvery is the longest (a year).
	MaxRefreshEvery = 366 * 24 * time.Hour
)

// ParseRefreshEvery reads a refresh_every value: a Go duration ("90s",
// "15m", "1h30m") between MinRefreshEvery and MaxRefreshEvery. The error
// names no field; callers prefix it.
func ParseRefreshEvery(s string) (time.Duration, error) {
	return parseBounded(s, MinRefreshEvery, MaxRefreshEvery)
}

// parseBounded reads a Go duration between lo and hi (refresh_every,
// target_lag).
func parseBounded(s string, lo, hi time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("want a duration such as \"30s\", \"15m\" or \"1h\" (got %q)", s)
	}
	if d < lo || d > hi {
		return 0, fmt.Errorf("must be between %v and %v (got %q)", lo, hi, s)
	}
	return d, nil
}

// SetSchedule sets a registered view's refresh_every (0: no schedule).
// The next scheduled refresh is one period from now. A view not in the
// registry is CodeTableNotFound.
func (c *Client) SetSchedule(ctx context.Context, view []string, every time.Duration) error {
	ok, err := c.st.setSchedule(ctx, view, every, time.Now())
	if err != nil {
		return err
	}
	if !ok {
		return errs.Errorf(errs.CodeTableNotFound, "view %s is not registered", table.JoinID(view))
	}
	return nil
}

// Schedule is how a view refreshes by itself: its refresh_every or its
// target_lag (at most one of them is set), when it is next due, and
// whether it is suspended.
type Schedule struct {
	Every     time.Duration
	TargetLag time.Duration
	// Next is the next scheduled refresh: one period on for Every; for
	// TargetLag, the deadline set by a change the view has not seen yet
	// (zero: none pending).
	Next      time.Time
	Suspended bool
	Auto      bool // the registry's auto_refresh flag
}

// Schedule returns view's schedule, nil when it has no refresh_every, no
// target_lag and is not suspended.
func (c *Client) Schedule(ctx context.Context, view []string) (*Schedule, error) {
	return c.st.schedule(ctx, view)
}

// Fire is one scheduled refresh a Scheduler claimed.
type Fire struct {
	View []string
	Due  time.Time // the period's fire time, or the target lag's deadline
	Lag  bool      // a target_lag deadline (cause CauseTargetLag)
	// Fresh is true when a target_lag view was found caught up (a refresh
	// since the change): no job was submitted.
	Fresh bool
	Job   *Job  // the job submitted; nil when it joined a pending one
	Err   error // the submit's error
}

// SchedulerConfig configures a Scheduler.
type SchedulerConfig struct {
	// Interval between polls of the schedule; default 1s. A scheduled
	// refresh starts up to this late.
	Interval time.Duration
	// Batch is the most views one poll claims; default 100 (a poll that
	// claims a full batch polls again at once).
	Batch int
}

// Scheduler fires views' refresh_every schedules: each poll claims the due
// views atomically (scriptClaimDue) and submits a refresh with cause
// CauseSchedule for each, which joins the view's automatic job when one
// is pending. Every worker runs one; a period fires once in the pool. A
// claim whose process dies before the submit loses that one period (the
// next fires as usual).
type Scheduler struct {
	c    *Client
	cfg  SchedulerConfig
	loop loop
}

// NewScheduler returns a scheduler that submits through the client.
func (c *Client) NewScheduler(cfg SchedulerConfig) *Scheduler {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	return &Scheduler{c: c, cfg: cfg}
}

// Start polls now and then every interval until Stop.
func (s *Scheduler) Start(ctx context.Context) error {
	return s.loop.start(ctx, func(ctx context.Context) {
		every(ctx, s.cfg.Interval, func(ctx context.Context) {
			for {
				fires, err := s.Pass(ctx, time.Now())
				if err != nil && ctx.Err() == nil {
					s.c.log.Warn("jobs: schedule poll failed", "err", err)
				}
				if err != nil || len(fires) < s.cfg.Batch {
					return
				}
			}
		})
	})
}

// Stop ends the polls.
func (s *Scheduler) Stop(ctx context.Context) error { return s.loop.stop(ctx) }

// Pass claims the views due at now and submits their refreshes. A
// target_lag view is claimed up to one interval before its deadline (a
// poll must not make it late), and refreshed only when it is still behind
// its source. A submit that fails (the view's source is gone, no worker
// serves the cluster) is logged and reported in its Fire; a period view
// fires again next period, a target_lag view is marked again from now.
func (s *Scheduler) Pass(ctx context.Context, now time.Time) ([]Fire, error) {
	due, err := s.c.st.claimDue(ctx, now, s.cfg.Batch, s.cfg.Interval)
	if err != nil {
		return nil, err
	}
	var out []Fire
	for _, d := range due {
		f := Fire{View: d.view, Due: d.due, Lag: d.lag}
		cause := CauseSchedule
		if d.lag {
			cause = CauseTargetLag
			if f.Fresh = !s.c.behind(ctx, f.View, now); f.Fresh {
				out = append(out, f)
				continue
			}
		}
		f.Job, f.Err = s.c.SubmitAuto(ctx, f.View, cause, nil)
		if f.Err != nil {
			s.c.log.Warn("jobs: scheduled refresh not submitted", "view", table.JoinID(f.View), "err", f.Err)
			if d.lag {
				s.c.markLag(ctx, f.View, time.Now())
			}
		}
		out = append(out, f)
	}
	return out, nil
}
