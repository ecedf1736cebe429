package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

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
	// Debounce delays every automatic refresh by this much after the
	// change that caused it, so a burst of changes is one refresh
	// (MVQ_AUTO_REFRESH_DEBOUNCE, default 0).
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
	src, _ := json.Marshal(source)
	flag := "0"
	if auto {
		flag = "1"
	}
	_, err := c.st.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.SAdd(ctx, depsKey(source), viewKey(view))
		p.HSet(ctx, viewRegKey(view), "source", string(src), "auto", flag)
		p.HDel(ctx, viewRegKey(view), "every")
		p.ZRem(ctx, schedKey, viewKey(view))
		return nil
	})
	if err != nil {
		return redisErr("register view", err)
	}
	return nil
}

// ForgetView removes a dropped view from the registry.
func (c *Client) ForgetView(ctx context.Context, view []string) error {
	src, err := c.st.rdb.HGet(ctx, viewRegKey(view), "source").Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return redisErr("read view registry", err)
	}
	var source []string
	_ = json.Unmarshal([]byte(src), &source)
	_, err = c.st.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if source != nil {
			p.SRem(ctx, depsKey(source), viewKey(view))
		}
		p.Del(ctx, viewRegKey(view))
		p.ZRem(ctx, schedKey, viewKey(view))
		return nil
	})
	if err != nil {
		return redisErr("forget view", err)
	}
	return nil
}

// Unlink removes view from the dependents of source only (a view created
// again over another table).
func (c *Client) Unlink(ctx context.Context, source, view []string) error {
	if err := c.st.rdb.SRem(ctx, depsKey(source), viewKey(view)).Err(); err != nil {
		return redisErr("unlink view", err)
	}
	return nil
}

// ForgetViewsUnder forgets every registered view under namespace ns.
func (c *Client) ForgetViewsUnder(ctx context.Context, ns []string) error {
	match := globEscape(keyPrefix+"viewreg:"+viewKey(ns)+"/") + "*"
	var views [][]string
	if err := c.st.scanKeys(ctx, match, func(k string) error {
		views = append(views, strings.Split(strings.TrimPrefix(k, keyPrefix+"viewreg:"), "/"))
		return nil
	}); err != nil {
		return redisErr("find registered views", err)
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
	ms, err := c.st.rdb.SMembers(ctx, depsKey(source)).Result()
	if err != nil {
		return nil, redisErr("read dependents", err)
	}
	sort.Strings(ms)
	out := make([][]string, len(ms))
	for i, m := range ms {
		out[i] = strings.Split(m, "/")
	}
	return out, nil
}

// Changed is told that table source has a new version (its commit hook,
// or a catalog notification with cause CauseNotification): every
// auto_refresh view that reads source gets an automatic job, unless it
// already has one that has not started (which refreshes to the latest
// version when it does: bursts coalesce). It returns the jobs submitted.
// A view whose job cannot be submitted is skipped and the error of the
// first such view returned after the others were tried.
func (c *Client) Changed(ctx context.Context, source []string, version uint64, cause string) ([]*Job, error) {
	views, err := c.Dependents(ctx, source)
	if err != nil || len(views) == 0 {
		return nil, err
	}
	var out []*Job
	var first error
	for _, v := range views {
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
// CauseNotification or CauseSchedule) and the source version that caused
// it, unless the view already has an automatic job that has not started:
// then it returns (nil, nil). Causes other than CauseSchedule need the
// view's auto_refresh. The job takes the view's default options on the
// AutoConfig's cluster and refreshes to the source's latest version when
// its plan runs. A PENDING job of the view with the same (default)
// options, a refresh request's, is joined instead of adding one.
func (c *Client) SubmitAuto(ctx context.Context, view []string, cause string, trig *Trigger) (*Job, error) {
	uid, err := uuid.NewV7()
	if err != nil {
		return nil, &errs.Error{Code: errs.CodeInternal, Message: "job id", Err: err}
	}
	id := uid.String()
	needAuto := "1"
	if cause == CauseSchedule {
		needAuto = "0"
	}
	now := time.Now()
	res, err := scriptAutoClaim.Run(ctx, c.st.rdb, []string{viewRegKey(view)}, id, now.UnixMilli(),
		c.auto.MinInterval.Milliseconds(), c.auto.Debounce.Milliseconds(), keyPrefix+"job:", autoClaimTTL.Milliseconds(), needAuto).Slice()
	if err != nil {
		return nil, redisErr("claim auto refresh", err)
	}
	if len(res) != 2 {
		return nil, &errs.Error{Code: errs.CodeInternal, Message: fmt.Sprintf("auto claim answered %v", res)}
	}
	if n, _ := res[0].(int64); n != 1 {
		return nil, nil
	}
	delay, _ := res[1].(int64)
	j, err := c.submit(ctx, view, refresh.Options{Cluster: c.auto.Cluster}, submitMeta{
		join: true, id: id, cause: cause, trigger: trig, delay: time.Duration(delay) * time.Millisecond,
	})
	if err != nil {
		_ = scriptAutoUnclaim.Run(context.WithoutCancel(ctx), c.st.rdb, []string{viewRegKey(view)}, id, "").Err()
		return nil, err
	}
	if j.Coalesced {
		// Joined a PENDING job with the same options (a refresh request's):
		// it is the view's pending automatic refresh now.
		_ = scriptAutoUnclaim.Run(context.WithoutCancel(ctx), c.st.rdb, []string{viewRegKey(view)}, id, j.ID).Err()
		return nil, nil
	}
	return j, nil
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
