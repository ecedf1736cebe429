package refresh

import (
	"context"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// Option defaults and caps. Zero means "not given" and takes the default;
// a negative value or one above the cap is CodeInvalidInput naming the
// field.
const (
	DefaultSourceTaskSize          = 1024
	DefaultConcurrency             = 8
	DefaultIntraApplierConcurrency = 1
	DefaultCluster                 = "default"

	MaxSourceTaskSize          = 1 << 20
	MaxConcurrency             = 1024
	MaxIntraApplierConcurrency = 64
	MaxMaxRowsPerFragment      = 1 << 24
)

// Prepare fills defaults into the options of a view refresh and validates
// them against the view:
// output_limit only for kinds that take it and >= 0; src_version must
// exist in the source; sizes and concurrencies within their caps; an
// inline manifest must be a valid manifest (ParseManifest) naming only
// declared runtimes. It sets ManifestChecksum to the checksum of the
// manifest in force (the inline one, else the view's, else "") and
// ManifestNotHonoured to its fields this deployment records but cannot
// act on, and UDTFSpecNotHonoured to the view's udtf_spec fields of that
// kind (UDTFEntry.NotHonoured). Whether the cluster exists is for the orchestrator to check.
func (j viewRefresh) Prepare(ctx context.Context, id []string, opts *Options) error {
	e := j.e
	v, err := e.View(ctx, id)
	if err != nil {
		return err
	}
	if err := checkOutputLimit(v, opts.OutputLimit); err != nil {
		return err
	}
	// The inline manifest replaces the view's for this job only.
	opts.ManifestChecksum, opts.ManifestNotHonoured = "", nil
	if opts.Manifest != "" {
		m, err := e.checkManifestText("manifest", opts.Manifest, "")
		if err != nil {
			return err
		}
		opts.ManifestChecksum, opts.ManifestNotHonoured = ManifestChecksum(opts.Manifest), m.NotHonoured()
	} else if v.Def.Manifest != "" {
		opts.ManifestChecksum = ManifestChecksum(v.Def.Manifest)
		if m, err := ParseManifest(v.Def.Manifest); err == nil {
			opts.ManifestNotHonoured = m.NotHonoured()
		}
	}
	opts.UDTFSpecNotHonoured = v.udtf.NotHonoured()
	if err := e.checkRuntimes(v, *opts); err != nil {
		return err
	}
	if err := e.checkColumns(v.Columns, v.Schema, opts.Manifest); err != nil {
		return err
	}
	src, err := e.source(ctx, v) // by identity: a renamed source is followed
	if errs.CodeOf(err) == errs.CodeTableNotFound {
		return sourceGone(id, v.Def.Source)
	}
	if errs.CodeOf(err) == errs.CodeServiceUnavailable {
		// The source's latest version cannot be read now: the job is
		// accepted and its plan retries (the plan binds the identity);
		// the checks below read only the versions they name.
		src, err = e.cat.OpenTable(ctx, v.Def.Source)
		if errs.CodeOf(err) == errs.CodeTableNotFound {
			return sourceGone(id, v.Def.Source)
		}
	}
	if err != nil {
		return err
	}
	if src, err = sourceBranch(ctx, src, v, opts.SrcBranch); err != nil {
		return err
	}
	if opts.SrcVersion != 0 {
		if _, err := src.Version(ctx, opts.SrcVersion); err != nil {
			if errs.CodeOf(err) == errs.CodeTableVersionNotFound {
				return invalid("src_version: source table %s has no version %d%s", table.JoinID(v.Def.Source), opts.SrcVersion, onBranchText(opts.SrcBranch))
			}
			return err
		}
	}
	return nil
}

// checkOutputLimit refuses an output_limit on a view whose kind takes
// none, and a negative one. Prepare checks it when the job is accepted
// and Plan again: the view may have been dropped and created again as
// another kind in between (the plan binds the view's identity, the
// options do not).
func checkOutputLimit(v *View, limit *int64) error {
	if limit == nil {
		return nil
	}
	if !traitsOf(v.Def.Kind).OutputLimit {
		return invalid("output_limit: view %s is kind %s, which takes no output_limit", table.JoinID(v.ID), v.Def.Kind)
	}
	if *limit < 0 {
		return invalid("output_limit: must be >= 0 (got %d)", *limit)
	}
	return nil
}

// fillDefaults gives the numbers every job type takes their defaults when
// left at zero and checks each is within its cap; an empty cluster is
// DefaultCluster.
func (e *Engine) fillDefaults(opts *Options) error {
	err := fillBounded([]boundedInt{
		{"source_task_size", &opts.SourceTaskSize, DefaultSourceTaskSize, MaxSourceTaskSize},
		{"concurrency", &opts.Concurrency, DefaultConcurrency, MaxConcurrency},
		{"intra_applier_concurrency", &opts.IntraApplierConcurrency, DefaultIntraApplierConcurrency, MaxIntraApplierConcurrency},
		{"max_rows_per_fragment", &opts.MaxRowsPerFragment, e.cat.Options().MaxRowsPerFragment, MaxMaxRowsPerFragment},
	})
	if err != nil {
		return err
	}
	if opts.Cluster == "" {
		opts.Cluster = DefaultCluster
	}
	return nil
}

// boundedInt is an option number with its default and cap.
type boundedInt struct {
	name      string
	val       *int
	def, most int
}

// fillBounded gives each number left at zero its default (at most its
// cap); a negative one or one above the cap is CodeInvalidInput naming
// the field.
func fillBounded(fields []boundedInt) error {
	for _, f := range fields {
		if *f.val == 0 {
			*f.val = min(f.def, f.most)
		}
		if *f.val < 0 || *f.val > f.most {
			return invalid("%s: must be > 0 and <= %d (got %d)", f.name, f.most, *f.val)
		}
	}
	return nil
}

// source opens a view's source table; a missing one is CodeTableNotFound.
// Source returns the source table of view v, found by the identity the view
// is bound to (a renamed source is followed).
func (e *Engine) Source(ctx context.Context, v *View) (*table.Table, error) { return e.source(ctx, v) }

func (e *Engine) source(ctx context.Context, v *View) (*table.Table, error) {
	// Bound by identity: the view's source as created, or as last
	// refreshed for views created before definitions recorded it.
	uuid := v.Def.SourceUUID
	if uuid == "" && v.Watermark != nil {
		uuid = v.Watermark.sourceIdentity()
	}
	src, err := e.cat.Resolve(ctx, v.Def.Source, uuid)
	if errs.CodeOf(err) == errs.CodeTableNotFound {
		return nil, errs.Errorf(errs.CodeTableNotFound, "source table %s of view %s not found", table.JoinID(v.Def.Source), table.JoinID(v.ID))
	}
	// Resolving reads the source's latest version: a version that cannot
	// be read now is a state error, retried.
	return src, stateErr(err)
}
