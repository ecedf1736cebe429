package refresh

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/table"
)

// This file is the one seam through which the engine applies a view: a
// ViewKind (validate the view's udtf_spec, derive its schema, say whether
// it is row-wise and incremental) and the Applier it makes for a work item
// (record batches in, record batches out, with a context and an error).
// The built-in kinds (kind_query.go, kind_chunker.go, kind_udtf.go) are
// files that register themselves; adding a kind means adding such a file.

// Traits say how the engine plans, expands and commits a kind's refreshes.
type Traits struct {
	// RowWise: every view row comes from one source row. The source query
	// must be a projection/filter of one table; the engine feeds it the
	// item's rows with their addresses, the view's first column is
	// __source_row_id, and the view keeps lineage from view fragments to
	// source fragments. Otherwise the query runs over the whole source
	// (all of a work item's rows) and the view holds what the kind makes.
	RowWise bool
	// Incremental: a refresh expands only the source fragments added since
	// the last one and removes the rows of those gone (needs RowWise).
	// Otherwise every refresh recomputes the view whole, and is a no_op
	// when the source version is the one last refreshed.
	Incremental bool
	// OutputLimit: the kind takes a refresh's output_limit.
	OutputLimit bool
	// Spec says whether a view of the kind has a udtf_spec.
	Spec SpecUse
}

// SpecUse says whether a kind takes a udtf_spec.
type SpecUse uint8

const (
	SpecOptional SpecUse = iota
	SpecForbidden
	SpecRequired
)

// ViewKind is one kind of materialized view. Implementations are
// stateless and registered once, at init, with RegisterKind.
type ViewKind interface {
	Traits() Traits
	// Bind validates a view's udtf_spec for this kind and returns the
	// kind bound to it. u is nil when the request has no udtf_spec; when
	// it has one, the engine has already checked Traits.Spec and what every kind shares
	// (kind, base64 udtf, udtf_sha, manifest) and doc is the decoded
	// udtf. It runs at create (errors: CodeInvalidInput naming the field,
	// "udtf_spec.udtf: ...") and again when a stored view is loaded.
	Bind(u *UDTFEntry, doc []byte) (Binding, error)
}

// Binding is a kind bound to one view's spec.
type Binding interface {
	// Columns derives the view's columns from the columns the source
	// query selects (for a row-wise kind, without the leading
	// __source_row_id, which the engine adds before what Columns
	// returns). Errors are CodeInvalidInput naming the field.
	Columns(selected []arrow.Field) ([]arrow.Field, error)
	// NewApplier returns the applier of one work item.
	NewApplier(env *ApplyEnv) (Applier, error)
}

// Applier computes one work item's view rows from the source query's
// output. Apply is called with the query output (a row-wise kind gets
// one batch of the item's rows, in source row order, with
// __source_row_id first; a whole-source kind gets each batch as the
// query streams it) and returns view rows conformed to the view schema;
// Finish is called once after the last Apply and returns the rows an
// applier held back (one that needs its whole input answers there).
// Close releases what the applier holds and is called exactly once,
// also after an error. Errors the user's definition causes (a crash of
// user code, bad output) should be CodeInvalidInput, which the
// orchestrator does not retry; others are retried.
type Applier interface {
	Apply(ctx context.Context, in arrow.RecordBatch) ([]arrow.RecordBatch, error)
	Finish(ctx context.Context) ([]arrow.RecordBatch, error)
	Close() error
}

// ApplyEnv is what an applier of one work item may use.
type ApplyEnv struct {
	Engine *Engine
	View   *View
	Plan   *Plan
	Index  int
	Mem    memory.Allocator
	// Workers is the plan's intra_applier_concurrency.
	Workers int
	// Output counts the item's view rows against the engine's bounds.
	Output *budget
	// Events receives lines for the job's events (user code's stderr);
	// never nil.
	Events func(string)
	// Skipped counts input partitions an applier left out under its
	// error handling (ItemResult.SkippedPartitions).
	Skipped atomic.Int64
}

func (env *ApplyEnv) skipped(n int64) { env.Skipped.Add(n) }

var kinds = struct {
	sync.RWMutex
	m map[Kind]ViewKind
}{m: map[Kind]ViewKind{}}

// RegisterKind makes a view kind available under name. It panics when the
// name is taken, as two files claiming one kind are a build mistake.
func RegisterKind(name Kind, k ViewKind) {
	kinds.Lock()
	defer kinds.Unlock()
	if _, dup := kinds.m[name]; dup {
		panic(fmt.Sprintf("refresh: view kind %q registered twice", name))
	}
	kinds.m[name] = k
}

// LookupKind returns the kind registered under name.
func LookupKind(name Kind) (ViewKind, bool) {
	kinds.RLock()
	defer kinds.RUnlock()
	k, ok := kinds.m[name]
	return k, ok
}

// KindNames lists the registered kinds, sorted.
func KindNames() []string {
	kinds.RLock()
	defer kinds.RUnlock()
	out := make([]string, 0, len(kinds.m))
	for k := range kinds.m {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}

// kindOf is the registered kind of a stored definition.
func kindOf(k Kind) (ViewKind, error) {
	vk, ok := LookupKind(k)
	if !ok {
		return nil, invalid("kind: unknown kind %q (want %s)", k, strings.Join(KindNames(), ", "))
	}
	return vk, nil
}

// traitsOf is the traits of kind k; an unknown kind has none (the view
// would not have loaded).
func traitsOf(k Kind) Traits {
	if vk, ok := LookupKind(k); ok {
		return vk.Traits()
	}
	return Traits{}
}

// noDictionary is implemented by bindings whose output columns should not
// be dictionary-encoded in Parquet (long, mostly distinct text).
type noDictionary interface{ NoDictionary() []string }

// budgetAdvisor is implemented by bindings that know how to get a work
// item's output under the bounds; the answer ends the error.
type budgetAdvisor interface {
	BudgetAdvice(plan *Plan, index int, what string) string
}

// releaseAll releases every batch of bs.
func releaseAll(bs []arrow.RecordBatch) {
	for _, b := range bs {
		if b != nil {
			b.Release()
		}
	}
}

// concatAll joins recs of schema s into one batch (recs[0] itself,
// retained, when there is one); recs, at least one, stay the caller's.
func (e *Engine) concatAll(s *arrow.Schema, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	switch len(recs) {
	case 0:
		return nil, fmt.Errorf("concatenate: no record batches")
	case 1:
		recs[0].Retain()
		return recs[0], nil
	}
	all, err := table.ConcatBatches(recs, e.mem)
	if err != nil {
		return nil, err
	}
	defer all.Release()
	return array.NewRecordBatch(s, all.Columns(), all.NumRows()), nil
}

// runApplier feeds in to a new applier of env and returns all its output
// (Apply's then Finish's); it closes the applier.
func runApplier(ctx context.Context, b Binding, env *ApplyEnv, in arrow.RecordBatch) (out []arrow.RecordBatch, err error) {
	a, err := b.NewApplier(env)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := a.Close(); err == nil && cerr != nil {
			releaseAll(out)
			out, err = nil, cerr
		}
	}()
	got, err := a.Apply(ctx, in)
	if err != nil {
		return nil, err
	}
	rest, err := a.Finish(ctx)
	if err != nil {
		releaseAll(got)
		return nil, err
	}
	return slices.Concat(got, rest), nil
}
