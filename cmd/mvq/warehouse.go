package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/table"
)

func (a *app) warehouseCmd() *cobra.Command {
	wc := &cobra.Command{
		Use:     "warehouse",
		Short:   "Work on a warehouse directly (offline: stop the services first)",
		Example: "  mvq warehouse upgrade --dry-run\n  mvq warehouse upgrade",
	}
	var uri string
	var dry bool
	up := &cobra.Command{
		Use:   "upgrade",
		Short: "Convert a warehouse of the Parquet + JSON layout to the Lance table format",
		Long: `Converts every table of the warehouse (--warehouse, MVQ_WAREHOUSE; default
file://./warehouse), in every namespace and on every branch, to the Lance table
format (MVQ_TABLE_FORMAT=lance), which LanceDB opens: each Parquet data file a
version references is written again as a Lance file (same name, .lance), each
version's manifest is replaced in place by its Lance form, tags and branch
records take the new manifest sizes, and the Parquet files are removed once no
manifest names them. Version numbers, tags, branches, properties (view
definitions) and table identities are kept. Then it writes _mvq_warehouse.json
at the root, which the services look for before they start in the Lance format.

It works on the warehouse itself, not through the API: stop the API, the
workers and mvq dev first. Every step is one atomic write or delete, every
version reads the same at every step, and a run that was stopped (Ctrl-C, a
crash) is finished by running it again; converted tables are skipped. It
refuses, changing nothing, while batch transactions or table moves are pending
(start the services once to settle them). Left as they are, and reported:
external tables (their files are outside the table) and tables whose data the
Lance writer cannot hold (they stay Parquet + JSON, which is still read).
--dry-run lists what would change and changes nothing.`,
		Example: "  mvq warehouse upgrade --dry-run\n  mvq warehouse upgrade --warehouse file:///srv/mvq/warehouse",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.upgradeWarehouse(uri, dry)
		},
	}
	def := a.getenv("MVQ_WAREHOUSE")
	if def == "" {
		def = table.DefaultWarehouse
	}
	up.Flags().StringVar(&uri, "warehouse", def, "warehouse root URI: file://, s3://, gs:// (MVQ_WAREHOUSE)")
	up.Flags().BoolVar(&dry, "dry-run", false, "list what would change; change nothing")
	wc.AddCommand(up)
	return wc
}

func (a *app) upgradeWarehouse(uri string, dry bool) error {
	ctx := a.ctx
	if strings.HasPrefix(uri, "mem://") {
		return usageErr("--warehouse %q: a mem:// warehouse lives in one process; there is nothing to upgrade", uri)
	}
	wh, err := table.OpenWarehouse(ctx, uri)
	if err != nil {
		return err
	}
	defer wh.Close()
	db, err := duck.Open(duck.Options{})
	if err != nil {
		return fmt.Errorf("duckdb: %w", err)
	}
	defer db.Close()
	c := table.NewCatalog(wh, db, table.Options{Format: table.FormatLance})
	w := a.stdout
	verb := "upgrading"
	if dry {
		verb = "dry run (nothing changes) of upgrading"
	}
	fmt.Fprintf(w, "%s %s to the Lance table format\n", verb, wh.URI())
	rep, err := table.Upgrade(ctx, c, table.UpgradeOptions{DryRun: dry, Progress: func(e table.UpgradeEvent) { printUpgradeEvent(w, e, dry) }})
	printUpgradeReport(w, rep, dry, err == nil)
	if err != nil {
		return fmt.Errorf("%w\n(run `%s` again to finish: what is done stays done)", err, table.UpgradeCommand)
	}
	return nil
}

func printUpgradeEvent(w io.Writer, e table.UpgradeEvent, dry bool) {
	would := ""
	if dry {
		would = "would be "
	}
	line := e.Branch
	if line == "" {
		line = "main"
	}
	switch e.Kind {
	case "table":
		fmt.Fprintf(w, "%s: %s\n", e.Table, e.Detail)
	case "file":
		fmt.Fprintf(w, "  %s %sconverted to %s\n", e.Path, would, e.Detail)
	case "version":
		fmt.Fprintf(w, "  version %d (%s) %srewritten\n", e.Version, line, would)
	case "ref":
		fmt.Fprintf(w, "  %s %supdated\n", e.Path, would)
	case "removed":
		fmt.Fprintf(w, "  %s %sremoved\n", e.Path, would)
	case "skipped":
		fmt.Fprintf(w, "%s: left as it is: %s\n", e.Table, e.Detail)
	case "indexes":
		fmt.Fprintf(w, "%s (%s): %s\n", e.Table, line, e.Detail)
	}
}

func printUpgradeReport(w io.Writer, r table.UpgradeReport, dry, ok bool) {
	head := "upgraded"
	if dry {
		head = "would upgrade"
	}
	if !ok {
		head = "stopped after"
	}
	fmt.Fprintf(w, "%s: %d tables (%d converted, %d already Lance, %d kept Parquet, %d external), %d data files converted, %d versions rewritten, %d tags/branches updated, %d Parquet files removed, %d index files moved\n",
		head, r.Tables, r.Converted, r.AlreadyLance, len(r.KeptParquet), len(r.External), r.Files, r.Versions, r.Refs, r.Removed, r.IndexFiles)
	for _, k := range r.KeptParquet {
		fmt.Fprintf(w, "kept Parquet + JSON: %s\n", k)
	}
	for _, x := range r.External {
		fmt.Fprintf(w, "external, left as it is: %s\n", x)
	}
	switch {
	case !ok:
	case dry:
		fmt.Fprintf(w, "the marker %s would be written\n", table.WarehouseMarker)
	default:
		fmt.Fprintf(w, "the warehouse is marked Lance (%s): the services start on it with MVQ_TABLE_FORMAT=lance\n", table.WarehouseMarker)
	}
}
