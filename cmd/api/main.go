// Command api serves the mvq HTTP API (Lance Namespace REST operations,
// materialized views and refresh jobs).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mvq-dev/mvq/internal/version"
	"github.com/mvq-dev/mvq/service"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return // -h: the flags were listed
	case errors.Is(err, service.ErrVersion):
		fmt.Println(version.String("mvq api"))
		return
	case err != nil:
		fmt.Fprintln(os.Stderr, "mvq api:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string) error {
	cfg, err := service.LoadConfig("api", args, getenv, os.Stderr)
	if err != nil {
		return err
	}
	service.SetupLogging(cfg)
	return service.RunAPI(ctx, cfg, service.ReadyFile(getenv))
}
