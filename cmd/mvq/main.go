// Command mvq is the mvq command line: `mvq dev` runs the API and a worker
// in one process on an embedded Redis; `mvq demo` runs a refresh end to end
// against it.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/service"
)

const usage = `usage: mvq <command> [flags]

commands:
  dev    run the API and a worker in one process on an embedded Redis
         (warehouse: MVQ_WAREHOUSE, default file://./warehouse; no
         authentication unless MVQ_AUTH says otherwise, loopback only)
  demo   start the dev server, create a text table and a chunker view,
         refresh it, follow the job to DONE and print the view's rows
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mvq:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("no command")
	}
	switch args[0] {
	case "dev":
		cfg, err := service.LoadConfig("mvq dev", args[1:], getenv, os.Stderr)
		if err != nil {
			return err
		}
		service.SetupLogging(cfg)
		return service.RunDev(ctx, cfg, func(addr string) {
			fmt.Fprintf(stdout, "mvq dev: API on http://%s (embedded Redis, warehouse %s)\n", addr, cfg.Warehouse)
		})
	case "demo":
		cfg, err := service.LoadConfig("mvq demo", args[1:], getenv, os.Stderr)
		if err != nil {
			return err
		}
		cfg.Listen = "127.0.0.1:0"
		cfg.LogLevel = "warn"
		// The demo's client sends no credentials; it listens on loopback.
		cfg.Auth = auth.Config{Mode: auth.ModeNone}
		service.SetupLogging(cfg)
		return demo(ctx, cfg, stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}
