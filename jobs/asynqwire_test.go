package jobs

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/internal/testenv"
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

// TestEnqueuePlanOnEveryTopology: enqueuePlan leaves the same plan task
// in asynq on one Redis (written by the create script) and on a Redis
// Cluster (enqueued through asynq after the script): pending, or
// scheduled when delayed, with the plan's type, payload, queue, retry
// limit and timeout; a second create with the same id enqueues nothing.
func TestEnqueuePlanOnEveryTopology(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, rdb redis.UniversalClient, conn asynq.RedisConnOpt) {
		ctx := context.Background()
		fe := newFakeEngine()
		view := []string{"v"}
		fe.addSource(view, 10)
		c := newClient(rdb, conn, fe)
		t.Cleanup(func() { c.Close() })
		insp := asynq.NewInspector(conn)
		t.Cleanup(func() { insp.Close() })
		if err := c.st.heartbeat(ctx, "placeholder", []string{"default"}, time.Minute); err != nil {
			t.Fatal(err)
		}
		now, err := c.submit(ctx, view, refresh.Options{}, submitMeta{cause: CauseAPI})
		if err != nil {
			t.Fatal(err)
		}
		later, err := c.submit(ctx, view, refresh.Options{}, submitMeta{cause: CauseAPI, delay: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []struct {
			id    string
			state asynq.TaskState
		}{{now.ID, asynq.TaskStatePending}, {later.ID, asynq.TaskStateScheduled}} {
			ti, err := insp.GetTaskInfo(QueueName("default"), "plan:"+w.id)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := NewPlanTask(w.id, "default", nil)
			if ti.Type != TypePlan || string(ti.Payload) != string(want.Payload()) || ti.Queue != QueueName("default") ||
				ti.MaxRetry != taskMaxRetry || ti.Timeout != taskTimeout || ti.State != w.state {
				t.Fatalf("plan task of job %s as asynq reads it: %+v", w.id, ti)
			}
		}
		if _, err := c.submit(ctx, view, refresh.Options{}, submitMeta{id: now.ID, cause: CauseAPI}); errs.CodeOf(err) != errs.CodeInternal {
			t.Fatalf("second create of job %s: %v", now.ID, err)
		}
		if ti, err := insp.GetTaskInfo(QueueName("default"), "plan:"+now.ID); err != nil || ti.State != asynq.TaskStatePending {
			t.Fatalf("plan task after a second create: %+v %v", ti, err)
		}
	}
	t.Run("single", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFakeEngine())
		check(t, b.rdb, b.conn)
	})
	t.Run("cluster", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a Redis Cluster")
		}
		t.Parallel()
		rdb, addrs := clusterClient(t)
		if !(&store{rdb: rdb}).clustered() {
			t.Fatal("a cluster client is not seen as clustered")
		}
		check(t, rdb, asynq.RedisClusterClientOpt{Addrs: addrs})
	})
}

// clusterClient starts a Redis Cluster and returns a client of it and its
// nodes' addresses.
func clusterClient(t *testing.T) (*redis.ClusterClient, []string) {
	rc := testenv.StartRedisCluster(t)
	var addrs []string
	for _, n := range rc.Nodes {
		addrs = append(addrs, n.Addr)
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { rdb.Close() })
	return rdb, addrs
}
