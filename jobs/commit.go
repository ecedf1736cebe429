package jobs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/codes"

	"github.com/mvq-dev/mvq/refresh"
)

// TypeCommit is the task that commits a refresh job.
const TypeCommit = "refresh:commit"

// CommitPayload is the commit task's payload.
type CommitPayload struct {
	JobID string `json:"job_id"`
}

// NewCommitTask returns the commit task of a job (task ID "commit:"+jobID)
// for the cluster's queue.
func NewCommitTask(jobID, cluster string, headers map[string]string) (*asynq.Task, error) {
	b, err := json.Marshal(CommitPayload{JobID: jobID})
	if err != nil {
		return nil, err
	}
	return asynq.NewTaskWithHeaders(TypeCommit, b, stamp(headers), taskOptions(cluster, "commit:"+jobID)...), nil
}

func (s *Server) enqueueCommit(ctx context.Context, j *Job, headers map[string]string) error {
	t, err := NewCommitTask(j.ID, j.Cluster, headers)
	if err != nil {
		return err
	}
	if err := enqueue(ctx, s.enq, t); err != nil {
		return fmt.Errorf("enqueue commit of job %s: %w", j.ID, err)
	}
	return nil
}

// handleCommit claims the commit (from then on the job cannot be
// cancelled), commits the view through the engine (idempotent per job),
// then marks the job DONE, which also frees the view for the next job,
// whose plan task is already retrying.
func (s *Server) handleCommit(ctx context.Context, t *asynq.Task) error {
	var p CommitPayload
	if err := decodePayload(t, &p); err != nil {
		return err
	}
	j, err := s.loadJob(ctx, p.JobID)
	if err != nil {
		return err
	}
	return s.commit(ctx, j)
}

// commitInPlace runs the commit inside the handler of the task that
// finished the job's last step, under a refresh.commit span of its own.
func (s *Server) commitInPlace(ctx context.Context, j *Job) error {
	ctx, span := startInPlace(ctx, TypeCommit)
	defer span.End()
	err := s.commit(ctx, j)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// commit is the commit task's work for job j (j.State as last read); the
// plan or work item task that finishes a job's last step calls it in place
// instead of enqueueing the commit task, saving a queue hop.
func (s *Server) commit(ctx context.Context, j *Job) error {
	switch j.State {
	case StateDone:
		return nil
	case StateCancelled, StateFailed:
		s.stopped(ctx, j.ID)
		return nil
	case StatePending:
		return fmt.Errorf("job %s: commit before plan", j.ID)
	}
	plan, err := s.loadPlan(ctx, j.ID)
	if err != nil {
		return err
	}
	if plan == nil {
		return fmt.Errorf("job %s: commit before its plan was stored", j.ID)
	}
	n := itemCount(plan)
	rs, err := s.st.results(ctx, j.ID, n)
	if err != nil {
		return err
	}
	for i, r := range rs {
		if r == nil {
			return fmt.Errorf("job %s: commit before work item %d is done", j.ID, i)
		}
	}
	r, err := s.st.transition(ctx, j, transition{
		from: []State{StateRunning}, event: EventPhase, message: "committing",
		set: []string{fPhase, PhaseCommitting},
	})
	if err != nil {
		return err
	}
	if !r.applied() {
		if Terminal(r.state) {
			s.stopped(context.WithoutCancel(ctx), j.ID)
		}
		return nil
	}
	// Watched: a cancel is refused from here on, but a drop of the view,
	// or the rescuer failing a stalled commit, stops it.
	wctx, stop := s.watch(ctx, j.ID)
	defer stop()
	res, err := protect(func() (refresh.Result, error) { return s.eng.Commit(wctx, plan, sortedResults(rs)) })
	if err != nil {
		return s.settle(wctx, j, PhaseCommitting, err, 0)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("done: %s refresh of source version %d, view version %d, %d rows added, %d removed",
		res.Mode, res.SourceVersion, res.ViewVersion, res.RowsAdded, res.RowsRemoved)
	fr, err := s.st.finish(context.WithoutCancel(ctx), j, StateDone, []State{StateRunning}, "", msg, fResult, string(b))
	if err != nil {
		return err // the retried commit finds its version and succeeds
	}
	s.wakeNext(context.WithoutCancel(ctx), j, fr.queued)
	return nil
}

// wakeNext runs at once the plan task of the job now first in j's view
// FIFO: it waits for its turn in asynq's retry set, where a retry's time
// is rounded to whole seconds, and the view is free now. A task that is
// not waiting for its turn (pending, scheduled, running, gone) is left
// alone. queued is the head of the view queue as the finish left it (nil:
// not known, read it).
func (s *Server) wakeNext(ctx context.Context, j *Job, queued []string) {
	if s.inspector == nil {
		return
	}
	ids := queued
	if ids == nil {
		var err error
		if ids, err = s.st.viewQueue(ctx, j.viewID, 2); err != nil {
			return
		}
	}
	for _, id := range ids {
		if id == j.ID {
			continue
		}
		// Only a plan waiting for its turn (retry): a scheduled one waits
		// out an automatic refresh's minimum interval or debounce.
		q := QueueName(j.Cluster)
		if info, err := s.inspector.GetTaskInfo(q, "plan:"+id); err == nil && info.State == asynq.TaskStateRetry {
			_ = s.inspector.RunTask(q, "plan:"+id)
		}
	}
}
