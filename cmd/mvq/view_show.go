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
refreshes on its source's commits (auto refresh) or on a schedule (refresh every),
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
				if st.NextRefreshAt != nil {
					refreshes += " (next " + st.NextRefreshAt.Local().Format(time.DateTime) + ")"
				}
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

// viewScheduleCmd is `mvq view schedule NAME --refresh-every D`: sets or
// (with off) stops a view's scheduled refresh.
func (a *app) viewScheduleCmd() *cobra.Command {
	var every string
	c := &cobra.Command{
		Use:   "schedule NAME --refresh-every DURATION|off",
		Short: "Refresh a view on a schedule (or stop it with off)",
		Long: `Refreshes view NAME every DURATION (1s to a year, e.g. 15m or 1h) even when
nothing announces a change of its source; off stops the schedule. Scheduled jobs
have cause "schedule". mvq view show NAME shows the schedule and the next refresh.`,
		Example: "  mvq view schedule 'docs$chunks' --refresh-every 15m\n  mvq view schedule 'docs$chunks' --refresh-every off",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("refresh-every") {
				return usageErr("view schedule needs --refresh-every DURATION (or off)")
			}
			v := every
			if strings.EqualFold(v, "off") {
				v = ""
			}
			if err := a.client().call(a.ctx, "POST", "/v1/materialized_view/"+idPath(args[0])+"/refresh_settings", map[string]any{"refresh_every": v}, nil); err != nil {
				return err
			}
			if v == "" {
				fmt.Fprintf(a.stdout, "%s: no scheduled refresh\n", args[0])
			} else {
				fmt.Fprintf(a.stdout, "%s: refreshed every %s\n", args[0], v)
			}
			return nil
		},
	}
	c.Flags().StringVar(&every, "refresh-every", "", "a duration such as 15m or 1h, or off")
	return c
}
