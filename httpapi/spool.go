package httpapi

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// DefaultSpoolMemoryBytes is how much of a query result is kept in memory
// before the rest goes to a temporary file.
const DefaultSpoolMemoryBytes = 64 << 20

// Defaults of the spool memory budget: all results being spooled or
// served together keep at most DefaultSpoolBudgetBytes in memory, one
// principal's at most DefaultSpoolPrincipalBytes; past either, batches go
// to the result's temporary file.
const (
	DefaultSpoolBudgetBytes    = 256 << 20
	DefaultSpoolPrincipalBytes = 64 << 20
)

// spoolBudget is the memory all spooled results share, with a share per
// principal. A result that finds no room spills to its temporary file
// rather than failing: the query has run already, and a 503 would have
// the client run it again; the file costs disk, not memory.
type spoolBudget struct {
	total, per int64
	mu         sync.Mutex
	used, peak int64
	by         map[string]int64
}

func newSpoolBudget(total, per int64) *spoolBudget {
	if total <= 0 {
		total = DefaultSpoolBudgetBytes
	}
	if per <= 0 {
		per = DefaultSpoolPrincipalBytes
	}
	return &spoolBudget{total: total, per: min(per, total), by: map[string]int64{}}
}

// reserve takes n bytes for principal, or reports that there is no room.
func (b *spoolBudget) reserve(principal string, n int64) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.total || b.by[principal]+n > b.per {
		return false
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	b.by[principal] += n
	return true
}

func (b *spoolBudget) release(principal string, n int64) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.by[principal] -= n; b.by[principal] <= 0 {
		delete(b.by, principal)
	}
}

// inUse is the memory held by spooled results now.
func (b *spoolBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// SpoolMemoryInUse is the memory held now by spooled query results, and
// SpoolMemoryPeak the most held at once (for tests and gauges).
func (s *Server) SpoolMemoryInUse() int64 { return s.spoolBudget.inUse() }

func (s *Server) SpoolMemoryPeak() int64 {
	s.spoolBudget.mu.Lock()
	defer s.spoolBudget.mu.Unlock()
	return s.spoolBudget.peak
}

// spool reads rdr to the end and releases it, so whatever rdr holds (a
// DuckDB session) is free before the client reads a byte. Batches are
// kept in memory up to memBytes and while budget has room for principal,
// the rest in an Arrow IPC stream in a temporary file (unlinked at once:
// it goes away with the reader, or with the process). The returned reader
// replays them in order; Release it (which gives the memory back to the
// budget).
func spool(rdr array.RecordReader, memBytes int64, budget *spoolBudget, principal string) (array.RecordReader, error) {
	defer rdr.Release()
	s := &spooled{schema: rdr.Schema(), budget: budget, principal: principal}
	var w *ipc.Writer
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if n := batchBytes(rec); w == nil && s.reserved+n <= memBytes && budget.reserve(principal, n) {
			rec.Retain()
			s.mem = append(s.mem, rec)
			s.reserved += n
			continue
		}
		if w == nil {
			f, err := os.CreateTemp("", "mvq-spool-*.arrows")
			if err != nil {
				s.Release()
				return nil, fmt.Errorf("spool: %w", err)
			}
			_ = os.Remove(f.Name()) // open files outlive their name
			s.file = f
			w = ipc.NewWriter(f, ipc.WithSchema(s.schema))
		}
		if err := w.Write(rec); err != nil {
			s.Release()
			return nil, fmt.Errorf("spool: %w", err)
		}
	}
	if err := rdr.Err(); err != nil {
		s.Release()
		return nil, err
	}
	if w != nil {
		if err := w.Close(); err != nil {
			s.Release()
			return nil, fmt.Errorf("spool: %w", err)
		}
		if _, err := s.file.Seek(0, 0); err != nil {
			s.Release()
			return nil, fmt.Errorf("spool: %w", err)
		}
		r, err := ipc.NewReader(s.file, ipc.WithSchema(s.schema))
		if err != nil {
			s.Release()
			return nil, fmt.Errorf("spool: %w", err)
		}
		s.disk = r
	}
	return s, nil
}

// spooled replays a spooled result: the batches in memory, then those in
// the file.
type spooled struct {
	budget    *spoolBudget
	principal string
	reserved  int64 // bytes of mem taken from budget
	schema    *arrow.Schema
	mem       []arrow.RecordBatch
	file      *os.File
	disk      *ipc.Reader
	cur       arrow.RecordBatch
	i         int
	err       error
	done      bool
}

func (s *spooled) Retain()                        {}
func (s *spooled) Schema() *arrow.Schema          { return s.schema }
func (s *spooled) RecordBatch() arrow.RecordBatch { return s.cur }
func (s *spooled) Record() arrow.RecordBatch      { return s.cur }
func (s *spooled) Err() error                     { return s.err }

func (s *spooled) Next() bool {
	if s.done {
		return false
	}
	if s.i < len(s.mem) {
		s.cur = s.mem[s.i]
		s.i++
		return true
	}
	if s.disk != nil && s.disk.Next() {
		s.cur = s.disk.RecordBatch()
		return true
	}
	if s.disk != nil {
		if err := s.disk.Err(); err != nil && !errors.Is(err, os.ErrClosed) {
			s.err = err
		}
	}
	s.cur = nil
	return false
}

// Release frees the batches and closes the file; it is idempotent.
func (s *spooled) Release() {
	if s.done {
		return
	}
	s.done = true
	for _, r := range s.mem {
		r.Release()
	}
	s.mem, s.cur = nil, nil
	s.budget.release(s.principal, s.reserved)
	s.reserved = 0
	if s.disk != nil {
		s.disk.Release()
	}
	if s.file != nil {
		s.file.Close()
	}
}

// batchBytes is the memory the buffers of rec occupy.
func batchBytes(rec arrow.RecordBatch) int64 {
	var n int64
	var add func(d arrow.ArrayData)
	add = func(d arrow.ArrayData) {
		for _, b := range d.Buffers() {
			if b != nil {
				n += int64(b.Len())
			}
		}
		for _, c := range d.Children() {
			add(c)
		}
	}
	for _, col := range rec.Columns() {
		add(col.Data())
	}
	return n
}
