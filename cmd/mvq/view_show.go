package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mvq-dev/mvq/httpapi"
)

// viewShowCmd is `mvq view show NAME`: the definition and where the view
// stands (lag in versions and seconds, the problem that stops a refresh,
// its schedule, its last job, the views that read it).
func (a *app) viewShowCmd() *cobra.Command {
	var outFmt string
	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a view: definition, lag, problem, schedule, last job",
		Long: `Shows view NAME: its kind, source and query (and its chunker spec), whether it
refreshes on its source's commits (auto refresh), on a schedule (refresh every) or
within a target lag, whether it is suspended,
how far it lags its source (versions, and seconds since the source's first commit
the view has not seen), why it cannot refresh (problem), its newest job and the
views that read it. -o json prints the status and the definition as the API gives them.`,
		Example: "  mvq view show 'docs$chunks'\n  mvq view show 'docs$chunks' -o json",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			var raw json.RawMessage
			if err := a.client().call(a.ctx, "GET", "/v1/materialized_view/"+idPath(name)+"/status", nil, &raw); err != nil {
				return err
			}
			d, err := a.describe(name)
			if err != nil {
				return err
			}
			defRaw := d.Properties["mvq.view"]
			if outFmt == "json" {
				out := map[string]json.RawMessage{"status": raw}
				if json.Valid([]byte(defRaw)) {
					out["definition"] = json.RawMessage(defRaw)
				}
				return json.NewEncoder(a.stdout).Encode(out)
			}
			var st httpapi.ViewStatus
			if err := json.Unmarshal(raw, &st); err != nil {
				return fmt.Errorf("view status: %w", err)
			}
			if st.Freshness == nil {
				return fmt.Errorf("view status: an empty answer")
			}
			var def struct {
				SourceQuery string          `json:"source_query"`
				UDTFSpec    json.RawMessage `json:"udtf_spec"`
			}
			_ = json.Unmarshal([]byte(defRaw), &def)
			rows := [][2]string{
				{"view", name},
				{"kind", string(st.Kind)},
				{"version", fmt.Sprintf("%d (%d rows)", st.Version, d.Stats.NumRows)},
				{"query", def.SourceQuery},
			}
			if spec := chunkerSpecOf(def.UDTFSpec); spec != "" {
				rows = append(rows, [2]string{"chunker", spec})
			}
			for _, s := range st.Sources {
				src := fmt.Sprintf("%s at version %d, refreshed from %d", s.Table, s.LatestVersion, s.RefreshedVersion)
				if s.RefreshedVersion == 0 {
					src = fmt.Sprintf("%s at version %d, never refreshed", s.Table, s.LatestVersion)
				}
				if s.Branch != "" {
					src += " (branch " + s.Branch + ")"
				}
				if !s.Exists {
					src = s.Table + " (gone)"
				}
				rows = append(rows, [2]string{"source", src})
			}
			lag := "fresh"
			if st.Stale {
				lag = fmt.Sprintf("%d versions, %s behind", st.LagVersions, (time.Duration(st.LagSeconds * float64(time.Second))).Round(time.Second))
			}
			rows = append(rows, [2]string{"lag", lag})
			if st.Problem != "" {
				rows = append(rows, [2]string{"problem", st.Problem})
			}
			refreshes := "on request (mvq refresh)"
			if st.AutoRefresh {
				refreshes = "on every commit of its source (auto refresh)"
			}
			if st.RefreshEvery != "" {
				refreshes += ", and every " + st.RefreshEvery
			}
			if st.TargetLag != "" {
				refreshes += ", and within " + st.TargetLag + " of its source's commits (target lag)"
			}
			if st.NextRefreshAt != nil {
				refreshes += " (next " + st.NextRefreshAt.Local().Format(time.DateTime) + ")"
			}
			if st.Suspended {
				refreshes += "; suspended (mvq view resume)"
			}
			rows = append(rows, [2]string{"refreshes", refreshes})
			last := "none"
			if j := st.LastJob; j != nil {
				last = fmt.Sprintf("%s %s (%s)", j.JobID, j.State, j.Cause)
			}
			rows = append(rows, [2]string{"last job", last})
			if len(st.Downstream) > 0 {
				rows = append(rows, [2]string{"read by", strings.Join(st.Downstream, ", ")})
			}
			for _, r := range rows {
				fmt.Fprintf(a.stdout, "%-10s %s\n", r[0], r[1])
			}
			return nil
		},
	}
	show.Flags().StringVarP(&outFmt, "output", "o", "text", "text or json")
	return show
}

// chunkerSpecOf is the chunker spec of a chunker view's udtf_spec, as
// JSON ("" when there is none).
func chunkerSpecOf(raw json.RawMessage) string {
	var spec struct {
		Kind string `json:"kind"`
		UDTF string `json:"udtf"`
	}
	if json.Unmarshal(raw, &spec) != nil || spec.Kind != "chunker" {
		return ""
	}
	b, err := base64.StdEncoding.DecodeString(spec.UDTF)
	if err != nil {
		return ""
	}
	return string(b)
}

// viewScheduleCmd is `mvq view schedule NAME --refresh-every D` or
// `--target-lag D`: sets or (with off) stops a view's scheduled refresh or
// target lag.
func (a *app) viewScheduleCmd() *cobra.Command {
	var every, lag string
	c := &cobra.Command{
		Use:   "schedule NAME (--refresh-every DURATION|off | --target-lag DURATION|off)",
		Short: "Refresh a view on a schedule or within a target lag (or stop it with off)",
		Long: `--refresh-every refreshes view NAME every DURATION (1s to a year, e.g. 15m or 1h)
even when nothing announces a change of its source; jobs have cause "schedule".
--target-lag keeps NAME at most DURATION behind its source: the first commit the
view has not seen sets a deadline, and one refresh (cause "target_lag") covers
every commit up to it; an unchanged source causes none. A view has one or the
other (setting one stops the other); off stops it. Not with auto refresh.
mvq view show NAME shows the setting and the next refresh.`,
		Example: "  mvq view schedule 'docs$chunks' --refresh-every 15m\n  mvq view schedule 'docs$chunks' --target-lag 5m\n  mvq view schedule 'docs$chunks' --refresh-every off",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			setEvery, setLag := cmd.Flags().Changed("refresh-every"), cmd.Flags().Changed("target-lag")
			if setEvery == setLag {
				return usageErr("view schedule needs --refresh-every DURATION or --target-lag DURATION (or off)")
			}
			field, v, what := "refresh_every", every, "refreshed every "
			if setLag {
				field, v, what = "target_lag", lag, "target lag "
			}
			if strings.EqualFold(v, "off") {
				v = ""
			}
			if err := a.client().call(a.ctx, "POST", "/v1/materialized_view/"+idPath(args[0])+"/refresh_settings", map[string]any{field: v}, nil); err != nil {
				return err
			}
			switch {
			case v == "" && setLag:
				fmt.Fprintf(a.stdout, "%s: no target lag\n", args[0])
			case v == "":
				fmt.Fprintf(a.stdout, "%s: no scheduled refresh\n", args[0])
			default:
				fmt.Fprintf(a.stdout, "%s: %s%s\n", args[0], what, v)
			}
			return nil
		},
	}
	c.Flags().StringVar(&every, "refresh-every", "", "a duration such as 15m or 1h, or off")
	c.Flags().StringVar(&lag, "target-lag", "", "a duration such as 30s or 5m, or off")
	return c
}

// viewSuspendCmd is `mvq view suspend NAME` (suspend) or `mvq view
// resume NAME`.
func (a *app) viewSuspendCmd(suspend bool) *cobra.Command {
	verb, short := "resume", "Resume a view's automatic refreshes (one catch-up refresh if it is behind)"
	long := `Resumes the automatic refreshes of view NAME (auto refresh, refresh every, target
lag). A view behind its source gets one catch-up refresh at once (cause "resume");
its job id is printed.`
	if suspend {
		verb, short = "suspend", "Stop every automatic refresh of a view until mvq view resume"
		long = `Stops every automatic refresh of view NAME (auto refresh, refresh every, target
lag) until mvq view resume NAME; mvq refresh NAME still refreshes it. mvq view show
and mvq view ls say "suspended".`
	}
	return &cobra.Command{
		Use:     verb + " NAME",
		Short:   short,
		Long:    long,
		Example: "  mvq view " + verb + " 'docs$chunks'",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp struct {
				JobID string `json:"job_id"`
			}
			if err := a.client().call(a.ctx, "POST", "/v1/materialized_view/"+idPath(args[0])+"/"+verb, map[string]any{}, &resp); err != nil {
				return err
			}
			switch {
			case suspend:
				fmt.Fprintf(a.stdout, "%s: automatic refresh suspended\n", args[0])
			case resp.JobID != "":
				fmt.Fprintf(a.stderr, "%s: resumed; catch-up refresh: job %s\n", args[0], resp.JobID)
				fmt.Fprintln(a.stdout, resp.JobID)
			default:
				fmt.Fprintf(a.stdout, "%s: resumed\n", args[0])
			}
			return nil
		},
	}
}
