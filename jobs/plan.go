package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/mvq-dev/mvq/refresh"
)

// TypePlan is the task that plans a refresh job.
const TypePlan = "refresh:plan"

// PlanPayload is the plan task's payload.
type PlanPayload struct {
	JobID string `json:"job_id"`
}

// NewPlanTask returns the plan task of a job (task ID "plan:"+jobID) for the
// cluster's queue; extra options (a delay) are added.
func NewPlanTask(jobID, cluster string, headers map[string]string, extra ...asynq.Option) (*asynq.Task, error) {
	b, err := json.Marshal(PlanPayload{JobID: jobID})
	if err != nil {
		return nil, err
	}
	return asynq.NewTaskWithHeaders(TypePlan, b, stamp(headers), taskOptions(cluster, "plan:"+jobID)...), nil
}

// handlePlan waits for the job's turn on its view (returning errWaitTurn,
// which asynq retries soon without counting), moves the job to RUNNING,
// plans it once (a retried plan reuses the stored plan), starts the
// dispatch, enqueues work items 1 to Concurrency-1 and expands item 0
// itself, or commits in place when there is nothing to expand.
func (s *Server) handlePlan(ctx context.Context, t *asynq.Task) error {
	var p PlanPayload
	if err := decodePayload(t, &p); err != nil {
		return err
	}
	j, err := s.loadJob(ctx, p.JobID)
	if err != nil {
		return err
	}
	if j.State != StatePending && j.State != StateRunning {
		return nil
	}
	// At its turn the plan is held by this worker (recorded by acquire,
	// in the same round trip).
	task := ""
	if id, ok := asynq.GetTaskID(ctx); ok {
		task = logicalTask(id)
	}
	switch turn, ahead, err := s.st.acquire(ctx, j, task, s.id); {
	case err != nil:
		return err
	case turn == turnGone:
		return nil
	case turn == turnWait:
		s.healLostPlan(ctx, ahead)
		return errWaitTurn
	}
	if task != "" {
		defer s.st.release(context.WithoutCancel(ctx), j.ID, task, s.id)
	}
	r, err := s.st.transition(ctx, j, transition{
		from: []State{StatePending}, event: EventState, message: "started on worker " + s.id,
		set: []string{fState, string(StateRunning), fPhase, PhasePlanning, fStarted, formatTime(time.Now())},
	})
	if err != nil {
		return err
	}
	if !r.applied() && r.state != StateRunning {
		return nil // cancelled meanwhile
	}
	j.State = StateRunning
	wctx, stop := s.watch(ctx, j.ID)
	defer stop()
	var plan *refresh.Plan
	if !r.changed() {
		// Not the first start: a plan may be stored (a job moves to
		// RUNNING once, before its plan is stored).
		if plan, err = s.loadPlan(wctx, j.ID); err != nil {
			return err
		}
	}
	if plan == nil {
		plan, err = protect(func() (*refresh.Plan, error) { return s.eng.Plan(wctx, j.viewID, j.ID, j.Request) })
		if err != nil {
			return s.settle(wctx, j, PhasePlanning, err, 0)
		}
		if plan.JobID == "" {
			plan.JobID = j.ID
		}
		if plan, err = s.st.savePlan(ctx, plan); err != nil {
			return err
		}
		s.plans.Put(j.ID, plan, 1)
	}
	total := itemCount(plan)
	first := min(max(j.Request.Concurrency, 1), total)
	ok, err := s.st.startDispatch(ctx, j.ID, total, first)
	if err != nil {
		return err
	}
	if !ok {
		s.stopped(context.WithoutCancel(ctx), j.ID)
		return nil
	}
	if total == 0 {
		return s.commitInPlace(ctx, j)
	}
	// Items 1..first-1 go to the queue; this task expands item 0 in
	// place (a one-item job then runs plan, item and commit in this one
	// task). A retried plan task finds item 0 done and only passes the
	// baton again.
	for i := 1; i < first; i++ {
		if err := s.enqueueItem(ctx, j, i, t.Headers()); err != nil {
			return err
		}
	}
	ictx, span := startInPlace(ctx, TypeWorkItem)
	span.SetAttributes(attribute.String("mvq.job_id", j.ID), attribute.Int("mvq.item_index", 0),
		attribute.String("messaging.worker", s.id), attribute.Float64("messaging.queue_wait_ms", 0))
	defer span.End()
	err = s.workItem(ictx, j, 0, t.Headers())
	if err != nil && !errors.Is(err, errWaitTurn) {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// lostPlanAge is how long a job may stay PENDING with no plan task before
// a job queued behind it declares the plan lost. Submit writes the record
// and the plan task in one script; a plan task deleted by hand (or a
// record written by an older version that enqueued separately) leaves
// this.
const lostPlanAge = time.Minute

// healLostPlan fails the job ahead in a view's FIFO when it has been
// PENDING for lostPlanAge and asynq holds no plan task for it, so the jobs
// behind it are not blocked forever. The failure is retryable: submitting
// again is safe.
func (s *Server) healLostPlan(ctx context.Context, ahead string) {
	if ahead == "" || s.inspector == nil {
		return
	}
	h, err := s.st.job(ctx, ahead)
	if err != nil || h.State != StatePending || time.Since(h.CreatedAt) < lostPlanAge {
		return
	}
	if _, err := s.inspector.GetTaskInfo(QueueName(h.Cluster), "plan:"+h.ID); !errors.Is(err, asynq.ErrTaskNotFound) {
		return
	}
	if _, err := s.st.fail(ctx, h, Failure{Phase: "", Message: "its plan task was lost (the submitting process stopped before enqueuing it); submit the refresh again", Retryable: true}, 0); err != nil {
		s.log.WarnContext(ctx, "jobs: fail a job with a lost plan", "job_id", h.ID, "err", err)
		return
	}
	s.log.WarnContext(ctx, "jobs: failed a job whose plan task was lost", "job_id", h.ID)
}
