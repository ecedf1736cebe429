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

// spool reads rdr to the end and releases it, so whatever rdr holds (a
// DuckDB session) is free before the client reads a byte. Batches are
// kept in memory up to memBytes, the rest in an Arrow IPC stream in a
// temporary file (unlinked at once: it goes away with the reader, or with
// the process). The returned reader replays them in order; Release it.
func spool(rdr array.RecordReader, memBytes int64) (array.RecordReader, error) {
	defer rdr.Release()
	s := &spooled{schema: rdr.Schema()}
	var used int64
	var w *ipc.Writer
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if w == nil && used+batchBytes(rec) <= memBytes {
			rec.Retain()
			s.mem = append(s.mem, rec)
			used += batchBytes(rec)
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
	schema *arrow.Schema
	mem    []arrow.RecordBatch
	file   *os.File
	disk   *ipc.Reader
	cur    arrow.RecordBatch
	i      int
	err    error
	done   bool
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
