package jobs

import (
	"context"
	"time"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// A view's target_lag: how far (in time) it may fall behind its source.
// When the source gets a version the view has not seen, the first such
// change sets a deadline in the schedule set (the same mvq:sched the
// refresh_every periods live in): change time + target_lag - the
// expected refresh time, estimated from the view's recent jobs. Later
// changes before the deadline add nothing, so a burst of commits is one
// refresh. The workers' Schedulers claim the deadline atomically (one
// fire in the pool, up to one poll early) and submit one job with cause
// CauseTargetLag, unless the view has caught up meanwhile. A source that
// does not change causes no refresh.
//
// A view has at most one of refresh_every and target_lag: setting one
// clears the other. auto_refresh (every change, at once) and target_lag
// are refused together at the API.

// Bounds of a view's target_lag.
const (
	MinTargetLag = time.Second
	MaxTargetLag = 366 * 24 * time.Hour
)

// CauseTargetLag is the cause of a job a target_lag deadline submitted;
// CauseResume of the catch-up refresh of a resumed view.
const (
	CauseTargetLag = "target_lag"
	CauseResume    = "resume"
)

// ParseTargetLag reads a target_lag value: a Go duration ("90s", "5m")
// between MinTargetLag and MaxTargetLag. The error names no field;
// callers prefix it.
func ParseTargetLag(s string) (time.Duration, error) {
	return parseBounded(s, MinTargetLag, MaxTargetLag)
}

// SetTargetLag sets a registered view's target lag (0: none), replacing
// its refresh_every. With catchUp, a view already behind its source gets
// a deadline from its oldest unseen change at once (without, the next
// change sets one: a view whose refresh was just submitted). A view not
// in the registry is CodeTableNotFound.
func (c *Client) SetTargetLag(ctx context.Context, view []string, lag time.Duration, catchUp bool) error {
	ok, err := c.st.setTargetLag(ctx, view, lag)
	if err != nil {
		return err
	}
	if !ok {
		return errs.Errorf(errs.CodeTableNotFound, "view %s is not registered", table.JoinID(view))
	}
	if lag > 0 && catchUp {
		if since, behind := c.unseenSince(ctx, view, time.Now()); behind {
			c.markLag(ctx, view, since)
		}
	}
	return nil
}

// Suspend stops every automatic refresh of a registered view (auto,
// schedule, target lag) until Resume; a refresh request still runs. A
// view not in the registry is CodeTableNotFound.
func (c *Client) Suspend(ctx context.Context, view []string) error {
	return c.suspend(ctx, view, true)
}

// Resume ends a view's suspension. A suspended view with an automatic
// refresh (auto_refresh, refresh_every or target_lag) that is behind its
// source gets one catch-up job at once (cause CauseResume), returned; nil
// when none was needed or a pending automatic job already covers it.
func (c *Client) Resume(ctx context.Context, view []string) (*Job, error) {
	s, err := c.Schedule(ctx, view) // read while suspended: never nil for a registered view
	if err != nil {
		return nil, err
	}
	if err := c.suspend(ctx, view, false); err != nil {
		return nil, err
	}
	if s == nil || !s.Suspended || (!s.Auto && s.Every == 0 && s.TargetLag == 0) {
		return nil, nil // not suspended (nothing to catch up from), or nothing automatic
	}
	if !c.behind(ctx, view, time.Now()) {
		return nil, nil
	}
	return c.SubmitAuto(ctx, view, CauseResume, nil)
}

func (c *Client) suspend(ctx context.Context, view []string, on bool) error {
	ok, err := c.st.suspend(ctx, view, on)
	if err != nil {
		return err
	}
	if !ok {
		return errs.Errorf(errs.CodeTableNotFound, "view %s is not registered", table.JoinID(view))
	}
	return nil
}

// markLag records a change at `at` of view's source for its target lag
// (a view without one, suspended, or with a deadline already set is left
// as it is). Errors are logged: the view then waits for its next change.
func (c *Client) markLag(ctx context.Context, view []string, at time.Time) {
	lag, idle, err := c.st.lagState(ctx, view)
	if err == nil && lag > 0 && idle {
		_, err = c.st.markLag(ctx, view, at, c.expectedRefresh(ctx, view, lag))
	}
	if err != nil {
		c.log.WarnContext(ctx, "jobs: mark a change for the target lag", "view", table.JoinID(view), "err", err)
	}
}

// expectedRefresh estimates how long a refresh of view takes from its
// submit to its commit (waiting for a worker and for the view's earlier
// jobs included): the longest of its last few finished jobs, with half
// again and a tenth of the lag as a margin (a refresh's time varies with
// the size of the change and the load of the pool), or lag/4 when it has
// none.
func (c *Client) expectedRefresh(ctx context.Context, view []string, lag time.Duration) time.Duration {
	const recent = 5
	js, _, err := c.List(ctx, ListFilter{View: view, State: string(StateDone), Limit: recent})
	if err != nil || len(js) == 0 {
		return lag / 4
	}
	var longest time.Duration
	for _, j := range js {
		if j.FinishedAt != nil {
			longest = max(longest, j.FinishedAt.Sub(j.CreatedAt))
		}
	}
	return longest*3/2 + lag/10
}

// behind says whether view has not seen its source's latest version at
// now. Without a way to ask (an engine that reports no freshness) or on
// an error it answers true: a refresh with nothing to do is a no-op, a
// missed one breaks the target.
func (c *Client) behind(ctx context.Context, view []string, now time.Time) bool {
	_, behind := c.unseenSince(ctx, view, now)
	return behind
}

// unseenSince returns when the oldest source change view has not seen was
// committed, and whether there is one (see behind for what it answers
// when it cannot tell: now, true).
func (c *Client) unseenSince(ctx context.Context, view []string, now time.Time) (time.Time, bool) {
	fr, ok := c.eng.(Freshener)
	if !ok {
		return now, true
	}
	f, err := fr.Freshness(ctx, view, now)
	if err != nil {
		c.log.WarnContext(ctx, "jobs: read a view's freshness", "view", table.JoinID(view), "err", err)
		return now, true
	}
	if !f.Stale || (len(f.Sources) > 0 && !f.Sources[0].Exists) {
		return now, false // fresh, or nothing to catch up to (the source is gone)
	}
	return now.Add(-time.Duration(f.LagSeconds * float64(time.Second))), true
}
