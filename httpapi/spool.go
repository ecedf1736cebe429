package httpapi

import (
	"errors"
	"fmt"
	"os"

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

// newSpoolBudget is the memory all spooled results share, with a share
// per principal (zero: the defaults). A result that finds no room spills
// to its temporary file rather than failing: the query has run already,
// and a 503 would have the client run it again; the file costs disk, not
// memory.
func newSpoolBudget(total, per int64) *quota {
	if total <= 0 {
		total = DefaultSpoolBudgetBytes
	}
	if per <= 0 {
		per = DefaultSpoolPrincipalBytes
	}
	return newQuota(total, per)
}

// roomFor reserves n bytes of budget (nil: no budget) for principal.
func roomFor(budget *quota, principal string, n int64) bool {
	if budget == nil {
		return true
	}
	ok, _, _ := budget.reserve(principal, n)
	return ok
}

// SpoolMemoryInUse is the memory held now by spooled query results, and
// SpoolMemoryPeak the most held at once (for tests and gauges).
func (s *Server) SpoolMemoryInUse() int64 { return s.spoolBudget.inUse() }

func (s *Server) SpoolMemoryPeak() int64 { return s.spoolBudget.peakUse() }

// spool reads rdr to the end and releases it, so whatever rdr holds (a
// DuckDB session) is free before the client reads a byte. Batches are
// kept in memory up to memBytes and while budget has room for principal,
// the rest in an Arrow IPC stream in a temporary file (unlinked at once:
// it goes away with the reader, or with the process). The returned reader
// replays them in order; Release it (which gives the memory back to the
// budget).
func spool(rdr array.RecordReader, memBytes int64, budget *quota, principal string) (array.RecordReader, error) {
	defer rdr.Release()
	s := &spooled{schema: rdr.Schema(), budget: budget, principal: principal}
	var w *ipc.Writer
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if n := batchBytes(rec); w == nil && s.reserved+n <= memBytes && roomFor(budget, principal, n) {
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
	budget    *quota
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
	if s.budget != nil {
		s.budget.release(s.principal, s.reserved)
	}
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
