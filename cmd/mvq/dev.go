package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/internal/version"
	"github.com/mvq-dev/mvq/service"
)

func (a *app) devCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "dev [flags]",
		Short: "Run the API and a worker in one process (the local API the other commands use)",
		Long: `Runs the API and a worker in one process, on 127.0.0.1:2333 by default, over the
warehouse in MVQ_WAREHOUSE (default file://./warehouse). With redis-server on PATH
and a file:// warehouse, job records persist across restarts in a redis-server
with AOF under <warehouse>/.mvq-dev/redis; otherwise an in-memory Redis is used
and jobs are lost on exit. No authentication (MVQ_AUTH=none) unless MVQ_AUTH says
otherwise; then it listens on loopback only. Flags (-h lists them) override the
MVQ_* variables of the same name. Besides the runtimes of MVQ_RUNTIMES_FILE it
declares local-embed, a built-in hashing embedder of 64 dimensions (not a learned
model; see mvq column add).`,
		Example:            "  mvq dev\n  mvq dev -listen 127.0.0.1:8080 -warehouse file:///tmp/wh\n  MVQ_AUTH=tokens MVQ_AUTH_TOKENS_FILE=tokens.yaml mvq dev",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := service.LoadConfig("mvq dev", args, a.getenv, a.stderr)
			if done, err := configDone(a, err); done {
				return err
			}
			service.SetupLogging(cfg)
			ctx, stop := signal.NotifyContext(a.ctx, syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runDev(ctx, cfg, func(d service.DevAddrs) {
				devBanner(a.stdout, d, cfg.Warehouse)
				service.ReadyFile(a.getenv)(d.API)
			})
		},
	}
}

// runDev is service.RunDev as the command line runs it (mvq dev, and mvq
// demo's server of its own): besides cfg's runtimes it declares the
// built-in embedder local-embed, for trying embeddings without a model.
// Both run on the same Redis and warehouse, so a job either takes must find
// the same runtimes.
func runDev(ctx context.Context, cfg service.Config, ready func(service.DevAddrs)) error {
	var err error
	if cfg.Runtimes, err = withLocalEmbed(cfg.Runtimes); err != nil {
		return err
	}
	return service.RunDev(ctx, cfg, ready)
}

// devBanner prints every address a dev server serves.
func devBanner(w io.Writer, d service.DevAddrs, warehouse string) {
	jobs := "in memory: lost on exit"
	if d.RedisKept {
		jobs = "kept across restarts"
	}
	fmt.Fprintf(w, `mvq dev is up (Ctrl-C stops it)
  API        http://%[1]s   (mvq commands use it: MVQ_URL)
  console    http://%[1]s/ui/
  metrics    http://%[1]s/metrics
  redis      %[2]s   (job records and queues, %[3]s; asynq tools connect here)
  warehouse  %[4]s
`, d.API, d.Redis, jobs, warehouse)
}

func (a *app) demoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "demo [flags]",
		Short: "Create a table and a chunker view, refresh it and print the rows (on the running mvq dev, or a server of its own)",
		Long: `Creates the table demo$articles (five short articles) and the chunker view
demo$article_chunks over it (dropping earlier ones), refreshes the view while
printing the job's events, and prints its rows. It uses the mvq API at MVQ_URL
(default ` + DefaultURL + `) when one answers there on this machine (never a
remote one); otherwise, or with -warehouse,
it starts a dev server of its own on the warehouse (default file://./warehouse)
for the length of the demo, keeping its job records where mvq dev keeps them
and declaring the runtime local-embed as mvq dev does.`,
		Example:            "  mvq demo\n  mvq demo -warehouse file:///tmp/demo",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := service.LoadConfig("mvq demo", args, a.getenv, a.stderr)
			if done, err := configDone(a, err); done {
				return err
			}
			cfg.Listen = "127.0.0.1:0"
			cfg.LogLevel = "warn"
			// Its own server's client sends no credentials; it listens on loopback.
			cfg.Auth = auth.Config{Mode: auth.ModeNone}
			service.SetupLogging(cfg)
			ctx, stop := signal.NotifyContext(a.ctx, syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return demo(ctx, a, cfg, hasFlag(args, "warehouse"), a.stdout)
		},
	}
}

// hasFlag reports whether args set flag name (-name, --name, with =value or not).
func hasFlag(args []string, name string) bool {
	for _, arg := range args {
		if arg == "--" {
			return false
		}
		f := strings.TrimLeft(arg, "-")
		if len(f) < len(arg) && (f == name || strings.HasPrefix(f, name+"=")) {
			return true
		}
	}
	return false
}

// configDone handles LoadConfig's -h and -version answers: done is true
// when the command should return err at once.
func configDone(a *app, err error) (bool, error) {
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, flag.ErrHelp):
		return true, nil
	case errors.Is(err, service.ErrVersion):
		fmt.Fprintln(a.stdout, version.String("mvq"))
		return true, nil
	}
	return true, &exitError{code: exitCancelled, msg: err.Error()}
}
