package service_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/internal/testenv"
)

// TestRedisSentinelFailover: the API and two workers reach Redis through
// a sentinel (MVQ_REDIS_URL=redis-sentinel://...). The master is killed
// while a refresh is mid-way; the sentinel promotes the replica, every
// process follows it, and the job still ends DONE with exactly the right
// rows. The test logs how long the promotion took and how long the job
// made no progress.
func TestRedisSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a refresh through a Redis failover")
	}
	s := testenv.StartSentinel(t)
	e := &env{t: t, redisURL: s.URL(0), warehouse: testenv.Warehouse(t)}
	e.startWorker("default")
	e.startWorker("default")
	addr := e.startProcess("api", "MVQ_TEST_API=1", "MVQ_LISTEN=127.0.0.1:0")
	e.api = "http://" + addr

	big := make([]map[string]any, 24)
	for i := range big {
		words := make([]string, 12000)
		for w := range words {
			words[w] = fmt.Sprintf("d%dw%d", i, w)
		}
		big[i] = map[string]any{"id": i, "lang": "en", "body": strings.Join(words, " ")}
	}
	if st := e.post("/v1/table/src/create", big, nil); st != 200 {
		t.Fatalf("create source: %d", st)
	}
	e.createChunkerView("v", "src")
	id := e.refresh("v", `{"source_task_size": 1, "concurrency": 2}`)
	done := func() int64 {
		p, _ := e.job(id)["progress"].(map[string]any)
		if p == nil {
			return -1
		}
		return num(p["work_items_done"])
	}
	var before int64
	waitFor(t, 120*time.Second, "the refresh to be mid-way", func() bool {
		before = done()
		return before >= 2
	})
	if before >= 24 {
		t.Fatal("the refresh finished before the failover; the test proves nothing")
	}
	killed := time.Now()
	s.Master.Stop()
	var promoted time.Duration
	waitFor(t, 60*time.Second, "the sentinel to promote the replica", func() bool {
		m, err := s.MasterAddr()
		if err == nil && m == s.Replica.Addr {
			promoted = time.Since(killed)
			return true
		}
		return false
	})
	var resumed time.Duration
	waitFor(t, 180*time.Second, "the job to make progress after the failover", func() bool {
		if n := done(); n > before {
			resumed = time.Since(killed)
			return true
		}
		return false
	})
	j := e.wait(id)
	if j["state"] != "DONE" {
		t.Fatalf("job after the failover ended %v: %v", j["state"], j["failure"])
	}
	if p := j["progress"].(map[string]any); num(p["work_items_done"]) != 24 {
		t.Fatalf("progress after the failover: %v", p)
	}
	e.assertView("v", "src", -1)
	t.Logf("failover: replica promoted %v after the master was killed; the job's next item finished %v after the kill", promoted.Round(time.Millisecond), resumed.Round(time.Millisecond))
}
