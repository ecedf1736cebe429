// Package views holds the use cases of materialized views that span the
// view engine (refresh) and the job layer (jobs): creating a view with its
// schedule and first refresh, and finding and forgetting the views a drop
// takes with it. It knows no HTTP: httpapi decodes a request, calls a
// method here and encodes the answer.
package views

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// Service runs the view use cases over an engine, a job client and the
// catalog the views live in.
type Service struct {
	engine *refresh.Engine
	jobs   *jobs.Client
	cat    *table.Catalog
}

// New returns the use cases over engine and client. cat, when set, lets a
// create that cannot complete drop the view again; nil leaves the view
// (it is then refreshed or dropped by hand).
func New(engine *refresh.Engine, client *jobs.Client, cat *table.Catalog) *Service {
	return &Service{engine: engine, jobs: client, cat: cat}
}

// CreateRequest is a view create: the view, its schedule and, unless
// WithNoData, its first refresh.
type CreateRequest struct {
	View refresh.CreateRequest
	// Every is the refresh schedule's period; zero: none.
	Every time.Duration
	// TargetLag is how far the view may fall behind its source; zero:
	// none. At most one of Every and TargetLag is set.
	TargetLag time.Duration
	// WithNoData creates the view without submitting its first refresh.
	WithNoData bool
	// Refresh is the first refresh's options.
	Refresh refresh.Options
}

// Created is what a create made: the view's first manifest and its first
// refresh's job (nil with WithNoData).
type Created struct {
	Manifest *table.Manifest
	Job      *jobs.Job
}

// Create creates view id: it admits the first refresh (a full backlog
// refuses the whole request before the view exists), creates the view,
// registers it for dependency tracking and auto-refresh, sets its schedule
// or target lag and submits its first refresh. A registry or schedule
// failure, or a backlog that filled up since the admission, drops the view
// again so nothing is half-accepted. A full backlog is an error wrapping
// jobs.ErrBacklogFull.
func (s *Service) Create(ctx context.Context, id []string, req CreateRequest) (Created, error) {
	if !req.WithNoData {
		if err := s.jobs.Admit(ctx, req.Refresh.Cluster); err != nil {
			return Created{}, err
		}
	}
	m, err := s.engine.CreateView(ctx, id, req.View)
	if err != nil {
		return Created{}, err
	}
	if err := s.register(ctx, id, m); err != nil {
		s.undoCreate(ctx, id)
		return Created{}, err
	}
	if req.Every > 0 {
		if err := s.jobs.SetSchedule(ctx, id, req.Every); err != nil {
			s.undoCreate(ctx, id)
			return Created{}, err
		}
	}
	if req.TargetLag > 0 {
		if err := s.jobs.SetTargetLag(ctx, id, req.TargetLag, req.WithNoData); err != nil {
			s.undoCreate(ctx, id)
			return Created{}, err
		}
	}
	out := Created{Manifest: m}
	if !req.WithNoData {
		job, err := s.jobs.Submit(ctx, id, req.Refresh)
		if errors.Is(err, jobs.ErrBacklogFull) {
			// Filled up since Admit.
			s.undoCreate(ctx, id)
		}
		if err != nil {
			return Created{}, err
		}
		out.Job = job
	}
	return out, nil
}

// register records a new view in the dependency registry (what
// auto-refresh and drop checks read).
func (s *Service) register(ctx context.Context, id []string, m *table.Manifest) error {
	var def refresh.Definition
	if err := json.Unmarshal(m.Properties[table.ViewProperty], &def); err != nil {
		return &errs.Error{Code: errs.CodeInternal, Message: "read the new view's definition", Err: err}
	}
	return s.jobs.RegisterView(ctx, id, def.Source, def.AutoRefresh)
}

// undoCreate drops a view whose create cannot complete, even when the
// request's context has ended; a failure is logged.
func (s *Service) undoCreate(ctx context.Context, id []string) {
	if s.cat == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if err := s.cat.DropTable(ctx, id); err != nil {
		slog.WarnContext(ctx, "drop a view whose create could not complete", "view", table.JoinID(id), "err", err)
	}
	_ = s.jobs.ForgetView(ctx, id)
}

// Dependents are the views that read table id now: registered for it
// and, read from the warehouse, still defined over it (a stale registry
// entry is dropped).
func (s *Service) Dependents(ctx context.Context, id []string) ([][]string, error) {
	reg, err := s.jobs.Dependents(ctx, id)
	if err != nil {
		return nil, err
	}
	var out [][]string
	for _, d := range reg {
		vw, err := s.engine.View(ctx, d)
		switch {
		case errs.CodeOf(err) == errs.CodeTableNotFound:
			_ = s.jobs.ForgetView(ctx, d)
			continue
		case err == nil && table.JoinID(vw.Def.Source) != table.JoinID(id):
			_ = s.jobs.Unlink(ctx, id, d) // created again over another table
			continue
		case errs.CodeOf(err) == errs.CodeInvalidInput:
			continue // no longer a view (dropped and created as a table)
		case err != nil:
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// ToDrop returns the views that read table id, transitively, deepest
// first (each after every view that reads it), and the direct ones: what
// a drop of id refuses or, cascading, drops first.
func (s *Service) ToDrop(ctx context.Context, id []string) (all, direct [][]string, err error) {
	seen := map[string]bool{table.JoinID(id): true}
	var visit func(t []string, depth int) error
	visit = func(t []string, depth int) error {
		deps, err := s.Dependents(ctx, t)
		if err != nil {
			return err
		}
		if depth == 0 {
			direct = deps
		}
		for _, d := range deps {
			k := table.JoinID(d)
			if seen[k] {
				continue
			}
			seen[k] = true
			if err := visit(d, depth+1); err != nil {
				return err
			}
			all = append(all, d)
		}
		return nil
	}
	return all, direct, visit(id, 0)
}

// Dropped cancels the jobs of a dropped table (a view's; a plain table has
// none) and forgets it, or with ns set does so for every view under a
// dropped namespace.
func (s *Service) Dropped(ctx context.Context, id []string, ns bool) error {
	const reason = "the view was dropped"
	var err, ferr error
	if ns {
		_, err = s.jobs.CancelViewsUnder(ctx, id, reason)
		ferr = s.jobs.ForgetViewsUnder(ctx, id)
	} else {
		_, err = s.jobs.CancelView(ctx, id, reason)
		ferr = s.jobs.ForgetView(ctx, id)
	}
	return errors.Join(err, ferr)
}
