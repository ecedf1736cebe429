package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/mvq-dev/mvq/internal/version"
)

// Exit codes.
const (
	exitOK        = 0
	exitFailed    = 1 // an error, or the job FAILED
	exitCancelled = 2 // the job was CANCELLED, or the command line is wrong
	// exitInterrupted: Ctrl-C while waiting for a job, which was left
	// running (or is being cancelled): 128 + SIGINT, as shells report it.
	exitInterrupted = 130
)

// DefaultURL is the API mvq talks to without --url or MVQ_URL: the one
// `mvq dev` serves.
const DefaultURL = "http://127.0.0.1:2333"

// app is one run of the command line.
type app struct {
	ctx    context.Context
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer

	url   string
	token string
}

// exitError ends the run with code after printing msg (when not empty).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func usageErr(format string, args ...any) error {
	return &exitError{code: exitCancelled, msg: fmt.Sprintf(format, args...)}
}

// run executes the command line and returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{ctx: ctx, getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	defer shellHint(stderr, cmd)
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "mvq:", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "mvq:", err)
	// Cobra's own errors are about the command line.
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "invalid argument", "accepts ", "requires ", "flag needs", "required flag", "if any flags in the group"} {
		if strings.HasPrefix(err.Error(), p) {
			fmt.Fprintln(stderr, "Run 'mvq --help' for usage.")
			return exitCancelled
		}
	}
	return exitFailed
}

func (a *app) rootCmd() *cobra.Command {
	v, c := version.Info()
	root := &cobra.Command{
		Use:   "mvq",
		Short: "mvq: materialized-view refreshes as asynchronous jobs",
		Long: `mvq talks to an mvq API (--url, MVQ_URL; default ` + DefaultURL + `, what ` + "`mvq dev`" + ` serves)
with the token in --token or MVQ_TOKEN when the API needs one.

Exit codes: 0 success (a waited-for job is DONE), 1 an error (or the job FAILED),
2 the job was CANCELLED or the command line is wrong, 130 Ctrl-C while waiting
for a job (which keeps running unless you answered y to cancel it).`,
		Example: `  mvq dev &                                   # API + worker on 127.0.0.1:2333
  mvq ns create docs
  mvq table create 'docs$articles' --from articles.ndjson
  mvq view create 'docs$chunks' --source 'docs$articles' --chunker fixed --input body --output chunk --size 200 --overlap 20
  mvq refresh 'docs$chunks' --wait
  mvq query 'docs$chunks' --limit 5`,
		Version:       fmt.Sprintf("%s (commit %s)", v, c),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			a.url = strings.TrimRight(a.url, "/")
			if !strings.HasPrefix(a.url, "http://") && !strings.HasPrefix(a.url, "https://") {
				return usageErr("--url %q: want http://host:port or https://…", a.url)
			}
			return nil
		},
	}
	root.SetVersionTemplate("mvq {{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &exitError{code: exitCancelled, msg: err.Error() + "\nRun '" + cmd.CommandPath() + " --help' for usage."}
	})
	root.CompletionOptions.HiddenDefaultCmd = true
	url := a.getenv("MVQ_URL")
	if url == "" {
		url = DefaultURL
	}
	root.PersistentFlags().StringVar(&a.url, "url", url, "the mvq API (MVQ_URL)")
	root.PersistentFlags().StringVar(&a.token, "token", a.getenv("MVQ_TOKEN"), "API token, sent as Authorization: Bearer (MVQ_TOKEN)")
	root.AddCommand(a.nsCmd(), a.tableCmd(), a.queryCmd(), a.viewCmd(), a.refreshCmd(), a.jobsCmd(),
		a.devCmd(), a.demoCmd(), a.versionCmd(), a.columnCmd(), a.searchCmd(), a.udfCmd(), a.warehouseCmd())
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes every command group (a command with
// subcommands and nothing to run itself) print its help when called bare,
// and exit 2 naming the word when called with one it does not know: cobra
// prints the help and exits 0 for `mvq view rm X` otherwise.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if c.Parent() == nil || !c.HasSubCommands() || c.Run != nil || c.RunE != nil {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		// The nearest verb: one edit away, else two (cobra sets a distance
		// for the root only).
		for d := 1; d <= 2; d++ {
			cmd.SuggestionsMinimumDistance = d
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf(" (did you mean %q?)", s[0])
				break
			}
		}
		var verbs []string
		for _, v := range cmd.Commands() {
			if v.IsAvailableCommand() {
				verbs = append(verbs, v.Name())
			}
		}
		return usageErr("%s\nIts commands: %s. Run '%s --help' for usage.", msg, strings.Join(verbs, ", "), cmd.CommandPath())
	}
}

// shellHint follows a failed command that was given a table or view name
// without a $: the shell expands an unquoted docs$articles to "docs" (the
// variable $articles is empty), which then fails in confusing ways (a view
// "reading itself", a table not found).
func shellHint(w io.Writer, cmd *cobra.Command) {
	if cmd == nil {
		return
	}
	switch cmd.CommandPath() {
	case "mvq table create", "mvq table insert", "mvq table describe", "mvq table versions", "mvq table rm",
		"mvq view create", "mvq view rm", "mvq view show", "mvq view schedule", "mvq table update", "mvq table delete", "mvq query", "mvq refresh",
		"mvq column add", "mvq column backfill", "mvq search":
	default:
		return
	}
	names := cmd.Flags().Args()
	if f := cmd.Flags().Lookup("source"); f != nil && f.Changed {
		names = append(names, f.Value.String())
	}
	for _, n := range names {
		if n != "" && !strings.ContainsAny(n, "$/") {
			fmt.Fprintf(w, "hint: %q has no $; if you meant NAMESPACE$NAME, quote it ('docs$articles') or write docs/articles: a shell turns an unquoted docs$articles into \"docs\"\n", n)
			return
		}
	}
}

func (a *app) client() *client {
	return &client{base: a.url, token: a.token, hc: &http.Client{}}
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version and commit of this build",
		Example: "  mvq version\n  mvq --version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(a.stdout, version.String("mvq"))
			return nil
		},
	}
}

// isTerminal reports whether w is a terminal (progress bars and aligned
// tables go to terminals; plain lines and JSON elsewhere).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// terminalWidth is w's width in columns, 80 when unknown.
func terminalWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	return 80
}

// exactArgs is cobra.ExactArgs naming what is missing.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usageErr("%s takes %s (got %d argument(s)); see --help", cmd.CommandPath(), strings.Join(names, " "), len(args))
		}
		return nil
	}
}
