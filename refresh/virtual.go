package refresh

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/udf"
)

// This file computes virtual and computed columns (column.go) over record
// batches: for a backfill, and after a view's own applier for the rows a
// refresh adds.

type eventsKey struct{}

// WithEvents returns a context under which the engine sends lines for the
// job's events (the stderr of user code, retries) to fn. The orchestrator
// sets it around Expand; without it the lines are dropped.
func WithEvents(ctx context.Context, fn func(string)) context.Context {
	return context.WithValue(ctx, eventsKey{}, fn)
}

func eventsFrom(ctx context.Context) func(string) {
	if fn, ok := ctx.Value(eventsKey{}).(func(string)); ok && fn != nil {
		return fn
	}
	return func(string) {}
}

// columnCtx is what computing columns for one work item needs.
type columnCtx struct {
	e           *Engine
	jobManifest string // the job's inline manifest ("" : each column's own)
	workers     int
	events      func(string)
}

// addColumns answers rec (whose leading columns are schema's) with the
// columns of bindings computed and appended, conformed to schema.
func (c *columnCtx) addColumns(ctx context.Context, rec arrow.RecordBatch, bindings []ColumnBinding, schema *arrow.Schema) (arrow.RecordBatch, error) {
	cur := rec
	cur.Retain()
	defer func() { cur.Release() }()
	for i := range bindings {
		b := &bindings[i]
		types := make([]arrow.DataType, len(b.Outputs))
		for k, o := range b.Outputs {
			idx := schema.FieldIndices(o.Column)
			if len(idx) == 0 {
				return nil, errs.Errorf(errs.CodeInvalidTableState, "column %q of binding %s is not in the schema", o.Column, b.Name)
			}
			types[k] = schema.Field(idx[0]).Type
		}
		outs, err := c.compute(ctx, b, cur, types)
		if err != nil {
			return nil, err
		}
		cols := append(slices.Clone(cur.Columns()), outs...)
		fields := slices.Clone(cur.Schema().Fields())
		for k, o := range b.Outputs {
			fields = append(fields, arrow.Field{Name: o.Column, Type: outs[k].DataType(), Nullable: true})
		}
		next := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, cur.NumRows())
		for _, o := range outs {
			o.Release()
		}
		cur.Release()
		cur = next
	}
	if int(cur.NumCols()) != schema.NumFields() {
		return nil, errs.Errorf(errs.CodeSchemaValidation, "rows have %d columns with their virtual columns, the table has %d", cur.NumCols(), schema.NumFields())
	}
	return table.Conform(ctx, cur, schema, c.e.mem)
}

// compute answers the output columns of binding b over the rows of rec,
// cast to types. Failures of user code are classified by udfErr.
func (c *columnCtx) compute(ctx context.Context, b *ColumnBinding, rec arrow.RecordBatch, types []arrow.DataType) ([]arrow.Array, error) {
	e := c.e
	if b.Kind == bindingComputed {
		rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
		if err != nil {
			return nil, err
		}
		defer rdr.Release()
		out, err := e.db.Query(ctx, map[string]array.RecordReader{computedInput: rdr}, computedQuery(b.Expression))
		if err != nil {
			return nil, computedErr(b, err)
		}
		recs, err := duck.Collect(out)
		out.Release()
		if err != nil {
			return nil, computedErr(b, err)
		}
		defer releaseAll(recs)
		parts := make([]arrow.Array, 0, len(recs))
		var n int64
		for _, r := range recs {
			parts = append(parts, r.Column(0))
			n += r.NumRows()
		}
		if n != rec.NumRows() {
			return nil, fmt.Errorf("computed column %s: %d values for %d rows", b.Name, n, rec.NumRows())
		}
		var col arrow.Array
		if len(parts) == 0 {
			col = array.MakeArrayOfNull(e.mem, types[0], 0)
		} else if col, err = array.Concatenate(parts, e.mem); err != nil {
			return nil, err
		}
		defer col.Release()
		return castColumns(ctx, e, []arrow.Array{col}, b.columnNames(), types)
	}
	s, err := e.columnSettings(b, c.jobManifest)
	if err != nil {
		return nil, err
	}
	in, err := selectColumns(rec, b.InputColumns)
	if err != nil {
		return nil, err
	}
	defer in.Release()
	outFields := make([]arrow.Field, len(b.Outputs))
	for k, o := range b.Outputs {
		outFields[k] = arrow.Field{Name: o.StructField, Type: types[k], Nullable: true}
	}
	back := leaveCPU(ctx)
	if e.userCodeHook != nil {
		e.userCodeHook()
	}
	res, err := e.udfs.Run(ctx, udf.Call{Settings: s, Mode: udf.RowWise, Parallel: c.workers, Events: c.events}, in, arrow.NewSchema(outFields, nil))
	if berr := back(); err == nil && berr != nil {
		res.Release()
		return nil, berr
	}
	if err != nil {
		return nil, udfErr(err)
	}
	defer res.Release()
	cols := make([]arrow.Array, len(b.Outputs))
	for k, o := range b.Outputs {
		idx := res.Schema().FieldIndices(o.StructField)
		if len(idx) == 0 {
			return nil, udfErr(&udf.Error{Runtime: s.Name, Msg: fmt.Sprintf("output lacks %q", o.StructField), Permanent: true})
		}
		cols[k] = res.Column(idx[0])
	}
	out, err := castColumns(ctx, e, cols, b.columnNames(), types)
	if err != nil {
		return nil, udfErr(&udf.Error{Runtime: s.Name, Msg: "output does not fit the column types", Permanent: true, Err: err})
	}
	return out, nil
}

func computedErr(b *ColumnBinding, err error) error {
	if e := table.EngineErr(err); e != nil {
		return e
	}
	return invalid("computed column %s: %v", b.Name, err)
}

// castColumns answers cols cast to types (new references).
func castColumns(ctx context.Context, e *Engine, cols []arrow.Array, names []string, types []arrow.DataType) ([]arrow.Array, error) {
	fields := make([]arrow.Field, len(cols))
	want := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: names[i], Type: c.DataType(), Nullable: true}
		want[i] = arrow.Field{Name: names[i], Type: types[i], Nullable: true}
	}
	n := int64(0)
	if len(cols) > 0 {
		n = int64(cols[0].Len())
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, n)
	defer rec.Release()
	out, err := table.Conform(ctx, rec, arrow.NewSchema(want, nil), e.mem)
	if err != nil {
		return nil, err
	}
	defer out.Release()
	res := make([]arrow.Array, len(cols))
	for i := range res {
		res[i] = out.Column(i)
		res[i].Retain()
	}
	return res, nil
}

// kindView is the view as its kind sees it: the schema without the
// virtual columns, which the engine adds after the kind's applier.
func (v *View) kindView() *View {
	if v.kind != nil {
		return v.kind
	}
	return v
}

// applying is the binding a refresh applies: the kind's, then the view's
// virtual columns over its output.
func (v *View) applying() Binding {
	if len(v.Columns) == 0 {
		return v.Binding
	}
	return &virtualBinding{Binding: v.Binding, full: v}
}

// splitColumns sets v.Columns from its manifest and, when it has any,
// v.kind: v with the schema the kind derives.
func (v *View) splitColumns() error {
	cols, err := tableColumns(v.Manifest)
	if err != nil || len(cols) == 0 {
		return err
	}
	v.Columns = cols
	virtual := map[string]bool{}
	for _, b := range cols {
		for _, c := range b.columnNames() {
			virtual[c] = true
		}
	}
	var fields []arrow.Field
	for _, f := range v.Schema.Fields() {
		if !virtual[f.Name] {
			fields = append(fields, f)
		}
	}
	k := *v
	k.Schema, k.kind, k.Columns = arrow.NewSchema(fields, nil), nil, nil
	v.kind = &k
	return nil
}

type virtualBinding struct {
	Binding
	full *View
}

func (b *virtualBinding) NewApplier(env *ApplyEnv) (Applier, error) {
	a, err := b.Binding.NewApplier(env)
	if err != nil {
		return nil, err
	}
	return &virtualApplier{inner: a, full: b.full, c: &columnCtx{e: env.Engine, jobManifest: env.Plan.Options.Manifest, workers: env.Workers, events: env.Events}}, nil
}

// virtualApplier adds the view's virtual columns to what the kind's
// applier makes.
type virtualApplier struct {
	inner Applier
	full  *View
	c     *columnCtx
}

func (a *virtualApplier) extend(ctx context.Context, recs []arrow.RecordBatch, err error) ([]arrow.RecordBatch, error) {
	if err != nil {
		return nil, err
	}
	defer releaseAll(recs)
	out := make([]arrow.RecordBatch, 0, len(recs))
	for _, r := range recs {
		if r.NumRows() == 0 {
			continue
		}
		x, err := a.c.addColumns(ctx, r, a.full.Columns, a.full.Schema)
		if err != nil {
			releaseAll(out)
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

func (a *virtualApplier) Apply(ctx context.Context, in arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	recs, err := a.inner.Apply(ctx, in)
	return a.extend(ctx, recs, err)
}

func (a *virtualApplier) Finish(ctx context.Context) ([]arrow.RecordBatch, error) {
	recs, err := a.inner.Finish(ctx)
	return a.extend(ctx, recs, err)
}

func (a *virtualApplier) Close() error { return a.inner.Close() }

// checkColumns refuses a job whose virtual columns would run an
// undeclared runtime or one whose embeddings do not fit their column.
func (e *Engine) checkColumns(cols []ColumnBinding, schema *arrow.Schema, jobManifest string) error {
	for i := range cols {
		b := &cols[i]
		if b.Kind != bindingUDF {
			continue
		}
		s, err := e.columnSettings(b, jobManifest)
		if err != nil {
			return invalid("column %s: %s", b.Name, tableMessage(err))
		}
		var outs []arrow.Field
		for _, o := range b.Outputs {
			if idx := schema.FieldIndices(o.Column); len(idx) > 0 {
				outs = append(outs, schema.Field(idx[0]))
			}
		}
		if err := checkEmbeddingShape(s, b.InputColumns, schema, outs); err != nil {
			return invalid("column %s: %v", b.Name, err)
		}
	}
	return nil
}

// markFilled records in base that the fragments ids hold values of every
// binding of cols computed by its current version, and forgets fragments
// base no longer has.
func markFilled(base *table.Manifest, cols []ColumnBinding, ids map[string][]uint32) error {
	if len(cols) == 0 && base.Properties[propFilled] == nil {
		return nil
	}
	filled, err := filledMap(base)
	if err != nil {
		return err
	}
	live := make(map[string]bool, len(base.Fragments))
	for _, f := range base.Fragments {
		live[strconv.FormatUint(uint64(f.ID), 10)] = true
	}
	for _, b := range cols {
		for _, id := range ids[b.Name] {
			if filled[b.Name] == nil {
				filled[b.Name] = map[string]string{}
			}
			filled[b.Name][strconv.FormatUint(uint64(id), 10)] = b.Version()
		}
	}
	for name, frags := range filled {
		for id := range frags {
			if !live[id] {
				delete(frags, id)
			}
		}
		if len(frags) == 0 {
			delete(filled, name)
		}
	}
	raw, err := json.Marshal(filled)
	if err != nil {
		return err
	}
	if base.Properties == nil {
		base.Properties = map[string]json.RawMessage{}
	}
	base.Properties[propFilled] = raw
	return nil
}
