package jobs

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/hibiken/asynq"
	"google.golang.org/protobuf/encoding/protowire"
)

// This file is mvq's only coupling to asynq's storage: enqueuePlan, the
// one way a job's plan task is enqueued, and what it writes on a single
// Redis or Sentinel.
//
// There the create script enqueues a job's plan task itself, in the same
// step as the record, as asynq's Client.Enqueue would: the task's hash
// asynq:{queue}:t:{id} (msg, state pending, pending_since), its id pushed
// on asynq:{queue}:pending, and the queue in the asynq:queues set. An
// accept so costs one Redis round trip, and a job is never recorded
// without its plan task. This follows asynq v0.26's storage layout (its
// internal TaskMessage protobuf, field numbers below);
// TestPlanTaskWireFormat checks it against the pinned asynq, and an
// upgrade of asynq must run it.

// planWrite is a plan task as the create script writes it; the zero value
// writes none.
type planWrite struct {
	keys   []string // task hash, pending list, all queues, scheduled set
	msg    []byte   // asynq's encoding of the task; nil: write no task
	taskID string
	queue  string
	runAt  int64 // unix seconds; 0: now, else the task is scheduled
}

// enqueuePlan creates job n (store.create) and enqueues its plan task t
// (task id "plan:"+job id on the job's cluster queue, run at runAt, unix
// seconds, 0: now) on every Redis topology:
//   - one node or Sentinel: the create script writes the task with the
//     record (planWrite), in one step;
//   - Redis Cluster: asynq's keys are in other slots than mvq's {mvq} one,
//     so the script records the job (with placeholder keys of its slot,
//     untouched without a message) and the task is enqueued through asynq
//     right after. A crash in between leaves a PENDING job without its
//     plan task, which the next job of its view fails after lostPlanAge
//     (plan.go).
//
// The task is enqueued only for jobCreated; a task id asynq already holds
// counts as enqueued.
func enqueuePlan(ctx context.Context, st *store, enq *asynq.Client, n newJob, t *asynq.Task, runAt int64) (createOutcome, *Job, error) {
	queue, taskID := QueueName(n.job.Cluster), "plan:"+n.job.ID
	clustered := st.clustered()
	if clustered {
		n.plan = planWrite{keys: []string{RedisKey("unused:1"), RedisKey("unused:2"), RedisKey("unused:3"), RedisKey("unused:4")},
			taskID: taskID, queue: queue, runAt: runAt}
	} else {
		n.plan = planWrite{
			keys:   []string{asynqTaskKey(queue, taskID), asynqPendingKey(queue), asynqAllQueues, asynqScheduledKey(queue)},
			msg:    encodeTaskMessage(t, taskID, queue, taskMaxRetry, taskTimeout),
			taskID: taskID, queue: queue, runAt: runAt,
		}
	}
	out, joined, err := st.create(ctx, n)
	if err != nil || out != jobCreated || !clustered {
		return out, joined, err
	}
	opts := []asynq.Option{asynq.Queue(queue), asynq.TaskID(taskID), asynq.MaxRetry(taskMaxRetry), asynq.Timeout(taskTimeout)}
	if runAt > 0 {
		opts = append(opts, asynq.ProcessAt(time.Unix(runAt, 0)))
	}
	if _, err := enq.EnqueueContext(ctx, t, opts...); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return out, nil, redisErr("enqueue plan", err)
	}
	return out, nil, nil
}

func asynqTaskKey(queue, id string) string { return "asynq:{" + queue + "}:t:" + id }
func asynqPendingKey(queue string) string  { return "asynq:{" + queue + "}:pending" }

// asynqScheduledKey is the queue's zset of tasks to run later (score: unix
// seconds); a delayed plan task goes there with state scheduled, and
// asynq's forwarder moves it to pending when due.
func asynqScheduledKey(queue string) string { return "asynq:{" + queue + "}:scheduled" }

const asynqAllQueues = "asynq:queues"

// encodeTaskMessage is asynq's encoding of a task with the given id,
// queue, retry limit and timeout (no deadline, no retention, not unique).
func encodeTaskMessage(t *asynq.Task, id, queue string, retry int, timeout time.Duration) []byte {
	var b []byte
	str := func(num protowire.Number, s string) {
		if s != "" {
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendString(b, s)
		}
	}
	str(1, t.Type()) // type
	if p := t.Payload(); len(p) > 0 {
		b = protowire.AppendTag(b, 2, protowire.BytesType) // payload
		b = protowire.AppendBytes(b, p)
	}
	str(3, id)    // id
	str(4, queue) // queue
	if retry != 0 {
		b = protowire.AppendTag(b, 5, protowire.VarintType) // retry
		b = protowire.AppendVarint(b, uint64(int64(retry)))
	}
	if s := int64(timeout.Seconds()); s != 0 {
		b = protowire.AppendTag(b, 8, protowire.VarintType) // timeout (seconds)
		b = protowire.AppendVarint(b, uint64(s))
	}
	h := t.Headers()
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys { // headers: map<string, string> = 15
		var e []byte
		e = protowire.AppendTag(e, 1, protowire.BytesType)
		e = protowire.AppendString(e, k)
		e = protowire.AppendTag(e, 2, protowire.BytesType)
		e = protowire.AppendString(e, h[k])
		b = protowire.AppendTag(b, 15, protowire.BytesType)
		b = protowire.AppendBytes(b, e)
	}
	return b
}
