package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/internal/lru"
	"github.com/mvq-dev/mvq/jobs/idem"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// engine is what the orchestrator needs of *refresh.Engine. Tests wrap the
// real engine to watch or pace it.
type engine interface {
	Prepare(ctx context.Context, id []string, opts *refresh.Options) error
	Plan(ctx context.Context, id []string, jobID string, opts refresh.Options) (*refresh.Plan, error)
	Expand(ctx context.Context, plan *refresh.Plan, index int) (refresh.ItemResult, error)
	Commit(ctx context.Context, plan *refresh.Plan, results []refresh.ItemResult) (refresh.Result, error)
	Discard(ctx context.Context, plan *refresh.Plan, keep []int) error
	// CheckpointKey and Reuse let a job take over the output of an item an
	// earlier job finished (refresh/checkpoint.go).
	CheckpointKey(ctx context.Context, plan *refresh.Plan, index int) (string, error)
	Reuse(ctx context.Context, plan *refresh.Plan, index int, from string, prior refresh.ItemResult) (refresh.ItemResult, error)
}

var _ engine = (*refresh.Engine)(nil)

// Client is the API side of refresh jobs: submit, inspect, cancel, follow.
// It is safe for concurrent use.
type Client struct {
	st         *store
	enq        *asynq.Client
	eng        engine
	log        *slog.Logger
	maxPending int
	auto       AutoConfig
	reads      readGroup                    // coalesced job reads (jobread.go)
	jobViews   *lru.Cache[string, []string] // each job's view, for access checks (jobread.go)
	cache      jobCache                     // polled jobs answered from memory (jobcache.go)
	idem       *idem.Store                  // HTTP idempotency records, over st's Redis
	idemMax    int                          // idempotency records per principal (IdempotencyMaxKeys)
	events     *store                       // where Events blocks on streams (EventsRedis); st by default
	hints      joinHints                    // PENDING jobs a submit expects to join (joinhint.go)
}

// EventsRedis makes Events read job event streams through rdb, a client
// of the same Redis with its own connection pool: a blocking stream read
// holds its connection for up to a second, and many followers would
// otherwise take the pool every other request waits on. Size rdb's pool
// to the number of streams the caller lets run at once.
func EventsRedis(rdb redis.UniversalClient) ClientOption {
	return func(c *Client) { c.events = &store{rdb: rdb} }
}

// ClientOption tunes a Client.
type ClientOption func(*Client)

// MaxPendingJobs makes Submit refuse a job (ErrBacklogFull, 503) while its
// cluster has n or more unfinished (PENDING or RUNNING) jobs; n <= 0: no
// limit (the default).
func MaxPendingJobs(n int) ClientOption { return func(c *Client) { c.maxPending = max(n, 0) } }

// NewClient returns a client that keeps job records in rdb and validates
// requests with eng. rdb and conn must reach the same Redis database: the
// create script writes a job's plan task into the workers' queues through
// rdb. Close closes what it opened from conn; rdb stays the caller's.
func NewClient(rdb redis.UniversalClient, conn asynq.RedisConnOpt, eng *refresh.Engine, opts ...ClientOption) *Client {
	return newClient(rdb, conn, eng, opts...)
}

func newClient(rdb redis.UniversalClient, conn asynq.RedisConnOpt, eng engine, opts ...ClientOption) *Client {
	c := &Client{st: &store{rdb: rdb}, enq: asynq.NewClient(conn), eng: eng, log: slog.Default(), auto: AutoConfig{}.withDefaults(),
		cache: jobCache{maxAge: DefaultJobCacheMaxAge}, jobViews: lru.New[string, []string](jobViewsBytes), hints: newJoinHints()}
	for _, o := range opts {
		o(c)
	}
	if c.events == nil {
		c.events = c.st
	}
	c.idem = idem.NewStore(rdb, keyPrefix, c.idemMax)
	return c
}

// IdempotencyMaxKeys bounds the HTTP idempotency records one principal
// keeps (n <= 0: idem.DefaultMaxKeys).
func IdempotencyMaxKeys(n int) ClientOption { return func(c *Client) { c.idemMax = n } }

// Idempotency is the store of HTTP Idempotency-Key records, kept in the
// client's Redis under its key prefix (package idem).
func (c *Client) Idempotency() *idem.Store { return c.idem }

// ErrBacklogFull is wrapped by the error Submit returns when the cluster's
// backlog is at MaxPendingJobs; nothing was recorded, and the caller should
// try again later (HTTP: 503 with Retry-After).
var ErrBacklogFull = errors.New("jobs: the cluster's backlog is full")

// BacklogRetryAfter is the wait a refused submitter is told to observe.
const BacklogRetryAfter = 5 * time.Second

// Admit reports whether cluster ("" is "default") takes another job now:
// nil, or an error wrapping ErrBacklogFull. It is advisory (Submit checks
// again atomically with the record); callers use it before work that a
// refused Submit would leave half done.
func (c *Client) Admit(ctx context.Context, cluster string) error {
	if c.maxPending <= 0 {
		return nil
	}
	if cluster == "" {
		cluster = refresh.DefaultCluster
	}
	n, err := c.st.unfinishedCount(ctx, cluster)
	if err != nil {
		return err
	}
	if n >= int64(c.maxPending) {
		return backlogFull(cluster, c.maxPending)
	}
	return nil
}

func backlogFull(cluster string, limit int) error {
	return &errs.Error{Code: errs.CodeServiceUnavailable,
		Message: fmt.Sprintf("cluster %q has %d unfinished jobs, its limit: retry later", cluster, limit), Err: ErrBacklogFull}
}

// Close releases the client's asynq connection and stops its subscription
// to job changes.
func (c *Client) Close() error {
	c.cache.close()
	return c.enq.Close()
}

// Ping checks that Redis answers (for readiness).
func (c *Client) Ping(ctx context.Context) error {
	return c.st.ping(ctx)
}

type headersKey struct{}

// WithTaskHeaders returns a context whose Submit passes h as the headers of
// the job's plan task; workers copy a task's headers to the tasks it
// enqueues (trace context travels this way).
func WithTaskHeaders(ctx context.Context, h map[string]string) context.Context {
	return context.WithValue(ctx, headersKey{}, h)
}

func taskHeaders(ctx context.Context) map[string]string {
	h, _ := ctx.Value(headersKey{}).(map[string]string)
	return h
}

// Submit validates a refresh of view, records it as a PENDING job and
// enqueues its plan task, both in one Redis script (one round trip; never
// one without the other). It returns at once. When the view has a PENDING job
// (one that has not started, created less than a minute ago) with the
// same effective options (defaults filled, manifest checksum, cluster),
// Submit joins it instead: it returns that job with Coalesced set (its
// id, creation time, view and options; its trace, cause and trigger are
// not read) and records nothing. A burst of identical requests so costs at most two jobs
// (the running one and the one waiting for its turn). A submit that this
// process expects to join (joinhint.go) runs the join alone first, and
// the create only when there was nothing to join. Errors: the engine's
// validation errors; CodeInvalidInput when no live worker serves the
// cluster; CodeServiceUnavailable when Redis fails, or wrapping
// ErrBacklogFull when the cluster has MaxPendingJobs unfinished jobs (then
// nothing is recorded).
func (c *Client) Submit(ctx context.Context, view []string, opts refresh.Options) (*Job, error) {
	return c.submit(ctx, view, opts, submitMeta{join: true, cause: CauseAPI})
}

// submitMeta is how a job is submitted besides its options: whether it
// may join a PENDING job with the same options, its id ("" makes one),
// cause and trigger, and how long its plan waits before it first runs
// (rounded up to whole seconds, asynq's resolution for scheduled tasks).
type submitMeta struct {
	join    bool
	id      string
	cause   string
	trigger *Trigger
	delay   time.Duration
}

func (c *Client) submit(ctx context.Context, view []string, opts refresh.Options, meta submitMeta) (*Job, error) {
	if err := c.eng.Prepare(ctx, view, &opts); err != nil {
		return nil, err
	}
	if opts.Cluster == "" {
		opts.Cluster = refresh.DefaultCluster
	}
	fresh := meta.id == ""
	if fresh {
		uid, err := uuid.NewV7()
		if err != nil {
			return nil, &errs.Error{Code: errs.CodeInternal, Message: "job id", Err: err}
		}
		meta.id = uid.String()
	}
	now := time.Now().UTC()
	j := &Job{
		ID: meta.id, Type: jobType(opts), View: table.JoinID(view), State: StatePending,
		CreatedAt: now, Request: opts, Cluster: opts.Cluster, ManifestChecksum: opts.ManifestChecksum, TraceID: traceID(ctx),
		Cause: meta.cause, Trigger: meta.trigger,
		viewID: append([]string(nil), view...),
	}
	runAt := int64(0) // unix seconds; 0: now
	if meta.delay > 0 {
		runAt = (now.Add(meta.delay).UnixMilli() + 999) / 1000
	}
	req, err := json.Marshal(opts)
	if err != nil {
		return nil, &errs.Error{Code: errs.CodeInternal, Message: "encode request", Err: err}
	}
	fp := ""
	if meta.join {
		sum := sha256.Sum256(req)
		fp = hex.EncodeToString(sum[:])
	}
	out, joined := jobNoJoin, (*Job)(nil)
	if fp != "" && c.hints.expects(view, fp, now) {
		// Likely a join: try it alone first (joinhint.go).
		if out, joined, err = c.st.join(ctx, j, fp); err != nil {
			return nil, err
		}
		if out == jobNoJoin {
			c.hints.forget(view, fp)
		}
	}
	if out == jobNoJoin {
		task, err := NewPlanTask(j.ID, j.Cluster, traceHeaders(ctx, taskHeaders(ctx)))
		if err != nil {
			return nil, &errs.Error{Code: errs.CodeInternal, Message: "plan task", Err: err}
		}
		if out, joined, err = enqueuePlan(ctx, c.st, c.enq, newJob{job: j, request: req, fingerprint: fp, backlog: c.maxPending, freshID: fresh}, task, runAt); err != nil {
			return nil, err
		}
	}
	switch out {
	case jobCreated:
		if fp != "" {
			c.hints.saw(view, fp, now, now)
		}
	case jobJoined:
		c.hints.saw(view, fp, joined.CreatedAt, now)
		joined.Coalesced = true
		return joined, nil
	case jobBacklogFull:
		return nil, backlogFull(j.Cluster, c.maxPending)
	case jobNoWorker:
		return nil, errs.Errorf(errs.CodeInvalidInput, "cluster: no worker serves cluster %q", opts.Cluster)
	default:
		return nil, &errs.Error{Code: errs.CodeInternal, Message: "job id " + j.ID + " exists"}
	}
	return j, nil
}

// pendingIndexTTL bounds how long a view's index of PENDING jobs by
// fingerprint lives after its last write (entries of jobs that started are
// ignored; this only bounds the key's size).
const pendingIndexTTL = 24 * time.Hour

// Get returns a job; an unknown (or expired) one is CodeJobNotFound.
func (c *Client) Get(ctx context.Context, jobID string) (*Job, error) {
	return c.st.job(ctx, jobID)
}

// List limits.
const (
	DefaultListLimit = 50
	MaxListLimit     = 1000
)

// ListFilter selects jobs for List. View nil: all views. State "": all
// states. PageToken is the token a previous page returned. Limit 0 means
// DefaultListLimit; more than MaxListLimit is cut to it.
type ListFilter struct {
	View      []string
	State     string
	PageToken string
	Limit     int
}

// List returns jobs newest first and the token of the next page ("" when
// this page is the last).
func (c *Client) List(ctx context.Context, f ListFilter) ([]*Job, string, error) {
	limit := f.Limit
	switch {
	case limit < 0:
		return nil, "", errs.Errorf(errs.CodeInvalidInput, "limit %d: must not be negative", limit)
	case limit == 0:
		limit = DefaultListLimit
	case limit > MaxListLimit:
		limit = MaxListLimit
	}
	state := State(strings.ToUpper(f.State))
	switch state {
	case "", StatePending, StateRunning, StateDone, StateFailed, StateCancelled:
	default:
		return nil, "", errs.Errorf(errs.CodeInvalidInput, "state %q: want PENDING, RUNNING, DONE, FAILED or CANCELLED", f.State)
	}
	if strings.ContainsAny(f.PageToken, " \t\r\n") {
		return nil, "", errs.Errorf(errs.CodeInvalidInput, "page token %q is not one List returned", f.PageToken)
	}
	bound := f.PageToken
	batch := int64(limit + 1)
	var out []*Job
	for len(out) <= limit {
		ids, recs, err := c.st.jobPage(ctx, f.View, bound, batch)
		if err != nil {
			return nil, "", err
		}
		if len(ids) == 0 {
			break
		}
		for i, m := range recs {
			c.cache.drop(ids[i]) // a read of a job after this list shows no older state
			if len(m) == 0 {
				c.st.unindex(ctx, f.View, ids[i]) // expired record
				continue
			}
			j, err := decodeJob(m)
			if err != nil {
				return nil, "", err
			}
			if state != "" && j.State != state {
				continue
			}
			if out = append(out, j); len(out) > limit {
				break
			}
		}
		if int64(len(ids)) < batch {
			break
		}
		bound = ids[len(ids)-1]
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].ID
	}
	return out, next, nil
}

// Cancel stops a job that is PENDING or RUNNING and not yet committing: it
// flips the record to CANCELLED, leaves the view's queue and discards
// staged output (workers discard again as they notice). A terminal or
// committing job is CodeJobFinished (409).
func (c *Client) Cancel(ctx context.Context, jobID string) (*Job, error) {
	j, err := c.st.job(ctx, jobID)
	if err != nil {
		return nil, err
	}
	r, err := c.st.finish(ctx, j, StateCancelled, []State{StatePending, StateRunning}, PhaseCommitting, "cancelled")
	c.cache.drop(jobID) // this process reads its own write, announced or not
	if err != nil {
		return nil, err
	}
	switch {
	case r.outcome == transitionNoJob:
		return nil, notFound(jobID)
	case r.outcome == transitionRefused && Terminal(r.state):
		return nil, errs.Errorf(errs.CodeJobFinished, "job %s is %s and can no longer be cancelled", jobID, r.state)
	case r.outcome == transitionRefused:
		return nil, errs.Errorf(errs.CodeJobFinished, "job %s is committing and can no longer be cancelled", jobID)
	}
	if plan, err := c.st.plan(ctx, jobID); err == nil && plan != nil {
		// Finished items stay as checkpoints a later refresh may reuse.
		keep, _ := c.st.doneItems(ctx, jobID)
		if err := c.eng.Discard(ctx, plan, keep); err != nil {
			c.log.Warn("jobs: discard after cancel failed; workers will retry", "job_id", jobID, "err", err)
		}
	}
	return c.st.job(ctx, jobID)
}

// eventsBlock is how long one read of the event stream waits.
const eventsBlock = time.Second

// Events calls fn with the job's events in order, from the start of the
// stream (or after lastID), and waits for more until a terminal event
// (which fn sees) or the end of ctx. It returns nil after the terminal
// event, fn's error if fn fails, ctx.Err() when ctx ends first, and
// CodeJobNotFound for an unknown job. Streams keep about the last
// 1000 events.
func (c *Client) Events(ctx context.Context, jobID, lastID string, fn func(Event) error) error {
	j, err := c.st.job(ctx, jobID)
	if err != nil {
		return err
	}
	skip := "" // the id of an event delivered already
	if lastID == "" || lastID == "0" {
		// A job's first event is written by its next one (emit): until
		// then the stream is missing and a reader gets the same event,
		// with the same id, from the record.
		first := firstEvent(j)
		exists, err := c.events.hasEvents(ctx, jobID)
		if err != nil {
			return err
		}
		lastID = "0"
		if !exists {
			c.cache.drop(jobID)
			if err := fn(first); err != nil {
				return err
			}
			// Read on from the stream's start, less the copy of this
			// event emit writes: events a worker of an older version
			// wrote (without that copy, with ids that a Redis clock
			// behind the API's may put below it) are not skipped.
			skip = first.ID
		}
	}
	deliver := func(evs []Event) (bool, error) {
		for _, ev := range evs {
			if ev.ID == skip {
				lastID = ev.ID
				continue
			}
			// A job read after this event was streamed must not show an
			// older state, whether or not the change was announced yet.
			c.cache.drop(jobID)
			if err := fn(ev); err != nil {
				return true, err
			}
			lastID = ev.ID
			if ev.Terminal() {
				return true, nil
			}
		}
		return false, nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		evs, err := c.events.waitEvents(ctx, jobID, lastID, eventsBlock)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return redisErr("read events", err)
		case len(evs) == 0:
			// Nothing new: stop if the job has ended (its terminal event
			// is written with the state, so one more read finds it).
			st, err := c.events.state(ctx, jobID)
			if err != nil {
				return redisErr("read job", err)
			}
			if st != "" && !Terminal(st) {
				continue
			}
			evs, err := c.events.eventsAfter(ctx, jobID, lastID)
			if err != nil {
				return err
			}
			_, err = deliver(evs)
			return err
		}
		if stop, err := deliver(evs); stop || err != nil {
			return err
		}
	}
}

// CancelView stops every unfinished job of view because the view is gone
// (dropped): each PENDING or RUNNING job, a committing one included,
// becomes CANCELLED with reason (the commit of a job whose view was dropped
// must not land; running handlers are cancelled), and the view's FIFO is
// removed. Staged output is not discarded: it went with the view's folder.
// It returns the number of jobs cancelled.
func (c *Client) CancelView(ctx context.Context, view []string, reason string) (int, error) {
	ids, err := c.st.viewQueue(ctx, view, 0)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		j, err := c.st.job(ctx, id)
		if errs.CodeOf(err) == errs.CodeJobNotFound {
			continue
		}
		if err != nil {
			return n, err
		}
		r, err := c.st.finish(ctx, j, StateCancelled, []State{StatePending, StateRunning}, "", reason)
		c.cache.drop(id)
		if err != nil {
			return n, err
		}
		if r.changed() {
			n++
		}
	}
	if err := c.st.dropViewQueue(ctx, view); err != nil {
		return n, err
	}
	return n, nil
}

// CancelViewsUnder runs CancelView for every view under namespace ns (a
// cascading namespace drop) that has a queue of unfinished jobs.
func (c *Client) CancelViewsUnder(ctx context.Context, ns []string, reason string) (int, error) {
	if len(ns) == 0 {
		return 0, errs.Errorf(errs.CodeInvalidInput, "namespace: the root has no parent to drop it from")
	}
	views, err := c.st.queuedViews(ctx, ns)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, v := range views {
		m, err := c.CancelView(ctx, v, reason)
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// globEscape quotes the characters SCAN MATCH treats as patterns.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
