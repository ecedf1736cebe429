package refresh

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"

	"github.com/mvq-dev/mvq/chunker"
	"github.com/mvq-dev/mvq/errs"
	lancefile "github.com/mvq-dev/mvq/lance/file"
	"github.com/mvq-dev/mvq/table"
)

// The chunker kind: every row's input_column is cut by a built-in chunker
// (package chunker) into 0..N rows: __source_row_id, __chunk_index, the
// other selected columns, and the chunk.
func init() { RegisterKind(KindChunker, chunkerKind{}) }

// Output batches of the chunker are cut at this many rows or bytes of
// chunk text, whichever comes first.
const (
	chunkBatchRows  = 8192
	chunkBatchBytes = 64 << 20
)

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
	return &chunkApplier{env: env, spec: &b.spec}, nil
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
type chunkApplier struct {
	env  *ApplyEnv
	spec *chunker.Spec
}

func (a *chunkApplier) Apply(ctx context.Context, q arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	return a.env.Engine.chunkRows(ctx, a.env.View, a.spec, q, a.env.Workers, a.env.Output)
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

// texts is what the chunker reads: utf8, large_utf8 and utf8_view arrays.
type texts interface {
	IsNull(int) bool
	Value(int) string
}

// chunkRows expands each row of q into its chunks. The rows are split into
// workers contiguous parts chunked concurrently; the parts' outputs are
// joined in order, so rows stay in (__source_row_id, __chunk_index) order.
// The chunks count against bud as they are made; the first row past it
// stops every part.
func (e *Engine) chunkRows(ctx context.Context, v *View, spec *chunker.Spec, q arrow.RecordBatch, workers int, bud *budget) ([]arrow.RecordBatch, error) {
	ch, err := chunker.New(*spec)
	if err != nil {
		return nil, err
	}
	in := -1
	for i, f := range q.Schema().Fields() {
		if i > 0 && strings.EqualFold(f.Name, spec.InputColumn) {
			in = i
		}
	}
	if in < 0 {
		return nil, errs.Errorf(errs.CodeSchemaValidation, "source_query no longer selects the chunker's input_column %q", spec.InputColumn)
	}
	txt, ok := q.Column(in).(texts)
	if !ok {
		return nil, errs.Errorf(errs.CodeSchemaValidation, "input_column %q is %s, not text", spec.InputColumn, q.Column(in).DataType())
	}
	// Where each view column comes from: a query column, or -1 for the
	// chunk index and -2 for the chunk.
	from := make([]int, v.Schema.NumFields())
	for i, f := range v.Schema.Fields() {
		switch {
		case i == 0:
			from[i] = 0
		case f.Name == ChunkIndexColumn:
			from[i] = -1
		case i == v.Schema.NumFields()-1:
			from[i] = -2
		default:
			idx := q.Schema().FieldIndices(f.Name)
			if len(idx) == 0 {
				return nil, errs.Errorf(errs.CodeSchemaValidation, "source_query no longer selects view column %q", f.Name)
			}
			from[i] = idx[0]
		}
	}
	c := &chunkJob{e: e, v: v, spec: spec, q: q, ch: ch, txt: txt, txtArr: q.Column(in), from: from, bud: bud}
	n := int(q.NumRows())
	workers = max(min(workers, n), 1)
	parts := make([][]arrow.RecordBatch, workers)
	errList := make([]error, workers)
	var wg sync.WaitGroup
	for p := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A panic on a row fails the item, not the process.
			errList[p] = table.Recover("chunk rows", func() (err error) {
				if e.chunkHook != nil {
					e.chunkHook()
				}
				parts[p], err = c.run(ctx, n*p/workers, n*(p+1)/workers)
				return err
			})
		}()
	}
	wg.Wait()
	// The chunks' codes are cut: the text's go now, not a collection
	// after the text does.
	lancefile.DropCodes(c.txtArr)
	var out []arrow.RecordBatch
	for _, part := range parts {
		out = append(out, part...)
	}
	for _, err := range errList {
		if err != nil {
			for _, b := range out {
				b.Release()
			}
			return nil, err
		}
	}
	return out, nil
}

// chunkJob is one call of chunkRows: the query output q and how each view
// column is made from it.
type chunkJob struct {
	e    *Engine
	v    *View
	spec *chunker.Spec
	q    arrow.RecordBatch
	ch   chunker.Chunker
	txt  texts
	// txtArr is txt as read: when the source file's FSST codes came with
	// it, the chunks' codes are cut from them (lance/file CodeCutter).
	txtArr arrow.Array
	from   []int
	bud    *budget
}

// carry is the size of the query columns row r copies into each of its
// chunks.
func (c *chunkJob) carry(r int) int64 {
	var n int64
	for i, src := range c.from {
		if i > 0 && src >= 0 {
			n += valueBytes(c.q.Column(src), r)
		}
	}
	return n
}

// admit counts the chunks of row r against the budget. Before the row is
// cut (chunks nil) it checks a lower bound of what the row will make, so
// a row far too large fails before the chunker allocates its chunks; the
// bound is computed only when the row could matter.
func (c *chunkJob) admit(r int, text string, chunks []string) error {
	perRow := int64(chunkRowBytes) + c.carry(r)
	if chunks == nil {
		n := int64(len(text))
		if c.bud.fits(n, n+n*perRow) == nil {
			return nil
		}
		k, tb := minChunks(c.spec, text)
		return c.bud.fits(k, tb+k*perRow)
	}
	var tb int64
	for _, s := range chunks {
		tb += int64(len(s))
	}
	k := int64(len(chunks))
	return c.bud.add(k, tb+k*perRow)
}

// run chunks rows [lo, hi) of the query output into view batches.
func (c *chunkJob) run(ctx context.Context, lo, hi int) ([]arrow.RecordBatch, error) {
	mem := c.e.mem
	var (
		out    []arrow.RecordBatch
		rows   []int64
		index  []int32
		nbytes int
		buf    []string
	)
	sb := array.NewStringBuilder(mem)
	defer sb.Release()
	// A chunk is a substring of its row's text: its FSST codes are cut
	// from the text's, when they came with it, and the writer writes them
	// as they are instead of compressing the chunk again (nil: no codes).
	cut := lancefile.NewCodeCutter(c.txtArr)
	// Chunks hold about the text of their rows, plus the overlap: reserve
	// that much so the builder does not grow by copying.
	var textBytes int
	for r := lo; r < hi; r++ {
		textBytes += len(c.txt.Value(r))
	}
	reserve := func() {
		n := min(textBytes+textBytes/4, chunkBatchBytes+chunkBatchBytes/4)
		sb.ReserveData(n)
		cut.Reserve(n)
	}
	reserve()
	fail := func(err error) ([]arrow.RecordBatch, error) {
		for _, b := range out {
			b.Release()
		}
		return nil, err
	}
	flush := func() error {
		rec, err := c.batch(ctx, rows, index, sb, cut)
		if err != nil {
			return err
		}
		out = append(out, rec)
		rows, index, nbytes = rows[:0], index[:0], 0
		reserve()
		return nil
	}
	for r := lo; r < hi; r++ {
		if r%64 == 0 && ctx.Err() != nil {
			return fail(ctx.Err())
		}
		if c.txt.IsNull(r) {
			continue
		}
		text := c.txt.Value(r)
		textBytes -= len(text)
		if c.bud.full() {
			return fail(c.bud.fits(0, 0))
		}
		if err := c.admit(r, text, nil); err != nil {
			return fail(err)
		}
		buf = c.ch.Chunk(text, buf[:0])
		if err := c.admit(r, text, buf); err != nil {
			return fail(err)
		}
		cut.Value(r, text)
		for k, s := range buf {
			rows = append(rows, int64(r))
			index = append(index, int32(k))
			sb.Append(s)
			cut.Cut(s)
			nbytes += len(s)
			if len(rows) >= chunkBatchRows || nbytes >= chunkBatchBytes {
				if err := flush(); err != nil {
					return fail(err)
				}
			}
		}
	}
	if len(rows) > 0 {
		if err := flush(); err != nil {
			return fail(err)
		}
	}
	return out, nil
}

// batch builds one view batch: the query rows at rows, the chunk indexes,
// and the chunks in sb (which it empties), with the codes cut has for them.
func (c *chunkJob) batch(ctx context.Context, rows []int64, index []int32, sb *array.StringBuilder, cut *lancefile.CodeCutter) (arrow.RecordBatch, error) {
	mem := c.e.mem
	ctx = compute.WithAllocator(ctx, mem)
	ib := array.NewInt64Builder(mem)
	ib.AppendValues(rows, nil)
	take := ib.NewArray()
	ib.Release()
	defer take.Release()
	cols := make([]arrow.Array, len(c.from))
	defer func() {
		for _, col := range cols {
			if col != nil {
				col.Release()
			}
		}
	}()
	for i, src := range c.from {
		switch src {
		case -1:
			b := array.NewInt32Builder(mem)
			b.AppendValues(index, nil)
			cols[i] = b.NewArray()
			b.Release()
		case -2:
			cols[i] = sb.NewArray()
			cut.Attach(cols[i])
		default:
			col, err := compute.TakeArray(ctx, c.q.Column(src), take)
			if err != nil {
				return nil, err
			}
			cols[i] = col
		}
	}
	fields := make([]arrow.Field, len(cols))
	for i, col := range cols {
		fields[i] = arrow.Field{Name: c.v.Schema.Field(i).Name, Type: col.DataType(), Nullable: true}
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(len(rows)))
	defer rec.Release()
	return table.Conform(ctx, rec, c.v.Schema, mem)
}

// minChunks is a lower bound of the chunks and chunk text bytes spec cuts
// text into: every strategy covers each non-space character at least once
// with chunks of at most chunk_size units. It reads text once.
func minChunks(spec *chunker.Spec, text string) (chunks, bytes int64) {
	var units int64
	inWord := false
	words := spec.Unit == chunker.UnitWords
	for i := 0; i < len(text); {
		c, w := rune(text[i]), 1
		if c >= utf8.RuneSelf {
			c, w = utf8.DecodeRuneInString(text[i:])
		}
		space := unicode.IsSpace(c)
		if !space {
			bytes += int64(w)
			if !words || !inWord {
				units++
			}
		}
		inWord = !space
		i += w
	}
	size := int64(max(spec.ChunkSize, 1))
	return (units + size - 1) / size, bytes
}
