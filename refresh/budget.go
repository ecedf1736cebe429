package refresh

import (
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/udf"
)

// Default bounds of one work item's output (EngineOptions). A worker runs
// several items at once and an item's output is held in memory until it is
// written, so the bytes bound is what keeps a worker's memory in check:
// one item at the bound peaks around twice it.
const (
	DefaultMaxItemOutputRows  = 4_000_000
	DefaultMaxItemOutputBytes = 256 << 20
)

// EngineOptions tune an Engine. Zero values take the defaults.
type EngineOptions struct {
	// MaxItemOutputRows and MaxItemOutputBytes bound the view rows one
	// work item may produce and their size in memory (text plus about 16
	// bytes a row, plus every column copied from the source row into each
	// chunk). Past either, the item stops at once and fails, not
	// retryable: a retry would produce the same. The SQL output of an
	// item is held to the same bounds.
	MaxItemOutputRows  int64
	MaxItemOutputBytes int64
	// Runtimes are the operator's declared runtimes (MVQ_RUNTIMES_FILE);
	// nil: none, and views or manifests naming one are refused.
	Runtimes *udf.Registry
	// CPUItems bounds how many row-wise work items (query and chunker
	// views: in-process SQL, chunking and encoding) apply and write at
	// once in this process; the others wait, with their source rows read
	// from an object store, before reading from a local one (decoding
	// from the page cache is CPU work as well).
	// 0: GOMAXPROCS. The worker's concurrency can then stay high for I/O
	// (reads, user code, commits) while memory follows the cores.
	CPUItems int
}

func (o EngineOptions) withDefaults() EngineOptions {
	if o.MaxItemOutputRows <= 0 {
		o.MaxItemOutputRows = DefaultMaxItemOutputRows
	}
	if o.MaxItemOutputBytes <= 0 {
		o.MaxItemOutputBytes = DefaultMaxItemOutputBytes
	}
	if o.CPUItems <= 0 {
		o.CPUItems = runtime.GOMAXPROCS(0)
	}
	return o
}

// budget counts the output of one work item against the engine's bounds.
// It is shared by the goroutines of an item.
type budget struct {
	maxRows, maxBytes int64
	rows, bytes       atomic.Int64
	what              string // "output" or "SQL output"
	plan              *Plan
	index             int
	advice            budgetAdvisor // nil: the generic advice
}

func (e *Engine) newBudget(what string, plan *Plan, index int, v *View) *budget {
	b := &budget{maxRows: e.opts.MaxItemOutputRows, maxBytes: e.opts.MaxItemOutputBytes, what: what, plan: plan, index: index}
	b.advice, _ = v.Binding.(budgetAdvisor)
	return b
}

// add counts rows of the given size; past a bound it answers the error
// that fails the item.
func (b *budget) add(rows, bytes int64) error {
	r, n := b.rows.Add(rows), b.bytes.Add(bytes)
	if r > b.maxRows || n > b.maxBytes {
		return b.exceeded(r, n, false)
	}
	return nil
}

// fits reports, without counting them, whether rows and bytes more would
// stay within the bounds.
func (b *budget) fits(rows, bytes int64) error {
	if r, n := b.rows.Load()+rows, b.bytes.Load()+bytes; r > b.maxRows || n > b.maxBytes {
		return b.exceeded(r, n, true)
	}
	return nil
}

// full reports whether another goroutine of the item already went past a
// bound.
func (b *budget) full() bool {
	return b.rows.Load() > b.maxRows || b.bytes.Load() > b.maxBytes
}

// exceeded is the error of an item stopped at r rows and n bytes, counted
// or (foreseen) known to be reached by the next row: CodeInvalidInput,
// which the orchestrator does not retry, saying how to proceed.
func (b *budget) exceeded(r, n int64, foreseen bool) error {
	item := b.plan.Items[b.index]
	var how string
	switch {
	case !traitsOf(b.plan.Kind).RowWise:
		how = fmt.Sprintf("a %s view is computed as one item over the whole source, so raise the bounds on the workers, or make it a row-wise view", b.plan.Kind)
	case b.advice != nil && b.advice.BudgetAdvice(b.plan, b.index, b.what) != "":
		how = b.advice.BudgetAdvice(b.plan, b.index, b.what)
	default:
		how = fmt.Sprintf("refresh with a smaller source_task_size (now %d; this item reads %d source rows), or raise the bounds on the workers", b.plan.Options.SourceTaskSize, item.Rows)
	}
	at := "stopped at"
	if foreseen {
		at = "stopped before a row that takes it to at least"
	}
	return errs.Errorf(errs.CodeInvalidInput, "work item %d: %s too large, %s %d rows, %d bytes (bounds: MVQ_MAX_ITEM_OUTPUT_ROWS=%d, MVQ_MAX_ITEM_OUTPUT_BYTES=%d): %s",
		b.index, b.what, at, r, n, b.maxRows, b.maxBytes, how)
}

// collect reads rdr to the end like duck.Collect, counting every batch
// against b and stopping at the first one past a bound. It releases rdr.
func collect(rdr array.RecordReader, b *budget) ([]arrow.RecordBatch, error) {
	defer rdr.Release()
	var out []arrow.RecordBatch
	fail := func(err error) ([]arrow.RecordBatch, error) {
		for _, r := range out {
			r.Release()
		}
		return nil, err
	}
	for rdr.Next() {
		r := rdr.RecordBatch()
		if err := b.add(r.NumRows(), recordBytes(r)); err != nil {
			return fail(err)
		}
		r.Retain()
		out = append(out, r)
	}
	if err := rdr.Err(); err != nil {
		return fail(sqlError(err))
	}
	return out, nil
}

// chunkRowBytes is what a chunk row costs besides its text: the source
// row id, the chunk index and the string offset.
const chunkRowBytes = 16

// valueBytes estimates the bytes value i of a takes in memory.
func valueBytes(a arrow.Array, i int) int64 {
	switch a := a.(type) {
	case *array.String:
		return int64(len(a.Value(i))) + 4
	case *array.LargeString:
		return int64(len(a.Value(i))) + 8
	case *array.StringView:
		return int64(len(a.Value(i))) + 16
	case *array.Binary:
		return int64(len(a.Value(i))) + 4
	case *array.LargeBinary:
		return int64(len(a.Value(i))) + 8
	case *array.BinaryView:
		return int64(len(a.Value(i))) + 16
	}
	if fw, ok := a.DataType().(arrow.FixedWidthDataType); ok {
		return int64(max(fw.BitWidth()/8, 1))
	}
	if a.Len() == 0 {
		return 0
	}
	return dataBytes(a.Data())/int64(a.Len()) + 1
}

// recordBytes is the size of the buffers behind rec (whole buffers, for a
// slice).
func recordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += dataBytes(c.Data())
	}
	return n
}

func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	return n
}
