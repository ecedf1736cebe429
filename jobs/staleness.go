package jobs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// MaxStalenessNamespaces bounds the view_namespace label of
// mvq_view_staleness_seconds: the namespaces past this many (in name
// order) are reported together as OtherNamespace. The label is the
// view's namespace, never its name, so its values grow with the
// namespaces an operator creates, not with views.
const MaxStalenessNamespaces = 100

// OtherNamespace is the view_namespace of the namespaces past
// MaxStalenessNamespaces.
const OtherNamespace = "_other"

// Freshener is what the staleness reporter needs of the engine.
type Freshener interface {
	Freshness(ctx context.Context, id []string, now time.Time) (*refresh.Freshness, error)
}

var _ Freshener = (*refresh.Engine)(nil)

// StalenessReporter computes, every Interval, the staleness of every
// registered view (refresh.Freshness.LagSeconds: the time since the
// oldest source commit it has not seen) and keeps the largest per view
// namespace for the mvq_view_staleness_seconds gauge. One reporter in the
// pool computes at a time (the "staleness" lock); the others report
// nothing, so a sum or max over processes counts each namespace once.
// A view whose source is gone is not stale: its status says so instead.
type StalenessReporter struct {
	st       *store
	eng      Freshener
	id       string
	interval time.Duration
	log      *slog.Logger
	loop     loop

	mu   sync.Mutex
	last map[string]float64
}

// NewStalenessReporter returns a reporter over the client's registry;
// interval <= 0 is 15s.
func (c *Client) NewStalenessReporter(eng Freshener, interval time.Duration) *StalenessReporter {
	if interval <= 0 {
		interval = 15 * time.Second
	}
	return &StalenessReporter{st: c.st, eng: eng, id: uuid.NewString(), interval: interval, log: c.log}
}

// Start runs a pass now and then every interval.
func (r *StalenessReporter) Start(ctx context.Context) error {
	return r.loop.start(ctx, func(ctx context.Context) {
		every(ctx, r.interval, func(ctx context.Context) {
			if _, err := r.Pass(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("jobs: staleness pass failed", "err", err)
			}
		})
	})
}

// Stop ends the passes.
func (r *StalenessReporter) Stop(ctx context.Context) error { return r.loop.stop(ctx) }

// Values is the staleness per view namespace of the last pass this
// reporter ran (nil when another one holds the lock).
func (r *StalenessReporter) Values(context.Context) map[string]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// Pass computes the staleness of every registered view once, unless
// another reporter holds the lock (then it reports nothing and returns
// nil). It returns the values it keeps.
func (r *StalenessReporter) Pass(ctx context.Context) (map[string]float64, error) {
	ok, err := r.st.lock(ctx, "staleness", r.id, 2*r.interval)
	if err == nil && !ok {
		ok, err = r.st.extend(ctx, "staleness", r.id, 2*r.interval)
	}
	if err != nil || !ok {
		r.mu.Lock()
		r.last = nil
		r.mu.Unlock()
		return nil, err
	}
	views, err := r.registered(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := map[string]float64{}
	for _, v := range views {
		f, err := r.eng.Freshness(ctx, v, now)
		if errs.CodeOf(err) == errs.CodeTableNotFound || errs.CodeOf(err) == errs.CodeInvalidInput {
			continue // dropped meanwhile
		}
		if err != nil {
			return nil, err
		}
		ns := table.JoinID(v[:len(v)-1])
		if _, seen := out[ns]; !seen && len(out) >= MaxStalenessNamespaces {
			ns = OtherNamespace
		}
		lag := 0.0
		if f.Problem == "" {
			lag = f.LagSeconds
		}
		out[ns] = max(out[ns], lag)
	}
	r.mu.Lock()
	r.last = out
	r.mu.Unlock()
	return out, nil
}

// registered lists the registered views, sorted by key.
func (r *StalenessReporter) registered(ctx context.Context) ([][]string, error) {
	return r.st.registeredViews(ctx, nil)
}
