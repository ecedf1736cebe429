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

// boot sets up what every process runs on: telemetry, then the warehouse
// and SQL engine. stop releases both, in reverse order.
func boot(ctx context.Context, cfg Config, service string) (*Core, *telemetry.Telemetry, func(), error) {
	tel, err := setupTelemetry(ctx, cfg, service)
	if err != nil {
		return nil, nil, nil, err
	}
	core, err := OpenCore(ctx, cfg)
	if err != nil {
		shutdownTelemetry(tel)
		return nil, nil, nil, err
	}
	return core, tel, func() {
		core.Close()
		shutdownTelemetry(tel)
	}, nil
}

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
