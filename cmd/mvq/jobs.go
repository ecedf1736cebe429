package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mvq-dev/mvq/jobs"
)

// refreshFlags are the options of a refresh request.
type refreshFlags struct {
	srcVersion, concurrency, sourceTaskSize, outputLimit, maxRowsPerFragment, intraApplier int64
	cluster, manifest                                                                      string
	srcBranch                                                                              string
}

func (r *refreshFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Int64Var(&r.srcVersion, "src-version", 0, "refresh from this source version (default: the latest)")
	f.Int64Var(&r.concurrency, "concurrency", 0, "work items of this job running at once, across all workers (default 8)")
	f.Int64Var(&r.sourceTaskSize, "source-task-size", 0, "source rows per work item (default 1024)")
	f.StringVar(&r.cluster, "cluster", "", "the worker pool to run on (default: default)")
	f.Int64Var(&r.outputLimit, "output-limit", -1, "chunker views: stop after this many view rows")
	f.Int64Var(&r.maxRowsPerFragment, "max-rows-per-fragment", 0, "rows per view fragment (default 131072)")
	f.Int64Var(&r.intraApplier, "intra-applier-concurrency", 0, "parallelism inside one work item")
	f.StringVar(&r.manifest, "manifest", "", "a JSON manifest file in force for this refresh only")
	f.StringVar(&r.srcBranch, "src-branch", "", "refresh from this branch of the source (default: main)")
}

func (r *refreshFlags) body(cmd *cobra.Command) (map[string]any, error) {
	b := map[string]any{}
	for _, o := range []struct {
		flag, field string
		v           int64
	}{{"src-version", "src_version", r.srcVersion}, {"concurrency", "concurrency", r.concurrency},
		{"source-task-size", "source_task_size", r.sourceTaskSize}, {"max-rows-per-fragment", "max_rows_per_fragment", r.maxRowsPerFragment},
		{"intra-applier-concurrency", "intra_applier_concurrency", r.intraApplier}} {
		if cmd.Flags().Changed(o.flag) {
			if o.v <= 0 {
				return nil, usageErr("--%s %d: want a positive number", o.flag, o.v)
			}
			b[o.field] = o.v
		}
	}
	if cmd.Flags().Changed("output-limit") {
		if r.outputLimit < 0 {
			return nil, usageErr("--output-limit %d: want 0 or more", r.outputLimit)
		}
		b["output_limit"] = r.outputLimit
	}
	if r.srcBranch != "" {
		b["src_branch"] = r.srcBranch
	}
	if r.cluster != "" {
		b["cluster"] = r.cluster
	}
	if r.manifest != "" {
		m, err := os.ReadFile(r.manifest)
		if err != nil {
			return nil, err
		}
		b["manifest"] = string(m)
	}
	return b, nil
}

// waitFlags say how a command waits for a job.
type waitFlags struct {
	cancelOnInterrupt bool
}

func (w *waitFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&w.cancelOnInterrupt, "cancel-on-interrupt", false, "Ctrl-C cancels the job without asking")
}

func (a *app) refreshCmd() *cobra.Command {
	var rf refreshFlags
	var wf waitFlags
	var wait bool
	c := &cobra.Command{
		Use:   "refresh VIEW",
		Short: "Start a refresh of a view; --wait follows it to the end",
		Long: `Starts a refresh job of VIEW and prints its id. With --wait it follows the job:
a live progress bar on a terminal (work items, rows read and written, rows/s,
elapsed, ETA), one line per event otherwise. Ctrl-C while waiting asks whether to
cancel the job (--cancel-on-interrupt: cancels without asking).

Exit codes with --wait: 0 DONE, 1 FAILED (the failure is printed), 2 CANCELLED.`,
		Example: "  mvq refresh 'docs$chunks' --wait\n  JOB=$(mvq refresh 'docs$chunks' --source-task-size 512 --concurrency 4)\n  mvq refresh 'docs$chunks' --wait --cancel-on-interrupt",
		Args:    exactArgs("VIEW"),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := rf.body(cmd)
			if err != nil {
				return err
			}
			id, err := a.submitRefresh(args[0], body)
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, id)
			if !wait {
				return nil
			}
			return a.wait(id, wf)
		},
	}
	rf.add(c)
	wf.add(c)
	c.Flags().BoolVarP(&wait, "wait", "w", false, "follow the job to its end, with a progress bar on a terminal")
	return c
}

func (a *app) submitRefresh(view string, body map[string]any) (string, error) {
	var resp struct {
		JobID string `json:"job_id"`
	}
	if err := a.client().call(a.ctx, "POST", "/v1/materialized_view/"+idPath(view)+"/refresh", body, &resp); err != nil {
		return "", err
	}
	return resp.JobID, nil
}

func (a *app) getJob(id string) (*jobs.Job, error) {
	var j jobs.Job
	if err := a.client().call(a.ctx, "GET", "/v1/job/"+idPath(id), nil, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

func (a *app) jobsCmd() *cobra.Command {
	j := &cobra.Command{Use: "jobs", Short: "List, show, follow, cancel and retry refresh jobs",
		Example: "  mvq jobs ls --state RUNNING\n  mvq jobs watch $JOB\n  mvq jobs cancel $JOB"}
	var view, state, outFmt string
	var limit int
	ls := &cobra.Command{
		Use: "ls", Short: "List jobs, newest first", Args: cobra.NoArgs,
		Example: "  mvq jobs ls\n  mvq jobs ls --view 'docs$chunks' --state FAILED -o json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := map[string]any{"limit": limit}
			if view != "" {
				req["view"] = nameArg(view)
			}
			if state != "" {
				req["state"] = strings.ToUpper(state)
			}
			var resp struct {
				Jobs []*jobs.Job `json:"jobs"`
			}
			if err := a.client().call(a.ctx, "POST", "/v1/jobs/list", req, &resp); err != nil {
				return err
			}
			if outFmt == "json" {
				return json.NewEncoder(a.stdout).Encode(resp.Jobs)
			}
			rows := [][]string{}
			for _, j := range resp.Jobs {
				p := j.Progress
				rows = append(rows, []string{j.ID, j.View, string(j.State), dash(j.Phase), fmt.Sprintf("%d/%d", p.WorkItemsDone, p.WorkItemsTotal),
					fmt.Sprint(p.RowsWritten), ago(j.CreatedAt)})
			}
			printTable(a.stdout, []string{"JOB", "VIEW", "STATE", "PHASE", "ITEMS", "ROWS WRITTEN", "CREATED"}, rows)
			return nil
		},
	}
	ls.Flags().StringVar(&view, "view", "", "only this view's jobs")
	ls.Flags().StringVar(&state, "state", "", "only jobs in this state: PENDING, RUNNING, DONE, FAILED, CANCELLED")
	ls.Flags().IntVar(&limit, "limit", 50, "at most this many jobs (1-1000)")
	ls.Flags().StringVarP(&outFmt, "output", "o", "table", "table or json")

	var showFmt string
	show := &cobra.Command{
		Use: "show ID", Short: "Show a job: state, progress, result or failure, request", Args: exactArgs("ID"),
		Example: "  mvq jobs show $JOB\n  mvq jobs show $JOB -o json",
		RunE: func(cmd *cobra.Command, args []string) error {
			j, err := a.getJob(args[0])
			if err != nil {
				return err
			}
			if showFmt == "json" {
				return json.NewEncoder(a.stdout).Encode(j)
			}
			p := j.Progress
			w := a.stdout
			fmt.Fprintf(w, "job        %s\nview       %s\nstate      %s\nphase      %s\n", j.ID, j.View, j.State, dash(j.Phase))
			fmt.Fprintf(w, "created    %s\n", j.CreatedAt.Local().Format(time.DateTime))
			if j.StartedAt != nil {
				fmt.Fprintf(w, "started    %s\n", j.StartedAt.Local().Format(time.DateTime))
			}
			if j.FinishedAt != nil {
				fmt.Fprintf(w, "finished   %s\n", j.FinishedAt.Local().Format(time.DateTime))
			}
			fmt.Fprintf(w, "progress   %d/%d work items (%d failed), %d rows read, %d written\n", p.WorkItemsDone, p.WorkItemsTotal, p.WorkItemsFailed, p.RowsRead, p.RowsWritten)
			if j.Result != nil {
				r := j.Result
				fmt.Fprintf(w, "result     %s refresh of source v%d into view v%d: +%d rows, -%d rows\n", r.Mode, r.SourceVersion, r.ViewVersion, r.RowsAdded, r.RowsRemoved)
			}
			if j.Failure != nil {
				fmt.Fprintf(w, "failure    in %s: %s (retryable: %v)\n", dash(j.Failure.Phase), j.Failure.Message, j.Failure.Retryable)
			}
			req, _ := json.Marshal(j.Request)
			fmt.Fprintf(w, "request    %s\n", req)
			if j.TraceID != "" {
				fmt.Fprintf(w, "trace      %s\n", j.TraceID)
				if tmpl := a.getenv("MVQ_TRACE_URL_TEMPLATE"); tmpl != "" {
					fmt.Fprintf(w, "trace url  %s\n", strings.ReplaceAll(tmpl, "{trace_id}", j.TraceID))
				}
			}
			return nil
		},
	}
	show.Flags().StringVarP(&showFmt, "output", "o", "text", "text or json")

	var wf waitFlags
	watch := &cobra.Command{
		Use: "watch ID", Short: "Follow a job to its end (exit 0 DONE, 1 FAILED, 2 CANCELLED)", Args: exactArgs("ID"),
		Example: "  mvq jobs watch $JOB",
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.wait(args[0], wf)
		},
	}
	wf.add(watch)

	cancel := &cobra.Command{
		Use: "cancel ID", Short: "Cancel a job", Args: exactArgs("ID"),
		Example: "  mvq jobs cancel $JOB",
		RunE: func(cmd *cobra.Command, args []string) error {
			var j jobs.Job
			if err := a.client().call(a.ctx, "POST", "/v1/jobs/cancel", map[string]any{"job_id": args[0]}, &j); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "job %s: %s\n", j.ID, j.State)
			return nil
		},
	}

	var rwait bool
	var rwf waitFlags
	retry := &cobra.Command{
		Use: "retry ID", Short: "Start a new job with the same request as job ID", Args: exactArgs("ID"),
		Example: "  mvq jobs retry $JOB --wait",
		RunE: func(cmd *cobra.Command, args []string) error {
			j, err := a.getJob(args[0])
			if err != nil {
				return err
			}
			id, err := a.submitRefresh(j.View, retryBody(j))
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, id)
			if rwait {
				return a.wait(id, rwf)
			}
			return nil
		},
	}
	retry.Flags().BoolVarP(&rwait, "wait", "w", false, "follow the new job to its end")
	rwf.add(retry)
	j.AddCommand(ls, show, watch, cancel, retry)
	return j
}

// retryBody is the refresh request of job j: the options it was given.
func retryBody(j *jobs.Job) map[string]any {
	r := j.Request
	b := map[string]any{}
	for k, v := range map[string]int{"source_task_size": r.SourceTaskSize, "concurrency": r.Concurrency,
		"intra_applier_concurrency": r.IntraApplierConcurrency, "max_rows_per_fragment": r.MaxRowsPerFragment} {
		if v > 0 {
			b[k] = v
		}
	}
	if r.SrcVersion > 0 {
		b["src_version"] = r.SrcVersion
	}
	if r.SrcBranch != "" {
		b["src_branch"] = r.SrcBranch
	}
	if r.OutputLimit != nil {
		b["output_limit"] = *r.OutputLimit
	}
	if r.Cluster != "" {
		b["cluster"] = r.Cluster
	}
	if r.Manifest != "" {
		b["manifest"] = r.Manifest
	}
	return b
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// wait follows job id to a terminal state, showing progress on stderr,
// and returns nil for DONE, an exit error 1 for FAILED and 2 for
// CANCELLED.
func (a *app) wait(id string, wf waitFlags) error {
	ctx, stop := context.WithCancel(a.ctx)
	defer stop()
	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, os.Interrupt)
	defer signal.Stop(sigc)

	job, err := a.getJob(id)
	if err != nil {
		return err
	}
	events := make(chan jobs.Event, 64)
	streamErr := make(chan error, 1)
	go func() { streamErr <- a.follow(ctx, id, events) }()

	p := newProgress(a.stderr, isTerminal(a.stderr), job)
	ticker := time.NewTicker(500 * time.Millisecond)
	defer ticker.Stop()
	cancelled := false
	for !jobs.Terminal(job.State) {
		select {
		case e := <-events:
			p.event(e)
			job.State, job.Phase, job.Progress = e.State, e.Phase, e.Progress
		case err := <-streamErr:
			// The stream ended: the job is terminal, or the connection
			// failed for good. follow has handed over every event it
			// read before returning, so show those first: select picks
			// among ready cases at random, and the end of the stream
			// can win over events still in the buffer.
			for drained := false; !drained; {
				select {
				case e := <-events:
					p.event(e)
				default:
					drained = true
				}
			}
			j, gerr := a.getJob(id)
			if gerr != nil {
				return errors.Join(err, gerr)
			}
			job = j
			if !jobs.Terminal(job.State) {
				return fmt.Errorf("lost the event stream of job %s (%v); it is %s: mvq jobs watch %s", id, err, job.State, id)
			}
		case <-ticker.C:
			p.draw()
		case <-sigc:
			if cancelled {
				p.clear()
				fmt.Fprintf(a.stderr, "stopped waiting; job %s is being cancelled\n", id)
				return &exitError{code: exitInterrupted}
			}
			p.clear()
			yes := wf.cancelOnInterrupt
			if !yes {
				var answered bool
				yes, answered = a.ask(fmt.Sprintf("Cancel job %s? [y/N] ", id), sigc)
				if !answered || !yes {
					fmt.Fprintf(a.stderr, "stopped waiting; job %s keeps running (mvq jobs watch %s, mvq jobs cancel %s)\n", id, id, id)
					return &exitError{code: exitInterrupted}
				}
			}
			if err := a.client().call(a.ctx, "POST", "/v1/jobs/cancel", map[string]any{"job_id": id}, nil); err != nil {
				return err
			}
			cancelled = true
			fmt.Fprintf(a.stderr, "cancelling job %s…\n", id)
		}
	}
	stop()
	if j, err := a.getJob(id); err == nil {
		job = j
	}
	p.finish(job)
	switch job.State {
	case jobs.StateDone:
		return nil
	case jobs.StateFailed:
		msg := "no failure recorded"
		if job.Failure != nil {
			msg = job.Failure.Message
			if job.Failure.Retryable {
				msg += " (retryable: mvq jobs retry " + id + ")"
			}
		}
		return &exitError{code: exitFailed, msg: fmt.Sprintf("job %s FAILED: %s", id, msg)}
	default:
		return &exitError{code: exitCancelled, msg: fmt.Sprintf("job %s was CANCELLED", id)}
	}
}

// ask prints prompt and reads y/n from stdin when it is a terminal. It
// returns answered=false without a terminal or on a second Ctrl-C.
func (a *app) ask(prompt string, sigc <-chan os.Signal) (yes, answered bool) {
	if f, ok := a.stdin.(*os.File); !ok || !isTerminal(f) {
		return false, false
	}
	fmt.Fprint(a.stderr, prompt)
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(a.stdin).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		s = strings.ToLower(strings.TrimSpace(s))
		return s == "y" || s == "yes", true
	case <-sigc:
		fmt.Fprintln(a.stderr)
		return false, false
	}
}

// follow sends the job's events to out until the stream ends after a
// terminal state (nil) or fails for good; a dropped connection resumes
// from the last event id.
func (a *app) follow(ctx context.Context, id string, out chan<- jobs.Event) error {
	lastID := ""
	var lastErr error
	for attempt := 0; attempt < 30; attempt++ {
		terminal, err := a.stream(ctx, id, lastID, func(e jobs.Event) {
			lastID = e.ID
			select {
			case out <- e:
			case <-ctx.Done():
			}
		})
		if terminal || ctx.Err() != nil {
			return nil
		}
		var ae *apiError
		if errors.As(err, &ae) && ae.Status < 500 {
			return err
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	return fmt.Errorf("event stream: %v", lastErr)
}

// stream reads one connection of the event stream.
func (a *app) stream(ctx context.Context, id, lastID string, fn func(jobs.Event)) (terminal bool, err error) {
	c := a.client()
	req := "/v1/job/" + idPath(id) + "/events"
	resp, err := c.doSSE(ctx, req, lastID)
	if err != nil {
		return false, err
	}
	defer resp.Close()
	sc := bufio.NewScanner(resp)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e jobs.Event
		if json.Unmarshal([]byte(data), &e) != nil {
			continue
		}
		fn(e)
		if e.Terminal() {
			terminal = true
		}
	}
	if err := sc.Err(); err != nil && !terminal {
		return false, err
	}
	if !terminal {
		return false, io.ErrUnexpectedEOF
	}
	return true, nil
}

// doSSE opens the event stream, resuming after lastID.
func (c *client) doSSE(ctx context.Context, path, lastID string) (io.ReadCloser, error) {
	var hdr [][2]string
	if lastID != "" {
		hdr = append(hdr, [2]string{"Last-Event-ID", lastID})
	}
	resp, err := c.do(ctx, "GET", path, nil, "", "text/event-stream", hdr...)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
