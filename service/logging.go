package service

import (
	"log/slog"
	"os"
)

// SetupLogging installs a JSON slog handler at the configured level.
func SetupLogging(cfg Config) {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel))
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})))
}
