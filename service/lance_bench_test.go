package service_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
)

// envInt is the positive integer in the environment variable name, else def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// BenchmarkVersionCreateLanceDB: LanceDB 0.31 appends MVQ_BENCH_ADDS (200)
// batches of 10 rows through mvq's REST namespace (managed versioning:
// each add is one version/create on file://), then the API's own request
// histogram (mvq_http_request_duration_seconds, route version/create) gives
// p50/p90/p99, interpolated within its buckets as Prometheus'
// histogram_quantile does. The whole add as LanceDB sees it (writing the
// data file, the version/create round trip, reloading) is reported next to
// it. Target: p50 <= 5 ms. MVQ_BENCH_API_CPUPROFILE=PATH writes the API
// process's CPU profile.
func BenchmarkVersionCreateLanceDB(b *testing.B) {
	o := oracle.Need(b)
	adds := envInt("MVQ_BENCH_ADDS", 200)
	for it := 0; it < b.N; it++ {
		var apiEnv []string
		if p := os.Getenv("MVQ_BENCH_API_CPUPROFILE"); p != "" {
			apiEnv = append(apiEnv, "MVQ_TEST_CPUPROFILE="+p)
		}
		e := startAPI(b, 0, "default", apiEnv...)
		if got := e.lancedb(o, "create", "docs", "t", "0", "100"); got["count"] != 100.0 {
			b.Fatalf("LanceDB created a table of %v rows", got["count"])
		}
		out, err := o.RunScript("race.mjs", "appends", e.api, "", "docs", "t", "1000", strconv.Itoa(adds), "10")
		if err != nil {
			b.Fatal(err)
		}
		var r struct {
			Acked  [][2]int  `json:"acked"`
			Failed []any     `json:"failed"`
			MS     []float64 `json:"ms"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			b.Fatalf("%q: %v", out, err)
		}
		if len(r.Failed) > 0 || len(r.Acked) != adds {
			b.Fatalf("LanceDB acknowledged %d of %d adds: %v", len(r.Acked), adds, r.Failed)
		}
		bounds, counts := routeHistogram(b, e.api+"/metrics", "/v1/table/:id/version/create")
		total := counts[len(counts)-1]
		if total < float64(adds) {
			b.Fatalf("histogram holds %v version/create requests, LanceDB made %d adds", total, adds)
		}
		p50, p90, p99 := quantile(bounds, counts, 0.5), quantile(bounds, counts, 0.9), quantile(bounds, counts, 0.99)
		c50, c90, c99 := percentile(r.MS, 0.5), percentile(r.MS, 0.9), percentile(r.MS, 0.99)
		b.Logf("version/create over %v requests (mvq's histogram): p50 %.2f ms, p90 %.2f ms, p99 %.2f ms (target p50 <= 5 ms: %.2fx of it)",
			total, p50, p90, p99, p50/5)
		b.Logf("LanceDB add of 10 rows as the client sees it: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms", c50, c90, c99)
		b.ReportMetric(p50, "version_create_p50_ms")
		b.ReportMetric(p90, "version_create_p90_ms")
		b.ReportMetric(p99, "version_create_p99_ms")
		b.ReportMetric(p50/5, "p50/target")
		b.ReportMetric(c50, "lancedb_add_p50_ms")
	}
}

// routeHistogram scrapes mvq_http_request_duration_seconds of route from a
// /metrics page: the bucket upper bounds in ms (the last +Inf) and their
// cumulative counts, summed over the route's series.
func routeHistogram(b *testing.B, url, route string) ([]float64, []float64) {
	e := &env{api: strings.TrimSuffix(url, "/metrics")}
	st, body, err := e.getRaw("/metrics")
	if err != nil || st != 200 {
		b.Fatalf("GET %s: %d %v", url, st, err)
	}
	byLE := map[float64]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "mvq_http_request_duration_seconds_bucket{") || !strings.Contains(l, `route="`+route+`"`) {
			continue
		}
		i := strings.Index(l, `le="`)
		j := strings.Index(l[i+4:], `"`)
		le := math.Inf(1)
		if s := l[i+4 : i+4+j]; s != "+Inf" {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				b.Fatalf("bucket %q: %v", l, err)
			}
			le = f * 1000
		}
		f := strings.Fields(l)
		n, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			b.Fatalf("bucket %q: %v", l, err)
		}
		byLE[le] += n
	}
	if len(byLE) == 0 {
		b.Fatalf("no mvq_http_request_duration_seconds buckets for route %s", route)
	}
	var bounds []float64
	for le := range byLE {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	counts := make([]float64, len(bounds))
	for i, le := range bounds {
		counts[i] = byLE[le]
	}
	return bounds, counts
}

// quantile interpolates the q-quantile within cumulative buckets (upper
// bounds bounds, the last +Inf), as histogram_quantile does: linearly
// within the bucket it falls in, the first bucket starting at 0; in the
// +Inf bucket it answers the largest finite bound.
func quantile(bounds, counts []float64, q float64) float64 {
	total := counts[len(counts)-1]
	rank := q * total
	lo, prev := 0.0, 0.0
	for i, le := range bounds {
		if counts[i] >= rank {
			if math.IsInf(le, 1) {
				return lo
			}
			if counts[i] == prev {
				return le
			}
			return lo + (le-lo)*(rank-prev)/(counts[i]-prev)
		}
		lo, prev = le, counts[i]
	}
	return lo
}

// percentile is the q-percentile of xs (nearest rank).
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	slices.Sort(s)
	k := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(k, 0)]
}

// startWorker starts one worker process (this test binary re-executed,
// see TestMain) on o's Redis and warehouse with the extra environment
// (later entries win) and waits until it has registered. The returned
// func stops it.
func (o *orchestrator) startWorker(b *testing.B, extra ...string) (*exec.Cmd, func()) {
	ready := filepath.Join(b.TempDir(), "ready")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), "MVQ_TEST_WORKER=1", "MVQ_READY_FILE="+ready, "MVQ_REDIS_URL="+o.redisURL,
		"MVQ_WAREHOUSE=file://"+o.dir, "MVQ_LOG_LEVEL=warn", "MVQ_AUTH=none", "MVQ_METRICS_LISTEN=127.0.0.1:0"), extra...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		now := strconv.FormatInt(time.Now().UnixMilli(), 10)
		live, err := o.rdb.ZCount(ctx, jobs.RedisKey("cluster:default:workers"), "("+now, "+inf").Result()
		if err == nil && live >= 1 {
			return cmd, stop
		}
		if time.Now().After(deadline) {
			stop()
			b.Fatal("the worker process did not register in 2 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procKB reads a "Name:   N kB" line of /proc/PID/status.
func procKB(b *testing.B, pid int, name string) int64 {
	n, ok := procKBOK(pid, name)
	if !ok {
		b.Fatalf("/proc/%d/status: no %s", pid, name)
	}
	return n
}

func procKBOK(pid int, name string) (int64, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(l, name+":"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// BenchmarkWorkerPeakRSS: the peak resident memory (VmHWM) of a real
// worker process (default concurrency, every core) over one full chunker
// refresh of MVQ_BENCH_RSS_DOCS (40k) ~2 KB documents from a Lance source
// into a Lance view, then of 4x the documents in a fresh worker. Targets:
// <= 300 MB at 40k, and 4x the documents <= +20% (ratio <= 1.2). The
// refresh must write exactly the chunks an in-process chunker makes.
// MVQ_BENCH_HEAPPROFILE=PATH has each worker print its Go runtime's
// memory on exit and write its allocation profile to PATH.DOCS.
func BenchmarkWorkerPeakRSS(b *testing.B) {
	docs := envInt("MVQ_BENCH_RSS_DOCS", 40_000)
	ctx := context.Background()
	for it := 0; it < b.N; it++ {
		var peaks, anonPeaks [2]int64
		for k, n := range []int{docs, 4 * docs} {
			o := newOrchestratorWith(b, n, false)
			var extra []string
			if p := os.Getenv("MVQ_BENCH_HEAPPROFILE"); p != "" {
				extra = append(extra, fmt.Sprintf("MVQ_TEST_HEAPPROFILE=%s.%d", p, n))
			}
			cmd, stop := o.startWorker(b, extra...)
			idle := procKB(b, cmd.Process.Pid, "VmHWM")
			view := o.view(b, fmt.Sprintf("rss%d_%d", it, k))
			t0 := time.Now()
			j, err := o.client.Submit(ctx, view, refresh.Options{})
			if err != nil {
				stop()
				b.Fatal(err)
			}
			// Anonymous memory (heaps: Go's and DuckDB's) has no high-water
			// mark of its own: sample it while the job runs.
			sampled := make(chan int64)
			done := make(chan struct{})
			go func() {
				var top int64
				for {
					if n, ok := procKBOK(cmd.Process.Pid, "RssAnon"); ok {
						top = max(top, n)
					}
					select {
					case <-done:
						sampled <- top
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
			}()
			j = followJob(b, ctx, o.client, j.ID, func(jobs.Event) error { return nil })
			d := time.Since(t0)
			close(done)
			anonPeaks[k] = <-sampled
			peaks[k] = procKB(b, cmd.Process.Pid, "VmHWM")
			anon, file := procKB(b, cmd.Process.Pid, "RssAnon"), procKB(b, cmd.Process.Pid, "RssFile")
			stop()
			if want := expectedChunks(0, n); j.Progress.RowsWritten != want {
				b.Fatalf("%d docs: refresh wrote %d rows, want %d", n, j.Progress.RowsWritten, want)
			}
			b.Logf("%d docs: worker peak RSS %.0f MB, of it anonymous at most %.0f MB (sampled every 5 ms); %.0f MB before the refresh; after it %.0f MB anonymous, %.0f MB file-backed (the binary's pages); refresh %v, %d items",
				n, float64(peaks[k])/1024, float64(anonPeaks[k])/1024, float64(idle)/1024, float64(anon)/1024, float64(file)/1024, d.Round(time.Millisecond), j.Progress.WorkItemsTotal)
		}
		ratio := float64(peaks[1]) / float64(peaks[0])
		b.Logf("peak RSS %d docs %.0f MB (target <= 300), %d docs %.0f MB: ratio %.2f (target <= 1.20)",
			docs, float64(peaks[0])/1024, 4*docs, float64(peaks[1])/1024, ratio)
		b.ReportMetric(float64(peaks[0])/1024, "peak_rss_MB")
		b.ReportMetric(float64(peaks[1])/1024, "peak_rss_4x_MB")
		b.ReportMetric(ratio, "rss_4x/1x")
		b.Logf("peak anonymous memory %.0f MB and %.0f MB: ratio %.2f", float64(anonPeaks[0])/1024, float64(anonPeaks[1])/1024, float64(anonPeaks[1])/float64(anonPeaks[0]))
		b.ReportMetric(float64(anonPeaks[0])/1024, "peak_anon_MB")
		b.ReportMetric(float64(anonPeaks[1])/float64(anonPeaks[0]), "anon_4x/1x")
	}
}

// BenchmarkIncrementalAfterLanceDBAppend: LanceDB fills a table of
// MVQ_BENCH_ROWS (1M) rows through mvq's REST namespace (batches of 100k,
// each a version/create), mvq creates a query view over it (its first,
// full refresh is timed from the create request to the job's DONE), then
// LanceDB appends 1% of the rows in one add and a refresh of the view is
// timed the same way: it must be incremental, read only the new rows and
// take <= 5% of the full refresh. One worker process, default settings.
func BenchmarkIncrementalAfterLanceDBAppend(b *testing.B) {
	o := oracle.Need(b)
	n := envInt("MVQ_BENCH_ROWS", 1_000_000)
	add := max(n/100, 1)
	for it := 0; it < b.N; it++ {
		e := startAPI(b, 1, "default")
		out, err := o.RunScript("race.mjs", "fill", e.api, "", "docs", "big", "0", strconv.Itoa(n), "100000")
		if err != nil {
			b.Fatal(err)
		}
		var filled struct{ Count int }
		if err := json.Unmarshal([]byte(out), &filled); err != nil || filled.Count != n {
			b.Fatalf("LanceDB filled the table: %q %v", out, err)
		}
		timed := func(path string, body any, want int) (map[string]any, time.Duration) {
			t0 := time.Now()
			var r map[string]any
			if st := e.post(path, body, &r); st != want {
				b.Fatalf("%s: %d %v", path, st, r)
			}
			j := e.mustDone(r["job_id"].(string))
			return j, time.Since(t0)
		}
		j, full := timed("/v1/materialized_view/docs$en/create", map[string]any{
			"kind": "query", "source_query": `SELECT id, lang, body FROM "docs$big" WHERE lang = 'en'`, "output_schema": "",
		}, 201)
		if r := j["result"].(map[string]any); r["mode"] != refresh.ModeFull || fmt.Sprint(r["rows_added"]) != strconv.Itoa(n*4/5) {
			b.Fatalf("the view's first refresh: %v", r)
		}
		out, err = o.RunScript("race.mjs", "appends", e.api, "", "docs", "big", strconv.Itoa(n), "1", strconv.Itoa(add))
		if err != nil {
			b.Fatal(err)
		}
		var appended raceAppends
		if err := json.Unmarshal([]byte(out), &appended); err != nil || len(appended.Acked) != 1 {
			b.Fatalf("LanceDB's 1%% append: %q %v", out, err)
		}
		j, inc := timed("/v1/materialized_view/docs$en/refresh", map[string]any{}, 202)
		r := j["result"].(map[string]any)
		if r["mode"] != refresh.ModeIncremental || fmt.Sprint(r["rows_added"]) != strconv.Itoa(add*4/5) {
			b.Fatalf("refresh after LanceDB's append: %v", r)
		}
		ratio := inc.Seconds() / full.Seconds()
		b.Logf("%d rows: full refresh %v, incremental after LanceDB appended %d rows %v: incremental/full %.4f (target <= 0.05)",
			n, full.Round(time.Millisecond), add, inc.Round(time.Millisecond), ratio)
		b.ReportMetric(full.Seconds(), "full_s")
		b.ReportMetric(inc.Seconds(), "incremental_s")
		b.ReportMetric(ratio, "incremental/full")
	}
}
