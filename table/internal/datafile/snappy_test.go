package datafile

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/snappy"
)

// TestFastSnappyIsSnappy: blocks the registered codec writes decode with a
// plain Snappy decoder, and the codec in use is ours.
func TestFastSnappyIsSnappy(t *testing.T) {
	c, err := compress.GetCodec(compress.Codecs.Snappy)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(fastSnappy); !ok {
		t.Fatalf("snappy codec is %T", c)
	}
	src := bytes.Repeat([]byte("materialized views refresh incrementally. "), 1000)
	enc := c.Encode(nil, src)
	dec, err := snappy.Decode(nil, enc)
	if err != nil || !bytes.Equal(dec, src) {
		t.Fatalf("decode: %v", err)
	}
	if len(enc) >= len(src)/4 {
		t.Fatalf("compressed %d -> %d", len(src), len(enc))
	}
}
