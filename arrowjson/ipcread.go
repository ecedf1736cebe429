package arrowjson

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// IPCError is every error ReadIPC and its reader report: the bytes are not
// a valid Arrow IPC stream or file, or decoding them would need more memory
// than allowed. It is always the sender's fault.
type IPCError struct{ Msg string }

func (e *IPCError) Error() string { return "arrowjson: IPC: " + e.Msg }

func ipcErrorf(format string, args ...any) error {
	return &IPCError{Msg: fmt.Sprintf(format, args...)}
}

// asIPCError turns err (or a recovered panic value) into an *IPCError.
func asIPCError(v any) error {
	var ie *IPCError
	switch e := v.(type) {
	case nil:
		return nil
	case error:
		if errors.As(e, &ie) {
			return ie
		}
		return &IPCError{Msg: e.Error()}
	default:
		return &IPCError{Msg: fmt.Sprint(e)}
	}
}

// ReadIPC returns the record batches of an Arrow IPC body held whole in
// data: the stream format, or the file format (data starting with
// "ARROW1"). It is meant for bytes from strangers:
//
//   - stream framing is checked against the bytes present before a message
//     is used, message bodies are used in place, and every length field is
//     bounded by len(data): no length drives an allocation;
//   - what the decoder still allocates (decompressed buffers, dictionary
//     deltas) goes through an allocator that refuses to hold more than
//     maxDecoded bytes at once (at least len(data));
//   - every batch is validated in full (buffer sizes, offsets, UTF-8,
//     nested children, dictionary indices, null counts) before the reader
//     yields it;
//   - a panic while decoding or validating becomes an error.
//
// Every error, returned here or by the reader's Err, is an *IPCError. The
// reader's batches may reference data, which must not change while they
// are in use.
func ReadIPC(data []byte, mem memory.Allocator, maxDecoded int64) (rr array.RecordReader, err error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	maxDecoded = max(maxDecoded, int64(len(data)))
	capped := &cappedAllocator{mem: mem, max: maxDecoded}
	defer func() {
		if p := recover(); p != nil {
			rr, err = nil, asIPCError(p)
		}
	}()
	if len(data) == 0 {
		return nil, ipcErrorf("empty body")
	}
	if bytes.HasPrefix(data, []byte("ARROW1")) {
		return readIPCFile(data, capped)
	}
	return readIPCStream(data, capped)
}

func readIPCStream(data []byte, mem memory.Allocator) (array.RecordReader, error) {
	mr := &sliceMessageReader{data: data}
	mr.refs.Store(1)
	// The IPC reader takes over mr's reference (and releases it on error).
	r, err := ipc.NewReaderFromMessageReader(mr, ipc.WithAllocator(mem))
	if err != nil {
		return nil, asIPCError(err)
	}
	return newValidatingReader(r.Schema(), func() (arrow.RecordBatch, error) {
		if !r.Next() {
			return nil, r.Err()
		}
		rec := r.RecordBatch()
		rec.Retain()
		return rec, nil
	}, r.Release), nil
}

// readIPCFile reads the file format as what it is, the stream format
// between the leading magic (8 bytes with padding) and the footer; the
// footer is an index of the same messages and is only checked for size.
func readIPCFile(data []byte, mem memory.Allocator) (array.RecordReader, error) {
	const magic = "ARROW1"
	const tail = 4 + len(magic) // footer length + magic
	if len(data) < 8+tail || string(data[len(data)-len(magic):]) != magic {
		return nil, ipcErrorf("truncated Arrow IPC file (%d bytes, no trailing magic)", len(data))
	}
	footer := int64(int32(binary.LittleEndian.Uint32(data[len(data)-tail:])))
	if footer <= 0 || 8+footer > int64(len(data)-tail) {
		return nil, ipcErrorf("file footer length %d does not fit the %d bytes sent", footer, len(data))
	}
	return readIPCStream(data[8:int64(len(data)-tail)-footer], mem)
}

// sliceMessageReader yields the messages of an IPC stream held in data,
// without copying: each message's metadata and body are slices of data, so
// a length field can never make it allocate. A length that runs past the
// end of data, a body that is not 8-byte aligned, or bytes after the
// end-of-stream marker are errors.
type sliceMessageReader struct {
	data []byte
	pos  int
	cur  *ipc.Message
	refs atomic.Int64
}

func (r *sliceMessageReader) Retain() { r.refs.Add(1) }

func (r *sliceMessageReader) Release() {
	if r.refs.Add(-1) == 0 && r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
}

func (r *sliceMessageReader) Message() (msg *ipc.Message, err error) {
	defer func() {
		if p := recover(); p != nil {
			msg, err = nil, ipcErrorf("invalid message metadata at offset %d: %v", r.pos, p)
		}
	}()
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	left := len(r.data) - r.pos
	if left == 0 {
		return nil, io.EOF // a stream may end without the end-of-stream marker
	}
	if left < 4 {
		return nil, ipcErrorf("truncated stream: %d stray bytes at offset %d", left, r.pos)
	}
	start := r.pos
	word := binary.LittleEndian.Uint32(r.data[r.pos:])
	hdr := 4
	if word == 0xFFFFFFFF {
		if left < 8 {
			return nil, ipcErrorf("truncated stream: message length missing at offset %d", r.pos)
		}
		word = binary.LittleEndian.Uint32(r.data[r.pos+4:])
		hdr = 8
	}
	if word == 0 {
		r.pos += hdr
		if r.pos != len(r.data) {
			return nil, ipcErrorf("%d bytes after the end-of-stream marker at offset %d", len(r.data)-r.pos, start)
		}
		return nil, io.EOF
	}
	metaLen := int64(int32(word))
	if metaLen < 8 || metaLen > int64(left-hdr) {
		return nil, ipcErrorf("message at offset %d: metadata length %d does not fit the %d bytes left", start, metaLen, left-hdr)
	}
	metaStart := r.pos + hdr
	metaEnd := metaStart + int(metaLen)
	if metaEnd%8 != 0 {
		return nil, ipcErrorf("message at offset %d: body is not 8-byte aligned (metadata length %d)", start, metaLen)
	}
	if err := verifyMessage(r.data[metaStart:metaEnd]); err != nil {
		return nil, ipcErrorf("message at offset %d: invalid metadata: %v", start, err)
	}
	meta := memory.NewBufferBytes(r.data[metaStart:metaEnd])
	probe := ipc.NewMessage(meta, memory.NewBufferBytes(nil))
	bodyLen := probe.BodyLen()
	probe.Release()
	if bodyLen < 0 || bodyLen > int64(len(r.data)-metaEnd) {
		return nil, ipcErrorf("message at offset %d: body length %d does not fit the %d bytes left", start, bodyLen, len(r.data)-metaEnd)
	}
	body := memory.NewBufferBytes(r.data[metaEnd : metaEnd+int(bodyLen)])
	r.cur = ipc.NewMessage(meta, body)
	r.pos = metaEnd + int(bodyLen)
	return r.cur, nil
}

// validatingReader yields batches only after array.ValidateRecordFull
// accepted them; decoding and validation panics become errors.
type validatingReader struct {
	schema  *arrow.Schema
	next    func() (arrow.RecordBatch, error) // nil, nil at the end
	release func()
	cur     arrow.RecordBatch
	err     error
	done    bool
	refs    atomic.Int64
	batches int
}

func newValidatingReader(schema *arrow.Schema, next func() (arrow.RecordBatch, error), release func()) *validatingReader {
	v := &validatingReader{schema: schema, next: next, release: release}
	v.refs.Store(1)
	return v
}

func (v *validatingReader) Schema() *arrow.Schema { return v.schema }

func (v *validatingReader) Next() bool {
	if v.cur != nil {
		v.cur.Release()
		v.cur = nil
	}
	if v.done || v.err != nil {
		return false
	}
	rec, err := v.pull()
	switch {
	case err != nil:
		v.err = err
		return false
	case rec == nil:
		v.done = true
		return false
	}
	v.cur = rec
	return true
}

func (v *validatingReader) pull() (rec arrow.RecordBatch, err error) {
	defer func() {
		if p := recover(); p != nil {
			if rec != nil {
				rec.Release()
			}
			rec, err = nil, ipcErrorf("batch %d: %v", v.batches, asIPCError(p).(*IPCError).Msg)
		}
	}()
	rec, err = v.next()
	if err != nil || rec == nil {
		return nil, asIPCError(err)
	}
	if err := checkBatch(rec, v.schema); err != nil {
		rec.Release()
		return nil, ipcErrorf("batch %d: %v", v.batches, err)
	}
	v.batches++
	return rec, nil
}

// checkBatch validates every column of rec in full against schema.
func checkBatch(rec arrow.RecordBatch, schema *arrow.Schema) error {
	if !rec.Schema().Equal(schema) {
		return fmt.Errorf("schema differs from the stream's")
	}
	for i, col := range rec.Columns() {
		if int64(col.Len()) != rec.NumRows() {
			return fmt.Errorf("column %d (%s) has %d rows, the batch %d", i, schema.Field(i).Name, col.Len(), rec.NumRows())
		}
	}
	return array.ValidateRecordFull(rec)
}

func (v *validatingReader) RecordBatch() arrow.RecordBatch { return v.cur }

// Record is RecordBatch (the older name in array.RecordReader).
func (v *validatingReader) Record() arrow.RecordBatch { return v.cur }

func (v *validatingReader) Err() error { return v.err }

func (v *validatingReader) Retain() { v.refs.Add(1) }

func (v *validatingReader) Release() {
	if v.refs.Add(-1) > 0 {
		return
	}
	if v.cur != nil {
		v.cur.Release()
		v.cur = nil
	}
	if v.release != nil {
		v.release()
		v.release = nil
	}
}

// cappedAllocator refuses (by panicking with an *IPCError, which the
// decoder recovers) to hold more than max bytes at once.
type cappedAllocator struct {
	mem  memory.Allocator
	max  int64
	used atomic.Int64
}

func (a *cappedAllocator) reserve(n int) {
	if a.used.Add(int64(n)) > a.max && n > 0 {
		a.used.Add(-int64(n))
		panic(ipcErrorf("decoding needs more than %d bytes of memory", a.max))
	}
}

func (a *cappedAllocator) Allocate(size int) []byte {
	a.reserve(size)
	return a.mem.Allocate(size)
}

func (a *cappedAllocator) Reallocate(size int, b []byte) []byte {
	a.reserve(size - len(b))
	return a.mem.Reallocate(size, b)
}

func (a *cappedAllocator) Free(b []byte) {
	a.used.Add(-int64(len(b)))
	a.mem.Free(b)
}
