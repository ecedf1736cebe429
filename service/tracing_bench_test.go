package service_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// switchProvider hands out tracers that use the SDK while on and a no-op
// tracer while off. The global provider can be installed only once per
// process (package tracers bind to it), so the benchmark flips this switch.
type switchProvider struct {
	embedded.TracerProvider
	sdk *sdktrace.TracerProvider
	on  atomic.Bool
}

func (p *switchProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return &switchTracer{on: &p.on, sdk: p.sdk.Tracer(name, opts...), off: noop.NewTracerProvider().Tracer(name)}
}

type switchTracer struct {
	embedded.Tracer
	on       *atomic.Bool
	sdk, off trace.Tracer
}

func (t *switchTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if t.on.Load() {
		return t.sdk.Start(ctx, name, opts...)
	}
	return t.off.Start(ctx, name, opts...)
}

// discard is a span exporter that drops everything: the cost measured is
// making, recording and batching spans, not the network.
type discard struct{ spans *atomic.Int64 }

func (d discard) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	d.spans.Add(int64(len(s)))
	return nil
}
func (discard) Shutdown(context.Context) error { return nil }

// BenchmarkTracingOverhead: the same orchestrated chunker refresh with
// every span recorded and batched (on) and with tracing off, alternating in
// one run. The ratio is throughput on / off.
func BenchmarkTracingOverhead(b *testing.B) {
	n := benchDocs() / 5
	var spans atomic.Int64
	p := &switchProvider{sdk: sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{&spans}), sdktrace.WithSampler(sdktrace.AlwaysSample()))}
	otel.SetTracerProvider(p)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	defer p.sdk.Shutdown(context.Background())
	o := newOrchestrator(b, n)
	var on, off time.Duration
	for i := 0; i < b.N; i++ {
		order := []bool{true, false}
		if i%2 == 1 { // alternate, so neither mode always runs first
			order = []bool{false, true}
		}
		for _, tracing := range order {
			p.on.Store(tracing)
			ctx := context.Background()
			var span trace.Span
			if tracing { // the HTTP request span a real refresh has
				ctx, span = otel.Tracer("bench").Start(ctx, "POST /v1/materialized_view/:id/refresh")
			}
			_, d := o.run(b, ctx, o.view(b, fmt.Sprintf("t%d_%v", i, tracing)))
			if span != nil {
				span.End()
			}
			if tracing {
				on += d
			} else {
				off += d
			}
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/on.Seconds(), "traced_src_rows/s")
	b.ReportMetric(float64(n)*float64(b.N)/off.Seconds(), "untraced_src_rows/s")
	b.ReportMetric(off.Seconds()/on.Seconds(), "traced/untraced_throughput")
	if err := p.sdk.ForceFlush(context.Background()); err != nil {
		b.Fatal(err)
	}
	if spans.Load() == 0 {
		b.Fatal("tracing on recorded no spans")
	}
	b.ReportMetric(float64(spans.Load())/float64(b.N), "spans/traced_refresh")
}
