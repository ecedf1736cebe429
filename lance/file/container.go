// Package file reads and writes Lance data files (the data/*.lance files of
// a Lance dataset), file format 2.0 and 2.1.
//
// A 2.x file is a run of buffers followed by the column metadatas, two
// offset tables and a 40-byte footer (container.go). Global buffer 0 holds
// the FileDescriptor: the schema as Lance fields and the row count. Each
// column is a list of pages; a page is a set of buffers and an encoding, in
// 2.1 a PageLayout (mini-block, full-zip, all-null or blob) whose
// compressive encodings say how the buffers hold the values (decode21*.go).
//
// Reading: Open checks every offset and length against the real file size
// before it reads or allocates; Reader.Read decodes a row range of some
// top-level columns and Reader.Take a set of rows, touching only the pages
// and mini-block chunks that hold them. Both return Arrow arrays equal to
// what LanceDB's own toArrow() returns for the same file (types, nulls and
// values), which the tests check against LanceDB 0.31 itself, with one
// exception: a blob column (large_binary with lance-encoding:blob) reads as
// the bytes of its values, where toArrow() returns their (position, size)
// descriptions. Columns are decoded in parallel. Malformed
// input gives an error wrapping ErrCorrupt, an unknown version or encoding
// one wrapping ErrUnsupported; neither panics.
package file

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/mvq-dev/mvq/lance/pb/file2pb"
	"github.com/mvq-dev/mvq/lance/pb/filepb"
)

// Version is a Lance file format version as written in the footer.
type Version struct{ Major, Minor uint16 }

// The file versions this package reads and writes. V2_0 is what LanceDB
// calls "2.0" (footer 0.3); V2_1 is "2.1", the LanceDB 0.31 default.
var (
	V2_0 = Version{0, 3}
	V2_1 = Version{2, 1}
)

// String names the version the way LanceDB's data_storage_version does:
// "2.0" for footer 0.3, "legacy" for 0.1/0.2, "major.minor" otherwise.
func (v Version) String() string {
	switch {
	case v == V2_0:
		return "2.0"
	case v.Major == 0 && v.Minor < 3:
		return "legacy"
	}
	return fmt.Sprintf("%d.%d", v.Major, v.Minor)
}

// Magic ends every Lance file.
const Magic = "LANC"

// FooterLen is the size of the fixed footer at the end of a 2.x file.
const FooterLen = 40

// ErrCorrupt is wrapped by every error that says the bytes of a file are not
// a well-formed Lance file (as opposed to I/O errors and unsupported features).
var ErrCorrupt = errors.New("lance file: corrupt")

// ErrUnsupported is wrapped by errors for well-formed files using a version,
// encoding or type this package does not read.
var ErrUnsupported = errors.New("lance file: unsupported")

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

func unsupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(format, args...))
}

// Footer is the fixed 40-byte tail of a Lance 2.x file.
type Footer struct {
	ColumnMetaStart        uint64 // offset of the first column metadata
	ColumnMetaOffsetsStart uint64 // offset of the column metadata offset table
	GlobalBuffOffsetsStart uint64 // offset of the global buffer offset table
	NumGlobalBuffers       uint32
	NumColumns             uint32
	Version                Version
}

// ParseFooter decodes the last FooterLen bytes of a file. It checks the
// magic only; ReadContainer checks the offsets against the file size.
func ParseFooter(b []byte) (Footer, error) {
	if len(b) != FooterLen {
		return Footer{}, corruptf("footer is %d bytes, want %d", len(b), FooterLen)
	}
	if string(b[36:40]) != Magic {
		return Footer{}, corruptf("no %q magic at the end of the file", Magic)
	}
	le := binary.LittleEndian
	return Footer{
		ColumnMetaStart:        le.Uint64(b[0:]),
		ColumnMetaOffsetsStart: le.Uint64(b[8:]),
		GlobalBuffOffsetsStart: le.Uint64(b[16:]),
		NumGlobalBuffers:       le.Uint32(b[24:]),
		NumColumns:             le.Uint32(b[28:]),
		Version:                Version{le.Uint16(b[32:]), le.Uint16(b[34:])},
	}, nil
}

// AppendFooter appends the encoded footer to b.
func AppendFooter(b []byte, f Footer) []byte {
	le := binary.LittleEndian
	b = le.AppendUint64(b, f.ColumnMetaStart)
	b = le.AppendUint64(b, f.ColumnMetaOffsetsStart)
	b = le.AppendUint64(b, f.GlobalBuffOffsetsStart)
	b = le.AppendUint32(b, f.NumGlobalBuffers)
	b = le.AppendUint32(b, f.NumColumns)
	b = le.AppendUint16(b, f.Version.Major)
	b = le.AppendUint16(b, f.Version.Minor)
	return append(b, Magic...)
}

// BufferRef locates a buffer in the file: absolute offset and size in bytes.
// Every BufferRef a container hands out lies inside the file.
type BufferRef struct{ Offset, Size uint64 }

// PageInfo is one page of a column: its buffers, its row count and its
// encoding (still packed; see Container.PageEncoding).
type PageInfo struct {
	Buffers  []BufferRef
	NumRows  uint64
	Encoding *file2pb.Encoding
	Priority uint64
}

// ColumnInfo is one column of the file as listed in its ColumnMetadata.
type ColumnInfo struct {
	Encoding *file2pb.Encoding
	Pages    []PageInfo
	Buffers  []BufferRef
}

// Container is the format-independent structure of a 2.x file: the footer,
// the global buffers, the columns and their pages, and the FileDescriptor in
// global buffer 0. It knows nothing of encodings.
type Container struct {
	r       io.ReaderAt
	size    uint64
	Footer  Footer
	Globals []BufferRef
	Columns []ColumnInfo
	// Descriptor is global buffer 0: the schema and the row count.
	Descriptor *filepb.FileDescriptor
}

// maxMetadataBytes caps the metadata region (column metadatas, offset tables,
// footer) and the FileDescriptor read into memory, whatever the file size.
const maxMetadataBytes = 1 << 30

// ReadContainer reads and checks the footer, the offset tables, every column
// metadata and the FileDescriptor of the file r of the given size. Every
// offset and length is checked against size before anything is read or
// allocated; a malformed file gives an error wrapping ErrCorrupt, a legacy or
// unknown version one wrapping ErrUnsupported.
func ReadContainer(r io.ReaderAt, size int64) (*Container, error) {
	if size < FooterLen {
		return nil, corruptf("file of %d bytes is too small for a Lance footer", size)
	}
	fsize := uint64(size)
	tail := make([]byte, FooterLen)
	if err := readFull(r, tail, fsize-FooterLen); err != nil {
		return nil, fmt.Errorf("lance file: read footer: %w", err)
	}
	f, err := ParseFooter(tail)
	if err != nil {
		return nil, err
	}
	if f.Version != V2_0 && f.Version.Major != 2 {
		if f.Version.Major == 0 && f.Version.Minor < 3 {
			return nil, unsupportedf("file version %d.%d is the legacy (0.1) format; rewrite the dataset with data_storage_version 2.0 or later (LanceDB: dataStorageVersion \"2.1\")", f.Version.Major, f.Version.Minor)
		}
		return nil, unsupportedf("file version %d.%d is not supported (2.0 and 2.1 are)", f.Version.Major, f.Version.Minor)
	}
	if f.Version.Major == 2 && f.Version.Minor > 1 {
		return nil, unsupportedf("file version %d.%d is not supported (2.0 and 2.1 are); rewrite it with data_storage_version 2.1", f.Version.Major, f.Version.Minor)
	}
	end := fsize - FooterLen
	// The metadata region is [ColumnMetaStart, end): column metadatas, then
	// the CMO table, then the GBO table.
	if f.ColumnMetaStart > f.ColumnMetaOffsetsStart || f.ColumnMetaOffsetsStart > f.GlobalBuffOffsetsStart || f.GlobalBuffOffsetsStart > end {
		return nil, corruptf("footer offsets out of order or past the end (column meta %d, CMO table %d, GBO table %d, footer %d)", f.ColumnMetaStart, f.ColumnMetaOffsetsStart, f.GlobalBuffOffsetsStart, end)
	}
	if uint64(f.NumColumns)*16 != f.GlobalBuffOffsetsStart-f.ColumnMetaOffsetsStart {
		return nil, corruptf("%d columns need a %d-byte offset table, found %d bytes", f.NumColumns, uint64(f.NumColumns)*16, f.GlobalBuffOffsetsStart-f.ColumnMetaOffsetsStart)
	}
	if uint64(f.NumGlobalBuffers)*16 != end-f.GlobalBuffOffsetsStart {
		return nil, corruptf("%d global buffers need a %d-byte offset table, found %d bytes", f.NumGlobalBuffers, uint64(f.NumGlobalBuffers)*16, end-f.GlobalBuffOffsetsStart)
	}
	if end-f.ColumnMetaStart > maxMetadataBytes {
		return nil, unsupportedf("metadata of %d bytes is over the %d-byte limit", end-f.ColumnMetaStart, maxMetadataBytes)
	}
	meta := make([]byte, end-f.ColumnMetaStart)
	if err := readFull(r, meta, f.ColumnMetaStart); err != nil {
		return nil, fmt.Errorf("lance file: read metadata: %w", err)
	}
	c := &Container{r: r, size: fsize, Footer: f}
	le := binary.LittleEndian
	gbo := meta[f.GlobalBuffOffsetsStart-f.ColumnMetaStart:]
	c.Globals = make([]BufferRef, f.NumGlobalBuffers)
	for i := range c.Globals {
		ref := BufferRef{le.Uint64(gbo[16*i:]), le.Uint64(gbo[16*i+8:])}
		if !c.inFile(ref) {
			return nil, corruptf("global buffer %d (offset %d, size %d) is outside the %d-byte file", i, ref.Offset, ref.Size, fsize)
		}
		c.Globals[i] = ref
	}
	cmo := meta[f.ColumnMetaOffsetsStart-f.ColumnMetaStart : f.GlobalBuffOffsetsStart-f.ColumnMetaStart]
	c.Columns = make([]ColumnInfo, f.NumColumns)
	for i := range c.Columns {
		pos, n := le.Uint64(cmo[16*i:]), le.Uint64(cmo[16*i+8:])
		if pos < f.ColumnMetaStart || pos > f.ColumnMetaOffsetsStart || n > f.ColumnMetaOffsetsStart-pos {
			return nil, corruptf("column %d metadata (offset %d, size %d) is outside the column metadata region [%d, %d)", i, pos, n, f.ColumnMetaStart, f.ColumnMetaOffsetsStart)
		}
		var cm file2pb.ColumnMetadata
		if err := proto.Unmarshal(meta[pos-f.ColumnMetaStart:pos-f.ColumnMetaStart+n], &cm); err != nil {
			return nil, corruptf("column %d metadata: %v", i, err)
		}
		ci, err := c.columnInfo(i, &cm)
		if err != nil {
			return nil, err
		}
		c.Columns[i] = ci
	}
	if len(c.Globals) == 0 {
		return nil, corruptf("no global buffers: the file descriptor (schema) is missing")
	}
	desc, err := c.ReadBuffer(c.Globals[0])
	if err != nil {
		return nil, fmt.Errorf("lance file: read file descriptor: %w", err)
	}
	c.Descriptor = new(filepb.FileDescriptor)
	if err := proto.Unmarshal(desc, c.Descriptor); err != nil {
		return nil, corruptf("file descriptor: %v", err)
	}
	if c.Descriptor.GetSchema() == nil {
		return nil, corruptf("file descriptor has no schema")
	}
	return c, nil
}

func (c *Container) columnInfo(i int, cm *file2pb.ColumnMetadata) (ColumnInfo, error) {
	ci := ColumnInfo{Encoding: cm.GetEncoding()}
	var err error
	if ci.Buffers, err = c.refs(cm.GetBufferOffsets(), cm.GetBufferSizes()); err != nil {
		return ci, fmt.Errorf("column %d: %w", i, err)
	}
	ci.Pages = make([]PageInfo, len(cm.GetPages()))
	for j, p := range cm.GetPages() {
		bufs, err := c.refs(p.GetBufferOffsets(), p.GetBufferSizes())
		if err != nil {
			return ci, fmt.Errorf("column %d page %d: %w", i, j, err)
		}
		ci.Pages[j] = PageInfo{Buffers: bufs, NumRows: p.GetLength(), Encoding: p.GetEncoding(), Priority: p.GetPriority()}
	}
	return ci, nil
}

func (c *Container) refs(offs, sizes []uint64) ([]BufferRef, error) {
	if len(offs) != len(sizes) {
		return nil, corruptf("%d buffer offsets but %d sizes", len(offs), len(sizes))
	}
	out := make([]BufferRef, len(offs))
	for k := range offs {
		out[k] = BufferRef{offs[k], sizes[k]}
		if !c.inFile(out[k]) {
			return nil, corruptf("buffer %d (offset %d, size %d) is outside the %d-byte file", k, offs[k], sizes[k], c.size)
		}
	}
	return out, nil
}

func (c *Container) inFile(b BufferRef) bool {
	return b.Offset <= c.size && b.Size <= c.size-b.Offset
}

// Size is the file size the container was opened with.
func (c *Container) Size() uint64 { return c.size }

// ReadBuffer reads a whole buffer. The ref must lie in the file (refs from
// the container always do; others are checked).
func (c *Container) ReadBuffer(ref BufferRef) ([]byte, error) {
	if !c.inFile(ref) {
		return nil, corruptf("buffer (offset %d, size %d) is outside the %d-byte file", ref.Offset, ref.Size, c.size)
	}
	b := make([]byte, ref.Size)
	if err := readFull(c.r, b, ref.Offset); err != nil {
		return nil, fmt.Errorf("lance file: read buffer at %d: %w", ref.Offset, err)
	}
	return b, nil
}

// ReadRange reads size bytes at offset off inside buffer ref.
func (c *Container) ReadRange(ref BufferRef, off, size uint64) ([]byte, error) {
	if off > ref.Size || size > ref.Size-off {
		return nil, corruptf("range [%d, +%d) is outside a %d-byte buffer", off, size, ref.Size)
	}
	return c.ReadBuffer(BufferRef{ref.Offset + off, size})
}

func readFull(r io.ReaderAt, b []byte, off uint64) error {
	if len(b) == 0 {
		return nil
	}
	n, err := r.ReadAt(b, int64(off))
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// UnpackEncoding decodes an Encoding (a google.protobuf.Any, stored in the
// column metadata or, when indirect, in a buffer of the file) into m, whose
// full protobuf name must match the Any's type URL (for example
// lance.encodings21.PageLayout or lance.encodings.ArrayEncoding).
func (c *Container) UnpackEncoding(enc *file2pb.Encoding, m proto.Message) error {
	var raw []byte
	switch {
	case enc.GetDirect() != nil:
		raw = enc.GetDirect().GetEncoding()
	case enc.GetIndirect() != nil:
		in := enc.GetIndirect()
		ref := BufferRef{in.GetBufferLocation(), in.GetBufferLength()}
		if ref.Size > maxMetadataBytes {
			return corruptf("indirect encoding of %d bytes", ref.Size)
		}
		b, err := c.ReadBuffer(ref)
		if err != nil {
			return err
		}
		raw = b
	default:
		return corruptf("missing encoding")
	}
	var a anypb.Any
	if err := proto.Unmarshal(raw, &a); err != nil {
		return corruptf("encoding: %v", err)
	}
	want := string(m.ProtoReflect().Descriptor().FullName())
	if name := a.GetTypeUrl()[strings.LastIndex(a.GetTypeUrl(), "/")+1:]; name != want {
		return corruptf("encoding is %q, want %q", a.GetTypeUrl(), want)
	}
	if err := proto.Unmarshal(a.GetValue(), m); err != nil {
		return corruptf("encoding %s: %v", want, err)
	}
	return nil
}
