package file

import (
	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/proto"
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
