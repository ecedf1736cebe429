package service_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// The accept peer is what a user of the same packages would write instead
// of mvq's accept: a gin handler that decodes the refresh body and calls
// asynq's Client.EnqueueContext with a retained (durable) task, answering
// 202 with its id. It runs in a process of its own, like mvq's API in
// BenchmarkAcceptVsPeer, on the same Redis.

// peerRefresh is the refresh request body of the seed.
type peerRefresh struct {
	ID                      []string          `json:"id"`
	SrcVersion              *int64            `json:"src_version"`
	MaxRowsPerFragment      *int64            `json:"max_rows_per_fragment"`
	Concurrency             *int64            `json:"concurrency"`
	IntraApplierConcurrency *int64            `json:"intra_applier_concurrency"`
	SourceTaskSize          *int64            `json:"source_task_size"`
	Cluster                 *string           `json:"cluster"`
	OutputLimit             *int64            `json:"output_limit"`
	Manifest                *string           `json:"manifest"`
	Context                 map[string]string `json:"context"`
}

// floorScript makes, in one step, the Redis reads and writes mvq's create
// script (jobs/scripts.go) makes for a new job that the accept's
// guarantees require before the 202 (the job durable, indexed and queued,
// joinable, the cluster's live worker and backlog checked): the record of
// the fields known at accept, the all-jobs, view and cluster indexes, the
// view's FIFO, the fingerprint for joins and the plan task on its queue.
// The floor peer (MVQ_TEST_PEER=floor) runs it behind the peer's handler:
// what these writes cost with no other work of mvq's around them.
const floorScript = floorChecks + `
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'type', 'refresh', 'view', 'v', 'view_id', '["v"]', 'state', 'PENDING',
  'created', ARGV[3], 'created_ms', ARGV[4], 'request', ARGV[5], 'cluster', 'default', 'cause', 'api', 'progress_at', ARGV[3],
  'manifest_checksum', '', 'trace_id', ARGV[6])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
redis.call('ZADD', KEYS[3], 0, ARGV[1])` + floorQueues

// leanFloorScript is floorScript less what moving work off the accept
// path could take from it: the all-jobs and view indexes (written by the
// plan task instead) and the record's derivable fields (id, type, view,
// created_at, cause, progress_at). What is left no data model can drop
// and keep the accept's checks: the record's own fields, the view's FIFO,
// the cluster's backlog set, the join fingerprint and the plan task. The
// lean floor peer (MVQ_TEST_PEER=lean) runs it.
const leanFloorScript = floorChecks + `
redis.call('HSET', KEYS[1], 'view_id', '["v"]', 'state', 'PENDING', 'created_ms', ARGV[4], 'request', ARGV[5], 'cluster', 'default', 'trace_id', ARGV[6])` + floorQueues

// floorChecks are the floors' reads: the join, the live worker, the
// record's existence and the backlog.
const floorChecks = `
redis.call('HGET', KEYS[8], ARGV[2])
redis.call('ZCOUNT', KEYS[7], '-inf', '+inf')
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('ZCARD', KEYS[6])`

// floorQueues are the floors' writes after the record and its indexes:
// the view's FIFO, the cluster's unfinished jobs, the fingerprint and its
// TTL, the plan task on its queue.
const floorQueues = `
redis.call('RPUSH', KEYS[4], ARGV[1])
redis.call('ZADD', KEYS[6], ARGV[4], ARGV[1])
redis.call('HSET', KEYS[8], ARGV[2], ARGV[1])
redis.call('PEXPIRE', KEYS[8], 86400000)
redis.call('HSET', KEYS[5], 'msg', ARGV[7], 'state', 'pending', 'pending_since', ARGV[4])
redis.call('LPUSH', KEYS[9], ARGV[1])
return 1`

// runPeerProcess serves the peer until killed (MVQ_TEST_PEER; "floor":
// the floor peer, see floorScript; "lean": the lean floor peer, see
// leanFloorScript).
func runPeerProcess() {
	opt, err := asynq.ParseRedisURI(os.Getenv("MVQ_REDIS_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	client := asynq.NewClient(opt)
	defer client.Close()
	rdb, ok := opt.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		fmt.Fprintln(os.Stderr, "asynq's Redis client is not a go-redis v9 client")
		os.Exit(2)
	}
	defer rdb.Close()
	floor := redis.NewScript(floorScript)
	if os.Getenv("MVQ_TEST_PEER") == "lean" {
		floor = redis.NewScript(leanFloorScript)
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.POST("/v1/materialized_view/:id/refresh", func(c *gin.Context) {
		var body peerRefresh
		if err := c.ShouldBindJSON(&body); err != nil {
			c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
			return
		}
		body.ID = strings.Split(c.Param("id"), "$")
		payload, _ := json.Marshal(body)
		id, _ := uuid.NewV7()
		if p := os.Getenv("MVQ_TEST_PEER"); p == "floor" || p == "lean" {
			view := c.Param("id")
			now := time.Now()
			keys := []string{"floor:job:" + id.String(), "floor:jobs", "floor:view:" + view + ":jobs", "floor:view:" + view + ":fifo",
				"floor:task:" + id.String(), "floor:live", "floor:workers", "floor:view:" + view + ":pending", "floor:queue"}
			err := floor.Run(c.Request.Context(), rdb, keys, id.String(), fmt.Sprintf("%x", sha256.Sum256(payload)),
				now.UTC().Format(time.RFC3339Nano), now.UnixMilli(), payload, id.String(), payload).Err()
			if err != nil {
				c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
				return
			}
			c.JSON(http.StatusAccepted, gin.H{"job_id": id.String()})
			return
		}
		info, err := client.EnqueueContext(c.Request.Context(), asynq.NewTask("refresh", payload),
			asynq.TaskID(id.String()), asynq.Queue("peer"), asynq.Retention(24*time.Hour))
		if err != nil {
			c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
			return
		}
		c.JSON(http.StatusAccepted, gin.H{"job_id": info.ID})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ready := os.Getenv("MVQ_READY_FILE")
	os.WriteFile(ready+".tmp", []byte(ln.Addr().String()), 0o644)
	os.Rename(ready+".tmp", ready)
	if err := http.Serve(ln, r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// serverProcess re-executes the test binary with env and returns the
// address it wrote to its ready file and its pid; it is stopped at
// cleanup.
func serverProcess(b *testing.B, env ...string) (string, int) {
	ready := filepath.Join(b.TempDir(), "ready")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), "MVQ_READY_FILE="+ready, "MVQ_LOG_LEVEL=warn", "MVQ_AUTH=none"), env...)
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	b.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if addr, err := os.ReadFile(ready); err == nil && len(addr) > 0 {
			return string(addr), cmd.Process.Pid
		}
		select {
		case <-exited:
			b.Fatalf("server process exited: %s", logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Fatalf("server process did not start: %s", logs.String())
		}
	}
}

// BenchmarkAcceptVsPeer: refresh accepts per second and their p99 on
// mvq's API (a process of its own, as bin/api runs) next to the accept
// peer (runPeerProcess) on the same Redis, 32 concurrent clients, the
// phases interleaved in short slices. A floor peer (the peer's handler
// making the Redis writes of mvq's new job, floorScript) shows what those
// writes, which the accept's guarantees require, cost on their own, and a
// lean floor peer (leanFloorScript) what they would cost with the job
// indexes written by the plan task and a record of only what cannot be
// derived. Two mvq paths: a new job for the
// view (every request has its own options, so none coalesces) and a
// request that joins the view's pending job (coalescing). Targets: each
// >= 0.8x the peer's rate with p99 <= 1.2x the peer's.
// MVQ_BENCH_API_CPUPROFILE=FILE writes the API process's CPU profile,
// MVQ_BENCH_API_MEMPROFILE=FILE its allocations; MVQ_BENCH_ACCEPT_ONLY=new
// or join sends mvq only that path's requests (the profiles are then of
// it alone) and reports no ratios.
func BenchmarkAcceptVsPeer(b *testing.B) {
	o := newOrchestratorWith(b, 200, false)
	e := &apiEnv{rdb: o.rdb}
	e.registerIdleWorker(b)
	const views = 64
	for i := range views {
		o.view(b, fmt.Sprintf("v%d", i))
	}
	// The backlog check stays on the path, with a limit the run cannot reach.
	apiEnv := []string{"MVQ_TEST_API=1", "MVQ_LISTEN=127.0.0.1:0", "MVQ_MAX_PENDING_JOBS=100000000", "MVQ_REDIS_URL=" + o.redisURL, "MVQ_WAREHOUSE=file://" + o.dir}
	if p := os.Getenv("MVQ_BENCH_API_CPUPROFILE"); p != "" {
		apiEnv = append(apiEnv, "MVQ_TEST_CPUPROFILE="+p)
	}
	if p := os.Getenv("MVQ_BENCH_API_MEMPROFILE"); p != "" {
		apiEnv = append(apiEnv, "MVQ_TEST_MEMPROFILE="+p)
	}
	apiAddr, apiPID := serverProcess(b, apiEnv...)
	peerAddr, peerPID := serverProcess(b, "MVQ_TEST_PEER=1", "MVQ_REDIS_URL="+o.redisURL)
	floorAddr, floorPID := serverProcess(b, "MVQ_TEST_PEER=floor", "MVQ_REDIS_URL="+o.redisURL)
	leanAddr, leanPID := serverProcess(b, "MVQ_TEST_PEER=lean", "MVQ_REDIS_URL="+o.redisURL)
	api, peer, floorURL, leanURL := "http://"+apiAddr, "http://"+peerAddr, "http://"+floorAddr, "http://"+leanAddr
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	defer hc.CloseIdleConnections()

	created := func(i int, status int, body []byte) error {
		var r struct {
			JobID     string `json:"job_id"`
			Coalesced bool   `json:"coalesced"`
		}
		if status != http.StatusAccepted || json.Unmarshal(body, &r) != nil || r.JobID == "" || r.Coalesced {
			return fmt.Errorf("status %d: %s", status, body)
		}
		return nil
	}
	joined := func(i int, status int, body []byte) error {
		var r struct {
			Coalesced bool `json:"coalesced"`
		}
		if status != http.StatusAccepted || json.Unmarshal(body, &r) != nil || !r.Coalesced {
			return fmt.Errorf("status %d: %s", status, body)
		}
		return nil
	}
	// One pending job per view for the joins to find.
	for i := range views {
		resp, err := hc.Post(fmt.Sprintf("%s/v1/materialized_view/v%d/refresh", api, i), "application/json", strings.NewReader(`{"concurrency":3}`))
		if err != nil || resp.StatusCode != http.StatusAccepted {
			b.Fatalf("first refresh of v%d: %v %v", i, resp, err)
		}
		resp.Body.Close()
	}
	const rounds, slice = 8, 300 * time.Millisecond
	only := os.Getenv("MVQ_BENCH_ACCEPT_ONLY") // "new" or "join": a profiling aid
	if only != "" && only != "new" && only != "join" {
		b.Fatalf("MVQ_BENCH_ACCEPT_ONLY=%q: want new or join", only)
	}
	for it := 0; it < b.N; it++ {
		var peerP, floorP, leanP, fresh, coalesce phase
		// CPU time of the serving process (and of Redis) per phase: on a
		// shared machine the rates swing with the neighbours, the CPU a
		// request costs does not.
		var peerCPU, freshCPU, coalesceCPU, peerRedis, freshRedis, coalesceRedis, floorCPU, floorRedis, leanCPU, leanRedis time.Duration
		// What Redis ran for each phase, by command (INFO commandstats):
		// the script's cost inside Redis, apart from the round trips.
		peerCmds, freshCmds, coalesceCmds, floorCmds, leanCmds := cmdStats{}, cmdStats{}, cmdStats{}, cmdStats{}, cmdStats{}
		measure := func(pid int, cpu, redisCPU *time.Duration, cmds cmdStats, run func()) {
			c0, r0, s0 := procCPU(b, pid), redisCPUTime(b, o), redisCmdStats(b, o)
			run()
			*cpu += procCPU(b, pid) - c0
			*redisCPU += redisCPUTime(b, o) - r0
			cmds.addDiff(redisCmdStats(b, o), s0)
		}
		// Every new-job request has options of its own (max_rows_per_fragment
		// is at most 16,777,216: a run of up to 16 iterations stays under it).
		base := it * 1_000_000
		for range rounds {
			measure(peerPID, &peerCPU, &peerRedis, peerCmds, func() {
				load(b, &peerP, hc, benchClients, slice, func(i int) *http.Request {
					return post(fmt.Sprintf("%s/v1/materialized_view/v%d/refresh", peer, i%views), []byte(fmt.Sprintf(`{"max_rows_per_fragment":%d}`, 1000+base+i)))
				}, wantStatus(http.StatusAccepted))
			})
			measure(floorPID, &floorCPU, &floorRedis, floorCmds, func() {
				load(b, &floorP, hc, benchClients, slice, func(i int) *http.Request {
					return post(fmt.Sprintf("%s/v1/materialized_view/v%d/refresh", floorURL, i%views), []byte(fmt.Sprintf(`{"max_rows_per_fragment":%d}`, 1000+base+i)))
				}, wantStatus(http.StatusAccepted))
			})
			measure(leanPID, &leanCPU, &leanRedis, leanCmds, func() {
				load(b, &leanP, hc, benchClients, slice, func(i int) *http.Request {
					return post(fmt.Sprintf("%s/v1/materialized_view/v%d/refresh", leanURL, i%views), []byte(fmt.Sprintf(`{"max_rows_per_fragment":%d}`, 1000+base+i)))
				}, wantStatus(http.StatusAccepted))
			})
			if only != "join" {
				measure(apiPID, &freshCPU, &freshRedis, freshCmds, func() {
					load(b, &fresh, hc, benchClients, slice, func(i int) *http.Request {
						return post(fmt.Sprintf("%s/v1/materialized_view/v%d/refresh", api, i%views), []byte(fmt.Sprintf(`{"max_rows_per_fragment":%d}`, 1000+base+i)))
					}, created)
				})
			}
			if only == "new" {
				continue
			}
			measure(apiPID, &coalesceCPU, &coalesceRedis, coalesceCmds, func() {
				load(b, &coalesce, hc, benchClients, slice, func(i int) *http.Request {
					return post(fmt.Sprintf("%s/v1/materialized_view/v%d/refresh", api, i%views), []byte(`{"concurrency":3}`))
				}, joined)
			})
		}
		if only != "" {
			n, cpu := fresh.n(), freshCPU
			if only == "join" {
				n, cpu = coalesce.n(), coalesceCPU
			}
			b.Logf("run %d: only mvq's %s phase ran (MVQ_BENCH_ACCEPT_ONLY), for its profile: %d requests, API CPU %.0f µs per request; no ratios",
				it, only, n, float64(cpu.Microseconds())/float64(max(n, 1)))
			continue
		}
		per := func(d time.Duration, p *phase) float64 { return float64(d.Microseconds()) / float64(p.n()) }
		b.Logf("run %d, %d clients, phases interleaved:\n  peer (gin + asynq.Enqueue)  %s\n  floor peer (mvq's writes)   %s  rate %.2fx, p99 %.2fx the peer's\n  lean floor (no indexes)     %s  rate %.2fx, p99 %.2fx the peer's\n  mvq accept, new job         %s  rate %.2fx, p99 %.2fx the peer's (target >= 0.8x, <= 1.2x); %.2fx the floor's\n  mvq accept, joins pending   %s  rate %.2fx, p99 %.2fx the peer's\n"+
			"  CPU per request, server process / redis-server: peer %.0f / %.0f µs, floor %.0f / %.0f µs, lean floor %.0f / %.0f µs, new job %.0f / %.0f µs, joins %.0f / %.0f µs",
			it, benchClients, &peerP, &floorP, floorP.rate()/peerP.rate(), ms(floorP.q(0.99))/ms(peerP.q(0.99)),
			&leanP, leanP.rate()/peerP.rate(), ms(leanP.q(0.99))/ms(peerP.q(0.99)),
			&fresh, fresh.rate()/peerP.rate(), ms(fresh.q(0.99))/ms(peerP.q(0.99)), fresh.rate()/floorP.rate(),
			&coalesce, coalesce.rate()/peerP.rate(), ms(coalesce.q(0.99))/ms(peerP.q(0.99)),
			per(peerCPU, &peerP), per(peerRedis, &peerP), per(floorCPU, &floorP), per(floorRedis, &floorP), per(leanCPU, &leanP), per(leanRedis, &leanP), per(freshCPU, &fresh), per(freshRedis, &fresh), per(coalesceCPU, &coalesce), per(coalesceRedis, &coalesce))
		b.Logf("Redis commands per request (calls, µs inside Redis; a script's calls are in its line):\n  peer     %s\n  floor    %s\n  lean     %s\n  new job  %s\n  joins    %s",
			peerCmds.per(peerP.n()), floorCmds.per(floorP.n()), leanCmds.per(leanP.n()), freshCmds.per(fresh.n()), coalesceCmds.per(coalesce.n()))
		b.ReportMetric(floorP.rate()/peerP.rate(), "floor/peer")
		b.ReportMetric(leanP.rate()/peerP.rate(), "lean_floor/peer")
		b.ReportMetric(fresh.rate()/floorP.rate(), "new/floor")
		b.ReportMetric(per(freshCPU, &fresh)/per(peerCPU, &peerP), "new_cpu/peer_cpu")
		b.ReportMetric(fresh.rate()/peerP.rate(), "new/peer")
		b.ReportMetric(ms(fresh.q(0.99))/ms(peerP.q(0.99)), "new_p99/peer_p99")
		b.ReportMetric(coalesce.rate()/peerP.rate(), "joined/peer")
		b.ReportMetric(ms(coalesce.q(0.99))/ms(peerP.q(0.99)), "joined_p99/peer_p99")
		b.ReportMetric(peerP.rate(), "peer_req/s")
	}
}

// cmdStats is, by Redis command, the calls and the µs Redis spent in them.
type cmdStats map[string][2]float64

// addDiff adds to s what Redis ran between the snapshots before and after.
func (s cmdStats) addDiff(after, before cmdStats) {
	for k, a := range after {
		d := [2]float64{a[0] - before[k][0], a[1] - before[k][1]}
		if d[0] > 0 {
			s[k] = [2]float64{s[k][0] + d[0], s[k][1] + d[1]}
		}
	}
}

// per is s per request of n, the costliest commands first; commands run
// less than once per 100 requests are left out (the workers' polling).
func (s cmdStats) per(n int) string {
	keys := make([]string, 0, len(s))
	for k, v := range s {
		if v[0]/float64(n) >= 0.01 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return s[keys[i]][1] > s[keys[j]][1] })
	var out []string
	total := 0.0
	for _, k := range keys {
		total += s[k][1]
		out = append(out, fmt.Sprintf("%s %.2f× %.1f µs", k, s[k][0]/float64(n), s[k][1]/float64(n)))
	}
	return fmt.Sprintf("%.1f µs: %s", total/float64(n), strings.Join(out, ", "))
}

// redisCmdStats is INFO commandstats of the shared redis-server.
func redisCmdStats(b *testing.B, o *orchestrator) cmdStats {
	info, err := o.rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	s := cmdStats{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found {
			continue
		}
		var calls, usec float64
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				fmt.Sscan(v, &calls)
			case "usec":
				fmt.Sscan(v, &usec)
			}
		}
		s[name] = [2]float64{calls, usec}
	}
	return s
}

// procCPU is the user and system CPU time process pid has used so far
// (/proc/PID/stat, in clock ticks of 10 ms).
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command (which may hold spaces) in parentheses.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// redisCPUTime is the CPU time the shared redis-server has used so far
// (INFO cpu).
func redisCPUTime(b *testing.B, o *orchestrator) time.Duration {
	info, err := o.rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), k); ok {
				var x float64
				fmt.Sscan(v, &x)
				total += x
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}
