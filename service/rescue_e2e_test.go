package service_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/jobs"
)

// TestKilledWorkerResumesElsewhere: two worker processes share a refresh;
// one is SIGKILLed while it holds work items. The other runs those items
// again once the dead one's heartbeat lapses (the rescuer), well before
// asynq's lease and retry would (about two minutes): every item the dead
// worker held is done within 15 s of the kill, and the job ends DONE with
// exactly the right rows.
func TestKilledWorkerResumesElsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a refresh across two worker processes and kills one")
	}
	e := start(t, 2, "default")
	big := make([]map[string]any, 24)
	for i := range big {
		words := make([]string, 20000)
		for w := range words {
			words[w] = fmt.Sprintf("d%dw%d", i, w)
		}
		big[i] = map[string]any{"id": i, "lang": "en", "body": strings.Join(words, " ")}
	}
	if st := e.post("/v1/table/src/create", big, nil); st != 200 {
		t.Fatalf("create source: %d", st)
	}
	e.createChunkerView("v", "src")
	id := e.refresh("v", `{"source_task_size": 1, "concurrency": 4}`)

	opt, err := redis.ParseURL(e.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	pids := map[int]int{} // pid -> index in e.workers
	for i, w := range e.workers {
		pids[w.Process.Pid] = i
	}
	// Wait for a worker process to hold a work item; kill that one.
	victim, victimID := -1, ""
	waitFor(t, 60*time.Second, "a worker to hold a work item", func() bool {
		held, _ := rdb.HGetAll(ctx, jobs.RedisKey("job:"+id+":holders")).Result()
		for task, worker := range held {
			pid, ok := jobs.WorkerPID(worker)
			if !strings.HasPrefix(task, "item:") || !ok {
				continue
			}
			if i, ok := pids[pid]; ok {
				victim, victimID = i, worker
				return true
			}
		}
		return false
	})
	if err := e.workers[victim].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	e.workers[victim].Wait()
	held, err := rdb.HGetAll(ctx, jobs.RedisKey("job:"+id+":holders")).Result()
	if err != nil {
		t.Fatal(err)
	}
	var items []string
	for task, worker := range held {
		if worker == victimID && strings.HasPrefix(task, "item:") {
			items = append(items, task[strings.LastIndex(task, ":")+1:])
		}
	}
	if len(items) == 0 {
		t.Fatal("the killed worker held no work item; the test proves nothing")
	}
	waitFor(t, 60*time.Second, "the dead worker's items to be done elsewhere", func() bool {
		done, _ := rdb.HMGet(ctx, jobs.RedisKey("job:"+id+":results"), items...).Result()
		for _, v := range done {
			if v == nil {
				return false
			}
		}
		return true
	})
	resumed := time.Since(killed)
	t.Logf("SIGKILL to the dead worker's %d work items done elsewhere: %v", len(items), resumed.Round(10*time.Millisecond))
	if resumed > 15*time.Second {
		t.Fatalf("the killed worker's items took %v to run again, want under 15s", resumed)
	}
	j := e.mustDone(id)
	if p := j["progress"].(map[string]any); num(p["work_items_done"]) != 24 {
		t.Fatalf("progress after recovery: %v", p)
	}
	e.assertView("v", "src", -1)
}

// TestKilledWorkerAnyMoment: an API and two worker processes (4 slots
// each) share refreshes of about 240 small work items with concurrency 8, more
// than one worker's slots. In each round one worker is SIGKILLed at a
// different moment: at a random point mid-run, right after an item's
// completion was recorded, while it holds the plan task, and while it runs
// the commit, and right after a dequeue. Every round must end DONE with exactly the right rows within
// 15 s of the kill (asynq alone would take its 30 s lease plus up to a
// minute of recovery), then the dead worker is replaced for the next round.
// Twice a process that took an item off the queue is killed right after
// asynq's dequeue, before any step of a worker (see runThiefProcess).
func TestKilledWorkerAnyMoment(t *testing.T) {
	if testing.Short() {
		t.Skip("kills worker processes in several refreshes")
	}
	e := start(t, 2, "default")
	opt, err := redis.ParseURL(e.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	const perRound = 1200
	if st := e.post("/v1/table/src/create", docs(0, perRound), nil); st != 200 {
		t.Fatalf("create source: %d", st)
	}
	e.createChunkerView("v", "src")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	moments := []string{"random", "dequeue", "completion", "plan", "dequeue", "commit", "completion"}
	var worst time.Duration
	missedCommits := 0
	for round := 0; round < len(moments); round++ {
		moment := moments[round]
		if round > 0 {
			if st := e.post("/v1/table/src/insert", docs(round*perRound, (round+1)*perRound), nil); st != 200 {
				t.Fatalf("round %d: insert: %d", round, st)
			}
		}
		var th *thief
		if moment == "dequeue" {
			th = e.newThief()
		}
		id := e.refresh("v", `{"source_task_size": 5, "concurrency": 8}`)
		key := func(s string) string { return jobs.RedisKey("job:" + id + s) }
		pids := map[int]int{}
		for i, w := range e.workers {
			if w.ProcessState == nil {
				pids[w.Process.Pid] = i
			}
		}
		// holderOf: a live worker process holding a task of the job that
		// matches want, or -1.
		holderOf := func(want func(task string) bool) int {
			held, _ := rdb.HGetAll(ctx, key(":holders")).Result()
			for task, worker := range held {
				pid, ok := jobs.WorkerPID(worker)
				if !want(task) || !ok {
					continue
				}
				if i, ok := pids[pid]; ok {
					return i
				}
			}
			return -1
		}
		anyItem := func(task string) bool { return strings.HasPrefix(task, "item:") }
		victim := -1
		var thief *exec.Cmd
		deadline := time.Now().Add(120 * time.Second)
		total, _ := rdb.HGet(ctx, key(""), "items_total").Int64()
		threshold := int64(-1)
		var lastDone int64 = -1
		for victim < 0 && time.Now().Before(deadline) {
			done, _ := rdb.HLen(ctx, key(":results")).Result()
			if total == 0 {
				total, _ = rdb.HGet(ctx, key(""), "items_total").Int64()
			}
			switch moment {
			case "dequeue":
				if total > 60 && done >= 20 {
					stolen := th.steal(t, func() bool {
						st, _ := rdb.HGet(ctx, key(""), "state").Result()
						return st == "DONE" || st == "FAILED" || st == "CANCELLED"
					})
					thief = th.cmd
					if !strings.HasPrefix(stolen, "item:"+id) {
						t.Fatalf("round %d: the thief took %s, not an item of job %s", round, stolen, id)
					}
					victim = len(e.workers) // not a worker: the thief
				}
			case "random":
				if threshold < 0 && total > 60 {
					threshold = 20 + rng.Int64N(total-40)
				}
				if threshold >= 0 && done >= threshold {
					victim = holderOf(anyItem)
				}
			case "completion":
				if lastDone >= 0 && done > lastDone && done >= 20 {
					victim = holderOf(anyItem)
				}
				lastDone = done
			case "plan":
				victim = holderOf(func(task string) bool { return strings.HasPrefix(task, "plan:") })
			case "commit":
				if ph, _ := rdb.HGet(ctx, key(""), "phase").Result(); ph == "committing" {
					victim = holderOf(func(string) bool { return true })
				}
			}
			if st, _ := rdb.HGet(ctx, key(""), "state").Result(); st == "DONE" {
				break
			}
			time.Sleep(2 * time.Millisecond) // leave the workers the cores
		}
		if victim < 0 && moment == "commit" && missedCommits < 3 {
			// A commit lasts a few milliseconds; on a loaded machine the
			// poll can miss it. The job ends by itself: try another round.
			missedCommits++
			t.Logf("round %d (commit): the commit ended before the poll saw it; one more round", round)
			e.mustDone(id)
			e.assertView("v", "src", -1)
			moments = append(moments, "commit")
			continue
		}
		if victim < 0 {
			t.Fatalf("round %d (%s): found no moment to kill a worker; the round proves nothing", round, moment)
		}
		w := thief
		if w == nil {
			w = e.workers[victim]
		}
		if err := w.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		w.Wait()
		var state string
		waitFor(t, 180*time.Second, "job "+id+" to end", func() bool {
			state, _ = rdb.HGet(ctx, key(""), "state").Result()
			return state == "DONE" || state == "FAILED" || state == "CANCELLED"
		})
		took := time.Since(killed)
		worst = max(worst, took)
		who := fmt.Sprintf("worker %d", victim)
		if thief != nil {
			who = "a process that had just dequeued an item"
		}
		t.Logf("round %d: SIGKILL (%s) of %s: %s %v after the kill", round, moment, who, state, took.Round(10*time.Millisecond))
		if state != "DONE" {
			t.Fatalf("round %d (%s): job ended %s: %v", round, moment, state, e.job(id)["failure"])
		}
		if took > 15*time.Second {
			t.Errorf("round %d (%s): DONE %v after the kill, want within 15s", round, moment, took.Round(10*time.Millisecond))
		}
		e.assertView("v", "src", -1)
		if thief == nil {
			e.startWorker("default")
		}
	}
	t.Logf("worst SIGKILL-to-DONE: %v", worst.Round(10*time.Millisecond))
}

// runThiefProcess is a process that takes one task off the cluster's
// queue the way a worker does (asynq's dequeue), writes its id to the
// ready file and then does nothing: SIGKILLed, it stands for a worker
// killed between asynq handing it a task and its first step, which no
// hook in the worker can stop at.
func runThiefProcess() {
	opt, err := asynq.ParseRedisURI(os.Getenv("MVQ_REDIS_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ready := os.Getenv("MVQ_READY_FILE")
	// The process is started ahead of the moment and waits for the go
	// file, so that what the test times is one dequeue, not the start of
	// a large binary on a loaded machine (a job can end meanwhile).
	for {
		if _, err := os.Stat(os.Getenv("MVQ_GO_FILE")); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: 1, Queues: map[string]int{jobs.QueueName("default"): 1},
		TaskCheckInterval: time.Millisecond, LogLevel: asynq.FatalLevel})
	err = srv.Run(asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		id, _ := asynq.GetTaskID(ctx)
		os.WriteFile(ready+".tmp", []byte(id), 0o644)
		os.Rename(ready+".tmp", ready)
		select {}
	}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// thief is a thief process started ahead of its moment.
type thief struct {
	cmd           *exec.Cmd
	ready, goFile string
	stderr        *bytes.Buffer
}

// newThief starts a thief process that waits for steal.
func (e *env) newThief() *thief {
	e.t.Helper()
	dir := e.t.TempDir()
	th := &thief{ready: filepath.Join(dir, "stolen"), goFile: filepath.Join(dir, "go"), stderr: new(bytes.Buffer)}
	th.cmd = exec.Command(os.Args[0])
	th.cmd.Env = append(os.Environ(), "MVQ_TEST_THIEF=1", "MVQ_READY_FILE="+th.ready, "MVQ_GO_FILE="+th.goFile, "MVQ_REDIS_URL="+e.redisURL)
	th.cmd.Stderr = th.stderr
	if err := th.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { th.cmd.Process.Kill(); th.cmd.Wait() })
	return th
}

// steal lets the thief dequeue and returns the id of the task it took.
// jobEnded reports whether the job the thief should steal from is over:
// then there is nothing left to take and the round proves nothing.
func (th *thief) steal(t *testing.T, jobEnded func() bool) string {
	t.Helper()
	if err := os.WriteFile(th.goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var id []byte
	waitFor(t, 60*time.Second, "the thief to take a task", func() bool {
		id, _ = os.ReadFile(th.ready)
		if len(id) > 0 {
			return true
		}
		if jobEnded() {
			t.Fatalf("the job ended before the thief took a task; thief stderr: %s", th.stderr)
		}
		return false
	})
	return string(id)
}
