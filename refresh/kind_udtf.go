package refresh

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/mvq-dev/mvq/table"
)

// The udtf kind: any SQL over the whole source (aggregates too), its
// output recomputed whole at every refresh. The udtf_spec, when given, is
// stored as it is; the function is the SQL.
func init() { RegisterKind(KindUDTF, udtfKind{}) }

type udtfKind struct{}

func (udtfKind) Traits() Traits { return Traits{} }

// Bind: a udtf that is base64 of {"runtime": ...} runs user code
// (kind_udtf_runtime.go); any other is stored as it is and the function
// is the SQL.
func (udtfKind) Bind(u *UDTFEntry, doc []byte) (Binding, error) {
	if u != nil {
		d, ok, err := parseUDFDoc(doc, "udtf_spec.udtf")
		if err != nil {
			return nil, err
		}
		if ok {
			return bindRuntimeUDTF(u, d)
		}
	}
	return sqlUDTFBinding{}, nil
}

type sqlUDTFBinding struct{}

// Columns are the query's, each with a unique, unreserved name.
func (sqlUDTFBinding) Columns(selected []arrow.Field) ([]arrow.Field, error) {
	if len(selected) == 0 {
		return nil, invalid("source_query: selects no columns")
	}
	seen := map[string]bool{}
	for _, f := range selected {
		if f.Name == "" || f.Name == table.RowAddrColumn || seen[f.Name] {
			return nil, invalid("source_query: output column %q is empty, reserved or repeated; give each column a unique name with AS", f.Name)
		}
		seen[f.Name] = true
	}
	return selected, nil
}

func (sqlUDTFBinding) NewApplier(env *ApplyEnv) (Applier, error) {
	return &conformApplier{env: env}, nil
}

// conformApplier passes the query output through, conformed to the view
// schema.
type conformApplier struct{ env *ApplyEnv }

func (a *conformApplier) Apply(ctx context.Context, in arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	rec, err := table.Conform(ctx, in, a.env.View.Schema, a.env.Mem)
	if err != nil {
		return nil, err
	}
	return []arrow.RecordBatch{rec}, nil
}

func (a *conformApplier) Finish(context.Context) ([]arrow.RecordBatch, error) { return nil, nil }
func (a *conformApplier) Close() error                                        { return nil }
