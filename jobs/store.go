package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/refresh"
)

// scanKeys calls fn with every key matching the glob pattern. A Redis
// Cluster answers SCAN per node, so there every master is scanned (the
// mvq keys live on the one that owns the {mvq} slot).
func (s *store) scanKeys(ctx context.Context, pattern string, fn func(key string) error) error {
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, 500).Iterator()
		for iter.Next(ctx) {
			if err := fn(iter.Val()); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu.Lock() // fn need not be safe for concurrent use
			defer mu.Unlock()
			return scan(ctx, c)
		})
	}
	return scan(ctx, s.rdb)
}

// store holds the job records, dispatch state, view queues and worker
// registry in Redis. Client and Server share it.
type store struct {
	rdb redis.UniversalClient
	// queues holds the asynq queues this store's create script has put
	// in asynq's set of all queues: as asynq's client, it adds each once.
	queues sync.Map
	// creates batches the create scripts of concurrent accepts.
	creates scriptBatch
}

func notFound(id string) error {
	return errs.Errorf(errs.CodeJobNotFound, "job %s not found", id)
}

func redisErr(what string, err error) error {
	return &errs.Error{Code: errs.CodeServiceUnavailable, Message: what + ": redis unavailable", Err: err}
}

// job loads a job record; a missing one is CodeJobNotFound.
func (s *store) job(ctx context.Context, id string) (*Job, error) {
	if id == "" || strings.ContainsAny(id, " \t\r\n") {
		return nil, notFound(id)
	}
	m, err := s.rdb.HGetAll(ctx, jobKey(id)).Result()
	if err != nil {
		return nil, redisErr("read job", err)
	}
	if len(m) == 0 || m[fID] == "" {
		return nil, notFound(id)
	}
	return decodeJob(m)
}

// state returns a job's state, "" when the record is gone.
func (s *store) state(ctx context.Context, id string) (State, error) {
	st, err := s.rdb.HGet(ctx, jobKey(id), fState).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return State(st), err
}

// transition is one call of scriptTransition.
type transition struct {
	from     []State // allowed states
	notPhase string  // refused when the job is in this phase
	event    string  // event type, "" for none
	message  string
	terminal bool // set the TTLs and leave the view queue
	set      []string
	incrBy   map[string]int64
}

// transitionOutcome is what a transition did.
type transitionOutcome int8

const (
	transitionNoJob     transitionOutcome = iota // no such job record
	transitionRefused                            // the state or phase did not allow it: nothing written
	transitionChanged                            // written now, with its event
	transitionAlreadySo                          // the record already had the values: nothing written
)

// transitionOutcomes maps scriptTransition's codes.
var transitionOutcomes = map[int64]transitionOutcome{
	-1: transitionNoJob, 0: transitionRefused, 1: transitionChanged, 2: transitionAlreadySo}

type transitionResult struct {
	outcome transitionOutcome
	state   State // after the call ("" when there is no job)
	phase   string
	// queued: the first jobs of the view queue after a terminal change
	// (transitionChanged); nil otherwise.
	queued []string
}

// applied reports whether the job now has the transition's values, set
// by this call or before it.
func (r transitionResult) applied() bool {
	return r.outcome == transitionChanged || r.outcome == transitionAlreadySo
}

// changed reports whether this call made the transition.
func (r transitionResult) changed() bool { return r.outcome == transitionChanged }

func (s *store) transition(ctx context.Context, j *Job, t transition) (transitionResult, error) {
	keys := []string{jobKey(j.ID), eventsKey(j.ID), viewQueueKey(j.viewID), liveJobsKey(j.Cluster),
		planKey(j.ID), resultsKey(j.ID), succKey(j.ID), activeKey(j.ID), holdersKey(j.ID), queuedKey(j.ID)}
	jobTTL, dispTTL := 0, 0
	if t.terminal {
		jobTTL, dispTTL = int(JobRetention/time.Second), int(DispatchRetention/time.Second)
	}
	args := []any{"|" + strings.Join(statesOf(t.from), "|") + "|", t.notPhase, t.event, t.message,
		formatTime(time.Now()), eventsMaxLen, jobTTL, dispTTL, j.ID}
	for _, v := range t.set {
		args = append(args, v)
	}
	for k, v := range t.incrBy {
		args = append(args, "+"+k, v)
	}
	v, err := scriptTransition.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		return transitionResult{}, redisErr("update job", err)
	}
	code, _ := v[0].(int64)
	out, ok := transitionOutcomes[code]
	if !ok {
		return transitionResult{}, &errs.Error{Code: errs.CodeInternal, Message: fmt.Sprintf("update job: unexpected answer %v", v)}
	}
	r := transitionResult{outcome: out}
	st, _ := v[1].(string)
	r.state = State(st)
	r.phase, _ = v[2].(string)
	if len(v) > 3 {
		ids, _ := v[3].([]any)
		r.queued = make([]string, 0, len(ids))
		for _, id := range ids {
			if str, ok := id.(string); ok {
				r.queued = append(r.queued, str)
			}
		}
	}
	if r.changed() && t.terminal {
		jobEnded(ctx, j, r.state)
	}
	return r, nil
}

// finish moves a job to a terminal state when it is in one of from (and
// not in phase notPhase). It reports what the job is in after the call.
func (s *store) finish(ctx context.Context, j *Job, state State, from []State, notPhase, message string, set ...string) (transitionResult, error) {
	set = append([]string{fState, string(state), fPhase, "", fFinished, formatTime(time.Now())}, set...)
	return s.transition(ctx, j, transition{
		from: from, notPhase: notPhase, event: EventState, message: message, terminal: true, set: set,
	})
}

// fail marks a job FAILED unless it has ended already. Only the commit
// itself may fail a job that is committing: a straggler (a duplicate work
// item whose lease expired) failing then must not discard the files the
// commit is publishing.
func (s *store) fail(ctx context.Context, j *Job, f Failure, failedItems int64) (transitionResult, error) {
	b, _ := json.Marshal(f)
	notPhase := PhaseCommitting
	if f.Phase == PhaseCommitting {
		notPhase = ""
	}
	t := transition{
		from: []State{StatePending, StateRunning}, notPhase: notPhase, event: EventState, terminal: true,
		message: fmt.Sprintf("failed while %s: %s", orDash(f.Phase), f.Message),
		set:     []string{fState, string(StateFailed), fPhase, "", fFinished, formatTime(time.Now()), fFailure, string(b)},
	}
	if failedItems > 0 {
		t.incrBy = map[string]int64{fFailed: failedItems}
	}
	return s.transition(ctx, j, t)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// turn is where a job stands in its view's FIFO.
type turn int8

const (
	turnHead turn = iota // first: it may run
	turnWait             // behind another unfinished job
	turnGone             // terminal or unknown: it will never run
)

// acquire reports whether the job is at the head of its view's FIFO, and
// when it waits, the id of the job ahead ("" when not known). At the head,
// task (unless "") is recorded as held by worker, as hold does.
func (s *store) acquire(ctx context.Context, j *Job, task, worker string) (t turn, ahead string, err error) {
	r, err := scriptAcquire.Run(ctx, s.rdb, []string{viewQueueKey(j.viewID), jobKey(j.ID), holdersKey(j.ID), queuedKey(j.ID)},
		j.ID, jobKey(""), task, worker, int64(DispatchRetention.Seconds())).Text()
	if err != nil {
		return 0, "", redisErr("view queue", err)
	}
	word, ahead, _ := strings.Cut(r, ":")
	switch word {
	case "head":
		return turnHead, "", nil
	case "wait":
		return turnWait, ahead, nil
	case "gone":
		return turnGone, "", nil
	}
	return 0, "", &errs.Error{Code: errs.CodeInternal, Message: fmt.Sprintf("view queue: unexpected answer %q", r)}
}

// plan returns the job's stored plan, nil when none is stored.
func (s *store) plan(ctx context.Context, id string) (*refresh.Plan, error) {
	b, err := s.rdb.Get(ctx, planKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, redisErr("read plan", err)
	}
	p := new(refresh.Plan)
	if err := json.Unmarshal(b, p); err != nil {
		return nil, &errs.Error{Code: errs.CodeInternal, Message: "stored plan of job " + id + " is corrupt", Err: err}
	}
	return p, nil
}

// savePlan stores p unless a plan is stored already, and returns the one
// stored: a retried plan task keeps the plan its items were released from.
// The job record gets the view's kind in the same round trip.
func (s *store) savePlan(ctx context.Context, p *refresh.Plan) (*refresh.Plan, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	var set *redis.BoolCmd
	if _, err := s.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		set = pl.SetNX(ctx, planKey(p.JobID), b, 0)
		// One script, so that the announcement follows the write even in
		// Redis Cluster (a PUBLISH names no key: a pipeline may send it
		// to another node, where it could overtake the write).
		scriptSetKind.Eval(ctx, pl, []string{jobKey(p.JobID)}, string(p.Kind))
		return nil
	}); err != nil {
		return nil, redisErr("store plan", err)
	}
	if set.Val() {
		return p, nil
	}
	stored, err := s.plan(ctx, p.JobID)
	if err != nil {
		return nil, err
	}
	if stored == nil {
		return nil, redisErr("store plan", errors.New("plan vanished"))
	}
	return stored, nil
}

// startDispatch records the item count and first release once; false when
// the job is no longer RUNNING.
func (s *store) startDispatch(ctx context.Context, id string, total, first int) (bool, error) {
	n, err := scriptDispatch.Run(ctx, s.rdb, []string{jobKey(id), eventsKey(id)},
		total, first, formatTime(time.Now()), eventsMaxLen).Int()
	if err != nil {
		return false, redisErr("start dispatch", err)
	}
	return n == 1, nil
}

// itemStart is what starting a work item found.
type itemStart int8

const (
	itemStarted       itemStart = iota // marked running: expand it
	itemAlreadyDone                    // its result is recorded: pass the baton only
	itemJobNotRunning                  // the job is not RUNNING: nothing marked
)

// startItem marks an item running unless it is done or its job is not
// RUNNING.
func (s *store) startItem(ctx context.Context, id string, index int) (itemStart, error) {
	n, err := scriptStartItem.Run(ctx, s.rdb, []string{jobKey(id), resultsKey(id), activeKey(id)}, index).Int()
	if err != nil {
		return 0, redisErr("start item", err)
	}
	switch n {
	case 1:
		return itemStarted, nil
	case 0:
		return itemAlreadyDone, nil
	case -1:
		return itemJobNotRunning, nil
	}
	return 0, &errs.Error{Code: errs.CodeInternal, Message: fmt.Sprintf("start item: unexpected answer %d", n)}
}

// endItem forgets that an item runs (the completion does it too).
func (s *store) endItem(ctx context.Context, id string, index int) {
	s.rdb.HDel(ctx, activeKey(id), strconv.Itoa(index))
}

// itemRecord is what recording a work item's result did.
type itemRecord int8

const (
	itemRecordedNow    itemRecord = iota // recorded by this call
	itemRecordedBefore                   // a repeated completion: nothing changed
	itemNotRecorded                      // the job is not RUNNING: nothing recorded
)

type completion struct {
	record   itemRecord
	released int   // index released by this item's completion, -1 none
	done     int64 // items done so far
}

// completeItem records item result r of job id once. ck, when set, is the
// item's checkpoint key, recorded with the result for later jobs;
// reusedFrom, when set, the job whose checkpoint r copies.
func (s *store) completeItem(ctx context.Context, id string, r refresh.ItemResult, ck, reusedFrom string) (completion, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return completion{}, err
	}
	keys := []string{jobKey(id), eventsKey(id), resultsKey(id), succKey(id), activeKey(id)}
	var rec []byte
	if ck != "" && !r.Skipped {
		if rec, err = json.Marshal(checkpointRef{Job: id, Item: r.Index}); err != nil {
			return completion{}, err
		}
		keys = append(keys, checkpointKey(ck))
	}
	v, err := scriptCompleteItem.Run(ctx, s.rdb, keys, r.Index, b, r.RowsRead, r.RowsWritten,
		formatTime(time.Now()), eventsMaxLen, rec, CheckpointRetention.Milliseconds(), reusedFrom).Int64Slice()
	if err != nil {
		return completion{}, redisErr("complete item", err)
	}
	c := completion{released: int(v[1]), done: v[2]}
	switch v[0] {
	case 1:
		c.record = itemRecordedNow
	case 0:
		c.record = itemRecordedBefore
	case -1:
		c.record = itemNotRecorded
	default:
		return completion{}, &errs.Error{Code: errs.CodeInternal, Message: fmt.Sprintf("complete item: unexpected answer %v", v)}
	}
	return c, nil
}

// checkpointRef is a checkpoint record: the job and item whose recorded
// result (in the job's results) is the checkpoint.
type checkpointRef struct {
	Job  string `json:"job"`
	Item int    `json:"item"`
}

// checkpoint is a finished work item's checkpoint: the job that staged
// its output and its result.
type checkpoint struct {
	Job    string
	Result refresh.ItemResult
}

// checkpoint reads the checkpoint under key ck: the record, then the
// result it points to. nil when there is none, when the job's results
// expired, or when either does not decode (then the item is expanded).
func (s *store) checkpoint(ctx context.Context, ck string) (*checkpoint, error) {
	b, err := s.rdb.Get(ctx, checkpointKey(ck)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, redisErr("read checkpoint", err)
	}
	var ref checkpointRef
	if json.Unmarshal(b, &ref) != nil || ref.Job == "" {
		return nil, nil
	}
	res, err := s.rdb.HGet(ctx, resultsKey(ref.Job), strconv.Itoa(ref.Item)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, redisErr("read checkpoint", err)
	}
	c := &checkpoint{Job: ref.Job}
	if json.Unmarshal(res, &c.Result) != nil {
		return nil, nil
	}
	return c, nil
}

// doneItems lists the items of job id whose results are recorded.
func (s *store) doneItems(ctx context.Context, id string) ([]int, error) {
	fields, err := s.rdb.HKeys(ctx, resultsKey(id)).Result()
	if err != nil {
		return nil, redisErr("read item results", err)
	}
	out := make([]int, 0, len(fields))
	for _, f := range fields {
		if i, err := strconv.Atoi(f); err == nil {
			out = append(out, i)
		}
	}
	return out, nil
}

// itemDone reports whether an item's result is recorded.
func (s *store) itemDone(ctx context.Context, id string, index int) (bool, error) {
	ok, err := s.rdb.HExists(ctx, resultsKey(id), strconv.Itoa(index)).Result()
	if err != nil {
		return false, redisErr("read item", err)
	}
	return ok, nil
}

// results returns the recorded results of items [0, n), nil for an item
// not done.
func (s *store) results(ctx context.Context, id string, n int) ([]*refresh.ItemResult, error) {
	if n == 0 {
		return nil, nil
	}
	fields := make([]string, n)
	for i := range n {
		fields[i] = strconv.Itoa(i)
	}
	vals, err := s.rdb.HMGet(ctx, resultsKey(id), fields...).Result()
	if err != nil {
		return nil, redisErr("read item results", err)
	}
	out := make([]*refresh.ItemResult, n)
	for i, v := range vals {
		str, ok := v.(string)
		if !ok {
			continue
		}
		r := new(refresh.ItemResult)
		if err := json.Unmarshal([]byte(str), r); err != nil {
			return nil, &errs.Error{Code: errs.CodeInternal, Message: fmt.Sprintf("result of item %d of job %s is corrupt", i, id), Err: err}
		}
		out[i] = r
	}
	return out, nil
}

// liveWorkers counts the workers whose heartbeat for cluster has not
// expired.
func (s *store) liveWorkers(ctx context.Context, cluster string) (int64, error) {
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	n, err := s.rdb.ZCount(ctx, workersKey(cluster), "("+now, "+inf").Result()
	if err != nil {
		return 0, redisErr("worker registry", err)
	}
	return n, nil
}

// heartbeat registers worker id as serving clusters until ttl from now.
func (s *store) heartbeat(ctx context.Context, id string, clusters []string, ttl time.Duration) error {
	now := time.Now()
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range clusters {
			k := workersKey(c)
			p.SAdd(ctx, clustersKey, c)
			p.ZAdd(ctx, k, redis.Z{Score: float64(now.Add(ttl).UnixMilli()), Member: id})
			p.ZRemRangeByScore(ctx, k, "-inf", strconv.FormatInt(now.UnixMilli(), 10))
			p.PExpire(ctx, k, ttl)
		}
		return nil
	})
	return err
}

// unregister removes worker id from the registry of clusters.
func (s *store) unregister(ctx context.Context, id string, clusters []string) error {
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range clusters {
			p.ZRem(ctx, workersKey(c), id)
		}
		return nil
	})
	return err
}

// sortedResults orders results by item index.
func sortedResults(rs []*refresh.ItemResult) []refresh.ItemResult {
	out := make([]refresh.ItemResult, 0, len(rs))
	for _, r := range rs {
		if r != nil {
			out = append(out, *r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// hold records that worker runs task (a logical task id: "plan:"+job,
// "item:"+job+":"+index or "commit:"+job) of job, so the rescuer can run
// it again elsewhere when the worker dies.
func (s *store) hold(ctx context.Context, jobID, task, worker string) error {
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, holdersKey(jobID), task, worker)
		p.Expire(ctx, holdersKey(jobID), DispatchRetention)
		p.HDel(ctx, queuedKey(jobID), task) // a rescue copy, now picked up
		return nil
	})
	if err != nil {
		return redisErr("record task holder", err)
	}
	return nil
}

// release forgets that worker holds task, unless another worker took it
// over meanwhile.
func (s *store) release(ctx context.Context, jobID, task, worker string) {
	scriptRelease.Run(ctx, s.rdb, []string{holdersKey(jobID)}, task, worker)
}

// handOver records that task of a job is now the rescue copy copyID
// (in mvq:job:{id}:queued, until a worker holds it), unless someone else
// took it meanwhile: heldBy is the (dead) worker it takes the task from,
// or "" for none, and then queuedWas is the copy it takes over from ("" for
// none). It reports whether it was handed over.
func (s *store) handOver(ctx context.Context, jobID, task, heldBy, queuedWas, copyID string) (bool, error) {
	n, err := scriptHandOver.Run(ctx, s.rdb, []string{holdersKey(jobID), queuedKey(jobID)}, task, heldBy, queuedWas, copyID,
		int64(DispatchRetention/time.Second)).Int()
	if err != nil {
		return false, redisErr("hand a task over", err)
	}
	return n == 1, nil
}

// queued returns task -> asynq id of the rescue copies of a job's tasks
// that no worker has picked up yet.
func (s *store) queued(ctx context.Context, jobID string) (map[string]string, error) {
	m, err := s.rdb.HGetAll(ctx, queuedKey(jobID)).Result()
	if err != nil {
		return nil, redisErr("read queued rescue copies", err)
	}
	return m, nil
}

// lockHolder returns the token holding a lock ("" when free).
func (s *store) lockHolder(ctx context.Context, name string) (string, error) {
	v, err := s.rdb.Get(ctx, lockKey(name)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", redisErr("read lock "+name, err)
	}
	return v, nil
}

// breakLock deletes a lock while token (a holder found dead) still holds
// it; unlock, but reporting the error.
func (s *store) breakLock(ctx context.Context, name, token string) error {
	if err := scriptUnlock.Run(ctx, s.rdb, []string{lockKey(name)}, token).Err(); err != nil {
		return redisErr("break lock "+name, err)
	}
	return nil
}

// recordDeath notes that worker died holding task of a job and returns
// how many different workers died holding that task. Recording the same
// death again (a pass that failed half-way) counts it once.
func (s *store) recordDeath(ctx context.Context, jobID, task, worker string) (int, error) {
	var members *redis.StringSliceCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.SAdd(ctx, deathsKey(jobID), task+"\x00"+worker)
		p.Expire(ctx, deathsKey(jobID), DispatchRetention)
		members = p.SMembers(ctx, deathsKey(jobID))
		return nil
	})
	if err != nil {
		return 0, redisErr("record a worker death", err)
	}
	n := 0
	for _, m := range members.Val() {
		if t, _, _ := strings.Cut(m, "\x00"); t == task {
			n++
		}
	}
	return n, nil
}

// holders returns task -> worker for the tasks of a job that are held.
func (s *store) holders(ctx context.Context, jobID string) (map[string]string, error) {
	m, err := s.rdb.HGetAll(ctx, holdersKey(jobID)).Result()
	if err != nil {
		return nil, redisErr("read task holders", err)
	}
	return m, nil
}

// workerAlive reports whether worker's heartbeat for cluster has not
// expired.
func (s *store) workerAlive(ctx context.Context, cluster, worker string) (bool, error) {
	exp, err := s.rdb.ZScore(ctx, workersKey(cluster), worker).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, redisErr("worker registry", err)
	}
	return int64(exp) > time.Now().UnixMilli(), nil
}

// unfinished returns the ids of the cluster's PENDING and RUNNING jobs
// (the backlog admission counts), oldest first.
func (s *store) unfinished(ctx context.Context, cluster string) ([]string, error) {
	ids, err := s.rdb.ZRange(ctx, liveJobsKey(cluster), 0, -1).Result()
	if err != nil {
		return nil, redisErr("unfinished jobs", err)
	}
	return ids, nil
}

// forgetUnfinished drops id from the cluster's unfinished jobs (its record
// is gone or terminal).
func (s *store) forgetUnfinished(ctx context.Context, cluster, id string) {
	s.rdb.ZRem(ctx, liveJobsKey(cluster), id)
}

// lock takes the named lock for ttl when it is free; the token identifies
// the holder for extend and unlock.
func (s *store) lock(ctx context.Context, name, token string, ttl time.Duration) (bool, error) {
	ok, err := s.rdb.SetNX(ctx, lockKey(name), token, ttl).Result()
	if err != nil {
		return false, redisErr("take lock "+name, err)
	}
	return ok, nil
}

// extend renews a lock the token holds; false when it no longer holds it.
func (s *store) extend(ctx context.Context, name, token string, ttl time.Duration) (bool, error) {
	n, err := scriptExtend.Run(ctx, s.rdb, []string{lockKey(name)}, token, ttl.Milliseconds()).Int()
	if err != nil {
		return false, redisErr("extend lock "+name, err)
	}
	return n == 1, nil
}

func (s *store) unlock(ctx context.Context, name, token string) {
	scriptUnlock.Run(ctx, s.rdb, []string{lockKey(name)}, token)
}

// ping checks that Redis answers.
func (s *store) ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return redisErr("ping", err)
	}
	return nil
}

// close closes the Redis client (a store made over a client it owns).
func (s *store) close() error { return s.rdb.Close() }

// clustered reports whether Redis is a Redis Cluster, where asynq's keys
// and mvq's live in different slots (see enqueuePlan).
func (s *store) clustered() bool {
	_, ok := s.rdb.(*redis.ClusterClient)
	return ok
}

// subscribe subscribes to channels (ChangedChannel, stoppedChannel); the
// caller closes the subscription.
func (s *store) subscribe(ctx context.Context, channels ...string) *redis.PubSub {
	return s.rdb.Subscribe(ctx, channels...)
}

// unfinishedCount counts the cluster's PENDING and RUNNING jobs.
func (s *store) unfinishedCount(ctx context.Context, cluster string) (int64, error) {
	n, err := s.rdb.ZCard(ctx, liveJobsKey(cluster)).Result()
	if err != nil {
		return 0, redisErr("count backlog", err)
	}
	return n, nil
}

// states returns the state of each job in ids that could be read, "" for
// a job whose record is gone; a job missing from the map could not be
// read. An error means none could.
func (s *store) states(ctx context.Context, ids []string) (map[string]State, error) {
	cmds := make([]*redis.StringCmd, len(ids))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGet(ctx, jobKey(id), fState)
		}
		return nil
	}); err != nil && !isNil(err) {
		return nil, err
	}
	out := make(map[string]State, len(ids))
	for i, id := range ids {
		st, err := cmds[i].Result()
		if err != nil && !isNil(err) {
			continue
		}
		out[id] = State(st)
	}
	return out, nil
}

func isNil(err error) bool { return errors.Is(err, redis.Nil) }

// jobPage returns up to n job ids of the index of view (nil: of all jobs)
// that sort before bound ("": from the newest), newest first, with their
// records (an empty map for a record that expired).
func (s *store) jobPage(ctx context.Context, view []string, bound string, n int64) ([]string, []map[string]string, error) {
	key := allJobsKey
	if view != nil {
		key = viewJobsKey(view)
	}
	max := "+"
	if bound != "" {
		max = "(" + bound
	}
	ids, err := s.rdb.ZRevRangeByLex(ctx, key, &redis.ZRangeBy{Max: max, Min: "-", Count: n}).Result()
	if err != nil {
		return nil, nil, redisErr("list jobs", err)
	}
	if len(ids) == 0 {
		return nil, nil, nil
	}
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, jobKey(id))
		}
		return nil
	}); err != nil {
		return nil, nil, redisErr("list jobs", err)
	}
	recs := make([]map[string]string, len(ids))
	for i, cmd := range cmds {
		recs[i] = cmd.Val()
	}
	return ids, recs, nil
}

// unindex drops id from the job index of view (nil: of all jobs); its
// record expired. Best effort: the next List drops it again.
func (s *store) unindex(ctx context.Context, view []string, id string) {
	key := allJobsKey
	if view != nil {
		key = viewJobsKey(view)
	}
	s.rdb.ZRem(ctx, key, id)
}

// trimJobIndexes drops the entries below bound (a lexical ZRANGEBYLEX
// bound) from the index of all jobs and from every view's.
func (s *store) trimJobIndexes(ctx context.Context, bound string) (int64, error) {
	n, err := s.rdb.ZRemRangeByLex(ctx, allJobsKey, "-", bound).Result()
	if err != nil {
		return 0, redisErr("trim job index", err)
	}
	var trimErr error
	err = s.scanKeys(ctx, globEscape(keyPrefix)+"view:*:jobs", func(key string) error {
		m, err := s.rdb.ZRemRangeByLex(ctx, key, "-", bound).Result()
		if err != nil {
			trimErr = redisErr("trim view job index", err)
			return trimErr
		}
		n += m
		return nil
	})
	if trimErr != nil {
		return n, trimErr
	}
	if err != nil {
		return n, redisErr("find view job indexes", err)
	}
	return n, nil
}

// waitEvents returns the events of a job after lastID, waiting up to
// block for one to come; none (nil, nil) when none came. Errors are
// Redis's own (the caller tells a cancelled wait from a failure).
func (s *store) waitEvents(ctx context.Context, jobID, lastID string, block time.Duration) ([]Event, error) {
	res, err := s.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{eventsKey(jobID), lastID}, Count: 100, Block: block}).Result()
	if isNil(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Event
	for _, st := range res {
		for _, m := range st.Messages {
			out = append(out, decodeEvent(jobID, m.ID, m.Values))
		}
	}
	return out, nil
}

// hasEvents reports whether a job's event stream exists (its first event
// is written lazily, by the next one).
func (s *store) hasEvents(ctx context.Context, jobID string) (bool, error) {
	n, err := s.rdb.Exists(ctx, eventsKey(jobID)).Result()
	if err != nil {
		return false, redisErr("read events", err)
	}
	return n > 0, nil
}

// eventsAfter returns every event of a job after lastID.
func (s *store) eventsAfter(ctx context.Context, jobID, lastID string) ([]Event, error) {
	msgs, err := s.rdb.XRange(ctx, eventsKey(jobID), "("+lastID, "+").Result()
	if err != nil {
		return nil, redisErr("read events", err)
	}
	out := make([]Event, len(msgs))
	for i, m := range msgs {
		out[i] = decodeEvent(jobID, m.ID, m.Values)
	}
	return out, nil
}

// viewQueue returns the first n job ids of view's FIFO (n <= 0: all).
func (s *store) viewQueue(ctx context.Context, view []string, n int64) ([]string, error) {
	stop := n - 1
	if n <= 0 {
		stop = -1
	}
	ids, err := s.rdb.LRange(ctx, viewQueueKey(view), 0, stop).Result()
	if err != nil {
		return nil, redisErr("read view queue", err)
	}
	return ids, nil
}

// viewQueueLen counts the jobs in view's FIFO.
func (s *store) viewQueueLen(ctx context.Context, view []string) (int64, error) {
	n, err := s.rdb.LLen(ctx, viewQueueKey(view)).Result()
	if err != nil {
		return 0, redisErr("read view queue", err)
	}
	return n, nil
}

// dropViewQueue removes view's FIFO.
func (s *store) dropViewQueue(ctx context.Context, view []string) error {
	if err := s.rdb.Del(ctx, viewQueueKey(view)).Err(); err != nil {
		return redisErr("remove view queue", err)
	}
	return nil
}

// knownClusters returns every cluster a worker ever served.
func (s *store) knownClusters(ctx context.Context) ([]string, error) {
	cs, err := s.rdb.SMembers(ctx, clustersKey).Result()
	if err != nil {
		return nil, redisErr("read known clusters", err)
	}
	return cs, nil
}

// logLine appends a log event to a RUNNING job; a job in another state is
// left as it is.
func (s *store) logLine(ctx context.Context, id, line string) error {
	if err := scriptLog.Run(ctx, s.rdb, []string{jobKey(id), eventsKey(id)}, line, formatTime(time.Now()), eventsMaxLen).Err(); err != nil {
		return redisErr("log line", err)
	}
	return nil
}

// statesOf spells states as the strings the scripts compare.
func statesOf(states []State) []string {
	out := make([]string, len(states))
	for i, st := range states {
		out[i] = string(st)
	}
	return out
}
