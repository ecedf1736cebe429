package file

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/mvq-dev/mvq/lance/pb/enc20pb"
	"github.com/mvq-dev/mvq/lance/pb/file2pb"
	"github.com/mvq-dev/mvq/lance/pb/filepb"
	"github.com/mvq-dev/mvq/lance/schema"
)

// columnWriter encodes the values of one top-level field into pages of the
// file's columns. A field may own several consecutive columns (in 2.1 each
// leaf of a struct is a column of its own); numColumns says how many.
//
// write receives the field's array for one batch; its rows follow those of
// the previous call. It returns the pages that became full (possibly none)
// and keeps the rest buffered. finish returns the remaining pages and then
// one encodedColumn per owned column, in column order. Pages of one column
// must come back in row order; pages of different columns may interleave.
// The Writer owns placement: it writes every buffer 64-byte aligned and
// records its offset and size in the column metadata. An error from write or
// finish fails the whole file.
type columnWriter interface {
	numColumns() int
	write(arr arrow.Array) ([]encodedPage, error)
	finish() ([]encodedPage, []encodedColumn, error)
}

// encodedPage is one page ready to be written.
type encodedPage struct {
	// column is relative to the columnWriter's first column.
	column int
	// buffers are written in order; the page records their offsets and sizes.
	buffers [][]byte
	// encoding is the page's encoding message (an *enc21pb.PageLayout in 2.1,
	// an *enc20pb.ArrayEncoding in 2.0); the Writer stores it as a
	// google.protobuf.Any inside a direct Encoding.
	encoding proto.Message
	// numRows is the page's top-level row count; firstRow is the row number of
	// its first row in the file (the page priority).
	numRows  uint64
	firstRow uint64
}

// encodedColumn is the column-level part of a column's metadata.
type encodedColumn struct {
	// buffers are column metadata buffers (usually none).
	buffers [][]byte
	// encoding is the column encoding (an *enc20pb.ColumnEncoding, by default
	// the Values variant); nil leaves the column's encoding unset.
	encoding proto.Message
}

// newColumnWriters20 builds the 2.0 encoders; the 2.0 encoder file sets it.
// While it is nil, NewWriter refuses V2_0.
var newColumnWriters20Hook func(fields []*filepb.Field, schema *arrow.Schema) ([]columnWriter, error)

// DefaultPageSize is the number of value bytes a column buffers before it
// writes a page, as Lance does.
const DefaultPageSize = 8 << 20

// WriterOptions configure a Writer.
type WriterOptions struct {
	// Version is the file format version; the zero value means V2_1.
	Version Version
	// PageSize is the target size in bytes of a column's page before
	// encoding; 0 means DefaultPageSize. A single value larger than it still
	// makes a page of its own.
	PageSize int
	// Metadata is stored as the schema metadata of the file.
	Metadata map[string][]byte
	// Schema is the Arrow schema of the batches, needed up front only for
	// V2_0; for V2_1 the first batch's schema is used.
	Schema *arrow.Schema
	// FSST, when set, shares trained FSST symbol tables among the pages
	// of a column (V2_1), in this file and in every other file written
	// with the same FSSTTables; nil trains a table for every page.
	FSST *FSSTTables
}

// Writer writes one Lance data file. It is not safe for concurrent use.
//
// In file format 2.1 each leaf field (primitive, string, binary,
// fixed-size list) is a column; struct and list layers become repetition
// and definition levels of the leaves. A column buffers about
// WriterOptions.PageSize bytes, then encodes a page, choosing as Lance does
// by measured size:
//   - all-null pages when no value is valid (levels kept when lists or
//     structs need them);
//   - mini-block pages for values under 256 bytes: fixed-width values flat,
//     FastLanes-bitpacked or run-length encoded, booleans as bits, vectors
//     flat (with item validity when items are null), strings plain, FSST or
//     dictionary-encoded; levels bitpacked; a repetition index for lists;
//   - full-zip pages for wider values (big vectors, long text), strings
//     FSST-compressed, values over 32 KiB zstd-compressed one by one.
//
// The file ends with the column metadata, the file descriptor (schema and
// row count) as global buffer 0, the offset tables and the footer.
type Writer struct {
	out    *posWriter
	opts   WriterOptions
	fields []*filepb.Field
	top    []*filepb.Field
	cols   []columnWriter
	base   []int // first column index of each top-level field
	meta   []*file2pb.ColumnMetadata
	rows   uint64
	err    error
	closed bool
	// checked: the first batch's types matched the fields.
	checked bool
	kids    map[int32][]*filepb.Field
}

// checkType checks that the Arrow type dt has the field's logical type, and
// so on down its children.
func (w *Writer) checkType(f *filepb.Field, dt arrow.DataType) error {
	lt, err := schema.LogicalType(dt)
	if err != nil {
		return fmt.Errorf("field %q: %w", f.Name, err)
	}
	if lt != f.LogicalType {
		return fmt.Errorf("field %q is %s but the batch has %s (%s)", f.Name, f.LogicalType, lt, dt)
	}
	kids := w.kids[f.Id]
	var types []arrow.DataType
	switch t := dt.(type) {
	case *arrow.StructType:
		for _, c := range t.Fields() {
			types = append(types, c.Type)
		}
	case *arrow.ListType:
		types = []arrow.DataType{t.Elem()}
	case *arrow.LargeListType:
		types = []arrow.DataType{t.Elem()}
	}
	if len(types) != len(kids) {
		return fmt.Errorf("field %q has %d children but the batch's %s has %d", f.Name, len(kids), dt, len(types))
	}
	for i, k := range kids {
		if err := w.checkType(k, types[i]); err != nil {
			return err
		}
	}
	return nil
}

type posWriter struct {
	w   io.Writer
	pos uint64
}

func (p *posWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.pos += uint64(n)
	return n, err
}

var padding [64]byte

func (p *posWriter) pad() error {
	if r := p.pos % 64; r != 0 {
		_, err := p.Write(padding[:64-r])
		return err
	}
	return nil
}

// NewWriter starts a Lance file on w with the given fields (ids assigned
// depth-first from 0, parent_id -1 at the top, as lance/schema makes them).
// Nothing is written until the first page is full or Close is called.
func NewWriter(w io.Writer, fields []*filepb.Field, opts WriterOptions) (*Writer, error) {
	if opts.Version == (Version{}) {
		opts.Version = V2_1
	}
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	if len(fields) == 0 {
		return nil, errors.New("lance file writer: no fields")
	}
	wr := &Writer{out: &posWriter{w: w}, opts: opts, fields: fields, kids: map[int32][]*filepb.Field{}}
	for _, f := range fields {
		if f.ParentId == -1 {
			wr.top = append(wr.top, f)
		} else {
			wr.kids[f.ParentId] = append(wr.kids[f.ParentId], f)
		}
	}
	switch opts.Version {
	case V2_1:
		cols, err := newColumnWriters21(fields, opts.PageSize, opts.FSST)
		if err != nil {
			return nil, err
		}
		wr.cols = cols
	case V2_0:
		if newColumnWriters20Hook == nil {
			return nil, fmt.Errorf("lance file writer: version %d.%d: not supported", opts.Version.Major, opts.Version.Minor)
		}
		if opts.Schema == nil {
			return nil, errors.New("lance file writer: version 2.0 needs WriterOptions.Schema")
		}
		cols, err := newColumnWriters20Hook(fields, opts.Schema)
		if err != nil {
			return nil, err
		}
		wr.cols = cols
	default:
		return nil, fmt.Errorf("lance file writer: version %d.%d: not supported", opts.Version.Major, opts.Version.Minor)
	}
	if len(wr.cols) != len(wr.top) {
		return nil, fmt.Errorf("lance file writer: %d column writers for %d top-level fields", len(wr.cols), len(wr.top))
	}
	n := 0
	for _, c := range wr.cols {
		wr.base = append(wr.base, n)
		n += c.numColumns()
	}
	wr.meta = make([]*file2pb.ColumnMetadata, n)
	for i := range wr.meta {
		wr.meta[i] = &file2pb.ColumnMetadata{}
	}
	return wr, nil
}

// Write appends the rows of rec, whose columns are the top-level fields in
// order. After an error the Writer is unusable and Close reports the error.
func (w *Writer) Write(rec arrow.RecordBatch) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("lance file writer: write after close")
	}
	if int(rec.NumCols()) != len(w.top) {
		w.err = fmt.Errorf("lance file writer: batch has %d columns, schema %d", rec.NumCols(), len(w.top))
		return w.err
	}
	if rec.NumRows() == 0 {
		return nil
	}
	if !w.checked {
		for i := range w.top {
			if err := w.checkType(w.top[i], rec.Column(i).DataType()); err != nil {
				w.err = fmt.Errorf("lance file writer: %w", err)
				return w.err
			}
		}
		w.checked = true
	}
	for i, c := range w.cols {
		col := rec.Column(i)
		if !w.top[i].Nullable && col.NullN() > 0 {
			w.err = fmt.Errorf("lance file writer: field %q is not nullable but has %d nulls", w.top[i].Name, col.NullN())
			return w.err
		}
		pages, err := c.write(col)
		if err != nil {
			w.err = fmt.Errorf("lance file writer: field %q: %w", w.top[i].Name, err)
			return w.err
		}
		if err := w.writePages(i, pages); err != nil {
			w.err = err
			return err
		}
	}
	w.rows += uint64(rec.NumRows())
	return nil
}

func (w *Writer) writePages(field int, pages []encodedPage) error {
	for _, p := range pages {
		col := w.base[field] + p.column
		if p.column < 0 || col >= len(w.meta) || (field+1 < len(w.base) && col >= w.base[field+1]) {
			return fmt.Errorf("lance file writer: page for column %d outside field %d", p.column, field)
		}
		page := &file2pb.ColumnMetadata_Page{Length: p.numRows, Priority: p.firstRow}
		for _, b := range p.buffers {
			if err := w.out.pad(); err != nil {
				return err
			}
			page.BufferOffsets = append(page.BufferOffsets, w.out.pos)
			page.BufferSizes = append(page.BufferSizes, uint64(len(b)))
			if _, err := w.out.Write(b); err != nil {
				return err
			}
		}
		enc, err := directEncoding(p.encoding)
		if err != nil {
			return err
		}
		page.Encoding = enc
		w.meta[col].Pages = append(w.meta[col].Pages, page)
	}
	return nil
}

// directEncoding wraps m as a google.protobuf.Any whose type URL is
// "/<full name>", the form Lance writes and checks.
func directEncoding(m proto.Message) (*file2pb.Encoding, error) {
	if m == nil {
		return nil, nil
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	anyb, err := proto.Marshal(&anypb.Any{TypeUrl: "/" + string(proto.MessageName(m)), Value: b})
	if err != nil {
		return nil, err
	}
	return &file2pb.Encoding{Location: &file2pb.Encoding_Direct{Direct: &file2pb.DirectEncoding{Encoding: anyb}}}, nil
}

// Close flushes the buffered pages, writes the column metadata, the schema
// and the footer, and returns the number of rows written. It does not close
// the underlying io.Writer.
func (w *Writer) Close() (uint64, error) {
	if w.closed {
		return w.rows, w.err
	}
	w.closed = true
	if w.err != nil {
		return 0, w.err
	}
	if err := w.finish(); err != nil {
		w.err = err
		return 0, err
	}
	return w.rows, nil
}

func (w *Writer) finish() error {
	for i, c := range w.cols {
		pages, cols, err := c.finish()
		if err != nil {
			return fmt.Errorf("lance file writer: field %q: %w", w.top[i].Name, err)
		}
		if err := w.writePages(i, pages); err != nil {
			return err
		}
		if len(cols) != c.numColumns() {
			return fmt.Errorf("lance file writer: field %q finished %d columns, owns %d", w.top[i].Name, len(cols), c.numColumns())
		}
		for j, ec := range cols {
			m := w.meta[w.base[i]+j]
			for _, b := range ec.buffers {
				if err := w.out.pad(); err != nil {
					return err
				}
				m.BufferOffsets = append(m.BufferOffsets, w.out.pos)
				m.BufferSizes = append(m.BufferSizes, uint64(len(b)))
				if _, err := w.out.Write(b); err != nil {
					return err
				}
			}
			enc := ec.encoding
			if enc == nil {
				enc = valuesColumnEncoding()
			}
			e, err := directEncoding(enc)
			if err != nil {
				return err
			}
			m.Encoding = e
		}
	}
	// Global buffer 0: the file descriptor (schema and row count).
	desc, err := proto.MarshalOptions{Deterministic: true}.Marshal(&filepb.FileDescriptor{
		Schema: &filepb.Schema{Fields: w.fields, Metadata: w.opts.Metadata},
		Length: w.rows,
	})
	if err != nil {
		return err
	}
	if err := w.out.pad(); err != nil {
		return err
	}
	descPos := w.out.pos
	if _, err := w.out.Write(desc); err != nil {
		return err
	}
	metaStart := w.out.pos
	type ref struct{ pos, size uint64 }
	refs := make([]ref, len(w.meta))
	for i, m := range w.meta {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			return err
		}
		refs[i] = ref{w.out.pos, uint64(len(b))}
		if _, err := w.out.Write(b); err != nil {
			return err
		}
	}
	tail := make([]byte, 0, 16*len(refs)+16+40)
	cmoStart := w.out.pos
	for _, r := range refs {
		tail = binary.LittleEndian.AppendUint64(tail, r.pos)
		tail = binary.LittleEndian.AppendUint64(tail, r.size)
	}
	gboStart := cmoStart + uint64(len(tail))
	tail = binary.LittleEndian.AppendUint64(tail, descPos)
	tail = binary.LittleEndian.AppendUint64(tail, uint64(len(desc)))
	tail = binary.LittleEndian.AppendUint64(tail, metaStart)
	tail = binary.LittleEndian.AppendUint64(tail, cmoStart)
	tail = binary.LittleEndian.AppendUint64(tail, gboStart)
	tail = binary.LittleEndian.AppendUint32(tail, 1)
	tail = binary.LittleEndian.AppendUint32(tail, uint32(len(w.meta)))
	tail = binary.LittleEndian.AppendUint16(tail, w.opts.Version.Major)
	tail = binary.LittleEndian.AppendUint16(tail, w.opts.Version.Minor)
	tail = append(tail, "LANC"...)
	_, err = w.out.Write(tail)
	return err
}

func valuesColumnEncoding() proto.Message {
	return &enc20pb.ColumnEncoding{ColumnEncoding: &enc20pb.ColumnEncoding_Values{Values: &emptypb.Empty{}}}
}
