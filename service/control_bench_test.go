package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/chunker"
	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/internal/corpus"
	"github.com/mvq-dev/mvq/internal/testenv"
	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// benchClients is the number of concurrent HTTP clients of the load
// phases.
const benchClients = 32

// phase is the outcome of one kind of request: its latencies and the
// time spent sending it, over one or more slices of load.
type phase struct {
	lat     []time.Duration
	elapsed time.Duration
}

func (p *phase) n() int        { return len(p.lat) }
func (p *phase) rate() float64 { return float64(len(p.lat)) / p.elapsed.Seconds() }

func (p *phase) q(f float64) time.Duration {
	slices.Sort(p.lat)
	return p.lat[min(len(p.lat)-1, int(f*float64(len(p.lat))))]
}

func (p *phase) String() string {
	return fmt.Sprintf("%7.0f req/s  p50 %6.2f ms  p99 %6.2f ms  (%d requests)", p.rate(),
		ms(p.q(0.50)), ms(p.q(0.99)), p.n())
}

// load runs clients goroutines sending requests for d and adds what they
// saw to p; req(i) makes the i-th request (i counts across goroutines and
// calls) and check judges its answer. Any failed check fails the
// benchmark.
func load(b *testing.B, p *phase, hc *http.Client, clients int, d time.Duration, req func(i int) *http.Request, check func(i int, status int, body []byte) error) {
	var counter atomic.Int64 // request numbers go on from the earlier slices
	counter.Store(int64(len(p.lat)))
	lat := make([][]time.Duration, clients)
	errc := make(chan error, clients)
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				i := int(counter.Add(1) - 1)
				r := req(i)
				t0 := time.Now()
				resp, err := hc.Do(r)
				if err != nil {
					errc <- err
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				lat[g] = append(lat[g], time.Since(t0))
				if err == nil {
					err = check(i, resp.StatusCode, body)
				}
				if err != nil {
					errc <- fmt.Errorf("request %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	p.elapsed += time.Since(start)
	close(errc)
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	for _, l := range lat {
		p.lat = append(p.lat, l...)
	}
	if len(p.lat) == 0 {
		b.Fatal("no request finished")
	}
}

// apiEnv is an API server in this process (auth none, the production
// metrics middleware) over a warehouse in a temp dir and the shared Redis.
type apiEnv struct {
	url    string
	hc     *http.Client
	cat    *table.Catalog
	eng    *refresh.Engine
	client *jobs.Client
	rdb    *redis.Client
	conn   asynq.RedisClientOpt
}

func newAPIEnv(b *testing.B, o *orchestrator) *apiEnv {
	r, db := testenv.SharedRedis(b)
	conn := asynq.RedisClientOpt{Addr: r.Addr, DB: db, PoolSize: 64}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, DB: db, PoolSize: 64})
	b.Cleanup(func() { rdb.Close() })
	client := jobs.NewClient(rdb, conn, o.eng)
	b.Cleanup(func() { client.Close() })
	api := httpapi.New(httpapi.Config{Middleware: []gin.HandlerFunc{httpapi.Metrics()}}, o.cat,
		&httpapi.ViewRoutes{Engine: o.eng, Jobs: client, Catalog: o.cat})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: api.Handler()}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	b.Cleanup(hc.CloseIdleConnections)
	return &apiEnv{url: "http://" + ln.Addr().String(), hc: hc, cat: o.cat, eng: o.eng, client: client, rdb: rdb, conn: conn}
}

// registerIdleWorker makes cluster "default" look served by a live worker
// that takes no tasks (the worker registry's documented layout): accepted
// jobs stay queued, so the accept path is measured alone.
func (e *apiEnv) registerIdleWorker(b *testing.B) {
	exp := time.Now().Add(time.Hour).UnixMilli()
	if err := e.rdb.ZAdd(context.Background(), jobs.RedisKey("cluster:default:workers"), redis.Z{Score: float64(exp), Member: "bench-idle"}).Err(); err != nil {
		b.Fatal(err)
	}
}

func get(url string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, url, nil)
	return r
}

func post(url string, body []byte) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

func wantStatus(want int) func(int, int, []byte) error {
	return func(_ int, status int, body []byte) error {
		if status != want {
			return fmt.Errorf("status %d, want %d: %s", status, want, body)
		}
		return nil
	}
}

// BenchmarkAPIControlPlane: requests/s and latency of accepting refreshes
// (POST …/refresh), of the same route refused at its body (the HTTP
// cost alone, the most an accept could reach), of a burst that
// coalesces, and of reading a job
// (GET /v1/job/{id}), each next to GET /healthz on the same server in the
// same run, 32 concurrent clients. Targets: accept >= 0.6x healthz with
// p99 < 10 ms; job status >= 0.9x healthz. Every accepted job is checked
// to be recorded once with its plan task queued.
func BenchmarkAPIControlPlane(b *testing.B) {
	// No worker in this process: one would run the accepted jobs (and
	// retry thousands of plan tasks waiting for their view's turn) on
	// the cores the server is measured on.
	o := newOrchestratorWith(b, 200, false)
	e := newAPIEnv(b, o)
	e.registerIdleWorker(b)
	const views = 64
	for i := range views {
		o.view(b, fmt.Sprintf("v%d", i))
	}
	// The phases take turns in short slices (8 rounds of 250 ms each), so
	// that a change in the machine's load during the run (it is shared)
	// weighs on every phase alike and the ratios stay comparable.
	const rounds, slice = 8, 250 * time.Millisecond
	for it := 0; it < b.N; it++ {
		var health, accept, refused, status, changing, coalesced phase
		var mu sync.Mutex
		ids := map[string]bool{}
		var someID string
		base := it * 10_000_000
		for r := range rounds {
			load(b, &health, e.hc, benchClients, slice, func(int) *http.Request { return get(e.url + "/healthz") }, wantStatus(200))

			// Accept: every request has its own options (no coalescing).
			load(b, &accept, e.hc, benchClients, slice, func(i int) *http.Request {
				body := fmt.Sprintf(`{"max_rows_per_fragment":%d}`, 1000+base+i)
				return post(fmt.Sprintf("%s/v1/materialized_view/v%d/refresh", e.url, i%views), []byte(body))
			}, func(i int, status int, body []byte) error {
				if status != http.StatusAccepted {
					return fmt.Errorf("status %d: %s", status, body)
				}
				var r struct {
					JobID     string `json:"job_id"`
					Coalesced bool   `json:"coalesced"`
				}
				if err := json.Unmarshal(body, &r); err != nil || r.JobID == "" || r.Coalesced {
					return fmt.Errorf("answer %s", body)
				}
				mu.Lock()
				defer mu.Unlock()
				if ids[r.JobID] {
					return fmt.Errorf("job id %s given twice", r.JobID)
				}
				ids[r.JobID] = true
				return nil
			})
			// The same route refused at its body (an unknown field): HTTP,
			// routing, middleware and the problem answer, without the
			// view checks or the job's record. What an accept can cost
			// at most is what this leaves.
			load(b, &refused, e.hc, benchClients, slice, func(i int) *http.Request {
				return post(fmt.Sprintf("%s/v1/materialized_view/v%d/refresh", e.url, i%views), []byte(`{"max_rows_per_fragmant":1000}`))
			}, func(_ int, status int, body []byte) error {
				if status != http.StatusBadRequest || !bytes.Contains(body, []byte("max_rows_per_fragmant")) {
					return fmt.Errorf("status %d: %s", status, body)
				}
				return nil
			})
			if r == 0 {
				for id := range ids {
					someID = id
					break
				}
			}

			load(b, &status, e.hc, benchClients, slice, func(int) *http.Request { return get(e.url + "/v1/job/" + someID) },
				func(_ int, status int, body []byte) error {
					if status != 200 || !bytes.Contains(body, []byte(someID)) {
						return fmt.Errorf("status %d: %s", status, body)
					}
					return nil
				})

			// The same while the job changes every 10 ms, as a running
			// job's progress does: what a worker's progress event writes
			// and announces, so polls are answered from Redis after each.
			stopChanges := make(chan struct{})
			changed := make(chan int)
			go func() {
				n := 0
				defer func() { changed <- n }()
				t := time.NewTicker(10 * time.Millisecond)
				defer t.Stop()
				key := jobs.RedisKey("job:" + someID)
				for {
					select {
					case <-stopChanges:
						return
					case <-t.C:
					}
					n++
					if _, err := e.rdb.TxPipelined(context.Background(), func(p redis.Pipeliner) error {
						p.HSet(context.Background(), key, "rows_read", n)
						p.Publish(context.Background(), jobs.ChangedChannel, key)
						return nil
					}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
			var lastSeen atomic.Int64
			load(b, &changing, e.hc, benchClients, slice, func(int) *http.Request { return get(e.url + "/v1/job/" + someID) },
				func(_ int, status int, body []byte) error {
					if status != 200 || !bytes.Contains(body, []byte(someID)) {
						return fmt.Errorf("status %d: %s", status, body)
					}
					var j jobs.Job
					if err := json.Unmarshal(body, &j); err != nil {
						return err
					}
					for n := j.Progress.RowsRead; ; {
						old := lastSeen.Load()
						if n <= old || lastSeen.CompareAndSwap(old, n) {
							break
						}
					}
					return nil
				})
			close(stopChanges)
			made := <-changed
			if made > 1 && lastSeen.Load() < int64(made-1) {
				b.Fatalf("polls saw change %d at most of %d made", lastSeen.Load(), made)
			}

			// Coalescing: identical requests join the view's pending job.
			load(b, &coalesced, e.hc, benchClients, slice, func(i int) *http.Request {
				return post(fmt.Sprintf("%s/v1/materialized_view/v%d/refresh", e.url, i%views), []byte(`{"concurrency":3}`))
			}, wantStatus(http.StatusAccepted))
		}
		e.checkAccepted(b, ids)

		// Where an accept's time goes, one caller at a time: the view
		// lookup and validation, then all of Submit (that plus the create
		// script and the enqueue).
		const seq = 1000
		t0 := time.Now()
		for i := range seq {
			o := refresh.Options{MaxRowsPerFragment: 1000 + i}
			if err := e.eng.Prepare(context.Background(), []string{fmt.Sprintf("v%d", i%views)}, &o); err != nil {
				b.Fatal(err)
			}
		}
		prep := time.Since(t0) / seq
		t0 = time.Now()
		for i := range seq {
			if _, err := e.client.Submit(context.Background(), []string{fmt.Sprintf("v%d", i%views)}, refresh.Options{MaxRowsPerFragment: 5_000_000 + base + i}); err != nil {
				b.Fatal(err)
			}
		}
		submit := time.Since(t0) / seq
		b.Logf("run %d, one caller: Prepare (view lookup, validation) %v, Submit %v (Prepare + create script + enqueue)", it, prep, submit)
		b.Logf("run %d, %d clients, phases interleaved:\n  GET /healthz           %s\n  POST refresh (accept)  %s  ratio %.2f (target >= 0.6, p99 < 10 ms)\n  POST refused at body   %s  ratio %.2f (the route doing no work: an accept's ceiling)\n  POST refresh (joins)   %s  ratio %.2f\n  GET /v1/job/{id}       %s  ratio %.2f (target >= 0.9)\n  the same, job changing %s  ratio %.2f (a change every 10 ms)",
			it, benchClients, &health, &accept, accept.rate()/health.rate(), &refused, refused.rate()/health.rate(), &coalesced, coalesced.rate()/health.rate(), &status, status.rate()/health.rate(),
			&changing, changing.rate()/health.rate())
		b.ReportMetric(accept.rate()/health.rate(), "accept/healthz")
		b.ReportMetric(ms(accept.q(0.99)), "accept_p99_ms")
		b.ReportMetric(ms(health.q(0.99)), "healthz_p99_ms")
		b.ReportMetric(status.rate()/health.rate(), "job_get/healthz")
		b.ReportMetric(coalesced.rate()/health.rate(), "joined/healthz")
		b.ReportMetric(refused.rate()/health.rate(), "refused/healthz")
		b.ReportMetric(changing.rate()/health.rate(), "job_get_changing/healthz")
		b.ReportMetric(health.rate(), "healthz_req/s")
	}
}

// checkAccepted checks that every job accepted is recorded PENDING and has
// its plan task queued.
func (e *apiEnv) checkAccepted(b *testing.B, ids map[string]bool) {
	ctx := context.Background()
	insp := asynq.NewInspector(e.conn)
	defer insp.Close()
	n := 0
	for id := range ids {
		if n++; n > 200 { // a sample: reading thousands of tasks would dominate the run
			break
		}
		j, err := e.client.Get(ctx, id)
		if err != nil || j.State != jobs.StatePending {
			b.Fatalf("accepted job %s: %v %v", id, j, err)
		}
		if _, err := insp.GetTaskInfo(jobs.QueueName("default"), "plan:"+id); err != nil {
			b.Fatalf("accepted job %s has no plan task: %v", id, err)
		}
	}
	recorded, err := e.rdb.ZCard(ctx, jobs.RedisKey("jobs")).Result()
	if err != nil || recorded < int64(len(ids)) {
		b.Fatalf("%d jobs recorded, %d accepted (%v)", recorded, len(ids), err)
	}
}

// waitJob follows a job's event stream until it ends and returns it; it
// fails the benchmark unless the job is DONE.
func waitJob(b *testing.B, ctx context.Context, c *jobs.Client, id string) *jobs.Job {
	return followJob(b, ctx, c, id, func(jobs.Event) error { return nil })
}

// followJob is waitJob handing each event to see.
func followJob(b *testing.B, ctx context.Context, c *jobs.Client, id string, see func(jobs.Event) error) *jobs.Job {
	if err := c.Events(ctx, id, "", see); err != nil {
		b.Fatal(err)
	}
	j, err := c.Get(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	if j.State != jobs.StateDone {
		b.Fatalf("job %s: %s %+v", j.ID, j.State, j.Failure)
	}
	return j
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// expectedChunks is the number of chunks the bench chunker makes of
// documents [from, to).
func expectedChunks(from, to int) int64 {
	spec, _ := chunker.Parse([]byte(benchSpec))
	ch, _ := chunker.New(spec)
	var n int64
	var buf []string
	for i := from; i < to; i++ {
		buf = ch.Chunk(corpus.Doc(i, 2048), buf[:0])
		n += int64(len(buf))
	}
	return n
}

// BenchmarkJobFixedCost: the median time from Submit to DONE (followed on
// the job's event stream) of a refresh with nothing to do, and of one
// after 100 documents were appended to a 40k-document chunker view, with a
// worker of concurrency 8 in this process. Targets: no-op <= 20 ms,
// +100 rows <= 60 ms. Each refresh's mode and rows are checked.
func BenchmarkJobFixedCost(b *testing.B) {
	const docs, rounds, add = 40_000, 15, 100
	ctx := context.Background()
	o := newOrchestrator(b, docs)
	view := o.view(b, "chunks")
	t0 := time.Now()
	j, _ := o.run(b, ctx, view)
	full := time.Since(t0)
	if want := expectedChunks(0, docs); j.Progress.RowsWritten != want {
		b.Fatalf("full refresh wrote %d rows, want %d", j.Progress.RowsWritten, want)
	}
	src, err := o.cat.OpenTable(ctx, []string{"corpus"})
	if err != nil {
		b.Fatal(err)
	}
	next := docs
	for it := 0; it < b.N; it++ {
		var noop, incr []time.Duration
		for range rounds {
			t0 := time.Now()
			j, err := o.client.Submit(ctx, view, refresh.Options{})
			if err != nil {
				b.Fatal(err)
			}
			j = waitJob(b, ctx, o.client, j.ID)
			noop = append(noop, time.Since(t0))
			if j.Result.Mode != refresh.ModeNoOp {
				b.Fatalf("refresh with nothing to do ran %s", j.Result.Mode)
			}
		}
		for range rounds {
			if _, _, err := src.Insert(ctx, docsReader(next, next+add), ""); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			j, err := o.client.Submit(ctx, view, refresh.Options{})
			if err != nil {
				b.Fatal(err)
			}
			j = waitJob(b, ctx, o.client, j.ID)
			incr = append(incr, time.Since(t0))
			if want := expectedChunks(next, next+add); j.Result.Mode != refresh.ModeIncremental || j.Result.RowsAdded != want {
				b.Fatalf("refresh after %d appended docs: %s, %d rows added, want incremental, %d", add, j.Result.Mode, j.Result.RowsAdded, want)
			}
			next += add
		}
		b.Logf("run %d: full refresh of %d docs %v; no-op median %.1f ms (target <= 20), +%d docs median %.1f ms (target <= 60), %.4f of the full refresh",
			it, docs, full.Round(time.Millisecond), ms(median(noop)), add, ms(median(incr)), median(incr).Seconds()/full.Seconds())
		b.ReportMetric(ms(median(noop)), "noop_median_ms")
		b.ReportMetric(ms(median(incr)), "add100_median_ms")
		b.ReportMetric(median(incr).Seconds()/full.Seconds(), "add100/full")
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkSmallJobs: 500 chunker views over 20 small tables, one refresh
// each, submitted at once by 8 goroutines, then once more (no-op: nothing
// changed); jobs finished per second next to asynq's own throughput of
// no-op tasks with the same concurrency (8) on the same Redis in the same
// run. Target: jobs/s >= 0.1x tasks/s. Every job is checked DONE with the
// rows of its table (or as a no-op).
func BenchmarkSmallJobs(b *testing.B) {
	const tables, perTable, docsPer = 20, 25, 20
	ctx := context.Background()
	// The catalog keeps its default data file size: with the corpus's
	// (10 rows) each small refresh wrote its ~130 chunks as 13 files.
	// MVQ_BENCH_SMALL_MAX_ROWS=10 measures that setting again.
	maxRows := 0
	if v, err := strconv.Atoi(os.Getenv("MVQ_BENCH_SMALL_MAX_ROWS")); err == nil {
		maxRows = v
	}
	o := newOrchestratorRows(b, 10, true, maxRows)
	want := expectedChunks(0, docsPer)
	var views [][]string
	for t := range tables {
		name := fmt.Sprintf("small%d", t)
		if _, _, err := o.cat.CreateTable(ctx, []string{name}, benchSchema, docsReader(0, docsPer), "", nil); err != nil {
			b.Fatal(err)
		}
		for v := range perTable {
			id := []string{fmt.Sprintf("%s_v%d", name, v)}
			if _, err := o.eng.CreateView(ctx, id, refresh.CreateRequest{Kind: "chunker",
				SourceQuery: "SELECT id, body FROM " + name, UDTFSpec: o.entry}); err != nil {
				b.Fatal(err)
			}
			views = append(views, id)
		}
	}
	r, db := testenv.SharedRedis(b)
	noopConn := asynq.RedisClientOpt{Addr: r.Addr, DB: db}
	if b.N > 1 {
		b.Fatal("run with -benchtime 1x: the views are refreshed once")
	}
	tasks := testenv.AsynqNoopRate(b, noopConn, 3*len(views), 8, jobs.TaskCheckInterval)
	opened := o.db.SessionsOpened()
	// MVQ_BENCH_SMALL_CPUPROFILE=file profiles the first refreshes alone
	// (go test's -cpuprofile would mix in creating the 500 views).
	if path := os.Getenv("MVQ_BENCH_SMALL_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
	}
	first := o.refreshAll(b, ctx, views, want, false)
	if os.Getenv("MVQ_BENCH_SMALL_CPUPROFILE") != "" {
		pprof.StopCPUProfile()
	}
	opened = o.db.SessionsOpened() - opened
	noop := o.refreshAll(b, ctx, views, want, true)
	// Warm: the same worker again after every table got docsPer more
	// documents (what a pipeline refreshing its views over and over
	// sees: DuckDB sessions and pass-through plans are already made).
	for t := range tables {
		src, err := o.cat.OpenTable(ctx, []string{fmt.Sprintf("small%d", t)})
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := src.Insert(ctx, docsReader(docsPer, 2*docsPer), ""); err != nil {
			b.Fatal(err)
		}
	}
	warm := o.refreshAll(b, ctx, views, expectedChunks(docsPer, 2*docsPer), false)
	tasks2 := testenv.AsynqNoopRate(b, noopConn, 3*len(views), 8, jobs.TaskCheckInterval)
	// The baseline is the mean of the runs before and after: on a shared
	// machine the load changes between them.
	base := (tasks + tasks2) / 2
	b.Logf("%d small views, one refresh each, submitted at once: first refresh (one work item, DuckDB and Parquet) %.0f jobs/s; "+
		"no-op refresh %.0f jobs/s; warm refresh after %d more documents per table %.0f jobs/s; asynq no-op tasks %.0f/s and %.0f/s (before, after); "+
		"ratios: first %.3f, no-op %.3f, warm %.3f (target >= 0.1); "+
		"data files of at most %d rows (0: default), %d DuckDB sessions opened by the first refreshes",
		len(views), first, noop, docsPer, warm, tasks, tasks2, first/base, noop/base, warm/base, maxRows, opened)
	b.ReportMetric(warm, "warm_jobs/s")
	b.ReportMetric(warm/base, "warm_jobs/tasks")
	tasks = (tasks + tasks2) / 2
	b.ReportMetric(first, "jobs/s")
	b.ReportMetric(noop, "noop_jobs/s")
	b.ReportMetric(tasks, "asynq_tasks/s")
	b.ReportMetric(first/tasks, "jobs/tasks")
	b.ReportMetric(noop/tasks, "noop_jobs/tasks")
}

// refreshAll submits one refresh of every view at once and waits (on the
// channel terminal transitions publish) until all are DONE; it returns
// jobs/s. Every job must be DONE with want rows (noop: a no-op).
func (o *orchestrator) refreshAll(b *testing.B, ctx context.Context, views [][]string, want int64, noop bool) float64 {
	sub := o.rdb.Subscribe(ctx, "mvq:jobs:stopped")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		b.Fatal(err)
	}
	ch := sub.Channel(redis.WithChannelSize(4096))
	ids := make([]string, len(views))
	var next atomic.Int64
	errc := make(chan error, 8)
	start := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(views) {
					return
				}
				j, err := o.client.Submit(ctx, views[i], refresh.Options{})
				if err != nil {
					errc <- err
					return
				}
				ids[i] = j.ID
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	mine := map[string]bool{}
	for _, id := range ids {
		mine[id] = true
	}
	deadline := time.After(5 * time.Minute)
	for left := len(mine); left > 0; {
		select {
		case m := <-ch:
			if mine[m.Payload] {
				left--
			}
		case <-deadline:
			b.Fatalf("%d jobs unfinished after 5 minutes", left)
		}
	}
	elapsed := time.Since(start)
	for i, id := range ids {
		j, err := o.client.Get(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		if j.State != jobs.StateDone {
			b.Fatalf("job %s of %v: %s %+v", id, views[i], j.State, j.Failure)
		}
		if noop && j.Result.Mode != refresh.ModeNoOp || !noop && j.Result.RowsAdded != want {
			b.Fatalf("job %s of %v: %s, %d rows added (want %d)", id, views[i], j.Result.Mode, j.Result.RowsAdded, want)
		}
	}
	return float64(len(views)) / elapsed.Seconds()
}
