package datafile

import (
	"bufio"
	"context"
	"io"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/mvq-dev/mvq/errs"
)

// WriterProps are the properties of every data file. The page index (an
// offset index per column chunk) lets a reader of a row range, such as a
// refresh work item, seek straight to its pages instead of decompressing
// every page before them.
// Columns in noDict skip the dictionary encoding Parquet would otherwise
// try first (and abandon, for mostly unique text such as chunks).
func WriterProps(rowGroupRows int, mem memory.Allocator, noDict ...string) (*parquet.WriterProperties, pqarrow.ArrowWriterProperties) {
	opts := []parquet.WriterProperty{
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithMaxRowGroupLength(int64(rowGroupRows)),
		parquet.WithPageIndexEnabled(true),
		parquet.WithAllocator(mem),
	}
	for _, col := range noDict {
		opts = append(opts, parquet.WithDictionaryFor(col, false))
	}
	return parquet.NewWriterProperties(opts...),
		pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(mem))
}

// writeBuffer is how much of a data file Write gathers before handing it
// to w.
const writeBuffer = 256 << 10

// buffers holds Write's buffers between files.
var buffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, writeBuffer) }}

type countingWriter struct {
	w io.Writer
	n int64
}

func (cw *countingWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	return n, err
}

// Write writes records (every one of schema) to w as one data file and
// answers its rows and bytes.
func Write(w io.Writer, schema *arrow.Schema, recs []arrow.RecordBatch, props *parquet.WriterProperties, aprops pqarrow.ArrowWriterProperties, mem memory.Allocator) (rows, size int64, err error) {
	// Pages go out in one buffered write each 256 KiB, not one write(2)
	// per page and footer piece (a small file is then one write).
	bw := buffers.Get().(*bufio.Writer)
	bw.Reset(w)
	defer func() {
		bw.Reset(nil)
		buffers.Put(bw)
	}()
	cw := &countingWriter{w: bw}
	store, convert := storageSchema(schema)
	fw, err := pqarrow.NewFileWriter(store, cw, props, aprops)
	if err != nil {
		return 0, 0, err
	}
	for _, r := range recs {
		if r.NumRows() == 0 {
			continue
		}
		if !r.Schema().Equal(schema) {
			fw.Close()
			return 0, 0, errs.Errorf(errs.CodeSchemaValidation, "record schema %s does not match table schema %s", r.Schema(), schema)
		}
		if convert {
			r = toStorage(r, store, mem)
			defer r.Release()
		}
		if err := fw.WriteBuffered(r); err != nil {
			fw.Close()
			return 0, 0, err
		}
		rows += r.NumRows()
	}
	if err := fw.Close(); err != nil {
		return 0, 0, err
	}
	return rows, cw.n, bw.Flush()
}

// WriteAll drains rdr (records of schema) into files of at most maxRows
// rows each, written in parallel by write (which releases nothing), and
// answers what write answered, in order. Files written before an error
// are not undone.
func WriteAll[T any](ctx context.Context, schema *arrow.Schema, rdr array.RecordReader, maxRows int, write func(ctx context.Context, recs []arrow.RecordBatch) (T, error)) ([]T, error) {
	type job struct {
		idx  int
		recs []arrow.RecordBatch
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan job)
	var (
		mu       sync.Mutex
		frags    = map[int]T{}
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				f, err := write(ctx, j.recs)
				for _, r := range j.recs {
					r.Release()
				}
				if err != nil {
					fail(err)
					continue
				}
				mu.Lock()
				frags[j.idx] = f
				mu.Unlock()
			}
		}()
	}
	var pending []arrow.RecordBatch
	var pendingRows int64
	idx := 0
	flush := func() bool {
		if pendingRows == 0 {
			return true
		}
		select {
		case jobs <- job{idx: idx, recs: pending}:
		case <-ctx.Done():
			for _, r := range pending {
				r.Release()
			}
			pending, pendingRows = nil, 0
			return false
		}
		idx++
		pending, pendingRows = nil, 0
		return true
	}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if !rec.Schema().Equal(schema) {
			fail(errs.Errorf(errs.CodeSchemaValidation, "batch schema does not match the table schema: got %s, want %s", rec.Schema(), schema))
			break
		}
		for off := int64(0); off < rec.NumRows(); {
			n := min(rec.NumRows()-off, int64(maxRows)-pendingRows)
			pending = append(pending, rec.NewSlice(off, off+n))
			pendingRows += n
			off += n
			if pendingRows == int64(maxRows) && !flush() {
				break
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err := rdr.Err(); err != nil {
		fail(errs.Errorf(errs.CodeInvalidInput, "read batches: %v", err))
	}
	if ctx.Err() == nil {
		flush()
	}
	for _, r := range pending {
		r.Release()
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	out := make([]T, 0, len(frags))
	for i := 0; i < idx; i++ {
		out = append(out, frags[i])
	}
	return out, nil
}
