package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/internal/lru"
	"github.com/mvq-dev/mvq/refresh"
)

// Task settings.
const (
	taskMaxRetry = 5
	// taskTimeout bounds one attempt of any task; handlers honour ctx.
	taskTimeout = 30 * time.Minute
	// waitRetryDelay paces a plan task waiting for its view's turn. asynq
	// schedules retries at whole seconds, so the real wait is up to ~1s.
	waitRetryDelay = 200 * time.Millisecond
)

// TaskCheckInterval is how often an idle worker polls its queues (asynq
// sleeps between half and one and a half of it after an empty poll): a
// job's first task waits about this long for an idle worker, which
// dominates small refreshes. One poll per worker process, not per slot;
// about 200 cheap Redis calls a second per idle worker.
const TaskCheckInterval = 5 * time.Millisecond

// errWaitTurn is a plan's answer while an earlier job of its view runs. It
// is not a failure: asynq retries it soon without counting a retry.
var errWaitTurn = errors.New("jobs: an earlier refresh of the view is still running")

// errJobStopped is the cause of a task context cancelled because its job
// was cancelled or failed elsewhere.
var errJobStopped = errors.New("jobs: job cancelled or failed")

// ServerConfig configures a worker.
type ServerConfig struct {
	Redis asynq.RedisConnOpt // queues (required)
	// RDB holds job records; nil: one is made from Redis and closed by
	// Shutdown.
	RDB      redis.UniversalClient
	Engine   *refresh.Engine // required
	Clusters []string        // clusters served; default ["default"]
	// Concurrency is the number of tasks run at once; default 8.
	Concurrency int
	// ShutdownTimeout is how long Shutdown waits for running tasks before
	// handing them back to the queue; default 8s.
	ShutdownTimeout time.Duration
	Logger          *slog.Logger // default slog.Default()

	// The worker's services; zero values take their defaults.
	Heartbeat HeartbeaterConfig
	Cancel    CancellerConfig
	Rescue    RescuerConfig
	// Janitor, when set, runs a janitor on this worker too (every worker
	// may: one does a pass at a time).
	Janitor *JanitorConfig

	engine engine // tests: replaces Engine
}

// Server is a worker: it runs the plan, workitem and commit tasks of the
// clusters it serves.
type Server struct {
	id     string
	cfg    ServerConfig
	eng    engine
	st     *store
	ownRDB bool
	srv    *asynq.Server
	enq    *asynq.Client
	log    *slog.Logger
	plans  *lru.Cache[string, *refresh.Plan]
	queues map[string]int
	// inspector reads queue depth and latency for the queue gauges, and
	// archived tasks for the rescuer.
	inspector *asynq.Inspector

	hb        *Heartbeater
	canceller *Canceller
	rescuer   *Rescuer
	janitor   *Janitor
	shutdown  sync.Once
}

// NewServer checks cfg and builds a worker; Start runs it.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Redis == nil {
		return nil, errors.New("jobs: ServerConfig.Redis is required")
	}
	eng := cfg.engine
	if eng == nil {
		if cfg.Engine == nil {
			return nil, errors.New("jobs: ServerConfig.Engine is required")
		}
		eng = cfg.Engine
	}
	if len(cfg.Clusters) == 0 {
		cfg.Clusters = []string{refresh.DefaultCluster}
	}
	queues := map[string]int{}
	for _, c := range cfg.Clusters {
		if strings.TrimSpace(c) == "" || c != strings.TrimSpace(c) {
			return nil, fmt.Errorf("jobs: cluster name %q is empty or has surrounding spaces", c)
		}
		queues[QueueName(c)] = 1
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, eng: eng, log: cfg.Logger, plans: newPlanCache()}
	host, _ := os.Hostname()
	s.id = fmt.Sprintf("%s:%d:%s", host, os.Getpid(), uuid.NewString()[:8])
	rdb := cfg.RDB
	if rdb == nil {
		c, ok := cfg.Redis.MakeRedisClient().(redis.UniversalClient)
		if !ok {
			return nil, fmt.Errorf("jobs: unsupported RedisConnOpt %T", cfg.Redis)
		}
		rdb, s.ownRDB = c, true
	}
	s.st = &store{rdb: rdb}
	s.enq = asynq.NewClient(cfg.Redis)
	s.queues = queues
	s.hb = newHeartbeater(s.st, s.id, cfg.Clusters, cfg.Heartbeat, s.log)
	s.canceller = newCanceller(s.st, cfg.Cancel, s.log)
	s.rescuer = &Rescuer{st: s.st, enq: s.enq, hb: s.hb, id: s.id, clusters: cfg.Clusters, cfg: cfg.Rescue, log: s.log, stopped: s.stopped}
	if cfg.Janitor != nil {
		s.janitor = newJanitor(s.st, s.id, *cfg.Janitor, s.log)
	}
	return s, nil
}

// WorkerPID is the process id inside a worker id ("host:pid:suffix", as
// ID returns and the holders and registry keys record), for tools and
// tests that map workers to processes.
func WorkerPID(id string) (int, bool) {
	parts := strings.Split(id, ":")
	if len(parts) < 3 {
		return 0, false
	}
	pid, err := strconv.Atoi(parts[len(parts)-2])
	return pid, err == nil
}

// Rescuer is the worker's rescuer (tests run passes by hand).
func (s *Server) Rescuer() *Rescuer { return s.rescuer }

// Janitor is the worker's janitor, nil when not configured.
func (s *Server) Janitor() *Janitor { return s.janitor }

// ID is the worker's id in the cluster registry.
func (s *Server) ID() string { return s.id }

func (s *Server) mux() *asynq.ServeMux {
	m := asynq.NewServeMux()
	m.Use(s.tracing, s.logging, recovery(s.log), s.failOnLastAttempt, s.hold)
	m.HandleFunc(TypePlan, s.handlePlan)
	m.HandleFunc(TypeWorkItem, s.handleWorkItem)
	m.HandleFunc(TypeCommit, s.handleCommit)
	return m
}

// Start registers the worker for its clusters (so Submit accepts them),
// starts its services (heartbeater, canceller, rescuer, and janitor when
// configured) and starts processing. It returns once all are under way.
func (s *Server) Start() error { return s.StartContext(context.Background()) }

// StartContext is Start with a context whose values (not its end: the
// services run until Shutdown) the services inherit. When a service does
// not start, those started are stopped and its error returned.
func (s *Server) StartContext(ctx context.Context) error {
	if err := s.hb.Start(ctx); err != nil {
		return err
	}
	// The asynq server is made here: one never started could not be
	// closed.
	s.srv = asynq.NewServer(s.cfg.Redis, asynq.Config{
		Concurrency:              s.cfg.Concurrency,
		Queues:                   s.queues,
		RetryDelayFunc:           retryDelay,
		IsFailure:                isFailure,
		DelayedTaskCheckInterval: 100 * time.Millisecond,
		TaskCheckInterval:        TaskCheckInterval,
		ShutdownTimeout:          s.cfg.ShutdownTimeout,
		Logger:                   asynqLogger{s.log},
		LogLevel:                 asynq.WarnLevel,
	})
	s.inspector = asynq.NewInspector(s.cfg.Redis)
	s.rescuer.inspector = s.inspector
	if err := s.canceller.Start(ctx); err != nil {
		_ = s.hb.Stop(ctx)
		return err
	}
	if err := s.srv.Start(s.mux()); err != nil {
		_ = s.canceller.Stop(ctx)
		_ = s.hb.Stop(ctx)
		return fmt.Errorf("jobs: start worker: %w", err)
	}
	if err := s.rescuer.Start(ctx); err != nil {
		return errors.Join(fmt.Errorf("jobs: start rescuer: %w", err), s.ShutdownContext(ctx))
	}
	if s.janitor != nil {
		if err := s.janitor.Start(ctx); err != nil {
			return errors.Join(fmt.Errorf("jobs: start janitor: %w", err), s.ShutdownContext(ctx))
		}
	}
	return nil
}

// Shutdown leaves the registry and stops the rescuer and janitor, then
// stops asynq: running tasks get ShutdownTimeout to finish before they go
// back to their queue (the canceller still stops those whose job ends
// meanwhile). It is safe to call more than once. It waits up to
// shutdownWait for the services; failures are logged.
func (s *Server) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel()
	if err := s.ShutdownContext(ctx); err != nil {
		s.log.Warn("jobs: worker shutdown", "worker", s.id, "err", err)
	}
}

// shutdownWait bounds how long Shutdown waits for each service to stop.
const shutdownWait = 10 * time.Second

// ShutdownContext is Shutdown waiting for the services until ctx ends; it
// returns what failed to stop or close (nil after the first call).
func (s *Server) ShutdownContext(ctx context.Context) error {
	var errList []error
	s.shutdown.Do(func() {
		errList = append(errList, s.hb.Stop(ctx), s.rescuer.Stop(ctx))
		if s.janitor != nil {
			errList = append(errList, s.janitor.Stop(ctx))
		}
		if s.srv != nil {
			s.srv.Shutdown()
		}
		errList = append(errList, s.canceller.Stop(ctx), s.enq.Close())
		if s.inspector != nil {
			errList = append(errList, s.inspector.Close())
		}
		if s.ownRDB {
			errList = append(errList, s.st.close())
		}
	})
	return errors.Join(errList...)
}

// hold records, for the task's duration, that this worker runs it (see
// Rescuer): a task whose worker dies is run again elsewhere. Plan tasks
// hold from the moment their job's turn comes (handlePlan), so the many
// retries of plans waiting for their view cost nothing here.
func (s *Server) hold(h asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		if t.Type() == TypePlan {
			return h.ProcessTask(ctx, t)
		}
		id, _ := asynq.GetTaskID(ctx)
		task := logicalTask(id)
		var p struct {
			JobID string `json:"job_id"`
		}
		if task == "" || json.Unmarshal(t.Payload(), &p) != nil || p.JobID == "" {
			return h.ProcessTask(ctx, t)
		}
		if err := s.st.hold(ctx, p.JobID, task, s.id); err != nil {
			return err
		}
		defer s.st.release(context.WithoutCancel(ctx), p.JobID, task, s.id)
		return h.ProcessTask(ctx, t)
	})
}

// failOnLastAttempt fails the job (retryable) of a task that failed on its
// last attempt with an error the handler did not settle (a Redis error,
// say): asynq archives such a task, and its job must not stay RUNNING at
// the head of its view's FIFO. When Redis still fails, the rescuer finds
// the archived task later.
func (s *Server) failOnLastAttempt(h asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		err := h.ProcessTask(ctx, t)
		if !isFailure(err) || errors.Is(err, asynq.SkipRetry) || !lastAttempt(ctx) {
			return err
		}
		var p struct {
			JobID string `json:"job_id"`
		}
		if json.Unmarshal(t.Payload(), &p) != nil || p.JobID == "" {
			return err
		}
		bg := context.WithoutCancel(ctx)
		j, jerr := s.st.job(bg, p.JobID)
		if jerr != nil {
			return err
		}
		n, _ := asynq.GetRetryCount(ctx)
		msg := fmt.Sprintf("%s task failed after %d retries: %s", t.Type(), n, userMessage(err))
		if r, ferr := s.st.fail(bg, j, Failure{Phase: j.Phase, Message: msg, Retryable: true}, 0); ferr == nil && r.changed() {
			s.log.WarnContext(ctx, "jobs: job failed", "job_id", j.ID, "view", j.View, "phase", j.Phase, "retryable", true, "err", err)
			s.stopped(bg, j.ID)
		}
		return err
	})
}

func retryDelay(n int, err error, _ *asynq.Task) time.Duration {
	if errors.Is(err, errWaitTurn) {
		return waitRetryDelay
	}
	return time.Second << min(n, 6) // 1s, 2s, 4s ... 64s
}

// isFailure: waiting for the view's turn is not a failure, nor is a lease
// lost to a killed or partitioned worker (a redeploy must not use up a
// task's retries). A task that kills its worker every time is therefore
// retried without end; the task timeout still bounds each attempt.
func isFailure(err error) bool {
	return err != nil && !errors.Is(err, errWaitTurn) && !errors.Is(err, asynq.ErrLeaseExpired)
}

// permanent reports whether retrying err cannot help: it wraps SkipRetry,
// or errs.Retryable says no (a coded error other than internal,
// unavailable, throttling and concurrent modification).
func permanent(err error) bool {
	return errors.Is(err, asynq.SkipRetry) || !errs.Retryable(err)
}

// lastAttempt reports whether asynq will not retry the running task.
func lastAttempt(ctx context.Context) bool {
	n, ok1 := asynq.GetRetryCount(ctx)
	max, ok2 := asynq.GetMaxRetry(ctx)
	return ok1 && ok2 && n >= max
}

// userMessage is what a job's failure shows: the coded message, or a
// pointer to the logs for internal errors.
func userMessage(err error) string {
	if errs.CodeOf(err) == errs.CodeInternal {
		return "internal error (details in the worker log)"
	}
	return err.Error()
}

// protect runs an engine call, turning a panic into an internal error so
// that it goes through the job's retry and failure rules.
func protect[T any](fn func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &errs.Error{Code: errs.CodeInternal, Message: "engine panic",
				Err: fmt.Errorf("%v\n%s", r, debug.Stack())}
		}
	}()
	return fn()
}

// watch returns a context cancelled (cause errJobStopped) once the job is
// no longer PENDING or RUNNING, and a stop func that ends the watch.
func (s *Server) watch(ctx context.Context, jobID string) (context.Context, func()) {
	return s.canceller.Watch(ctx, jobID)
}

// settle turns a failed step of job j into the task's answer. If the job
// was stopped meanwhile, the error is moot: staged output is discarded and
// settle returns nil. A permanent error, or a transient one on the task's
// last attempt, fails the job (discarding staged output, except after a
// transient commit error, when the commit may have landed) and returns an
// error wrapping SkipRetry. Any other error is returned for asynq to retry.
func (s *Server) settle(ctx context.Context, j *Job, phase string, err error, failedItems int64) error {
	bg := context.WithoutCancel(ctx)
	if errors.Is(context.Cause(ctx), errJobStopped) {
		s.stopped(bg, j.ID)
		return nil
	}
	if st, serr := s.st.state(bg, j.ID); serr == nil && st != StatePending && st != StateRunning {
		s.stopped(bg, j.ID)
		return nil
	}
	perm := permanent(err)
	if !perm && !lastAttempt(ctx) {
		return err
	}
	f := Failure{Phase: phase, Message: userMessage(err), Retryable: !perm}
	r, ferr := s.st.fail(bg, j, f, failedItems)
	if ferr != nil {
		return errors.Join(err, ferr)
	}
	s.log.Warn("jobs: job failed", "job_id", j.ID, "view", j.View, "phase", phase, "retryable", !perm, "err", err)
	if r.changed() && (phase != PhaseCommitting || perm) {
		s.discard(bg, j.ID)
	} else if !r.changed() {
		s.stopped(bg, j.ID)
	}
	return fmt.Errorf("%w: %w", asynq.SkipRetry, err)
}

// stopped cleans up after a job found CANCELLED or FAILED: it discards the
// job's staged output, except for a job that failed while committing (the
// commit may have landed), and except the output of its finished items
// (checkpoints: a later refresh of the same source version and definition
// reuses them; the janitor removes them once the job's results expire). Discard is idempotent, so every task that finds
// the job stopped may call it; the last one to run removes what stragglers
// wrote.
func (s *Server) stopped(ctx context.Context, jobID string) {
	j, err := s.st.job(ctx, jobID)
	if err != nil {
		return
	}
	switch {
	case j.State == StateCancelled:
	case j.State == StateFailed && (j.Failure == nil || j.Failure.Phase != PhaseCommitting):
	default:
		return
	}
	s.discard(ctx, jobID)
}

func (s *Server) discard(ctx context.Context, jobID string) {
	plan, err := s.loadPlan(ctx, jobID)
	if err != nil || plan == nil {
		return
	}
	// Finished items stay as checkpoints a later refresh may reuse; an
	// unreadable list keeps none (they are recomputed then).
	keep, err := s.st.doneItems(ctx, jobID)
	if err != nil {
		keep = nil
	}
	if _, err := protect(func() (struct{}, error) { return struct{}{}, s.eng.Discard(ctx, plan, keep) }); err != nil {
		s.log.Warn("jobs: discard staged output", "job_id", jobID, "err", err)
	}
}

// loadPlan returns the job's plan, from the cache when it is there; nil
// when none is stored.
func (s *Server) loadPlan(ctx context.Context, jobID string) (*refresh.Plan, error) {
	if p, _ := s.plans.Get(jobID); p != nil {
		return p, nil
	}
	p, err := s.st.plan(ctx, jobID)
	if err != nil || p == nil {
		return nil, err
	}
	s.plans.Put(jobID, p, 1)
	return p, nil
}

// itemCount is the number of work items a plan dispatches; a no-op plan
// has none.
func itemCount(p *refresh.Plan) int {
	if p.Mode == refresh.ModeNoOp {
		return 0
	}
	return len(p.Items)
}

// enqueue adds a task; one whose ID is already queued or running counts as
// added.
func enqueue(ctx context.Context, c *asynq.Client, t *asynq.Task) error {
	_, err := c.EnqueueContext(ctx, t)
	if errors.Is(err, asynq.ErrTaskIDConflict) || errors.Is(err, asynq.ErrDuplicateTask) {
		return nil
	}
	return err
}

func taskOptions(cluster, taskID string) []asynq.Option {
	return []asynq.Option{asynq.Queue(QueueName(cluster)), asynq.TaskID(taskID),
		asynq.MaxRetry(taskMaxRetry), asynq.Timeout(taskTimeout)}
}

// decodePayload reads a task payload; a bad one can never succeed.
func decodePayload(t *asynq.Task, v any) error {
	if err := json.Unmarshal(t.Payload(), v); err != nil {
		return fmt.Errorf("%s payload: %v: %w", t.Type(), err, asynq.SkipRetry)
	}
	return nil
}

// loadJob reads the job a task is for; a missing record ends the task.
func (s *Server) loadJob(ctx context.Context, id string) (*Job, error) {
	j, err := s.st.job(ctx, id)
	if errs.CodeOf(err) == errs.CodeJobNotFound {
		return nil, fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	return j, err
}

// logging logs each task's outcome with its job.
func (s *Server) logging(h asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		start := time.Now()
		err := h.ProcessTask(ctx, t)
		var p struct {
			JobID string `json:"job_id"`
			Index *int   `json:"index"`
		}
		_ = json.Unmarshal(t.Payload(), &p)
		attrs := []any{"type", t.Type(), "job_id", p.JobID, "worker", s.id, "duration", time.Since(start)}
		if p.Index != nil {
			attrs = append(attrs, "index", *p.Index)
		}
		switch {
		case err == nil:
			s.log.DebugContext(ctx, "jobs: task done", attrs...)
		case errors.Is(err, errWaitTurn):
			s.log.DebugContext(ctx, "jobs: task waits for its view", attrs...)
		case errors.Is(err, asynq.SkipRetry):
			s.log.WarnContext(ctx, "jobs: task failed for good", append(attrs, "err", err)...)
		default:
			n, _ := asynq.GetRetryCount(ctx)
			s.log.WarnContext(ctx, "jobs: task failed, will retry", append(attrs, "retried", n, "err", err)...)
		}
		return err
	})
}

// recovery turns a handler panic into an error (asynq retries it).
func recovery(log *slog.Logger) asynq.MiddlewareFunc {
	return func(h asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) (err error) {
			defer func() {
				if r := recover(); r != nil {
					log.Error("jobs: task panicked", "type", t.Type(), "panic", r, "stack", string(debug.Stack()))
					err = fmt.Errorf("%s: panic: %v", t.Type(), r)
				}
			}()
			return h.ProcessTask(ctx, t)
		})
	}
}

// asynqLogger sends asynq's logs to slog.
type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Debug("asynq: " + fmt.Sprint(args...)) }
func (a asynqLogger) Info(args ...any)  { a.l.Info("asynq: " + fmt.Sprint(args...)) }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn("asynq: " + fmt.Sprint(args...)) }
func (a asynqLogger) Error(args ...any) { a.l.Error("asynq: " + fmt.Sprint(args...)) }
func (a asynqLogger) Fatal(args ...any) {
	a.l.Error("asynq: " + fmt.Sprint(args...))
	os.Exit(1)
}

// planCacheSize is how many recently used plans a worker keeps (a plan is
// immutable once stored): each counts 1 in an lru.Cache.
const planCacheSize = 32

func newPlanCache() *lru.Cache[string, *refresh.Plan] {
	return lru.New[string, *refresh.Plan](planCacheSize)
}
