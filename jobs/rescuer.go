package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/mvq-dev/mvq/errs"
)

// RescuerConfig configures a Rescuer.
type RescuerConfig struct {
	// Interval between passes; default 1s.
	Interval time.Duration
	// StallTimeout fails a RUNNING job whose last event (a state or phase
	// change, or a finished work item) is older than this; default 30m
	// (one attempt of a task is bounded by the same 30m). Env
	// MVQ_JOB_STALL_TIMEOUT.
	StallTimeout time.Duration
	// ArchiveScanInterval is how often archived tasks are looked for;
	// default 10s.
	ArchiveScanInterval time.Duration
	// MaxWorkerDeaths fails a job, not retryable, once this many workers
	// died while holding the same task of it (default 3), instead of
	// handing the task to yet another worker: a work item whose SQL or
	// code kills the process it runs in would otherwise take the pool
	// down one worker after another.
	MaxWorkerDeaths int
	// OrphanGrace is how long a task may stay active in asynq with no
	// holder before it is run again (default 2s): a worker records that it
	// holds a task milliseconds after asynq hands it over, so a task still
	// unheld after the grace was taken by a worker that died in between.
	OrphanGrace time.Duration
}

func (c *RescuerConfig) defaults() {
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.StallTimeout <= 0 {
		c.StallTimeout = 30 * time.Minute
	}
	if c.ArchiveScanInterval <= 0 {
		c.ArchiveScanInterval = 10 * time.Second
	}
	if c.MaxWorkerDeaths <= 0 {
		c.MaxWorkerDeaths = DefaultMaxWorkerDeaths
	}
	if c.OrphanGrace <= 0 {
		c.OrphanGrace = 2 * time.Second
	}
}

// DefaultMaxWorkerDeaths is RescuerConfig.MaxWorkerDeaths unless set.
const DefaultMaxWorkerDeaths = 3

// rescueSep separates a logical task id from the suffix of a re-run
// enqueued by the rescuer ("item:J:3~rescue~W"): asynq keeps the dead
// worker's task under the logical id until its lease expires, so the
// re-run needs an id of its own, and a deterministic one, so a second pass
// does not enqueue it twice.
const rescueSep = "~rescue~"

// Rescuer keeps unfinished jobs moving when what runs them goes away. On
// each pass, for every unfinished job of its clusters:
//
//   - a task (plan, work item or commit) held by a worker whose heartbeat
//     expired is enqueued again under a rescue id, so another worker runs
//     it within about the heartbeat TTL plus Interval of the death instead
//     of waiting for asynq's lease (30s) and recovery (up to a minute
//     more); every task is idempotent, so the dead worker's copy running
//     later is harmless;
//   - a task asynq handed to a worker that died before recording that it
//     holds it (an orphan: active in asynq, held by nobody, for longer
//     than OrphanGrace) is enqueued again the same way, as is a rescue
//     copy that was lost before any worker held it; a handed-on task's
//     copy is recorded in mvq:job:{id}:queued until a worker holds it,
//     so the dead worker's own task, still active in asynq, is not taken
//     for another orphan;
//   - but once MaxWorkerDeaths different workers died holding the same
//     task (a poison pill: its input kills whatever runs it), the job
//     fails, not retryable, saying so, and the task is not handed on;
//   - a RUNNING job whose last event is older than StallTimeout fails,
//     retryable, with that reason;
//   - a job one of whose tasks asynq archived (retries used up, e.g. on
//     Redis errors inside the handler) fails, retryable, with the task's
//     last error.
//
// A failed job leaves its view's FIFO (the next job runs) and its staged
// output is discarded. One worker per cluster does a pass at a time (a
// Redis lock); passes are skipped while this worker's own heartbeat is
// stale, since then the registry cannot tell dead workers from live ones.
type Rescuer struct {
	st        *store
	enq       *asynq.Client
	inspector *asynq.Inspector
	hb        *Heartbeater
	id        string
	clusters  []string
	cfg       RescuerConfig
	log       *slog.Logger
	stopped   func(ctx context.Context, jobID string)
	loop      loop

	lastArchiveScan time.Time
	// orphans: per cluster, asynq task id -> when a pass first saw it
	// active with no holder.
	orphans map[string]map[string]orphanSighting
}

// orphanSighting is the first sight of an active task nobody holds. A
// task retried meanwhile (a plan waiting for its view's turn runs for
// milliseconds every 200) shows another LastFailedAt: it is alive.
type orphanSighting struct {
	at         time.Time
	lastFailed time.Time
}

// RescueResult counts what one pass did.
type RescueResult struct {
	Rescued  int // tasks of dead workers enqueued again
	Stalled  int // jobs failed for want of progress
	Archived int // jobs failed because a task was archived
	Poisoned int // jobs failed because their task killed MaxWorkerDeaths workers
	Orphans  int // tasks taken by a worker that died before holding them, enqueued again
}

// Start runs passes every Interval until Stop.
func (r *Rescuer) Start(ctx context.Context) error {
	r.cfg.defaults()
	return r.loop.start(ctx, func(ctx context.Context) {
		every(ctx, r.cfg.Interval, func(ctx context.Context) {
			if _, err := r.Pass(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("jobs: rescuer pass failed", "worker", r.id, "err", err)
			}
		})
	})
}

// Stop ends the passes.
func (r *Rescuer) Stop(ctx context.Context) error { return r.loop.stop(ctx) }

// Pass runs one pass over every cluster of the worker.
func (r *Rescuer) Pass(ctx context.Context) (RescueResult, error) {
	r.cfg.defaults()
	var total RescueResult
	scanArchive := time.Since(r.lastArchiveScan) >= r.cfg.ArchiveScanInterval
	var errList []error
	for _, c := range r.clusters {
		res, err := r.pass(ctx, c, scanArchive)
		total.Rescued += res.Rescued
		total.Stalled += res.Stalled
		total.Archived += res.Archived
		total.Poisoned += res.Poisoned
		total.Orphans += res.Orphans
		errList = append(errList, err)
	}
	if scanArchive {
		r.lastArchiveScan = time.Now()
	}
	return total, errors.Join(errList...)
}

func (r *Rescuer) pass(ctx context.Context, cluster string, scanArchive bool) (RescueResult, error) {
	var res RescueResult
	if r.hb != nil && !r.hb.alive(ctx, cluster) {
		delete(r.orphans, cluster) // sightings must come from consecutive passes
		return res, nil
	}
	lock := "rescuer:" + cluster
	ttl := max(5*r.cfg.Interval, 10*time.Second)
	ok, err := r.st.lock(ctx, lock, r.id, ttl)
	if err == nil && !ok {
		ok, err = r.takeDeadLock(ctx, cluster, lock, ttl)
	}
	if err != nil || !ok {
		delete(r.orphans, cluster)
		return res, err
	}
	defer r.st.unlock(context.WithoutCancel(ctx), lock, r.id)

	ids, err := r.st.unfinished(ctx, cluster)
	if err != nil {
		return res, err
	}
	live := map[string]*Job{}
	var errList []error
	for _, id := range ids {
		j, err := r.st.job(ctx, id)
		switch {
		case err == nil && !Terminal(j.State):
			live[id] = j
		case err == nil || errs.CodeOf(err) == errs.CodeJobNotFound:
			r.st.forgetUnfinished(ctx, cluster, id)
			continue
		default:
			errList = append(errList, err)
			continue
		}
		n, poisoned, err := r.rescueHeld(ctx, j)
		res.Rescued += n
		errList = append(errList, err)
		if poisoned {
			res.Poisoned++
			delete(live, id)
			continue
		}
		if j.State == StateRunning && !j.progressAt.IsZero() && time.Since(j.progressAt) > r.cfg.StallTimeout {
			msg := fmt.Sprintf("no progress for %s (last event at %s); stalled jobs are failed after MVQ_JOB_STALL_TIMEOUT: submit the refresh again",
				time.Since(j.progressAt).Round(time.Second), formatTime(j.progressAt))
			if r.failJob(ctx, j, msg, true) {
				res.Stalled++
				delete(live, id)
			}
		}
	}
	if r.inspector != nil {
		n, err := r.scanOrphans(ctx, cluster, live)
		res.Orphans += n
		errList = append(errList, err)
	}
	if scanArchive && r.inspector != nil {
		n, err := r.scanArchived(ctx, cluster, live)
		res.Archived += n
		errList = append(errList, err)
	}
	return res, errors.Join(errList...)
}

// rescueHeld enqueues again the tasks of j held by dead workers, or fails
// j (poisoned) when one of them has now died on MaxWorkerDeaths workers.
func (r *Rescuer) rescueHeld(ctx context.Context, j *Job) (n int, poisoned bool, err error) {
	held, err := r.st.holders(ctx, j.ID)
	if err != nil {
		return 0, false, err
	}
	if r.inspector != nil {
		queued, err := r.st.queued(ctx, j.ID)
		if err != nil {
			return 0, false, err
		}
		for task, copyID := range queued {
			if held[task] != "" {
				continue
			}
			lost, err := r.lostCopy(ctx, j, task, copyID)
			if err != nil {
				return n, false, err
			}
			if lost {
				n++
			}
		}
	}
	alive := map[string]bool{}
	for task, worker := range held {
		ok, seen := alive[worker]
		if !seen {
			if ok, err = r.st.workerAlive(ctx, j.Cluster, worker); err != nil {
				return n, false, err
			}
			alive[worker] = ok
		}
		if ok {
			continue
		}
		deaths, err := r.st.recordDeath(ctx, j.ID, task, worker)
		if err != nil {
			return n, false, err
		}
		if deaths >= r.cfg.MaxWorkerDeaths {
			msg := fmt.Sprintf("%s was running on %d workers that died while running it (heartbeats lapsed; the last %s), so it is not handed to another: "+
				"what it runs likely kills the worker (memory: the view's SQL is bounded by MVQ_QUERY_MEMORY, its code by the runtime); fix the view before refreshing again",
				describeTask(task), deaths, worker)
			r.st.release(ctx, j.ID, task, worker)
			return n, r.failJob(ctx, j, msg, false), nil
		}
		t, copyID, err := rescueTask(task, worker, j.Cluster)
		if err != nil {
			r.log.Warn("jobs: unknown held task", "job_id", j.ID, "task", task, "err", err)
			r.st.release(ctx, j.ID, task, worker)
			continue
		}
		if err := enqueue(ctx, r.enq, t); err != nil {
			return n, false, redisErr("enqueue rescued task", err)
		}
		if _, err := r.st.handOver(ctx, j.ID, task, worker, "", copyID); err != nil {
			return n, false, err
		}
		n++
		r.log.Warn("jobs: re-ran a task of a dead worker", "job_id", j.ID, "task", task, "dead_worker", worker, "deaths", deaths)
	}
	return n, false, nil
}

// describeTask names a logical task id for a job's failure message.
func describeTask(task string) string {
	kind, rest, _ := strings.Cut(task, ":")
	switch kind {
	case "item":
		_, idx, _ := strings.Cut(rest, ":")
		return "work item " + idx
	case "plan":
		return "the plan task (which runs work item 0 in place)"
	case "commit":
		return "the commit task"
	}
	return "task " + task
}

// rescueTask rebuilds the task named by a logical task id, under a rescue
// id derived from suffix (the dead worker, or the orphaned copy), and
// returns it with that id.
func rescueTask(task, suffix, cluster string) (*asynq.Task, string, error) {
	kind, rest, _ := strings.Cut(task, ":")
	id := task + rescueSep + suffix
	var (
		typ     string
		payload any
	)
	switch kind {
	case "plan":
		typ, payload = TypePlan, PlanPayload{JobID: rest}
	case "commit":
		typ, payload = TypeCommit, CommitPayload{JobID: rest}
	case "item":
		job, idx, ok := strings.Cut(rest, ":")
		i, err := strconv.Atoi(idx)
		if !ok || err != nil {
			return nil, "", fmt.Errorf("bad work item task %q", task)
		}
		typ, payload = TypeWorkItem, WorkItemPayload{JobID: job, Index: i}
	default:
		return nil, "", fmt.Errorf("bad task %q", task)
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, "", err
	}
	return asynq.NewTaskWithHeaders(typ, b, stamp(nil), taskOptions(cluster, id)...), id, nil
}

// taskJob is the job id inside a logical task id ("" when malformed).
func taskJob(task string) string {
	kind, rest, _ := strings.Cut(task, ":")
	switch kind {
	case "plan", "commit":
		return rest
	case "item":
		job, _, _ := strings.Cut(rest, ":")
		return job
	}
	return ""
}

// needed reports whether running a logical task of j (state as last
// read) again can still move the job: an item without a result, or any
// item once all are done and the job is not yet committed (such a run
// passes the baton: it enqueues the commit); the plan of a PENDING job, or
// of a RUNNING one still planning, whose item 0 (run in place) has no
// result, or whose commit is pending; the commit of a RUNNING job. A
// needless re-run is harmless (every task is idempotent) but costs a
// queue hop.
func (r *Rescuer) needed(ctx context.Context, j *Job, task string) (bool, error) {
	kind, rest, _ := strings.Cut(task, ":")
	if j.State == StatePending {
		return kind == "plan", nil
	}
	if j.State != StateRunning {
		return false, nil
	}
	commitPending := j.Phase != PhasePlanning && j.Progress.WorkItemsDone >= j.Progress.WorkItemsTotal
	switch kind {
	case "plan":
		if j.Phase == PhasePlanning || commitPending {
			return true, nil
		}
		done, err := r.st.itemDone(ctx, j.ID, 0)
		return !done, err
	case "commit":
		return true, nil
	case "item":
		if commitPending {
			return true, nil
		}
		_, idx, _ := strings.Cut(rest, ":")
		i, err := strconv.Atoi(idx)
		if err != nil {
			return false, nil
		}
		done, err := r.st.itemDone(ctx, j.ID, i)
		return !done, err
	}
	return false, nil
}

// orphanSuffix names the copy of an orphaned asynq task: derived from its
// id, so passes that see the same orphan enqueue one copy, and a copy
// that is itself orphaned gets a new one.
func orphanSuffix(asynqID string) string {
	h := fnv.New64a()
	h.Write([]byte(asynqID))
	return "orphan-" + strconv.FormatUint(h.Sum64(), 36)
}

// handToCopy enqueues a copy of task (logical id) of j, nobody holding
// it, and records the copy as queued in place of queuedWas (the copy
// queued before, "" for none). It returns the copy's asynq id, "" when
// nothing was handed over (a worker took the task meanwhile, or the id is
// malformed).
func (r *Rescuer) handToCopy(ctx context.Context, j *Job, task, queuedWas, suffix string) (string, error) {
	t, copyID, err := rescueTask(task, suffix, j.Cluster)
	if err != nil {
		return "", nil
	}
	if err := enqueue(ctx, r.enq, t); err != nil {
		return "", redisErr("enqueue rescued task", err)
	}
	ok, err := r.st.handOver(ctx, j.ID, task, "", queuedWas, copyID)
	if err != nil || !ok {
		return "", err
	}
	return copyID, nil
}

// lostCopy re-runs a task whose queued copy asynq no longer has although
// no worker ever held it and its work is still needed.
func (r *Rescuer) lostCopy(ctx context.Context, j *Job, task, copyID string) (bool, error) {
	if r.inspector == nil {
		return false, nil
	}
	_, err := r.inspector.GetTaskInfo(QueueName(j.Cluster), copyID)
	if !errors.Is(err, asynq.ErrTaskNotFound) {
		if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
			return false, redisErr("look up a rescued task", err)
		}
		return false, nil
	}
	if need, err := r.needed(ctx, j, task); err != nil || !need {
		return false, err
	}
	again, err := r.handToCopy(ctx, j, task, copyID, orphanSuffix(copyID))
	if again != "" && err == nil {
		r.log.Warn("jobs: re-ran a task whose rescue copy was lost", "job_id", j.ID, "task", task, "copy", copyID)
	}
	return again != "", err
}

// scanOrphans runs again the tasks asynq has active for the cluster that
// no worker holds and whose work is still needed, once a pass at least
// OrphanGrace after the first has seen them so: the worker asynq handed
// them to died before it could record holding them (asynq itself would
// wait for the lease, 30s, and its recoverer, up to a minute more).
func (r *Rescuer) scanOrphans(ctx context.Context, cluster string, live map[string]*Job) (int, error) {
	if r.orphans == nil {
		r.orphans = map[string]map[string]orphanSighting{}
	}
	prev := r.orphans[cluster]
	seen := map[string]orphanSighting{}
	r.orphans[cluster] = seen
	if len(live) == 0 {
		return 0, nil
	}
	now := time.Now()
	type taskState struct{ held, queued map[string]string }
	states := map[string]taskState{}
	n := 0
	const pageSize = 500
	for page := 1; page <= 20; page++ {
		tasks, err := r.inspector.ListActiveTasks(QueueName(cluster), asynq.PageSize(pageSize), asynq.Page(page))
		if err != nil {
			if errors.Is(err, asynq.ErrQueueNotFound) {
				return n, nil
			}
			return n, redisErr("list active tasks", err)
		}
		for _, t := range tasks {
			task := logicalTask(t.ID)
			j := live[taskJob(task)]
			if j == nil {
				continue
			}
			ts, ok := states[j.ID]
			if !ok {
				if ts.held, err = r.st.holders(ctx, j.ID); err != nil {
					return n, err
				}
				if ts.queued, err = r.st.queued(ctx, j.ID); err != nil {
					return n, err
				}
				states[j.ID] = ts
			}
			if ts.held[task] != "" {
				continue // held by a worker (the dead ones are rescueHeld's)
			}
			from := ts.queued[task]
			if from != "" && from != t.ID {
				continue // handed to another copy (the dead worker's own task is this one)
			}
			need, err := r.needed(ctx, j, task)
			if err != nil {
				return n, err
			}
			if !need {
				continue
			}
			first, ok := prev[t.ID]
			if !ok || !first.lastFailed.Equal(t.LastFailedAt) {
				seen[t.ID] = orphanSighting{at: now, lastFailed: t.LastFailedAt}
				continue
			}
			if now.Sub(first.at) < r.cfg.OrphanGrace {
				seen[t.ID] = first
				continue
			}
			copyID, err := r.handToCopy(ctx, j, task, from, orphanSuffix(t.ID))
			if err != nil {
				return n, err
			}
			if copyID != "" {
				n++
				ts.queued[task] = copyID
				r.log.Warn("jobs: re-ran a task taken by a worker that died before holding it", "job_id", j.ID, "task", task,
					"orphan", t.ID, "unheld_for", now.Sub(first.at).Round(time.Millisecond))
			}
		}
		if len(tasks) < pageSize {
			break
		}
	}
	return n, nil
}

// takeDeadLock takes the cluster's rescuer lock from a holder whose
// heartbeat expired: a worker killed during its pass would otherwise keep
// every rescue waiting for the lock's TTL.
func (r *Rescuer) takeDeadLock(ctx context.Context, cluster, lock string, ttl time.Duration) (bool, error) {
	holder, err := r.st.lockHolder(ctx, lock)
	if err != nil || holder == "" {
		return false, err
	}
	if holder != r.id { // our own lock is stale when we find it here (an unlock that failed)
		alive, err := r.st.workerAlive(ctx, cluster, holder)
		if err != nil || alive {
			return false, err
		}
	}
	if err := r.st.breakLock(ctx, lock, holder); err != nil {
		return false, err
	}
	r.log.Warn("jobs: took the rescuer lock of a dead worker", "cluster", cluster, "dead_worker", holder)
	return r.st.lock(ctx, lock, r.id, ttl)
}

// logicalTask strips a rescue suffix from an asynq task id.
func logicalTask(id string) string {
	base, _, _ := strings.Cut(id, rescueSep)
	return base
}

// scanArchived fails the live jobs one of whose tasks asynq archived.
func (r *Rescuer) scanArchived(ctx context.Context, cluster string, live map[string]*Job) (int, error) {
	if len(live) == 0 {
		return 0, nil
	}
	n := 0
	const pageSize = 100
	for page := 1; page <= 100; page++ {
		tasks, err := r.inspector.ListArchivedTasks(QueueName(cluster), asynq.PageSize(pageSize), asynq.Page(page))
		if err != nil {
			if errors.Is(err, asynq.ErrQueueNotFound) {
				return n, nil
			}
			return n, redisErr("list archived tasks", err)
		}
		for _, t := range tasks {
			var p struct {
				JobID string `json:"job_id"`
			}
			if json.Unmarshal(t.Payload, &p) != nil {
				continue
			}
			j := live[p.JobID]
			if j == nil {
				continue
			}
			last := t.LastErr
			if len(last) > 300 {
				last = last[:300] + "…"
			}
			msg := fmt.Sprintf("task %s was archived after %d retries (last error: %s): submit the refresh again", logicalTask(t.ID), t.Retried, last)
			if r.failJob(ctx, j, msg, true) {
				n++
			}
			delete(live, p.JobID)
		}
		if len(tasks) < pageSize {
			break
		}
	}
	return n, nil
}

// failJob fails j in its current phase, and discards its staged output;
// it reports whether this call failed it.
func (r *Rescuer) failJob(ctx context.Context, j *Job, msg string, retryable bool) bool {
	res, err := r.st.fail(ctx, j, Failure{Phase: j.Phase, Message: msg, Retryable: retryable}, 0)
	if err != nil {
		r.log.Warn("jobs: rescuer could not fail a job", "job_id", j.ID, "err", err)
		return false
	}
	if !res.changed() {
		return false
	}
	r.log.Warn("jobs: rescuer failed a job", "job_id", j.ID, "view", j.View, "reason", msg)
	if r.stopped != nil {
		r.stopped(context.WithoutCancel(ctx), j.ID)
	}
	return true
}
