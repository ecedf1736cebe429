package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
)

func (a *app) viewCmd() *cobra.Command {
	v := &cobra.Command{Use: "view", Short: "Create, list, show, schedule, suspend and drop materialized views",
		Example: "  mvq view create 'docs$chunks' --source 'docs$articles' --chunker fixed --input body --size 200\n  mvq view ls docs\n  mvq view show 'docs$chunks'"}
	var (
		source, query, kind, chunkerName, input, output, unit, manifest, every, lag string
		size, overlap                                                               int
		keepInput, autoRefresh, noData                                              bool
	)
	create := &cobra.Command{
		Use:   "create NAME (--source TABLE | --query SQL) [--chunker fixed --input COL ...]",
		Short: "Create a materialized view (and start its first refresh)",
		Long: `Creates view NAME over one source table. --source TABLE alone selects all its
columns; --query SQL is the view's SELECT over that table (with --source too, the
query must read it). With --chunker the view is a chunker view: the CLI writes the
chunker spec and its SHA-256 into the request. --kind udtf makes the query a table
function run over the whole source (full refresh).

The first refresh starts at once and its job id is printed (--no-data: none).`,
		Example: `  mvq view create 'docs$en' --query "SELECT id, body FROM \"docs\$articles\" WHERE lang = 'en'"
  mvq view create 'docs$chunks' --source 'docs$articles' --chunker fixed --input body --output chunk --size 200 --overlap 20
  mvq view create 'docs$sentences' --source 'docs$articles' --chunker sentence --input body --size 3 --unit words --no-data`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if source == "" && query == "" {
				return usageErr("view create needs --source TABLE or --query SQL")
			}
			source = nameArg(source)
			sq := query
			if sq == "" {
				sq = `SELECT * FROM "` + strings.ReplaceAll(source, `"`, `""`) + `"`
			} else if source != "" {
				src, err := refresh.SourceTable(sq)
				if err == nil && strings.Join(src, "$") != source {
					return usageErr("--query reads %s, not the --source %s", strings.Join(src, "$"), source)
				}
			}
			if kind == "" {
				kind = "query"
				if chunkerName != "" {
					kind = "chunker"
				}
			}
			body := map[string]any{"kind": kind, "source_query": sq, "output_schema": ""}
			switch kind {
			case "chunker":
				if chunkerName == "" || input == "" || size <= 0 {
					return usageErr("a chunker view needs --chunker fixed|recursive|sentence, --input COLUMN and --size N")
				}
				spec := map[string]any{"chunker": chunkerName, "input_column": input, "output_column": output,
					"chunk_size": size, "chunk_overlap": overlap, "unit": unit}
				if keepInput {
					spec["keep_input"] = true
				}
				doc, _ := json.Marshal(spec)
				sum := sha256.Sum256(doc)
				entry := map[string]any{"kind": "chunker", "udtf_name": chunkerName, "udtf_version": "1",
					"udtf": base64.StdEncoding.EncodeToString(doc), "udtf_sha": hex.EncodeToString(sum[:])}
				if manifest != "" {
					m, err := os.ReadFile(manifest)
					if err != nil {
						return err
					}
					// The server computes the checksum (of the canonical JSON).
					entry["manifest"] = string(m)
				}
				body["udtf_spec"] = entry
			case "query", "udtf":
				if chunkerName != "" || manifest != "" {
					return usageErr("--chunker and --manifest are for chunker views (--kind %s has neither)", kind)
				}
			default:
				return usageErr("--kind %q: want query, chunker or udtf", kind)
			}
			if autoRefresh {
				body["auto_refresh"] = true
			}
			if noData {
				body["with_no_data"] = true
			}
			if every != "" {
				body["refresh_every"] = every
			}
			if lag != "" {
				body["target_lag"] = lag
			}
			var resp struct {
				Version uint64 `json:"version"`
				JobID   string `json:"job_id"`
			}
			if err := a.client().call(a.ctx, "POST", "/v1/materialized_view/"+idPath(args[0])+"/create", body, &resp); err != nil {
				return err
			}
			if resp.JobID != "" {
				fmt.Fprintf(a.stderr, "created %s view %s; first refresh: job %s (mvq jobs watch %s)\n", kind, args[0], resp.JobID, resp.JobID)
				fmt.Fprintln(a.stdout, resp.JobID)
			} else {
				fmt.Fprintf(a.stdout, "created %s view %s (no data yet: mvq refresh '%s')\n", kind, args[0], args[0])
			}
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&source, "source", "", "the source table (all its columns unless --query)")
	f.StringVar(&query, "query", "", "the view's SELECT over its source table")
	f.StringVar(&kind, "kind", "", "query, chunker or udtf (default: chunker with --chunker, else query)")
	f.StringVar(&chunkerName, "chunker", "", "fixed, recursive or sentence")
	f.StringVar(&input, "input", "", "chunker: the text column to cut")
	f.StringVar(&output, "output", "chunk", "chunker: the column of the chunks")
	f.IntVar(&size, "size", 0, "chunker: chunk size in --unit")
	f.IntVar(&overlap, "overlap", 0, "chunker: overlap between chunks in --unit")
	f.StringVar(&unit, "unit", "chars", "chunker: chars or words")
	f.BoolVar(&keepInput, "keep-input", false, "chunker: keep the input column in the view")
	f.StringVar(&manifest, "manifest", "", "chunker: a JSON manifest file stored with the view")
	f.BoolVar(&autoRefresh, "auto-refresh", false, "mark the view for refresh when its source changes")
	f.BoolVar(&noData, "no-data", false, "create it empty, without the first refresh")
	f.StringVar(&every, "refresh-every", "", "also refresh it on a schedule, e.g. 15m or 1h (mvq view schedule changes it)")
	f.StringVar(&lag, "target-lag", "", "keep it at most this far behind its source, e.g. 5m: one refresh covers the changes within it (mvq view schedule changes it)")

	var outFmt string
	ls := &cobra.Command{
		Use:   "ls [NAMESPACE]",
		Short: "List views with their freshness",
		Long: `Lists the views of NAMESPACE (default: every namespace from the root, which needs
a root grant) with their last successful refresh and how far behind their source
is: FRESH is "yes" when the last DONE refresh read the source's current version,
else the number of source versions added since (or "never"). LAG is the time since
the oldest source commit the view has not seen ("0s" when fresh); REFRESHES says
how it refreshes by itself (auto, every D, target D, or manual) and "suspended".`,
		Example: "  mvq view ls docs\n  mvq view ls -o json",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var names []string
			var err error
			if len(args) == 1 {
				names, err = a.tablesIn(args[0])
			} else {
				names, err = a.allTables("$")
			}
			if err != nil {
				return err
			}
			type viewRow struct {
				View          string     `json:"view"`
				Kind          string     `json:"kind"`
				Source        string     `json:"source"`
				Version       uint64     `json:"version"`
				Rows          int64      `json:"rows"`
				SourceVersion uint64     `json:"source_version"`
				RefreshedAt   *time.Time `json:"refreshed_at,omitempty"`
				RefreshedFrom uint64     `json:"refreshed_source_version,omitempty"`
				Behind        *uint64    `json:"versions_behind,omitempty"`
				LastJob       *jobs.Job  `json:"last_job,omitempty"`
				LagSeconds    float64    `json:"lag_seconds"`
				AutoRefresh   bool       `json:"auto_refresh,omitempty"`
				RefreshEvery  string     `json:"refresh_every,omitempty"`
				TargetLag     string     `json:"target_lag,omitempty"`
				Suspended     bool       `json:"suspended,omitempty"`
			}
			var out []viewRow
			for _, n := range names {
				d, err := a.describe(n)
				if err != nil {
					return err
				}
				def := d.view()
				if def == nil {
					continue
				}
				r := viewRow{View: n, Kind: def.Kind, Source: strings.Join(def.Source, "$"), Version: d.Version, Rows: d.Stats.NumRows}
				if sd, err := a.describe(r.Source); err == nil {
					r.SourceVersion = sd.Version
				}
				if last, _ := a.latestJob(n, ""); last != nil {
					r.LastJob = last
				}
				if done, _ := a.latestJob(n, jobs.StateDone); done != nil && done.Result != nil {
					r.RefreshedAt, r.RefreshedFrom = done.FinishedAt, done.Result.SourceVersion
					if r.SourceVersion >= r.RefreshedFrom {
						b := r.SourceVersion - r.RefreshedFrom
						r.Behind = &b
					}
				}
				var st httpapi.ViewStatus
				if err := a.client().call(a.ctx, "GET", "/v1/materialized_view/"+idPath(n)+"/status", nil, &st); err == nil && st.Freshness != nil {
					r.LagSeconds, r.AutoRefresh, r.Suspended = st.LagSeconds, st.AutoRefresh, st.Suspended
					r.RefreshEvery, r.TargetLag = st.RefreshEvery, st.TargetLag
				}
				out = append(out, r)
			}
			if outFmt == "json" {
				return json.NewEncoder(a.stdout).Encode(out)
			}
			rows := [][]string{}
			for _, r := range out {
				fresh, when, last := "never", "-", "-"
				if r.Behind != nil {
					fresh = "yes"
					if *r.Behind > 0 {
						fresh = fmt.Sprintf("%d behind", *r.Behind)
					}
				}
				if r.RefreshedAt != nil {
					when = ago(*r.RefreshedAt)
				}
				if r.LastJob != nil {
					last = string(r.LastJob.State)
				}
				refreshes := "manual"
				switch {
				case r.TargetLag != "":
					refreshes = "target " + shortDuration(r.TargetLag)
				case r.RefreshEvery != "":
					refreshes = "every " + shortDuration(r.RefreshEvery)
				case r.AutoRefresh:
					refreshes = "auto"
				}
				if r.Suspended {
					refreshes += ", suspended"
				}
				rows = append(rows, []string{r.View, r.Kind, r.Source, fmt.Sprint(r.Version), fmt.Sprint(r.Rows), when, fresh, last,
					lagText(r.LagSeconds), refreshes})
			}
			printTable(a.stdout, []string{"VIEW", "KIND", "SOURCE", "VERSION", "ROWS", "REFRESHED", "FRESH", "LAST JOB", "LAG", "REFRESHES"}, rows)
			return nil
		},
	}
	ls.Flags().StringVarP(&outFmt, "output", "o", "table", "table or json")
	v.AddCommand(create, ls, a.viewShowCmd(), a.viewScheduleCmd(), a.viewSuspendCmd(true), a.viewSuspendCmd(false), a.dropCmd("view"))
	return v
}

// tablesIn lists the tables of a namespace as full identifiers.
func (a *app) tablesIn(ns string) ([]string, error) {
	var resp struct {
		Tables []string `json:"tables"`
	}
	if err := a.client().call(a.ctx, "GET", "/v1/namespace/"+idPath(ns)+"/table/list", nil, &resp); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(resp.Tables))
	for _, t := range resp.Tables {
		if ns == "$" {
			out = append(out, t)
		} else {
			out = append(out, ns+"$"+t)
		}
	}
	return out, nil
}

// allTables lists the tables of ns and every namespace under it.
func (a *app) allTables(ns string) ([]string, error) {
	out, err := a.tablesIn(ns)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Namespaces []string `json:"namespaces"`
	}
	if err := a.client().call(a.ctx, "GET", "/v1/namespace/"+idPath(ns)+"/list", nil, &resp); err != nil {
		return nil, err
	}
	for _, child := range resp.Namespaces {
		full := child
		if ns != "$" {
			full = ns + "$" + child
		}
		sub, err := a.allTables(full)
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
	}
	sort.Strings(out)
	return out, nil
}

// latestJob is the newest job of view in state ("": any), nil when none.
func (a *app) latestJob(view string, state jobs.State) (*jobs.Job, error) {
	var resp struct {
		Jobs []*jobs.Job `json:"jobs"`
	}
	req := map[string]any{"view": nameArg(view), "limit": 1}
	if state != "" {
		req["state"] = state
	}
	if err := a.client().call(a.ctx, "POST", "/v1/jobs/list", req, &resp); err != nil {
		return nil, err
	}
	if len(resp.Jobs) == 0 {
		return nil, nil
	}
	return resp.Jobs[0], nil
}

// lagText renders a lag in seconds in its largest whole unit: "0s",
// "3s", "2m", "5h", "3d".
func lagText(sec float64) string {
	d := time.Duration(sec * float64(time.Second))
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// shortDuration drops the zero units of a Go duration's text: "5m0s" is
// "5m", "1h0m0s" is "1h" (anything else is left as it is).
func shortDuration(s string) string {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return s
	}
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

// ago renders how long ago t was: "12s ago", "3m ago", "2h ago", "4d ago".
func ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}
