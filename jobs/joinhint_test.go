package jobs

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/internal/testenv"
	"github.com/mvq-dev/mvq/refresh"
)

// TestSubmitJoinHints: a process that created or joined a view's PENDING
// job sends the next identical submit as the join script alone; a
// process without the hint joins through the create script, as before.
// When the hinted job is no longer PENDING (cancelled here) the submit
// creates a job after the join finds nothing, and when no worker is
// alive the join alone refuses as a create would. Redis's slow log (every
// command, on a redis-server of the test's own) shows which scripts each
// submit ran.
func TestSubmitJoinHints(t *testing.T) {
	ctx := context.Background()
	r := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rdb.Close() })
	fe := newFakeEngine()
	view := []string{"hinted"}
	fe.addSource(view, 10)
	conn := asynq.RedisClientOpt{Addr: r.Addr}
	newAPI := func() *Client {
		c := newClient(rdb, conn, newProbe(fe))
		t.Cleanup(func() { c.Close() })
		return c
	}
	api1, api2 := newAPI(), newAPI()
	// A worker's heartbeat without a worker: jobs stay PENDING.
	if err := api1.st.heartbeat(ctx, "placeholder", []string{"default"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	// Loaded, so that every run is an EVALSHA naming its script.
	for _, sc := range []*redis.Script{scriptJoin, scriptCreate} {
		if err := sc.Load(ctx, rdb).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, cfg := range [][2]string{{"slowlog-log-slower-than", "0"}, {"slowlog-max-len", "10000"}} {
		if err := rdb.ConfigSet(ctx, cfg[0], cfg[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// logged runs submit and answers the scripts it ran, in order.
	logged := func(submit func() (*Job, error)) (*Job, []string, error) {
		t.Helper()
		if err := rdb.Do(ctx, "SLOWLOG", "RESET").Err(); err != nil {
			t.Fatal(err)
		}
		j, err := submit()
		logs, lerr := rdb.SlowLogGet(ctx, -1).Result()
		if lerr != nil {
			t.Fatal(lerr)
		}
		names := map[string]string{scriptJoin.Hash(): "join", scriptCreate.Hash(): "create"}
		var scripts []string
		for i := len(logs) - 1; i >= 0; i-- { // newest first
			if a := logs[i].Args; len(a) >= 2 && a[0] == "evalsha" {
				scripts = append(scripts, cmp.Or(names[a[1]], a[1]))
			}
		}
		return j, scripts, err
	}
	// try submits a refresh with default options on c.
	try := func(c *Client) (*Job, []string, error) {
		t.Helper()
		return logged(func() (*Job, error) { return c.Submit(ctx, view, refresh.Options{}) })
	}
	scripts := func(c *Client) (*Job, []string) {
		t.Helper()
		j, ran, err := try(c)
		if err != nil {
			t.Fatal(err)
		}
		return j, ran
	}
	same := func(got []string, want ...string) bool { return slices.Equal(got, want) }

	first, ran := scripts(api1)
	if first.Coalesced || !same(ran, "create") {
		t.Fatalf("first submit: coalesced %v, scripts %v; want a created job, create alone", first.Coalesced, ran)
	}
	j, ran := scripts(api1)
	if !j.Coalesced || j.ID != first.ID || !same(ran, "join") {
		t.Fatalf("second submit in the creating process: job %s coalesced %v, scripts %v; want %s joined by the join script alone", j.ID, j.Coalesced, ran, first.ID)
	}
	if j.CreatedAt.UnixMilli() != first.CreatedAt.UnixMilli() || j.Cluster != "default" || j.State != StatePending {
		t.Fatalf("joined job %+v, created %v", j, first.CreatedAt)
	}
	j, ran = scripts(api2)
	if !j.Coalesced || j.ID != first.ID || !same(ran, "create") {
		t.Fatalf("submit in a process without the hint: job %s coalesced %v, scripts %v; want a join through create", j.ID, j.Coalesced, ran)
	}
	if j, ran = scripts(api2); !j.Coalesced || j.ID != first.ID || !same(ran, "join") {
		t.Fatalf("that process's next submit: job %s coalesced %v, scripts %v; want the join script alone", j.ID, j.Coalesced, ran)
	}

	// The hinted job is cancelled: the join finds nothing, a job is made.
	if _, err := api1.Cancel(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	second, ran := scripts(api1)
	if second.Coalesced || second.ID == first.ID || !same(ran, "join", "create") {
		t.Fatalf("submit after the hinted job was cancelled: job %s coalesced %v, scripts %v; want a new job after join, create", second.ID, second.Coalesced, ran)
	}
	if j, ran = scripts(api1); !j.Coalesced || j.ID != second.ID || !same(ran, "join") {
		t.Fatalf("submit after that: job %s coalesced %v, scripts %v; want %s joined by the join script", j.ID, j.Coalesced, ran, second.ID)
	}

	// A submit run again with its own id (an automatic refresh's) finds
	// its own job: created, as the create script's check answers it, not
	// joined.
	rerun := func() (*Job, []string) {
		t.Helper()
		j, scripts, err := logged(func() (*Job, error) {
			return api1.submit(ctx, view, refresh.Options{Concurrency: 5}, submitMeta{join: true, id: "rerun-1", cause: CauseAuto})
		})
		if err != nil {
			t.Fatal(err)
		}
		return j, scripts
	}
	if j, ran := rerun(); j.ID != "rerun-1" || j.Coalesced || !same(ran, "create") {
		t.Fatalf("submit with its own id: job %s coalesced %v, scripts %v", j.ID, j.Coalesced, ran)
	}
	if j, ran := rerun(); j.ID != "rerun-1" || j.Coalesced || !same(ran, "join", "create") {
		t.Fatalf("that submit run again: job %s coalesced %v, scripts %v; want its own job, created, after join and create", j.ID, j.Coalesced, ran)
	}

	// No live worker: the join alone refuses, as a create would.
	if err := rdb.ZRem(ctx, workersKey("default"), "placeholder").Err(); err != nil {
		t.Fatal(err)
	}
	if _, ran, err := try(api1); errs.CodeOf(err) != errs.CodeInvalidInput || !same(ran, "join") {
		t.Fatalf("submit with no live worker: %v, scripts %v; want invalid input from the join script alone", err, ran)
	}
}
