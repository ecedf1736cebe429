package dataset

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// A reader for the one Arrow IPC file shape a deletion file has: one
// non-null uint32 column "row_id", one record batch, buffers optionally
// compressed (zstd or lz4 frames). It does not use a general Arrow reader
// because those trust the file's flatbuffer lengths (a hostile file makes
// them allocate without bound); every offset and length here is checked
// against the input, and decompression stops at the size the batch's row
// count implies.

// fbTable is a flatbuffer table inside buf.
type fbTable struct {
	buf     []byte
	pos     int // table start
	vt      int // vtable start
	vtSize  int
	objSize int
}

func u32at(b []byte, p int) (uint32, bool) {
	if p < 0 || p > len(b)-4 {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b[p:]), true
}

func fbTableAt(buf []byte, pos int) (fbTable, error) {
	so, ok := u32at(buf, pos)
	if !ok {
		return fbTable{}, corrupt("flatbuffer table at %d outside %d bytes", pos, len(buf))
	}
	vt := pos - int(int32(so))
	if vt < 0 || vt > len(buf)-4 {
		return fbTable{}, corrupt("flatbuffer vtable at %d outside %d bytes", vt, len(buf))
	}
	t := fbTable{buf: buf, pos: pos, vt: vt,
		vtSize:  int(binary.LittleEndian.Uint16(buf[vt:])),
		objSize: int(binary.LittleEndian.Uint16(buf[vt+2:]))}
	if t.vtSize < 4 || t.vtSize%2 != 0 || vt+t.vtSize > len(buf) || pos+t.objSize > len(buf) {
		return fbTable{}, corrupt("flatbuffer vtable sizes %d/%d do not fit", t.vtSize, t.objSize)
	}
	return t, nil
}

func fbRoot(buf []byte) (fbTable, error) {
	off, ok := u32at(buf, 0)
	if !ok || off > math.MaxInt32 {
		return fbTable{}, corrupt("flatbuffer of %d bytes has no root", len(buf))
	}
	return fbTableAt(buf, int(off))
}

// field returns the absolute position of field i, 0 when absent.
func (t fbTable) field(i int) (int, error) {
	e := 4 + 2*i
	if e+2 > t.vtSize {
		return 0, nil
	}
	o := int(binary.LittleEndian.Uint16(t.buf[t.vt+e:]))
	if o == 0 {
		return 0, nil
	}
	if o >= t.objSize {
		return 0, corrupt("flatbuffer field %d at %d outside its table of %d bytes", i, o, t.objSize)
	}
	return t.pos + o, nil
}

func (t fbTable) scalar(i, size int) (uint64, error) {
	p, err := t.field(i)
	if err != nil || p == 0 {
		return 0, err
	}
	if p+size > len(t.buf) {
		return 0, corrupt("flatbuffer field %d runs past the buffer", i)
	}
	switch size {
	case 1:
		return uint64(t.buf[p]), nil
	case 2:
		return uint64(binary.LittleEndian.Uint16(t.buf[p:])), nil
	case 4:
		return uint64(binary.LittleEndian.Uint32(t.buf[p:])), nil
	}
	return binary.LittleEndian.Uint64(t.buf[p:]), nil
}

// ref follows the uoffset stored in field i; 0 when absent.
func (t fbTable) ref(i int) (int, error) {
	p, err := t.field(i)
	if err != nil || p == 0 {
		return 0, err
	}
	o, ok := u32at(t.buf, p)
	if !ok || int64(p)+int64(o) > int64(len(t.buf)) {
		return 0, corrupt("flatbuffer reference in field %d outside the buffer", i)
	}
	return p + int(o), nil
}

func (t fbTable) table(i int) (fbTable, bool, error) {
	p, err := t.ref(i)
	if err != nil || p == 0 {
		return fbTable{}, false, err
	}
	s, err := fbTableAt(t.buf, p)
	return s, err == nil, err
}

// vector returns the start and length of the vector in field i, whose
// elements are elem bytes (4 for tables and strings).
func (t fbTable) vector(i, elem int) (start, n int, err error) {
	p, err := t.ref(i)
	if err != nil || p == 0 {
		return 0, 0, err
	}
	l, ok := u32at(t.buf, p)
	if !ok || uint64(l)*uint64(elem) > uint64(len(t.buf)-p-4) {
		return 0, 0, corrupt("flatbuffer vector in field %d of %d elements runs past the buffer", i, l)
	}
	return p + 4, int(l), nil
}

func (t fbTable) vectorTable(start, k int) (fbTable, error) {
	p := start + 4*k
	o, _ := u32at(t.buf, p)
	if int64(p)+int64(o) > int64(len(t.buf)) {
		return fbTable{}, corrupt("flatbuffer vector element outside the buffer")
	}
	return fbTableAt(t.buf, p+int(o))
}

func (t fbTable) str(i int) (string, error) {
	start, n, err := t.vector(i, 1)
	if err != nil {
		return "", err
	}
	return string(t.buf[start : start+n]), nil
}

// Arrow flatbuffer field numbers (format/Schema.fbs, Message.fbs, File.fbs).
const (
	footerSchema        = 1
	footerRecordBatches = 3
	schemaFields        = 1
	fieldName           = 0
	fieldNullable       = 1
	fieldTypeType       = 2
	fieldType           = 3
	fieldDictionary     = 4
	fieldChildren       = 5
	intBitWidth         = 0
	intIsSigned         = 1
	typeInt             = 2
	messageHeaderType   = 1
	messageHeader       = 2
	messageBodyLength   = 3
	headerRecordBatch   = 3
	batchLength         = 0
	batchNodes          = 1
	batchBuffers        = 2
	batchCompression    = 3
	compressionCodec    = 0
	codecLZ4Frame       = 0
	codecZstd           = 1
)

// maxArrowExpansion bounds the decompressed row offsets against the file
// size (LanceDB writes Arrow deletion files only below 5,000 rows).
const maxArrowExpansion = 256

// decodeDeletionIPC returns the row offsets of an Arrow deletion file.
func decodeDeletionIPC(b []byte) ([]uint32, error) {
	const magicIPC = "ARROW1"
	if len(b) < 8+10 || string(b[:6]) != magicIPC || string(b[len(b)-6:]) != magicIPC {
		return nil, corrupt("not an Arrow IPC file")
	}
	flen, _ := u32at(b, len(b)-10)
	fstart := int64(len(b)) - 10 - int64(int32(flen))
	if int32(flen) <= 0 || fstart < 8 {
		return nil, corrupt("Arrow footer length %d does not fit", int32(flen))
	}
	footer, err := fbRoot(b[fstart : len(b)-10])
	if err != nil {
		return nil, err
	}
	if err := checkDeletionSchema(footer); err != nil {
		return nil, err
	}
	start, n, err := footer.vector(footerRecordBatches, 24)
	if err != nil {
		return nil, err
	}
	if n != 1 {
		return nil, corrupt("deletion file has %d batches, want 1", n)
	}
	blk := footer.buf[start:]
	off := int64(binary.LittleEndian.Uint64(blk))
	metaLen := int64(int32(binary.LittleEndian.Uint32(blk[8:])))
	bodyLen := int64(binary.LittleEndian.Uint64(blk[16:]))
	if off < 8 || metaLen < 8 || bodyLen < 0 || off > fstart || metaLen > fstart-off || bodyLen > fstart-off-metaLen {
		return nil, corrupt("Arrow record batch block outside the file")
	}
	meta := b[off : off+metaLen]
	if cont, _ := u32at(meta, 0); cont == 0xFFFFFFFF {
		meta = meta[8:]
	} else {
		meta = meta[4:]
	}
	msg, err := fbRoot(meta)
	if err != nil {
		return nil, err
	}
	if ht, err := msg.scalar(messageHeaderType, 1); err != nil || ht != headerRecordBatch {
		return nil, corrupt("Arrow message is not a record batch (%d, %v)", ht, err)
	}
	rb, ok, err := msg.table(messageHeader)
	if err != nil || !ok {
		return nil, corrupt("Arrow record batch header missing (%v)", err)
	}
	body := b[off+metaLen : off+metaLen+bodyLen]
	rows, err := rb.scalar(batchLength, 8)
	if err != nil {
		return nil, err
	}
	nstart, nn, err := rb.vector(batchNodes, 16)
	if err != nil {
		return nil, err
	}
	if nn != 1 {
		return nil, corrupt("deletion batch has %d columns", nn)
	}
	nodeLen := binary.LittleEndian.Uint64(rb.buf[nstart:])
	nulls := binary.LittleEndian.Uint64(rb.buf[nstart+8:])
	if nodeLen != rows || nulls != 0 {
		return nil, corrupt("deletion column has %d rows (batch %d) and %d nulls", nodeLen, rows, nulls)
	}
	bstart, bn, err := rb.vector(batchBuffers, 16)
	if err != nil {
		return nil, err
	}
	if bn != 2 {
		return nil, corrupt("deletion column has %d buffers, want 2", bn)
	}
	vo := binary.LittleEndian.Uint64(rb.buf[bstart+16:])
	vl := binary.LittleEndian.Uint64(rb.buf[bstart+24:])
	if vo > uint64(len(body)) || vl > uint64(len(body))-vo {
		return nil, corrupt("deletion values buffer outside the body")
	}
	values := body[vo : vo+vl]
	want := rows * 4
	if rows > uint64(len(b))*maxArrowExpansion/4+1<<18 {
		return nil, corrupt("deletion file of %d bytes claims %d rows", len(b), rows)
	}
	comp, compressed, err := rb.table(batchCompression)
	if err != nil {
		return nil, err
	}
	if compressed && len(values) > 0 {
		codec, err := comp.scalar(compressionCodec, 1)
		if err != nil {
			return nil, err
		}
		if values, err = decompressBuffer(values, codec, want); err != nil {
			return nil, err
		}
	}
	if uint64(len(values)) < want {
		return nil, corrupt("deletion values buffer holds %d bytes for %d rows", len(values), rows)
	}
	out := make([]uint32, rows)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(values[4*i:])
	}
	return out, nil
}

// checkDeletionSchema requires exactly `row_id: uint32 not null`.
func checkDeletionSchema(footer fbTable) error {
	schema, ok, err := footer.table(footerSchema)
	if err != nil || !ok {
		return corrupt("Arrow footer has no schema (%v)", err)
	}
	start, n, err := schema.vector(schemaFields, 4)
	if err != nil {
		return err
	}
	if n != 1 {
		return corrupt("deletion file has %d columns, want 1", n)
	}
	f, err := schema.vectorTable(start, 0)
	if err != nil {
		return err
	}
	name, err := f.str(fieldName)
	if err != nil {
		return err
	}
	nullable, err := f.scalar(fieldNullable, 1)
	if err != nil {
		return err
	}
	tt, err := f.scalar(fieldTypeType, 1)
	if err != nil {
		return err
	}
	typ, ok, err := f.table(fieldType)
	if err != nil || !ok || tt != typeInt {
		return corrupt("deletion column %q is not an integer (type %d)", name, tt)
	}
	bw, err := typ.scalar(intBitWidth, 4)
	if err != nil {
		return err
	}
	signed, err := typ.scalar(intIsSigned, 1)
	if err != nil {
		return err
	}
	if _, kids, err := f.vector(fieldChildren, 4); err != nil || kids != 0 {
		return corrupt("deletion column has children")
	}
	if d, err := f.field(fieldDictionary); err != nil || d != 0 {
		return corrupt("deletion column is dictionary-encoded")
	}
	if name != "row_id" || nullable != 0 || bw != 32 || signed != 0 {
		return corrupt("deletion column is %q (%d-bit, signed %v, nullable %v), want row_id uint32 not null", name, bw, signed != 0, nullable != 0)
	}
	return nil
}

// decompressBuffer undoes Arrow's buffer compression: an int64
// uncompressed length (-1: stored raw), then the frame. It produces at most
// want bytes.
func decompressBuffer(b []byte, codec uint64, want uint64) ([]byte, error) {
	if len(b) < 8 {
		return nil, corrupt("compressed buffer of %d bytes", len(b))
	}
	n := int64(binary.LittleEndian.Uint64(b))
	data := b[8:]
	if n == -1 {
		return data, nil
	}
	// Writers may count padding in the length; never more than 64 bytes.
	if n < 0 || uint64(n) < want || uint64(n) > want+64 {
		return nil, corrupt("compressed buffer says %d bytes, the rows need %d", n, want)
	}
	want = uint64(n)
	switch codec {
	case codecZstd:
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderMaxWindow(8<<20))
		if err != nil {
			return nil, err
		}
		defer dec.Close()
		out, err := dec.DecodeAll(data, make([]byte, 0, want))
		if err != nil {
			return nil, corrupt("zstd buffer: %v", err)
		}
		if uint64(len(out)) != want {
			return nil, corrupt("zstd buffer gave %d bytes, want %d", len(out), want)
		}
		return out, nil
	case codecLZ4Frame:
		out := make([]byte, want)
		if _, err := io.ReadFull(lz4.NewReader(bytes.NewReader(data)), out); err != nil {
			return nil, corrupt("lz4 buffer: %v", err)
		}
		return out, nil
	}
	return nil, corrupt("unknown Arrow compression codec %d", codec)
}
