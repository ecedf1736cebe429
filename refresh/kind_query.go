package refresh

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// The query kind: each view row is one source row, projected and filtered
// by the source query.
func init() { RegisterKind(KindQuery, queryKind{}) }

type queryKind struct{}

func (queryKind) Traits() Traits {
	return Traits{RowWise: true, Incremental: true, Spec: SpecForbidden}
}

func (queryKind) Bind(*UDTFEntry, []byte) (Binding, error) {
	return queryBinding{}, nil
}

type queryBinding struct{}

func (queryBinding) Columns(selected []arrow.Field) ([]arrow.Field, error) { return selected, nil }

func (queryBinding) NewApplier(env *ApplyEnv) (Applier, error) { return &projectApplier{env: env}, nil }

// projectApplier shapes the query output: the selected columns without
// any _rowaddr a star brought in, conformed to the view schema.
type projectApplier struct{ env *ApplyEnv }

func (a *projectApplier) Apply(ctx context.Context, q arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	v := a.env.View
	cols := make([]arrow.Array, 0, q.NumCols())
	for i, f := range q.Schema().Fields() {
		if i == 0 || f.Name != table.RowAddrColumn {
			cols = append(cols, q.Column(i))
		}
	}
	if len(cols) != v.Schema.NumFields() {
		return nil, errs.Errorf(errs.CodeSchemaValidation, "source_query now produces %d columns, the view has %d", len(cols), v.Schema.NumFields())
	}
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: v.Schema.Field(i).Name, Type: c.DataType(), Nullable: true}
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, q.NumRows())
	defer rec.Release()
	out, err := table.Conform(ctx, rec, v.Schema, a.env.Mem)
	if err != nil {
		return nil, err
	}
	return []arrow.RecordBatch{out}, nil
}

func (a *projectApplier) Finish(context.Context) ([]arrow.RecordBatch, error) { return nil, nil }
func (a *projectApplier) Close() error                                        { return nil }
