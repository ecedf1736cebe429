package refresh

import (
	"github.com/apache/arrow-go/v18/arrow"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

var tracer = otel.Tracer("github.com/mvq-dev/mvq/refresh")

// recordsAttrs counts rows and in-memory bytes of records for a span.
func recordsAttrs(recs []arrow.RecordBatch) []attribute.KeyValue {
	var rows, bytes int64
	for _, r := range recs {
		rows += r.NumRows()
		for _, c := range r.Columns() {
			for _, b := range c.Data().Buffers() {
				if b != nil {
					bytes += int64(b.Len())
				}
			}
		}
	}
	return []attribute.KeyValue{attribute.Int64("mvq.rows", rows), attribute.Int64("mvq.bytes", bytes)}
}

// endSpan sets attributes and the error status, then ends the span.
func endSpan(span trace.Span, err error, attrs ...attribute.KeyValue) {
	span.SetAttributes(attrs...)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
