package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) nsCmd() *cobra.Command {
	ns := &cobra.Command{Use: "ns", Short: "Create, list and drop namespaces", Example: "  mvq ns create docs\n  mvq ns ls\n  mvq ns rm docs --cascade"}
	var existOK bool
	create := &cobra.Command{
		Use: "create NAME", Short: "Create a namespace (nested ones join parts with $)", Args: exactArgs("NAME"),
		Example: "  mvq ns create docs\n  mvq ns create 'docs$2024' --exist-ok",
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{}
			if existOK {
				body["mode"] = "exist_ok"
			}
			if err := a.client().call(a.ctx, "POST", "/v1/namespace/"+idPath(args[0])+"/create", body, nil); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "created namespace %s\n", args[0])
			return nil
		},
	}
	create.Flags().BoolVar(&existOK, "exist-ok", false, "succeed when it exists already")
	ls := &cobra.Command{
		Use: "ls [PARENT]", Short: "List the namespaces under PARENT (default: the root, $)", Args: cobra.MaximumNArgs(1),
		Example: "  mvq ns ls\n  mvq ns ls docs",
		RunE: func(cmd *cobra.Command, args []string) error {
			parent := "$"
			if len(args) == 1 {
				parent = args[0]
			}
			var resp struct {
				Namespaces []string `json:"namespaces"`
			}
			if err := a.client().call(a.ctx, "GET", "/v1/namespace/"+idPath(parent)+"/list", nil, &resp); err != nil {
				return err
			}
			for _, n := range resp.Namespaces {
				fmt.Fprintln(a.stdout, n)
			}
			return nil
		},
	}
	var cascade bool
	rm := &cobra.Command{
		Use: "rm NAME", Short: "Drop a namespace (empty, or everything in it with --cascade)", Args: exactArgs("NAME"),
		Example: "  mvq ns rm docs\n  mvq ns rm docs --cascade",
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{}
			if cascade {
				body["behavior"] = "cascade"
			}
			if err := a.client().call(a.ctx, "POST", "/v1/namespace/"+idPath(args[0])+"/drop", body, nil); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "dropped namespace %s\n", args[0])
			return nil
		},
	}
	rm.Flags().BoolVar(&cascade, "cascade", false, "also drop the tables, views and namespaces in it")
	ns.AddCommand(create, ls, rm)
	return ns
}

func (a *app) tableCmd() *cobra.Command {
	t := &cobra.Command{Use: "table", Short: "Create, load, update, inspect and drop tables",
		Example: "  mvq table create 'docs$articles' --from articles.csv\n  mvq table insert 'docs$articles' --from more.parquet\n  mvq table describe 'docs$articles'"}
	load := func(verb string) *cobra.Command {
		var from, format, mode string
		c := &cobra.Command{
			Use:   verb + " NAME --from FILE",
			Short: map[string]string{"create": "Create a table from a file (schema inferred)", "insert": "Insert the rows of a file"}[verb],
			Long: `FILE is Parquet (.parquet), CSV with a header row (.csv), NDJSON (.ndjson, .jsonl),
a JSON array of objects (.json) or Arrow IPC (.arrow, .arrows, .ipc, .feather); --format
overrides the extension, and "-" reads standard input. The schema is inferred: CSV
columns by their values, JSON by the API's inference, Parquet and Arrow as stored.`,
			Example: "  mvq table " + verb + " 'docs$articles' --from articles.ndjson\n  cat rows.csv | mvq table " + verb + " 'docs$articles' --from - --format csv",
			Args:    exactArgs("NAME"),
			RunE: func(cmd *cobra.Command, args []string) error {
				if from == "" {
					return usageErr("--from FILE is required")
				}
				body, ct, err := a.openInput(from, format)
				if err != nil {
					return err
				}
				defer body.Close()
				path := "/v1/table/" + idPath(args[0]) + "/" + verb
				if mode != "" {
					path += "?mode=" + mode
				}
				resp, err := a.client().do(a.ctx, "POST", path, body, ct, "application/json")
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				var out struct {
					Version  uint64 `json:"version"`
					Inserted *int64 `json:"num_inserted_rows"`
				}
				if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
					return err
				}
				if verb == "create" {
					fmt.Fprintf(a.stdout, "created table %s at version %d\n", args[0], out.Version)
				} else {
					n := int64(0)
					if out.Inserted != nil {
						n = *out.Inserted
					}
					fmt.Fprintf(a.stdout, "inserted %d rows into %s: version %d\n", n, args[0], out.Version)
				}
				return nil
			},
		}
		c.Flags().StringVar(&from, "from", "", "the file to read (- for standard input)")
		c.Flags().StringVar(&format, "format", "", "parquet, csv, ndjson, json or arrow (default: from the extension)")
		if verb == "create" {
			c.Flags().StringVar(&mode, "mode", "", "create (default), exist_ok or overwrite")
		} else {
			c.Flags().StringVar(&mode, "mode", "", "append (default) or overwrite")
		}
		return c
	}
	ls := &cobra.Command{
		Use: "ls NAMESPACE", Short: "List the tables (and views) of a namespace", Args: exactArgs("NAMESPACE"),
		Example: "  mvq table ls docs",
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp struct {
				Tables []string `json:"tables"`
			}
			if err := a.client().call(a.ctx, "GET", "/v1/namespace/"+idPath(args[0])+"/table/list", nil, &resp); err != nil {
				return err
			}
			for _, n := range resp.Tables {
				fmt.Fprintln(a.stdout, n)
			}
			return nil
		},
	}
	describe := &cobra.Command{
		Use: "describe NAME", Short: "Show a table's version, rows, fragments and schema", Args: exactArgs("NAME"),
		Example: "  mvq table describe 'docs$articles'",
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := a.describe(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "table     %s\nversion   %d\nrows      %d\nfragments %d\nlocation  %s\n", args[0], d.Version, d.Stats.NumRows, d.Stats.NumFragments, d.Location)
			if v := d.view(); v != nil {
				fmt.Fprintf(a.stdout, "view      %s over %s: %s\n", v.Kind, strings.Join(v.Source, "$"), v.SourceQuery)
			}
			fmt.Fprintln(a.stdout, "schema:")
			rows := [][]string{}
			for _, f := range d.Schema.Fields {
				rows = append(rows, []string{"  " + f.Name, typeName(f.Type), map[bool]string{true: "nullable", false: "not null"}[f.Nullable]})
			}
			printTable(a.stdout, nil, rows)
			return nil
		},
	}
	versions := &cobra.Command{
		Use: "versions NAME", Short: "List a table's versions", Args: exactArgs("NAME"),
		Example: "  mvq table versions 'docs$articles'",
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp struct {
				Versions []struct {
					Version   uint64            `json:"version"`
					Timestamp int64             `json:"timestamp_millis"`
					Metadata  map[string]string `json:"metadata"`
				} `json:"versions"`
			}
			if err := a.client().call(a.ctx, "GET", "/v1/table/"+idPath(args[0])+"/version/list", nil, &resp); err != nil {
				return err
			}
			rows := [][]string{}
			for _, v := range resp.Versions {
				keys := make([]string, 0, len(v.Metadata))
				for k := range v.Metadata {
					keys = append(keys, k+"="+v.Metadata[k])
				}
				sort.Strings(keys)
				rows = append(rows, []string{fmt.Sprint(v.Version), time.UnixMilli(v.Timestamp).Local().Format(time.DateTime), strings.Join(keys, " ")})
			}
			printTable(a.stdout, []string{"VERSION", "CREATED", "METADATA"}, rows)
			return nil
		},
	}
	t.AddCommand(load("create"), load("insert"), a.tableUpdateCmd(), a.tableDeleteCmd(), ls, describe, versions, a.dropCmd("table"))
	return t
}

// dropCmd is `mvq table rm` and `mvq view rm`: both drop through the
// table drop route, which refuses (409) while views read the table unless
// --cascade drops them too.
func (a *app) dropCmd(what string) *cobra.Command {
	var cascade bool
	rm := &cobra.Command{
		Use: "rm NAME", Short: "Drop a " + what + " (its jobs are cancelled; --cascade also drops the views that read it)", Args: exactArgs("NAME"),
		Example: "  mvq " + what + " rm 'docs$articles'\n  mvq " + what + " rm 'docs$articles' --cascade",
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{}
			if cascade {
				body["cascade"] = true
			}
			if err := a.client().call(a.ctx, "POST", "/v1/table/"+idPath(args[0])+"/drop", body, nil); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "dropped %s\n", args[0])
			return nil
		},
	}
	rm.Flags().BoolVar(&cascade, "cascade", false, "also drop the views that read it (and theirs)")
	return rm
}

// description is what table describe answers.
type description struct {
	Version  uint64 `json:"version"`
	Location string `json:"location"`
	Schema   struct {
		Fields []struct {
			Name     string          `json:"name"`
			Type     json.RawMessage `json:"type"`
			Nullable bool            `json:"nullable"`
		} `json:"fields"`
	} `json:"schema"`
	Stats struct {
		NumRows      int64 `json:"num_rows"`
		NumFragments int64 `json:"num_fragments"`
	} `json:"stats"`
	Properties map[string]string `json:"properties"`
}

// viewDef is the part of a view's definition the CLI shows.
type viewDef struct {
	Kind        string   `json:"kind"`
	SourceQuery string   `json:"source_query"`
	Source      []string `json:"source"`
	AutoRefresh bool     `json:"auto_refresh"`
}

// view returns the view definition of a view, nil for a plain table.
func (d *description) view() *viewDef {
	raw, ok := d.Properties["mvq.view"]
	if !ok {
		return nil
	}
	var v viewDef
	if json.Unmarshal([]byte(raw), &v) != nil {
		return nil
	}
	return &v
}

func (a *app) describe(name string) (*description, error) {
	var d description
	if err := a.client().call(a.ctx, "POST", "/v1/table/"+idPath(name)+"/describe", map[string]any{}, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// typeName renders a JSON schema type ({"type": "int64"} or a string).
func typeName(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var t struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &t) == nil && t.Type != "" {
		return t.Type
	}
	return string(raw)
}
