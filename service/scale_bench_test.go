package service_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
)

// scaleWorkers is MVQ_SCALE_WORKERS ("1,2,4" unless set): the numbers of
// worker processes BenchmarkScaleWorkers runs.
func scaleWorkers(b *testing.B) []int {
	s := os.Getenv("MVQ_SCALE_WORKERS")
	if s == "" {
		s = "1,2,4"
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("MVQ_SCALE_WORKERS=%q: want positive integers separated by commas", s)
		}
		out = append(out, n)
	}
	return out
}

// startWorkers starts n worker processes (this test binary re-executed,
// see TestMain), each with one task slot and GOMAXPROCS=1, on o's Redis
// and warehouse, and waits until they have registered. The returned func
// stops them.
func (o *orchestrator) startWorkers(b *testing.B, n int) func() {
	var cmds []*exec.Cmd
	stop := func() {
		for _, c := range cmds {
			c.Process.Signal(syscall.SIGTERM)
		}
		for _, c := range cmds {
			c.Wait()
		}
	}
	for i := range n {
		ready := filepath.Join(b.TempDir(), fmt.Sprintf("ready%d", i))
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "MVQ_TEST_WORKER=1", "MVQ_READY_FILE="+ready, "MVQ_REDIS_URL="+o.redisURL,
			"MVQ_WAREHOUSE=file://"+o.dir, "MVQ_LOG_LEVEL=warn", "MVQ_AUTH=none", "MVQ_METRICS_LISTEN=127.0.0.1:0",
			"MVQ_WORKER_CONCURRENCY=1", "GOMAXPROCS=1")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			stop()
			b.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		now := strconv.FormatInt(time.Now().UnixMilli(), 10)
		live, err := o.rdb.ZCount(ctx, jobs.RedisKey("cluster:default:workers"), "("+now, "+inf").Result()
		if err == nil && live == int64(n) {
			return stop
		}
		if time.Now().After(deadline) {
			stop()
			b.Fatalf("%d of %d worker processes registered in 2 minutes", live, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkScaleWorkers: one full refresh of a chunker view over
// MVQ_SCALE_DOCS documents (default 20k) with 1, 2, 4 ... worker processes
// (MVQ_SCALE_WORKERS), each one task slot on one core (GOMAXPROCS=1),
// request concurrency twice the processes. It reports source rows/s per
// count, the speedup over the first count and each refresh's phases (from
// its events); with one process, the speedup at 16 its serial part allows
// (Amdahl). Every refresh must write
// exactly the chunks an in-process chunker makes. `make bench-scale` runs
// 1, 2, 4, 8, 16 processes over 400k documents (a 16-core machine, target
// >= 12x from 1 to 16).
func BenchmarkScaleWorkers(b *testing.B) {
	docs := 20_000
	if n, err := strconv.Atoi(os.Getenv("MVQ_SCALE_DOCS")); err == nil && n > 0 {
		docs = n
	}
	counts := scaleWorkers(b)
	ctx := context.Background()
	o := newOrchestratorWith(b, docs, false)
	want := expectedChunks(0, docs)
	for it := 0; it < b.N; it++ {
		var base float64
		for _, n := range counts {
			stop := o.startWorkers(b, n)
			view := o.view(b, fmt.Sprintf("scale%d_%d", it, n))
			t0 := time.Now()
			j, err := o.client.Submit(ctx, view, refresh.Options{Concurrency: 2 * n})
			if err != nil {
				stop()
				b.Fatal(err)
			}
			var ph jobPhases
			j = followJob(b, ctx, o.client, j.ID, ph.see)
			d := time.Since(t0)
			stop()
			// Nothing left for the next count's janitor pass (it runs as
			// a worker starts) to compact while that count's refresh runs.
			if err := o.cat.DropTable(ctx, view); err != nil {
				b.Fatal(err)
			}
			if j.Progress.RowsWritten != want {
				b.Fatalf("%d workers: refresh wrote %d rows, want %d", n, j.Progress.RowsWritten, want)
			}
			rate := float64(docs) / d.Seconds()
			if base == 0 {
				base = rate / float64(n)
			}
			b.Logf("%2d worker processes: %d docs in %v, %.0f src rows/s, %.2fx the first count per process, %d items, peak %d running; %s",
				n, docs, d.Round(time.Millisecond), rate, rate/base, j.Progress.WorkItemsTotal, j.Progress.MaxRunning, &ph)
			if n == 1 {
				// Amdahl from one process: what does not spread over
				// workers (submit to the first expanding, committing)
				// stays, expanding divides.
				serial := d - ph.expanding()
				bound := d.Seconds() / (serial.Seconds() + ph.expanding().Seconds()/16)
				b.Logf("   its serial part is %v of %v: 16 processes could reach at most %.1fx", serial.Round(time.Millisecond), d.Round(time.Millisecond), bound)
				b.ReportMetric(bound, "amdahl_bound_16w")
			}
			b.ReportMetric(rate, fmt.Sprintf("src_rows/s_%dw", n))
			b.ReportMetric(rate/base, fmt.Sprintf("speedup_%dw", n))
		}
	}
}

// jobPhases records when a job entered each phase, from its event stream
// (the times the worker wrote them).
type jobPhases struct {
	created, expand, commit, end time.Time
}

func (p *jobPhases) see(e jobs.Event) error {
	if p.created.IsZero() {
		p.created = e.Time
	}
	switch {
	case e.Phase == jobs.PhaseExpanding && p.expand.IsZero():
		p.expand = e.Time
	case e.Phase == jobs.PhaseCommitting && p.commit.IsZero():
		p.commit = e.Time
	}
	if e.Terminal() {
		p.end = e.Time
	}
	return nil
}

// expanding is the time from the first expanding event to committing.
func (p *jobPhases) expanding() time.Duration {
	if p.expand.IsZero() || p.commit.IsZero() {
		return 0
	}
	return p.commit.Sub(p.expand)
}

func (p *jobPhases) String() string {
	span := func(a, b time.Time) string {
		if a.IsZero() || b.IsZero() {
			return "?"
		}
		return b.Sub(a).Round(time.Millisecond).String()
	}
	return fmt.Sprintf("submit to expanding %s, expanding %s, committing %s",
		span(p.created, p.expand), span(p.expand, p.commit), span(p.commit, p.end))
}
