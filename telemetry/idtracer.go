package telemetry

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"reflect"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// idTracerProvider is the tracer provider of a process that exports no
// spans: its spans record nothing (a span nobody exports costs an
// allocation-heavy record on every request and Redis command for
// nothing), but each has a trace and span id as the SDK's would, so trace
// ids reach logs, job records and the tasks a job enqueues (one trace per
// job), and the sampled flag travels as the SDK's default sampler would
// set it (parent-based, a root sampled): a worker that does export records
// the job's spans under the API's trace id.
type idTracerProvider struct{ embedded.TracerProvider }

func (idTracerProvider) Tracer(string, ...trace.TracerOption) trace.Tracer { return idTracer{} }

type idTracer struct{ embedded.Tracer }

func (idTracer) Start(ctx context.Context, _ string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanContextFromContext(ctx)
	if newRoot(opts) {
		parent = trace.SpanContext{}
	}
	cfg := trace.SpanContextConfig{TraceID: parent.TraceID(), TraceFlags: parent.TraceFlags(), TraceState: parent.TraceState()}
	if !parent.IsValid() {
		cfg = trace.SpanContextConfig{TraceFlags: trace.FlagsSampled}
		binary.NativeEndian.PutUint64(cfg.TraceID[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(cfg.TraceID[8:], rand.Uint64())
	}
	for !cfg.SpanID.IsValid() {
		binary.NativeEndian.PutUint64(cfg.SpanID[:], rand.Uint64())
	}
	s := idSpan{sc: trace.NewSpanContext(cfg)}
	return trace.ContextWithSpan(ctx, s), s
}

// attributesOption is the type of trace.WithAttributes, which cannot make
// a span a new root: newRoot reads the other options only
// (trace.NewSpanStartConfig copies every attribute given, which would be
// most of what a span that records nothing costs).
var attributesOption = reflect.TypeOf(trace.WithAttributes())

// newRoot reports whether opts ask for a new trace (trace.WithNewRoot).
func newRoot(opts []trace.SpanStartOption) bool {
	var buf [4]trace.SpanStartOption
	rest := buf[:0]
	for _, o := range opts {
		if reflect.TypeOf(o) != attributesOption {
			rest = append(rest, o)
		}
	}
	if len(rest) == 0 {
		return false
	}
	cfg := trace.NewSpanStartConfig(rest...)
	return cfg.NewRoot()
}

// idSpan is a span that records nothing and has an id.
type idSpan struct {
	noop.Span
	sc trace.SpanContext
}

func (s idSpan) SpanContext() trace.SpanContext { return s.sc }

func (s idSpan) TracerProvider() trace.TracerProvider { return idTracerProvider{} }

// Recording reports whether the process's tracer provider records spans:
// false once Setup found nothing to export them to. Instrumentation whose
// spans only matter when recorded (a span per Redis command) is left out
// then.
func Recording() bool {
	_, ids := otel.GetTracerProvider().(idTracerProvider)
	return !ids
}
