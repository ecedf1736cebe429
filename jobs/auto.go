package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// What caused a job (Job.Cause).
const (
	CauseAPI          = "api"          // a refresh request (or a view create)
	CauseAuto         = "auto"         // a new version of an auto_refresh view's source
	CauseSchedule     = "schedule"     // the view's refresh_every schedule
	CauseNotification = "notification" // a catalog notification advanced the source
	// CauseTargetLag and CauseResume: lag.go.
)

// Trigger is the source version that caused an automatic job.
type Trigger struct {
	Source  string `json:"source"` // identifier joined with "$"
	Version uint64 `json:"version"`
}

// AutoConfig tunes automatic refreshes.
type AutoConfig struct {
	// MinInterval is the least time between the starts of two automatic
	// refreshes of one view (MVQ_AUTO_REFRESH_MIN_INTERVAL, default 1s;
	// negative: none). A change sooner than that is served by a job whose
	// plan waits out the interval.
	MinInterval time.Duration
	// Debounce delays every automatic refresh (but a target_lag's or a
	// resume's) by this much after the change that caused it, so a burst
	// of changes is one refresh (MVQ_AUTO_REFRESH_DEBOUNCE, default 0).
	Debounce time.Duration
	// Cluster runs automatic jobs; default "default".
	Cluster string
}

// DefaultAutoMinInterval is AutoConfig.MinInterval's default.
const DefaultAutoMinInterval = time.Second

func (c AutoConfig) withDefaults() AutoConfig {
	if c.MinInterval == 0 {
		c.MinInterval = DefaultAutoMinInterval
	}
	if c.MinInterval < 0 {
		c.MinInterval = 0
	}
	if c.Debounce < 0 {
		c.Debounce = 0
	}
	if c.Cluster == "" {
		c.Cluster = refresh.DefaultCluster
	}
	return c
}

// AutoRefresh sets the client's automatic refresh settings.
func AutoRefresh(cfg AutoConfig) ClientOption { return func(c *Client) { c.auto = cfg.withDefaults() } }

// RegisterView records that view reads source and whether it refreshes
// automatically. Registering again replaces the record, schedule
// included (SetSchedule sets one).
func (c *Client) RegisterView(ctx context.Context, view, source []string, auto bool) error {
	return c.st.registerView(ctx, view, source, auto)
}

// ForgetView removes a dropped view from the registry.
func (c *Client) ForgetView(ctx context.Context, view []string) error {
	return c.st.forgetView(ctx, view)
}

// Unlink removes view from the dependents of source only (a view created
// again over another table).
func (c *Client) Unlink(ctx context.Context, source, view []string) error {
	return c.st.unlink(ctx, source, view)
}

// ForgetViewsUnder forgets every registered view under namespace ns.
func (c *Client) ForgetViewsUnder(ctx context.Context, ns []string) error {
	views, err := c.st.registeredViews(ctx, ns)
	if err != nil {
		return err
	}
	for _, v := range views {
		if err := c.ForgetView(ctx, v); err != nil {
			return err
		}
	}
	return nil
}

// Dependents returns the registered views that read table source, sorted.
func (c *Client) Dependents(ctx context.Context, source []string) ([][]string, error) {
	return c.st.dependents(ctx, source)
}

// Changed is told that table source has a new version (its commit hook,
// or a catalog notification with cause CauseNotification): every
// auto_refresh view that reads source gets an automatic job, unless it
// already has one that has not started (which refreshes to the latest
// version when it does: bursts coalesce); a target_lag view gets a
// deadline (lag.go) when it has none. It returns the jobs submitted.
// A view whose job cannot be submitted is skipped and the error of the
// first such view returned after the others were tried.
func (c *Client) Changed(ctx context.Context, source []string, version uint64, cause string) ([]*Job, error) {
	views, err := c.Dependents(ctx, source)
	if err != nil || len(views) == 0 {
		return nil, err
	}
	var out []*Job
	var first error
	now := time.Now()
	for _, v := range views {
		c.markLag(ctx, v, now)
		j, err := c.SubmitAuto(ctx, v, cause, &Trigger{Source: table.JoinID(source), Version: version})
		if err != nil && first == nil {
			first = fmt.Errorf("auto refresh of %s: %w", table.JoinID(v), err)
		}
		if j != nil {
			out = append(out, j)
		}
	}
	return out, first
}

// autoClaimTTL is how long a claim without a job record holds (the
// submitting process may have died between the claim and the record).
const autoClaimTTL = 10 * time.Second

// SubmitAuto submits an automatic refresh of view with cause (CauseAuto,
// CauseNotification, CauseSchedule, CauseTargetLag or CauseResume) and the
// source version that caused it, unless the view already has an automatic
// job that has not started, or is suspended: then it returns (nil, nil).
// CauseAuto and CauseNotification need the view's auto_refresh. The job
// takes the view's default options on the AutoConfig's cluster and
// refreshes to the source's latest version when its plan runs, after the
// debounce (none for CauseTargetLag and CauseResume: their changes are
// already coalesced) and the rest of the minimum interval. A PENDING job
// of the view with the same (default) options, a refresh request's, is
// joined instead of adding one.
func (c *Client) SubmitAuto(ctx context.Context, view []string, cause string, trig *Trigger) (*Job, error) {
	uid, err := uuid.NewV7()
	if err != nil {
		return nil, &errs.Error{Code: errs.CodeInternal, Message: "job id", Err: err}
	}
	id := uid.String()
	now := time.Now()
	needAuto := cause == CauseAuto || cause == CauseNotification
	debounce := c.auto.Debounce
	if cause == CauseTargetLag || cause == CauseResume {
		debounce = 0 // the deadline already coalesced the changes; a resume catches up now
	}
	claim, err := c.st.claimAuto(ctx, view, id, now, c.auto.MinInterval, debounce, needAuto)
	if err != nil || !claim.claimed {
		return nil, err
	}
	j, err := c.submit(ctx, view, refresh.Options{Cluster: c.auto.Cluster}, submitMeta{
		join: true, id: id, cause: cause, trigger: trig, delay: claim.delay,
	})
	if err != nil {
		c.unclaimAuto(ctx, view, id, "")
		return nil, err
	}
	if j.Coalesced {
		// Joined a PENDING job with the same options (a refresh request's):
		// it is the view's pending automatic refresh now.
		c.unclaimAuto(ctx, view, id, j.ID)
		return nil, nil
	}
	return j, nil
}

// unclaimAuto gives up view's claim of id, whose job was not created (the
// PENDING job joined takes it when joined is not ""). A failure is logged:
// the claim then ages out after autoClaimTTL, or holds while the joined
// job is PENDING.
func (c *Client) unclaimAuto(ctx context.Context, view []string, id, joined string) {
	if err := c.st.unclaimAuto(context.WithoutCancel(ctx), view, id, joined); err != nil {
		c.log.WarnContext(ctx, "jobs: release an automatic refresh claim", "view", table.JoinID(view), "job_id", id, "err", err)
	}
}

// CommitHook returns the catalog commit hook (table.Catalog.OnCommit)
// that submits automatic refreshes: every version committed in this
// process, but a compaction's (which changes no rows), is a change of
// its table; a version a catalog notification committed to an external
// table causes jobs with CauseNotification. Errors are logged.
func (c *Client) CommitHook() table.CommitHook {
	return func(ctx context.Context, id []string, m *table.Manifest) {
		if m.Operation == table.OperationCompact {
			return
		}
		cause := CauseAuto
		if m.Operation == table.OperationNotification {
			cause = CauseNotification // an external table advanced by a catalog notification
		}
		if _, err := c.Changed(ctx, id, m.Version, cause); err != nil {
			c.log.WarnContext(ctx, "jobs: auto refresh after a commit", "table", table.JoinID(id), "version", m.Version, "err", err)
		}
	}
}
