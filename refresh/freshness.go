package refresh

import (
	"context"
	"time"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// SourceFreshness is how far a view is behind one of its sources.
type SourceFreshness struct {
	Table string `json:"table"` // identifier joined with "$"
	// Exists is false when the source is gone (dropped): the view cannot
	// refresh until it is created again.
	Exists bool `json:"exists"`
	// Branch is the branch of the source the view was last refreshed
	// from, and the one its lag is measured on (omitted: main).
	Branch string `json:"branch,omitempty"`
	// RefreshedVersion is the source version the view was last refreshed
	// from (0: never refreshed); LatestVersion the source's latest (0 when
	// gone).
	RefreshedVersion uint64 `json:"refreshed_version"`
	LatestVersion    uint64 `json:"latest_version"`
	LagVersions      uint64 `json:"lag_versions"`
	// LagSeconds is the time since the oldest source change the view has
	// not seen: the commit of version RefreshedVersion+1 (0 when fresh).
	LagSeconds float64 `json:"lag_seconds"`
	// Identity mismatch: the source was dropped and created again since
	// the last refresh (the next refresh is full).
	Recreated bool `json:"recreated,omitempty"`
}

// Freshness is a view's state against its source(s), as the engine sees
// it (package jobs adds the jobs, the registry the downstream views).
type Freshness struct {
	View        string            `json:"view"`
	Kind        Kind              `json:"kind"`
	AutoRefresh bool              `json:"auto_refresh"`
	Version     uint64            `json:"version"` // the view's latest version
	Sources     []SourceFreshness `json:"sources"`
	Stale       bool              `json:"stale"`
	LagVersions uint64            `json:"lag_versions"`
	LagSeconds  float64           `json:"lag_seconds"`
	// Problem says why the view cannot refresh ("" when it can).
	Problem string `json:"problem,omitempty"`
}

// Freshness reports view id's freshness at now. Errors: the view's
// (CodeTableNotFound, CodeInvalidInput when id is not a view); a source
// that is gone is not an error but Sources[0].Exists false and Problem.
func (e *Engine) Freshness(ctx context.Context, id []string, now time.Time) (*Freshness, error) {
	v, err := e.View(ctx, id)
	if err != nil {
		return nil, err
	}
	return e.freshnessOf(ctx, v, now)
}

// FreshnessOf is Freshness of a view already loaded at manifest m of t;
// ok is false when m is not a view's.
func (e *Engine) FreshnessOf(ctx context.Context, t *table.Table, m *table.Manifest, now time.Time) (*Freshness, bool, error) {
	v, err := viewOf(t, m)
	if err != nil {
		return nil, false, nil
	}
	f, err := e.freshnessOf(ctx, v, now)
	return f, err == nil, err
}

func (e *Engine) freshnessOf(ctx context.Context, v *View, now time.Time) (*Freshness, error) {
	f := &Freshness{View: table.JoinID(v.ID), Kind: v.Def.Kind, AutoRefresh: v.Def.AutoRefresh, Version: v.Manifest.Version}
	s := SourceFreshness{Table: table.JoinID(v.Def.Source)}
	if w := v.Watermark; w != nil {
		s.RefreshedVersion = w.SourceVersion
	}
	src, err := e.source(ctx, v) // by identity: a renamed source is followed
	switch {
	case errs.CodeOf(err) == errs.CodeTableNotFound:
		f.Problem = sourceGone(v.ID, v.Def.Source).Error()
		f.Stale = true
		f.Sources = []SourceFreshness{s}
		return f, nil
	case err != nil:
		return nil, err
	}
	s.Exists = true
	if w := v.Watermark; w != nil && w.SourceBranch != "" {
		s.Branch = w.SourceBranch
		if src, err = sourceBranch(ctx, src, v, w.SourceBranch); err != nil {
			if errs.CodeOf(err) != errs.CodeTableBranchNotFound {
				return nil, err
			}
			f.Problem = err.Error() + "; refresh it from main or another branch"
			f.Stale = true
			f.Sources = []SourceFreshness{s}
			return f, nil
		}
	}
	latest, err := src.LatestVersion(ctx)
	if err != nil {
		return nil, err
	}
	s.LatestVersion = latest.Version
	if v.Watermark != nil && v.Watermark.SourceUUID != "" {
		lm, err := src.Load(ctx, latest.Version)
		if err != nil {
			return nil, err
		}
		if ident, err := src.Identity(ctx, lm); err == nil && ident != v.Watermark.SourceUUID {
			s.Recreated = true
		}
	}
	switch {
	case s.Recreated || s.RefreshedVersion == 0:
		s.LagVersions = s.LatestVersion
		s.LagSeconds = e.changedSince(ctx, src, 1, now)
	case s.LatestVersion > s.RefreshedVersion:
		s.LagVersions = s.LatestVersion - s.RefreshedVersion
		s.LagSeconds = e.changedSince(ctx, src, s.RefreshedVersion+1, now)
	}
	if !s.Recreated && s.RefreshedVersion > 0 && s.LatestVersion > s.RefreshedVersion {
		lm, err := src.Load(ctx, s.LatestVersion)
		if err != nil {
			return nil, err
		}
		if p := e.sourceSchemaProblem(ctx, v, src, s.RefreshedVersion, lm); p != nil {
			f.Problem = p.Error()
		}
	}
	f.Sources = []SourceFreshness{s}
	f.Stale = s.LagVersions > 0
	f.LagVersions, f.LagSeconds = s.LagVersions, s.LagSeconds
	return f, nil
}

// changedSince is the time from the commit of version v of t to now (0
// when it cannot be read: a version cleaned up is not worth failing for).
func (e *Engine) changedSince(ctx context.Context, t *table.Table, v uint64, now time.Time) float64 {
	m, err := t.Load(ctx, v)
	if err != nil {
		return 0
	}
	return max(now.Sub(time.UnixMilli(m.TimestampMillis)).Seconds(), 0)
}
