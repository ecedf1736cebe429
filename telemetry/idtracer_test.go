package telemetry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TestSpansWithoutExportCarryIDs: a process that exports no spans records
// none, but its spans have ids, children stay in their parent's trace,
// a root is sampled and a remote parent's flag is kept, as the SDK's
// default sampler sets them; the ids travel in traceparent.
func TestSpansWithoutExportCarryIDs(t *testing.T) {
	tel, err := Setup(context.Background(), Options{ServiceName: "t", Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if tel.Exporting || Recording() {
		t.Fatalf("exporting %v, recording %v without an exporter", tel.Exporting, Recording())
	}
	tr := otel.Tracer("t")
	ctx, root := tr.Start(context.Background(), "root")
	if root.IsRecording() || !root.SpanContext().IsValid() || !root.SpanContext().IsSampled() {
		t.Fatalf("root span: recording %v, context %+v", root.IsRecording(), root.SpanContext())
	}
	_, child := tr.Start(ctx, "child")
	if child.SpanContext().TraceID() != root.SpanContext().TraceID() || child.SpanContext().SpanID() == root.SpanContext().SpanID() {
		t.Fatalf("child %v of root %v", child.SpanContext(), root.SpanContext())
	}
	_, other := tr.Start(ctx, "new root", trace.WithAttributes(), trace.WithNewRoot())
	if other.SpanContext().TraceID() == root.SpanContext().TraceID() {
		t.Fatal("a new root kept its parent's trace")
	}
	if _, s := tr.Start(ctx, "attributes", trace.WithAttributes(), trace.WithSpanKind(trace.SpanKindServer)); s.SpanContext().TraceID() != root.SpanContext().TraceID() {
		t.Fatal("a span with attributes left its parent's trace")
	}
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	if want := "00-" + root.SpanContext().TraceID().String() + "-" + root.SpanContext().SpanID().String() + "-01"; carrier["traceparent"] != want {
		t.Fatalf("traceparent %q, want %q", carrier["traceparent"], want)
	}
	// A remote parent that is not sampled stays so.
	remote := otel.GetTextMapPropagator().Extract(context.Background(), propagation.MapCarrier{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"})
	_, s := tr.Start(remote, "from remote")
	if s.SpanContext().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || s.SpanContext().IsSampled() {
		t.Fatalf("span of an unsampled remote parent: %+v", s.SpanContext())
	}
}

// TestSpanWithoutExportAllocations: a span that records nothing allocates
// little whatever attributes it is given (they are not copied).
func TestSpanWithoutExportAllocations(t *testing.T) {
	tr := idTracerProvider{}.Tracer("t")
	ctx, root := tr.Start(context.Background(), "root")
	defer root.End()
	attrs := trace.WithAttributes(attribute.String("a", "1"), attribute.String("b", "2"), attribute.Int("c", 3), attribute.String("d", "4"))
	kind := trace.WithSpanKind(trace.SpanKindServer)
	n := testing.AllocsPerRun(100, func() {
		_, s := tr.Start(ctx, "child", attrs, attrs, kind)
		s.End()
	})
	if n > 3 { // the context, the span, its config (copying the attributes would add two)
		t.Fatalf("%v allocations per span", n)
	}
}
