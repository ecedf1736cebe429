package jobs

import (
	"sort"
	"time"

	"github.com/hibiken/asynq"
	"google.golang.org/protobuf/encoding/protowire"
)

// The create script enqueues a job's plan task itself, in the same step as
// the record, as asynq's Client.Enqueue would: the task's hash
// asynq:{queue}:t:{id} (msg, state pending, pending_since), its id pushed
// on asynq:{queue}:pending, and the queue in the asynq:queues set. An
// accept so costs one Redis round trip, and a job is never recorded
// without its plan task. This follows asynq v0.26's storage layout (its
// internal TaskMessage protobuf, field numbers below);
// TestPlanTaskWireFormat checks it against the pinned asynq.

func asynqTaskKey(queue, id string) string { return "asynq:{" + queue + "}:t:" + id }
func asynqPendingKey(queue string) string  { return "asynq:{" + queue + "}:pending" }

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
