package service

import (
	"log/slog"
	"os"

	"github.com/mvq-dev/mvq/telemetry"
)

// SetupLogging installs a JSON slog handler at the configured level; records
// logged with a span's context carry trace_id and span_id.
func SetupLogging(cfg Config) {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel))
	slog.SetDefault(slog.New(telemetry.LogHandler(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))))
}
