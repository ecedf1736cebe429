package service_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

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

// scrapeSamples returns the samples of one metric on a /metrics page,
// keyed by their label sets as written ("{cluster=\"gpu\",state=\"pending\"}").
func scrapeSamples(t *testing.T, url, metric string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		out[labelsOf(line[len(metric):i])] = v
	}
	return out
}

// labelsOf keeps the cluster and state labels of a label set, in that
// order (the exporter adds others, such as otel_scope_name).
func labelsOf(set string) string {
	var keep []string
	for _, kv := range strings.Split(strings.Trim(set, "{} "), ",") {
		if strings.HasPrefix(kv, "cluster=") || strings.HasPrefix(kv, "state=") {
			keep = append(keep, kv)
		}
	}
	return "{" + strings.Join(keep, ",") + "}"
}

// TestQueueGaugesForEveryCluster: the API exports mvq_queue_depth and
// mvq_workers_active for every cluster it knows (MVQ_CLUSTERS on the API,
// and every cluster a worker ever served), so when the last worker of a
// pool stops with work queued, its series stay, show the backlog and zero
// workers: what MvqNoActiveWorkers and scale-from-zero read.
func TestQueueGaugesForEveryCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("stops a worker pool mid-refresh")
	}
	e := startAPI(t, 0, "", "MVQ_CLUSTERS=default,spare")
	e.startProcess("worker", "MVQ_TEST_WORKER=1", "MVQ_CLUSTERS=gpu", "MVQ_METRICS_LISTEN=127.0.0.1:0", "MVQ_WORKER_CONCURRENCY=1")
	gpu := e.workers[0]
	big := make([]map[string]any, 12)
	for i := range big {
		words := make([]string, 6000)
		for w := range words {
			words[w] = fmt.Sprintf("d%dw%d", i, w)
		}
		big[i] = map[string]any{"id": i, "lang": "en", "body": strings.Join(words, " ")}
	}
	if st := e.post("/v1/table/src/create", big, nil); st != 200 {
		t.Fatalf("create source: %d", st)
	}
	e.createChunkerView("v", "src")
	id := e.refresh("v", map[string]any{"cluster": "gpu", "source_task_size": 1, "concurrency": 4})
	waitFor(t, 120*time.Second, "the gpu pool to start the refresh", func() bool {
		p, _ := e.job(id)["progress"].(map[string]any)
		return p != nil && num(p["work_items_done"]) >= 1
	})
	// While the pool has its worker, MvqNoActiveWorkers does not fire.
	if firing := alertFiring(t, e.api+"/metrics", "MvqNoActiveWorkers"); len(firing) != 0 {
		t.Fatalf("MvqNoActiveWorkers fires with a live worker: %v", firing)
	}
	// The pool's only worker stops; the items released to it stay queued.
	if err := gpu.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	gpu.Wait()
	metrics := e.api + "/metrics"
	var depth, workers map[string]float64
	waitFor(t, 30*time.Second, "the gpu pool to show queued work and no worker", func() bool {
		depth = scrapeSamples(t, metrics, "mvq_queue_depth")
		workers = scrapeSamples(t, metrics, "mvq_workers_active")
		w, ok := workers[`{cluster="gpu"}`]
		return ok && w == 0 && depth[`{cluster="gpu",state="pending"}`] > 0
	})
	for _, c := range []string{"default", "spare", "gpu"} {
		if _, ok := workers[`{cluster="`+c+`"}`]; !ok {
			t.Errorf("no mvq_workers_active series for cluster %s: %v", c, workers)
		}
		for _, s := range []string{"pending", "active", "scheduled", "retry"} {
			if _, ok := depth[`{cluster="`+c+`",state="`+s+`"}`]; !ok {
				t.Errorf("no mvq_queue_depth series for cluster %s state %s", c, s)
			}
		}
	}
	// The alert's expression, evaluated on what the API serves, fires for
	// gpu and only for it (Prometheus would wait its `for: 2m` first).
	if firing := alertFiring(t, metrics, "MvqNoActiveWorkers"); len(firing) != 1 || firing[0] != "gpu" {
		t.Fatalf("MvqNoActiveWorkers fires for %v, want [gpu]", firing)
	}
	if j := e.job(id); j["state"] != "RUNNING" {
		t.Fatalf("job with its pool gone is %v, want RUNNING (waiting for a worker)", j["state"])
	}
	t.Logf("gpu pool after its last worker stopped: depth %v, workers %v", depth, workers)
}

// TestRedisClusterRefresh: with MVQ_REDIS_URL=redis-cluster://... (three
// masters), job records, scripts and asynq queues work across the
// cluster: a full and an incremental refresh split over two workers end
// DONE with exact rows. Without the {mvq} hash tag the scripts fail with
// CROSSSLOT and so does this test.
func TestRedisClusterRefresh(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c := testenv.StartRedisCluster(t)
	e := &env{t: t, redisURL: c.URL(), warehouse: testenv.Warehouse(t)}
	e.startWorker("default")
	e.startWorker("default")
	e.api = "http://" + e.startProcess("api", "MVQ_TEST_API=1", "MVQ_LISTEN=127.0.0.1:0")
	if st := e.post("/v1/table/src/create", docs(0, 300), nil); st != 200 {
		t.Fatalf("create source: %d", st)
	}
	e.createChunkerView("v", "src")
	j := e.mustDone(e.refresh("v", `{"source_task_size": 10, "concurrency": 4}`))
	if p := j["progress"].(map[string]any); num(p["work_items_done"]) != 30 {
		t.Fatalf("progress %v, want 30 items", p)
	}
	e.assertView("v", "src", -1)
	e.post("/v1/table/src/insert", docs(300, 330), nil)
	e.mustDone(e.refresh("v", `{"source_task_size": 10}`))
	e.assertView("v", "src", -1)
}

// alertFiring evaluates alert rule name of deploy/prometheus/alerts.yml
// on one scrape of url and returns the clusters it fires for.
func alertFiring(t *testing.T, url, name string) []string {
	t.Helper()
	raw, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	expr := ""
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			if r.Alert == name {
				expr = r.Expr
			}
		}
	}
	if expr == "" {
		t.Fatalf("no alert %s in alerts.yml", name)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	data, err := parseExposition(string(body))
	if err != nil {
		t.Fatal(err)
	}
	v, err := promEval(expr, data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out []string
	for _, s := range v {
		out = append(out, s.labels["cluster"])
	}
	return out
}
