package jobs

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/mvq-dev/mvq/refresh"
)

// TestPlanTaskWireFormat: the plan task the create script writes is one
// the pinned asynq reads back as it would have enqueued it (type, payload,
// queue, retry limit, timeout, headers, pending) and runs: a worker picks
// it up and the job ends DONE. An asynq upgrade that changes its storage
// fails here.
func TestPlanTaskWireFormat(t *testing.T) {
	t.Parallel()
	fe := newFakeEngine()
	view := []string{"v"}
	fe.addSource(view, 10)
	b := setup(t, fe)
	ctx := WithTaskHeaders(context.Background(), map[string]string{"x-test": "1", "another": "two"})
	if err := b.client.st.heartbeat(ctx, "placeholder", []string{"default"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	j, err := b.client.Submit(ctx, view, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspectorFromRedisClient(b.rdb)
	ti, err := insp.GetTaskInfo(QueueName("default"), "plan:"+j.ID)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := NewPlanTask(j.ID, "default", nil)
	if ti.Type != TypePlan || string(ti.Payload) != string(want.Payload()) || ti.Queue != QueueName("default") ||
		ti.MaxRetry != taskMaxRetry || ti.Timeout != taskTimeout || !ti.Deadline.IsZero() || ti.State != asynq.TaskStatePending {
		t.Fatalf("plan task as asynq reads it: %+v", ti)
	}
	h := maps.Clone(ti.Headers)
	if h[headerEnqueuedAt] == "" {
		t.Fatalf("headers %v lack %s", h, headerEnqueuedAt)
	}
	delete(h, headerEnqueuedAt)
	if !maps.Equal(h, map[string]string{"x-test": "1", "another": "two"}) {
		t.Fatalf("headers %v", ti.Headers)
	}
	queues, err := insp.Queues()
	if err != nil || len(queues) != 1 || queues[0] != QueueName("default") {
		t.Fatalf("queues %v %v", queues, err)
	}
	b.startServer(t)
	if d := b.waitState(t, j.ID, StateDone); d.Result.RowsAdded != 20 {
		t.Fatalf("result %+v", d.Result)
	}
}
