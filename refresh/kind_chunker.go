package refresh

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/mvq-dev/mvq/chunker"
)

// The chunker kind: every row's input_column is cut by a built-in chunker
// (package chunker) into 0..N rows: __source_row_id, __chunk_index, the
// other selected columns, and the chunk.
func init() { RegisterKind(KindChunker, chunkerKind{}) }

type chunkerKind struct{}

func (chunkerKind) Traits() Traits {
	return Traits{RowWise: true, Incremental: true, OutputLimit: true, Spec: SpecRequired}
}

func (chunkerKind) Bind(_ *UDTFEntry, doc []byte) (Binding, error) {
	spec, err := chunker.Parse(doc)
	if err != nil {
		var fe *chunker.FieldError
		if errors.As(err, &fe) && fe.Field == "udtf" {
			return nil, invalid("udtf_spec.udtf: %s", fe.Message)
		}
		return nil, invalid("udtf_spec.udtf: %v", err)
	}
	return &chunkerBinding{spec: spec}, nil
}

type chunkerBinding struct{ spec chunker.Spec }

// Columns: __chunk_index, the selected columns (without the input column
// unless keep_input), then the chunk.
func (b *chunkerBinding) Columns(cols []arrow.Field) ([]arrow.Field, error) {
	spec := b.spec
	fields := []arrow.Field{{Name: ChunkIndexColumn, Type: arrow.PrimitiveTypes.Int32}}
	in := -1
	for i, f := range cols {
		if strings.EqualFold(f.Name, spec.InputColumn) {
			in = i
		}
		if strings.EqualFold(f.Name, spec.OutputColumn) {
			return nil, invalid("udtf_spec.udtf: output_column %q clashes with a selected column", spec.OutputColumn)
		}
	}
	if in < 0 {
		return nil, invalid("source_query: must select the chunker's input_column %q", spec.InputColumn)
	}
	if !isText(cols[in].Type) {
		return nil, invalid("source_query: the chunker's input_column %q must be text, it is %s", spec.InputColumn, cols[in].Type)
	}
	for i, f := range cols {
		if i != in || spec.KeepInput {
			fields = append(fields, f)
		}
	}
	return append(fields, arrow.Field{Name: spec.OutputColumn, Type: arrow.BinaryTypes.String}), nil
}

func (b *chunkerBinding) NewApplier(env *ApplyEnv) (Applier, error) {
	return &chunkApplier{env: env}, nil
}

// NoDictionary: chunks are long and mostly distinct.
func (b *chunkerBinding) NoDictionary() []string { return []string{b.spec.OutputColumn} }

func (b *chunkerBinding) BudgetAdvice(plan *Plan, index int, what string) string {
	if what != "output" {
		return ""
	}
	return fmt.Sprintf("refresh with a smaller source_task_size (now %d; this item reads %d source rows) or use a larger chunk_size (now %d) so each row makes fewer chunks; a single row this large needs the larger chunk_size, or higher bounds on the workers",
		plan.Options.SourceTaskSize, plan.Items[index].Rows, b.spec.ChunkSize)
}

// chunkApplier cuts the rows of each batch with intra_applier_concurrency
// goroutines (chunkRows).
type chunkApplier struct{ env *ApplyEnv }

func (a *chunkApplier) Apply(ctx context.Context, q arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	return a.env.Engine.chunkRows(ctx, a.env.View, q, a.env.Workers, a.env.Output)
}

func (a *chunkApplier) Finish(context.Context) ([]arrow.RecordBatch, error) { return nil, nil }
func (a *chunkApplier) Close() error                                        { return nil }

// chunkerSpec is the chunker spec of a chunker view (nil for other kinds).
func (v *View) chunkerSpec() *chunker.Spec {
	if b, ok := v.Binding.(*chunkerBinding); ok {
		return &b.spec
	}
	return nil
}
