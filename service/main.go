package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/mvq-dev/mvq/internal/version"
)

// Runner starts one role of mvq (RunAPI, RunWorker) and blocks until ctx
// ends or it fails; ready is called with the address it listens on.
type Runner func(ctx context.Context, cfg Config, ready func(addr string)) error

// Main is the whole main function of a service binary: it resolves the
// configuration of role (defaults, environment, flags) and runs it until
// SIGINT or SIGTERM. -h lists the flags, -version prints the version; a
// bad configuration or a failed run prints "mvq ROLE: error" and exits 1.
func Main(role string, run Runner) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := Run(ctx, role, run, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		os.Exit(1)
	}
}

// Run is Main without the process around it, for tests: it returns the
// error Main would exit 1 for (already printed to stderr), and nil after
// -h or -version.
func Run(ctx context.Context, role string, run Runner, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	err := func() error {
		cfg, err := LoadConfig(role, args, getenv, stderr)
		if err != nil {
			return err
		}
		SetupLogging(cfg)
		return run(ctx, cfg, ReadyFile(getenv))
	}()
	switch {
	case errors.Is(err, flag.ErrHelp):
		return nil // -h: the flags were listed
	case errors.Is(err, ErrVersion):
		fmt.Fprintln(stdout, version.String("mvq "+role))
		return nil
	case err != nil:
		fmt.Fprintf(stderr, "mvq %s: %v\n", role, err)
		return err
	}
	return nil
}
