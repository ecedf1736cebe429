package udf

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Error is a failure of user code or of its endpoint.
type Error struct {
	Runtime string
	Msg     string
	// Permanent: a retry of the same input would fail the same way (bad
	// output, a crash on that input, a 4xx answer).
	Permanent bool
	// Timeout is the runtime's timeout when the failure is that it
	// passed without an answer (after the runtime's retries, for http).
	Timeout time.Duration
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("runtime %s: %s: %v", e.Runtime, e.Msg, e.Err)
	}
	return fmt.Sprintf("runtime %s: %s", e.Runtime, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

func failf(rt string, permanent bool, format string, args ...any) *Error {
	return &Error{Runtime: rt, Msg: fmt.Sprintf(format, args...), Permanent: permanent}
}

// Mode says how output rows relate to input rows.
type Mode uint8

const (
	// RowWise: exactly one output row per input row, in the same order.
	RowWise Mode = iota
	// Table: any number of output rows per input batch.
	Table
)

// Call is one use of a runtime: its settings, how many subprocesses (or
// requests) may work on it at once, and where stderr lines go.
type Call struct {
	Settings Settings
	Mode     Mode
	// Parallel bounds the batches of this call in flight (exec: the
	// subprocesses it uses; http: also bounded by MaxInFlight per
	// runtime across calls). 0 means 1.
	Parallel int
	// Events receives stderr lines of exec subprocesses (at most
	// MaxEventLines per call); nil drops them.
	Events func(string)
}

// MaxEventLines caps the stderr lines one call reports.
const MaxEventLines = 50

// Manager runs calls: it keeps the exec subprocess pools and the http
// client and in-flight limits of one process. It is safe for concurrent
// use; Close stops every subprocess.
type Manager struct {
	Mem memory.Allocator

	mu     sync.Mutex
	pools  map[string]*pool
	sems   map[string]chan struct{}
	client *http.Client
	closed bool
	// maxIdle bounds the idle subprocesses kept per pool.
	maxIdle int
	// IdleTimeout: an idle subprocess, and a pool with none and no call
	// in progress, is closed after this long. MaxPools bounds the pools
	// (environments) of one runtime: past it, the least recently used
	// pools without a call in progress are closed. Set them before the
	// first call.
	IdleTimeout time.Duration
	MaxPools    int
	stopJanitor chan struct{}
	// sleep waits between http retries (tests shorten nothing: it is
	// time.After with the context).
	backoffBase time.Duration
}

// NewManager returns a manager with no processes started.
func NewManager(mem memory.Allocator) *Manager {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return &Manager{Mem: mem, pools: map[string]*pool{}, sems: map[string]chan struct{}{},
		client: &http.Client{}, maxIdle: 64, backoffBase: 100 * time.Millisecond,
		IdleTimeout: DefaultIdleTimeout, MaxPools: DefaultMaxPools}
}

// Defaults of the subprocess pools' bounds.
const (
	DefaultIdleTimeout = 5 * time.Minute
	DefaultMaxPools    = 8
)

// Close stops every pooled subprocess.
func (m *Manager) Close() error {
	m.mu.Lock()
	pools := m.pools
	m.pools, m.closed = map[string]*pool{}, true
	if m.stopJanitor != nil {
		close(m.stopJanitor)
		m.stopJanitor = nil
	}
	m.mu.Unlock()
	for _, p := range pools {
		p.close()
	}
	return nil
}

// Run applies the call to in and returns the output: for RowWise, a
// batch of in.NumRows() rows with the columns of out; for Table, any
// number of rows with those columns. Columns are matched by name; the
// caller conforms types. in is cut into batches of MaxBatchRows rows.
func (m *Manager) Run(ctx context.Context, c Call, in arrow.RecordBatch, out *arrow.Schema) (arrow.RecordBatch, error) {
	s := c.Settings
	n := int(in.NumRows())
	size := max(s.MaxBatchRows, 1)
	var parts [][2]int
	for lo := 0; lo < n; lo += size {
		parts = append(parts, [2]int{lo, min(lo+size, n)})
	}
	if len(parts) == 0 && c.Mode == Table {
		parts = [][2]int{{0, 0}}
	}
	results := make([]arrow.RecordBatch, len(parts))
	defer func() {
		for _, r := range results {
			if r != nil {
				r.Release()
			}
		}
	}()
	events := newEventCap(c.Events)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		next     = make(chan int)
	)
	workers := min(max(c.Parallel, 1), max(len(parts), 1))
	if s.Kind == KindHTTP && s.MaxInFlight > 0 {
		workers = min(workers, s.MaxInFlight)
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				slice := in.NewSlice(int64(parts[i][0]), int64(parts[i][1]))
				rec, err := m.runBatch(ctx, c, slice, int64(parts[i][0]), out, events)
				slice.Release()
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					continue
				}
				results[i] = rec
			}
		}()
	}
	for i := range parts {
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return concat(m.Mem, out, results)
}

func (m *Manager) runBatch(ctx context.Context, c Call, in arrow.RecordBatch, base int64, out *arrow.Schema, ev *eventCap) (arrow.RecordBatch, error) {
	s := c.Settings
	var rec arrow.RecordBatch
	var err error
	switch s.Kind {
	case KindExec:
		rec, err = m.execBatch(ctx, c, in, base, out, ev)
	case KindHTTP:
		rec, err = m.httpBatch(ctx, c, in, base, out)
	default:
		return nil, failf(s.Name, true, "unknown kind %q", s.Kind)
	}
	if err != nil {
		return nil, err
	}
	if c.Mode == RowWise && rec.NumRows() != in.NumRows() {
		rec.Release()
		return nil, failf(s.Name, true, "answered %d rows for %d input rows", rec.NumRows(), in.NumRows())
	}
	return rec, nil
}

// concat joins recs (nil entries skipped) into one batch of schema s.
func concat(mem memory.Allocator, s *arrow.Schema, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	var n int64
	var live []arrow.RecordBatch
	for _, r := range recs {
		if r != nil {
			live = append(live, r)
			n += r.NumRows()
		}
	}
	if len(live) == 1 && live[0].Schema().Equal(s) {
		live[0].Retain()
		return live[0], nil
	}
	cols := make([]arrow.Array, s.NumFields())
	for i, f := range s.Fields() {
		parts := make([]arrow.Array, 0, len(live))
		for _, r := range live {
			idx := r.Schema().FieldIndices(f.Name)
			if len(idx) == 0 {
				for _, c := range cols[:i] {
					c.Release()
				}
				return nil, fmt.Errorf("udf output lacks column %q", f.Name)
			}
			parts = append(parts, r.Column(idx[0]))
		}
		if len(parts) == 0 {
			b := array.NewBuilder(mem, f.Type)
			cols[i] = b.NewArray()
			b.Release()
			continue
		}
		c, err := array.Concatenate(parts, mem)
		if err != nil {
			for _, c := range cols[:i] {
				c.Release()
			}
			return nil, err
		}
		cols[i] = c
	}
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: s.Field(i).Name, Type: c.DataType(), Nullable: true}
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, n)
	for _, c := range cols {
		c.Release()
	}
	return rec, nil
}

// eventCap forwards at most MaxEventLines lines.
type eventCap struct {
	mu   sync.Mutex
	f    func(string)
	n    int
	said bool
}

func newEventCap(f func(string)) *eventCap { return &eventCap{f: f} }

func (e *eventCap) line(s string) {
	if e == nil || e.f == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n >= MaxEventLines {
		if !e.said {
			e.said = true
			e.f(fmt.Sprintf("(more stderr lines dropped after %d)", MaxEventLines))
		}
		return
	}
	e.n++
	if len(s) > 1024 {
		s = s[:1024] + "…"
	}
	e.f(s)
}

// IsPermanent reports whether err is a user-code failure a retry cannot
// fix.
func IsPermanent(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Permanent
}
