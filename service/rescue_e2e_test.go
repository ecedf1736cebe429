package service_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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
			parts := strings.Split(worker, ":")
			if !strings.HasPrefix(task, "item:") || len(parts) < 3 {
				continue
			}
			pid, _ := strconv.Atoi(parts[len(parts)-2])
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
