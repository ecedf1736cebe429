package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mvq-dev/mvq/udf"
)

// Embeddings from the command line: `mvq column add` adds a virtual column
// a runtime fills (and starts its backfill), `mvq search` runs a vector
// search, and `mvq udf hash-embed` is the built-in hashing embedder that
// mvq dev declares as the runtime local-embed.

// Names of the built-in embedding runtime mvq dev declares.
const (
	localEmbedRuntime = "local-embed"
	localEmbedDims    = 64
)

// withLocalEmbed is reg with the runtime local-embed: this program's
// hashing embedder (`mvq udf hash-embed`), unless reg declares that name.
func withLocalEmbed(reg *udf.Registry) (*udf.Registry, error) {
	if _, ok := reg.Lookup(localEmbedRuntime); ok {
		return reg, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return reg, fmt.Errorf("runtime %s: %w", localEmbedRuntime, err)
	}
	return reg.With(udf.LocalEmbedRuntime(localEmbedRuntime, exe, localEmbedDims))
}

func (a *app) udfCmd() *cobra.Command {
	u := &cobra.Command{Use: "udf", Short: "Built-in user code that runtimes run", Hidden: true}
	var dims int
	he := &cobra.Command{
		Use:   "hash-embed [--dims N]",
		Short: "The hashing embedder over the ndjson protocol of exec runtimes (stdin to stdout)",
		Long: `Answers the ndjson protocol of an exec runtime: each input row's text (its input
columns, joined) becomes {"__row": n, "embedding": [N floats]}. The vector is
feature hashing of words and character trigrams, L2-normalised: not a learned
model. Texts that share words get close vectors, synonyms do not; the same text
always gives the same vector. It needs no network and is there to try the
pipeline; mvq dev declares it as the runtime local-embed (64 dimensions).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return udf.ServeHashEmbed(os.Stdin, a.stdout, dims)
		},
	}
	he.Flags().IntVar(&dims, "dims", localEmbedDims, "dimensions of the vectors")
	u.AddCommand(he)
	return u
}

func (a *app) columnCmd() *cobra.Command {
	col := &cobra.Command{Use: "column", Short: "Add virtual columns (embeddings, user code) and backfill them",
		Example: "  mvq column add 'docs$chunks' --name vec --from chunk --runtime local-embed --wait\n  mvq column backfill 'docs$articles' vec --wait"}
	var (
		name, from, runtime, udfVersion, manifest string
		dims                                      int
		noBackfill, wait                          bool
		wf                                        waitFlags
	)
	add := &cobra.Command{
		Use:   "add NAME --name COLUMN --from INPUT[,INPUT...] --runtime RUNTIME",
		Short: "Add a virtual column a runtime fills (an embedding column), then backfill it",
		Long: `Adds column COLUMN to table or view NAME, filled by runtime RUNTIME from the
INPUT columns, and starts the backfill job that fills the existing rows (printing
its id; --no-backfill: none). On a view, every refresh then fills the rows it
adds; on a table, run mvq column backfill after loading more rows.

The column is an embedding column, fixed_size_list<float32>[dimensions], whose
dimensions are the runtime's (declared in the runtimes file; --dims sets them
for a runtime that declares none). The runtimes are the operator's
(MVQ_RUNTIMES_FILE; examples/runtimes-*.yaml). mvq dev also declares
local-embed, a built-in hashing embedder of 64 dimensions: not a learned model
(texts that share words get close vectors), there to try the pipeline without a
network.

With --wait it follows the backfill like mvq refresh --wait.`,
		Example: `  mvq column add 'docs$chunks' --name vec --from chunk --runtime local-embed --wait
  mvq column add 'docs$chunks' --name vec --from chunk --runtime openai --udf-version text-embedding-3-small`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var inputs []string
			for _, c := range strings.Split(from, ",") {
				if c = strings.TrimSpace(c); c != "" {
					inputs = append(inputs, c)
				}
			}
			switch {
			case name == "" || len(inputs) == 0 || runtime == "":
				return usageErr("column add needs --name COLUMN, --from INPUT and --runtime RUNTIME")
			case dims < 0 || dims > udf.MaxHashEmbedDims:
				return usageErr("--dims %d: want 1 to %d", dims, udf.MaxHashEmbedDims)
			case wait && noBackfill:
				return usageErr("--wait follows the backfill; --no-backfill starts none")
			}
			ref, _ := json.Marshal(map[string]string{"runtime": runtime})
			vc := map[string]any{"input_columns": inputs, "udf": base64.StdEncoding.EncodeToString(ref),
				"auto_backfill": !noBackfill}
			if udfVersion != "" {
				vc["udf_version"] = udfVersion
			}
			if dims > 0 {
				vc["outputs"] = []any{map[string]any{"column": name, "struct_field": udf.HashEmbedField,
					"data_type": map[string]any{"type": "fixed_size_list", "length": dims,
						"fields": []any{map[string]any{"name": "item", "type": map[string]any{"type": "float32"}, "nullable": true}}}}}
			}
			if manifest != "" {
				m, err := os.ReadFile(manifest)
				if err != nil {
					return err
				}
				vc["manifest"] = string(m)
			}
			body := map[string]any{"new_columns": []any{map[string]any{"name": name, "virtual_column": vc}}}
			var resp struct {
				Version       int64    `json:"version"`
				JobIDs        []string `json:"job_ids"`
				BackfillError string   `json:"backfill_error"`
			}
			if err := a.client().call(a.ctx, "POST", "/v1/table/"+idPath(args[0])+"/add_columns", body, &resp); err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "added column %s to %s (version %d)\n", name, args[0], resp.Version)
			if resp.BackfillError != "" {
				return fmt.Errorf("the column exists, but its backfill did not start (%s); run: mvq column backfill '%s' %s", resp.BackfillError, args[0], name)
			}
			if len(resp.JobIDs) == 0 {
				return nil
			}
			fmt.Fprintln(a.stdout, resp.JobIDs[0])
			if !wait {
				return nil
			}
			return a.wait(resp.JobIDs[0], wf)
		},
	}
	add.Flags().StringVar(&name, "name", "", "the new column")
	add.Flags().StringVar(&from, "from", "", "comma-separated input columns (an embedding runtime takes one text column)")
	add.Flags().StringVar(&runtime, "runtime", "", "the runtime that fills it (mvq dev: local-embed)")
	add.Flags().IntVar(&dims, "dims", 0, "dimensions of the vectors (default: the runtime's)")
	add.Flags().StringVar(&udfVersion, "udf-version", "", "version of the code or model (default 1); a backfill refills rows another version filled")
	add.Flags().StringVar(&manifest, "manifest", "", "file with the column's manifest (JSON: mvq.model, mvq.timeout, env_vars, ...)")
	add.Flags().BoolVar(&noBackfill, "no-backfill", false, "add the column only; fill it later with mvq column backfill")
	add.Flags().BoolVarP(&wait, "wait", "w", false, "follow the backfill job to its end")
	wf.add(add)

	var bwait bool
	var bwf waitFlags
	var where string
	backfill := &cobra.Command{
		Use:     "backfill NAME COLUMN [--where PREDICATE]",
		Short:   "Fill a virtual column's rows that are not filled yet (or filled by another version)",
		Example: "  mvq column backfill 'docs$articles' vec --wait",
		Args:    exactArgs("NAME", "COLUMN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{"column": args[1]}
			if where != "" {
				body["where"] = where
			}
			var resp struct {
				JobID string `json:"job_id"`
			}
			if err := a.client().call(a.ctx, "POST", "/v1/table/"+idPath(args[0])+"/backfill_column", body, &resp); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, resp.JobID)
			if !bwait {
				return nil
			}
			return a.wait(resp.JobID, bwf)
		},
	}
	backfill.Flags().StringVar(&where, "where", "", "fill only the rows that match this SQL predicate")
	backfill.Flags().BoolVarP(&bwait, "wait", "w", false, "follow the backfill job to its end")
	bwf.add(backfill)
	col.AddCommand(add, backfill)
	return col
}

func (a *app) searchCmd() *cobra.Command {
	var text, vec, column, filter, columns, output string
	var k, dims int
	c := &cobra.Command{
		Use:   "search NAME (--text TEXT | --vector JSON) [--vector-column COLUMN]",
		Short: "Print a table's (or view's) rows nearest to a vector",
		Long: `Runs a vector search over NAME and prints the k nearest rows, nearest first, with
their _distance. --vector is the query vector as a JSON array. --text embeds TEXT
with the built-in hashing embedder (the one the runtime local-embed runs, at the
vector column's dimensions), so it fits columns local-embed filled; for a column another
runtime filled, embed the query with the same model and pass --vector.`,
		Example: `  mvq search 'docs$chunks' --text "solar panels" --vector-column vec -k 3 --columns id,chunk
  mvq search 'docs$chunks' --vector "$(cat query.json)" --vector-column vec`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := map[string]any{"k": k}
			switch {
			case (text == "") == (vec == ""):
				return usageErr("search needs one of --text TEXT or --vector JSON")
			case k <= 0:
				return usageErr("-k %d: want a positive number of rows", k)
			case dims <= 0 || dims > udf.MaxHashEmbedDims:
				return usageErr("--dims %d: want 1 to %d", dims, udf.MaxHashEmbedDims)
			case text != "":
				if !cmd.Flags().Changed("dims") {
					dims = a.vectorDims(args[0], column, dims)
				}
				req["vector"] = udf.HashEmbed(text, dims)
			default:
				var v []float32
				if err := json.Unmarshal([]byte(vec), &v); err != nil || len(v) == 0 {
					return usageErr("--vector: want a JSON array of numbers")
				}
				req["vector"] = v
			}
			if column != "" {
				req["vector_column"] = column
			}
			if filter != "" {
				req["filter"] = filter
			}
			if columns != "" {
				req["columns"] = columnNames(columns)
			}
			return a.printQuery(args[0], req, output)
		},
	}
	c.Flags().StringVar(&text, "text", "", "query text, embedded by the built-in hashing embedder (for columns local-embed filled)")
	c.Flags().StringVar(&vec, "vector", "", "query vector, a JSON array of numbers")
	c.Flags().IntVar(&dims, "dims", localEmbedDims, "dimensions of the --text embedding (default: the vector column's)")
	c.Flags().StringVar(&column, "vector-column", "", "the vector column (needed when the table has several)")
	c.Flags().IntVarP(&k, "k", "k", 10, "how many rows")
	c.Flags().StringVar(&filter, "filter", "", "SQL predicate the rows must match")
	c.Flags().StringVar(&columns, "columns", "", "comma-separated columns to return (default: all)")
	c.Flags().StringVarP(&output, "output", "o", "", "table, json, csv or arrow (default: table on a terminal, json otherwise)")
	return c
}

// vectorDims is the length of the vector column of table name (column, or
// its only fixed_size_list column); def when that cannot be told (the
// search then answers what is wrong).
func (a *app) vectorDims(name, column string, def int) int {
	d, err := a.describe(name)
	if err != nil {
		return def
	}
	found := 0
	for _, f := range d.Schema.Fields {
		var t struct {
			Type   string `json:"type"`
			Length int    `json:"length"`
		}
		if json.Unmarshal(f.Type, &t) != nil || t.Type != "fixed_size_list" || t.Length <= 0 || t.Length > udf.MaxHashEmbedDims {
			continue
		}
		if f.Name == column {
			return t.Length
		}
		if column == "" {
			if found != 0 {
				return def
			}
			found = t.Length
		}
	}
	if found == 0 {
		return def
	}
	return found
}
