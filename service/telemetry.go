package service

import (
	"context"
	"log/slog"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mvq-dev/mvq/telemetry"
)

// SpanExporter, when set (by tests), receives every span instead of the
// OTLP exporter the OTEL_* variables configure.
var SpanExporter sdktrace.SpanExporter

func setupTelemetry(ctx context.Context, cfg Config, service string) (*telemetry.Telemetry, error) {
	return telemetry.Setup(ctx, telemetry.Options{ServiceName: service, SpanExporter: SpanExporter})
}

func shutdownTelemetry(t *telemetry.Telemetry) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		slog.Warn("telemetry shutdown", "err", err)
	}
}
