package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/attribute"

	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/telemetry"
)

// TypeWorkItem is the task that expands one work item of a job.
const TypeWorkItem = "refresh:workitem"

// WorkItemPayload is the workitem task's payload.
type WorkItemPayload struct {
	JobID string `json:"job_id"`
	Index int    `json:"index"`
}

// NewWorkItemTask returns the task of work item index of a job (task ID
// "item:"+jobID+":"+index) for the cluster's queue.
func NewWorkItemTask(jobID string, index int, cluster string, headers map[string]string) (*asynq.Task, error) {
	b, err := json.Marshal(WorkItemPayload{JobID: jobID, Index: index})
	if err != nil {
		return nil, err
	}
	return asynq.NewTaskWithHeaders(TypeWorkItem, b, stamp(headers),
		taskOptions(cluster, "item:"+jobID+":"+strconv.Itoa(index))...), nil
}

func (s *Server) enqueueItem(ctx context.Context, j *Job, index int, headers map[string]string) error {
	done, err := s.st.itemDone(ctx, j.ID, index)
	if err != nil || done {
		return err
	}
	t, err := NewWorkItemTask(j.ID, index, j.Cluster, headers)
	if err != nil {
		return err
	}
	if err := enqueue(ctx, s.enq, t); err != nil {
		return fmt.Errorf("enqueue item %d of job %s: %w", index, j.ID, err)
	}
	return nil
}

// handleWorkItem expands one item unless its job has stopped or the item is
// done already, records the result once, and passes the baton: it enqueues
// the item its completion released, and the commit after the last item. A
// repeated delivery repeats only the passing of the baton.
func (s *Server) handleWorkItem(ctx context.Context, t *asynq.Task) error {
	var p WorkItemPayload
	if err := decodePayload(t, &p); err != nil {
		return err
	}
	j, err := s.loadJob(ctx, p.JobID)
	if err != nil {
		return err
	}
	return s.workItem(ctx, j, p.Index, t.Headers())
}

// workItem is the work item task's work for item index of job j (j.State
// as last read). The completion that records a job's last item commits in
// place (no commit task, no queue hop); a repeated completion enqueues the
// commit task instead, which runs once however many ask for it.
func (s *Server) workItem(ctx context.Context, j *Job, index int, headers map[string]string) error {
	p := WorkItemPayload{JobID: j.ID, Index: index}
	if j.State != StateRunning {
		if Terminal(j.State) {
			s.stopped(ctx, j.ID)
		}
		return nil
	}
	plan, err := s.loadPlan(ctx, j.ID)
	if err != nil {
		return err
	}
	if plan == nil {
		return fmt.Errorf("job %s: work item %d before its plan was stored", j.ID, p.Index)
	}
	if p.Index < 0 || p.Index >= itemCount(plan) {
		return fmt.Errorf("job %s has no work item %d: %w", j.ID, p.Index, asynq.SkipRetry)
	}
	started, err := s.st.startItem(ctx, j.ID, p.Index)
	if err != nil {
		return err
	}
	if started == itemJobNotRunning {
		s.stopped(context.WithoutCancel(ctx), j.ID)
		return nil
	}
	// The item is marked running until its completion, which unmarks it
	// itself; a failed step unmarks it here.
	completed := false
	if started == itemStarted {
		defer func() {
			if !completed {
				s.st.endItem(context.WithoutCancel(ctx), j.ID, p.Index)
			}
		}()
	}

	res := refresh.ItemResult{Index: p.Index}
	var ck, from string
	if started == itemStarted {
		wctx, stop := s.watch(ctx, j.ID)
		res, ck, from, err = s.expand(wctx, j, plan, p.Index)
		stop()
		if err != nil {
			return s.settle(wctx, j, PhaseExpanding, err, 1)
		}
	}
	c, err := s.st.completeItem(ctx, j.ID, res, ck, from)
	if err != nil {
		return err
	}
	completed = true
	if c.record == itemRecordedNow { // counted once, however often the item ran
		a := telemetry.Attrs(attribute.String("cluster", j.Cluster), attribute.String("kind", s.kindOf(j.ID)))
		telemetry.RowsRead.Add(ctx, res.RowsRead, a)
		telemetry.RowsWritten.Add(ctx, res.RowsWritten, a)
		if from != "" {
			telemetry.WorkItemsReused.Add(ctx, 1, a)
		}
	}
	if c.record == itemNotRecorded {
		s.stopped(context.WithoutCancel(ctx), j.ID)
		return nil
	}
	if c.released >= 0 {
		if err := s.enqueueItem(ctx, j, c.released, headers); err != nil {
			return err
		}
	}
	if c.done >= int64(itemCount(plan)) {
		if c.record == itemRecordedNow {
			return s.commitInPlace(ctx, j)
		}
		return s.enqueueCommit(ctx, j, headers)
	}
	return nil
}

// expand runs the engine on one item, or skips it when output_limit is
// already reached: the rows kept from earlier refreshes before the item
// plus the rows written by all earlier items (when all are done) reach the
// limit. An item an earlier job finished with the same checkpoint key is
// reused instead (reuse). It answers the result, the item's checkpoint
// key ("" none) and the job whose output it reused ("" none).
func (s *Server) expand(ctx context.Context, j *Job, plan *refresh.Plan, index int) (res refresh.ItemResult, ck, from string, err error) {
	skip, err := s.skippable(ctx, j, plan, index)
	if err != nil {
		return refresh.ItemResult{}, "", "", err
	}
	if skip {
		return refresh.ItemResult{Index: index, Skipped: true}, "", "", nil
	}
	ctx = s.withLog(ctx, j.ID)
	ck, res, from, ok := s.reuse(ctx, j, plan, index)
	if ok {
		return res, ck, from, nil
	}
	res, err = protect(func() (refresh.ItemResult, error) { return s.eng.Expand(ctx, plan, index) })
	res.Index = index
	return res, ck, "", err
}

// reuse looks up the checkpoint of item index of plan and, when an
// earlier job recorded one, has the engine check and copy its output.
// Anything amiss (no key, no record, a record of this very job, files
// missing or changed, Redis unreachable) answers ok false: the item is
// expanded as usual, and the failure is logged, never the job's.
func (s *Server) reuse(ctx context.Context, j *Job, plan *refresh.Plan, index int) (ck string, res refresh.ItemResult, from string, ok bool) {
	ck, err := protect(func() (string, error) { return s.eng.CheckpointKey(ctx, plan, index) })
	if err != nil || ck == "" {
		if err != nil {
			s.log.WarnContext(ctx, "jobs: checkpoint key", "job_id", j.ID, "item", index, "err", err)
		}
		return "", res, "", false
	}
	rec, err := s.st.checkpoint(ctx, ck)
	if err != nil {
		s.log.WarnContext(ctx, "jobs: read checkpoint; expanding the item", "job_id", j.ID, "item", index, "err", err)
	}
	if err != nil || rec == nil || rec.Job == j.ID {
		return ck, res, "", false
	}
	res, err = protect(func() (refresh.ItemResult, error) { return s.eng.Reuse(ctx, plan, index, rec.Job, rec.Result) })
	if err != nil {
		if ctx.Err() == nil {
			s.log.WarnContext(ctx, "jobs: checkpoint not reusable; expanding the item", "job_id", j.ID, "item", index, "from_job", rec.Job, "err", err)
		}
		return ck, res, "", false
	}
	res.Index = index
	return ck, res, rec.Job, true
}

func (s *Server) skippable(ctx context.Context, j *Job, plan *refresh.Plan, index int) (bool, error) {
	if plan.Options.OutputLimit == nil {
		return false, nil
	}
	if plan.Skippable(index, 0) {
		return true, nil
	}
	rs, err := s.st.results(ctx, j.ID, index)
	if err != nil {
		return false, err
	}
	var written int64
	for _, r := range rs {
		if r == nil {
			return false, nil // an earlier item is not done: expand
		}
		written += r.RowsWritten
	}
	return plan.Skippable(index, written), nil
}
