package datafile

import (
	"io"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/s2"
)

// fastSnappy writes Snappy blocks with s2's fast Snappy-compatible encoder
// instead of the "better" one arrow-go uses by default: in a chunker
// refresh the default encoder took a quarter of all CPU. The output is
// plain Snappy, readable by every Parquet reader; everything but block
// encoding is the default codec's.
type fastSnappy struct {
	base interface {
		compress.Codec
		compress.StreamingCodec
		DecodeWithError(dst, src []byte) ([]byte, error)
	}
}

func (f fastSnappy) Encode(dst, src []byte) []byte { return s2.EncodeSnappy(dst, src) }
func (f fastSnappy) EncodeLevel(dst, src []byte, _ int) []byte {
	return s2.EncodeSnappy(dst, src)
}
func (f fastSnappy) CompressBound(n int64) int64         { return f.base.CompressBound(n) }
func (f fastSnappy) Decode(dst, src []byte) []byte       { return f.base.Decode(dst, src) }
func (f fastSnappy) NewReader(r io.Reader) io.ReadCloser { return f.base.NewReader(r) }
func (f fastSnappy) NewWriter(w io.Writer) io.WriteCloser {
	return f.base.NewWriter(w)
}
func (f fastSnappy) NewWriterLevel(w io.Writer, level int) (io.WriteCloser, error) {
	return f.base.NewWriterLevel(w, level)
}
func (f fastSnappy) DecodeWithError(dst, src []byte) ([]byte, error) {
	return f.base.DecodeWithError(dst, src)
}

func init() {
	c, err := compress.GetCodec(compress.Codecs.Snappy)
	if err != nil {
		return
	}
	if base, ok := c.(interface {
		compress.Codec
		compress.StreamingCodec
		DecodeWithError(dst, src []byte) ([]byte, error)
	}); ok {
		compress.RegisterCodec(compress.Codecs.Snappy, fastSnappy{base: base})
	}
}
