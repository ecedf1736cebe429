// Package telemetry sets up OpenTelemetry for mvq's processes: one tracer
// provider (OTLP export configured by the standard OTEL_* variables;
// nothing exported when they are unset, though spans and trace ids still
// exist, recording nothing), W3C trace context propagation, and a meter provider exposed in
// Prometheus format on /metrics.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Telemetry owns the providers of one process.
type Telemetry struct {
	TracerProvider *sdktrace.TracerProvider
	// Tracing is the provider the process traces with (the global one):
	// TracerProvider when spans are exported, else one whose spans only
	// carry ids (idTracerProvider).
	Tracing       trace.TracerProvider
	MeterProvider *sdkmetric.MeterProvider
	registry      *promclient.Registry
	Exporting     bool // spans leave the process
}

// Options tune Setup.
type Options struct {
	// ServiceName is used when OTEL_SERVICE_NAME is unset.
	ServiceName string
	// SpanExporter, when set, replaces the OTLP exporter (tests use an
	// in-memory one).
	SpanExporter sdktrace.SpanExporter
	// Getenv reads the environment (default os.Getenv).
	Getenv func(string) string
}

// Setup builds the providers and installs them (and the W3C propagator)
// as the process globals. Errors come only from a bad OTEL_* setting.
func Setup(ctx context.Context, opts Options) (*Telemetry, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	name := getenv("OTEL_SERVICE_NAME")
	if name == "" {
		name = opts.ServiceName
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(name)))
	if err != nil {
		res = resource.Default()
	}
	t := &Telemetry{registry: promclient.NewRegistry()}

	exp := opts.SpanExporter
	if exp == nil {
		exp, err = otlpExporter(ctx, getenv)
		if err != nil {
			return nil, err
		}
	}
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if exp != nil {
		t.Exporting = true
		if opts.SpanExporter != nil {
			tpOpts = append(tpOpts, sdktrace.WithSyncer(exp))
		} else {
			tpOpts = append(tpOpts, sdktrace.WithBatcher(exp))
		}
	}
	t.TracerProvider = sdktrace.NewTracerProvider(tpOpts...)

	pe, err := otelprom.New(otelprom.WithRegisterer(t.registry), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	t.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(pe))

	t.Tracing = t.TracerProvider
	if !t.Exporting {
		t.Tracing = idTracerProvider{}
	}
	otel.SetTracerProvider(t.Tracing)
	// Series that only move on rare events exist from the start, so
	// dashboards and alerts find them (at zero).
	CommitConflicts.Add(ctx, 0)
	otel.SetMeterProvider(t.MeterProvider)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return t, nil
}

// otlpExporter returns an OTLP span exporter when an endpoint is
// configured, nil otherwise. OTEL_EXPORTER_OTLP_PROTOCOL picks
// http/protobuf (default) or grpc; the exporters read the other OTEL_*
// variables themselves.
func otlpExporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, nil
	}
	if strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return nil, nil
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "", "http/protobuf":
		return otlptracehttp.New(ctx)
	case "grpc":
		return otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: want http/protobuf or grpc", proto)
	}
}

// MetricsHandler serves the process's metrics in Prometheus format.
func (t *Telemetry) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// Shutdown flushes and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	return errors.Join(t.TracerProvider.Shutdown(ctx), t.MeterProvider.Shutdown(ctx))
}
