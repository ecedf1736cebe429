package arrowjson

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func benchRecord(b *testing.B, mem memory.Allocator, rows int) arrow.RecordBatch {
	s := sch(nf("id", arrow.PrimitiveTypes.Int64), nf("score", arrow.PrimitiveTypes.Float64), nf("text", arrow.BinaryTypes.String))
	rb := array.NewRecordBuilder(mem, s)
	defer rb.Release()
	ids := rb.Field(0).(*array.Int64Builder)
	scores := rb.Field(1).(*array.Float64Builder)
	texts := rb.Field(2).(*array.StringBuilder)
	base := strings.Repeat("lorem ipsum dolor sit amet, ", 8) // 224 bytes
	for i := 0; i < rows; i++ {
		ids.Append(int64(i) * 7919)
		scores.Append(float64(i) / 3)
		texts.Append(fmt.Sprintf("%06d %s", i, base[:192]))
	}
	return rb.NewRecordBatch()
}

// BenchmarkWriteRows: 100k rows of (int64, float64, ~200-byte string).
func BenchmarkWriteRows(b *testing.B) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(b, 0)
	rec := benchRecord(b, mem, 100_000)
	defer rec.Release()
	var size countingWriter
	if err := WriteRecords(&size, []arrow.RecordBatch{rec}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
		if err != nil {
			b.Fatal(err)
		}
		if err := WriteRows(io.Discard, rdr); err != nil {
			b.Fatal(err)
		}
		rdr.Release()
	}
}

// BenchmarkDecodeRows: 10k rows of the same shape, JSON to Arrow.
func BenchmarkDecodeRows(b *testing.B) {
	mem := memory.NewGoAllocator()
	rec := benchRecord(b, mem, 10_000)
	defer rec.Release()
	var buf bytes.Buffer
	if err := WriteRecords(&buf, []arrow.RecordBatch{rec}); err != nil {
		b.Fatal(err)
	}
	body := buf.Bytes()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		out, err := DecodeRows(bytes.NewReader(body), rec.Schema(), mem)
		if err != nil {
			b.Fatal(err)
		}
		out.Release()
	}
}

type countingWriter int

func (w *countingWriter) Write(p []byte) (int, error) {
	*w += countingWriter(len(p))
	return len(p), nil
}
