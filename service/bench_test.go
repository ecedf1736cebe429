package service_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/chunker"
	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/internal/corpus"
	"github.com/mvq-dev/mvq/internal/testenv"
	"github.com/mvq-dev/mvq/jobs"
	lfile "github.com/mvq-dev/mvq/lance/file"
	lschema "github.com/mvq-dev/mvq/lance/schema"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/service"
	"github.com/mvq-dev/mvq/table"
)

const benchSpec = `{"chunker":"recursive","input_column":"body","output_column":"chunk","chunk_size":512,"chunk_overlap":64}`

var benchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "body", Type: arrow.BinaryTypes.String},
}, nil)

// benchDocs is 100k unless MVQ_BENCH_DOCS says otherwise.
func benchDocs() int {
	if n, err := strconv.Atoi(os.Getenv("MVQ_BENCH_DOCS")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

func docsReader(from, to int) array.RecordReader {
	rb := array.NewRecordBuilder(memory.DefaultAllocator, benchSchema)
	defer rb.Release()
	for i := from; i < to; i++ {
		rb.Field(0).(*array.Int64Builder).Append(int64(i))
		rb.Field(1).(*array.StringBuilder).Append(corpus.Doc(i, 2048))
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	rdr, _ := array.NewRecordReader(benchSchema, []arrow.RecordBatch{rec})
	return rdr
}

// plainLoop is what a script using every core would do: read the
// source's Lance data file with mvq's Lance file reader in batches of 16k
// rows, chunk every body on GOMAXPROCS goroutines (one chunker each) and,
// when write is set, write each goroutine's chunks to its own Lance 2.1
// file in dir with the writer the view uses. It reads the same file the
// refresh reads (the table's one fragment), so both pay the same
// decoding; it has no plan, no job, no commit and no Redis.
func plainLoop(b *testing.B, path, dir string, write bool) int64 {
	spec, _ := chunker.Parse([]byte(benchSpec))
	outSchema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "chunk_index", Type: arrow.PrimitiveTypes.Int32}, {Name: "chunk", Type: arrow.BinaryTypes.String},
	}, nil)
	fields, err := lschema.FromArrow(outSchema)
	if err != nil {
		b.Fatal(err)
	}
	const batch = 1 << 14
	var next atomic.Uint64
	var total atomic.Int64
	workers := runtime.GOMAXPROCS(0)
	errc := make(chan error, workers)
	for w := range workers {
		go func() {
			errc <- func() error {
				ch, _ := chunker.New(spec)
				f, err := os.Open(path)
				if err != nil {
					return err
				}
				defer f.Close()
				st, err := f.Stat()
				if err != nil {
					return err
				}
				r, err := lfile.Open(f, st.Size())
				if err != nil {
					return err
				}
				var lw *lfile.Writer
				var out *os.File
				if write {
					if out, err = os.Create(filepath.Join(dir, fmt.Sprintf("plain%d.lance", w))); err != nil {
						return err
					}
					defer out.Close()
					if lw, err = lfile.NewWriter(out, fields, lfile.WriterOptions{}); err != nil {
						return err
					}
				}
				var buf []string
				for {
					lo := next.Add(batch) - batch
					if lo >= r.NumRows() {
						break
					}
					rec, err := r.Read(context.Background(), nil, lo, min(lo+batch, r.NumRows()))
					if err != nil {
						return err
					}
					ids := rec.Column(0).(*array.Int64)
					body := rec.Column(1).(*array.String)
					ob := array.NewRecordBuilder(memory.DefaultAllocator, outSchema)
					for i := 0; i < body.Len(); i++ {
						buf = ch.Chunk(body.Value(i), buf[:0])
						total.Add(int64(len(buf)))
						if write {
							for k, c := range buf {
								ob.Field(0).(*array.Int64Builder).Append(ids.Value(i))
								ob.Field(1).(*array.Int32Builder).Append(int32(k))
								ob.Field(2).(*array.StringBuilder).Append(c)
							}
						}
					}
					rec.Release()
					if write {
						or := ob.NewRecordBatch()
						err = lw.Write(or)
						or.Release()
					}
					ob.Release()
					if err != nil {
						return err
					}
				}
				if write {
					if _, err := lw.Close(); err != nil {
						return err
					}
				}
				return nil
			}()
		}()
	}
	for range workers {
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
	return total.Load()
}

// orchestrator is a source table of n documents, the view engine and a
// worker pool (concurrency 8, in this process) behind a job client.
type orchestrator struct {
	cat      *table.Catalog
	eng      *refresh.Engine
	client   *jobs.Client
	rdb      *redis.Client
	redisURL string
	conn     asynq.RedisClientOpt
	srcFile  string
	dir      string
	entry    *refresh.UDTFEntry
	db       *duck.DB
}

func newOrchestrator(b *testing.B, n int) *orchestrator { return newOrchestratorWith(b, n, true) }

// newOrchestratorWith is newOrchestrator; worker false starts no worker
// in this process (the caller starts worker processes).
func newOrchestratorWith(b *testing.B, n int, worker bool) *orchestrator {
	return newOrchestratorRows(b, n, worker, n)
}

// newOrchestratorRows is newOrchestratorWith whose catalog writes data
// files of at most maxRows rows (0: the catalog's default).
func newOrchestratorRows(b *testing.B, n int, worker bool, maxRows int) *orchestrator {
	service.TuneGC() // as a worker process runs
	ctx := context.Background()
	dir := b.TempDir()
	wh, err := table.OpenWarehouse(ctx, "file://"+dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { wh.Close() })
	db, err := duck.Open(duck.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	cat := table.NewCatalog(wh, db, table.Options{MaxRowsPerFragment: maxRows, Indexes: index.Maintenance()}) // n: one source file for the plain loop
	_, m, err := cat.CreateTable(ctx, []string{"corpus"}, benchSchema, docsReader(0, n), "", nil)
	if err != nil {
		b.Fatal(err)
	}
	r, rdbNum := testenv.SharedRedis(b)
	conn := asynq.RedisClientOpt{Addr: r.Addr, DB: rdbNum}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, DB: rdbNum})
	b.Cleanup(func() { rdb.Close() })
	eng := refresh.NewEngine(cat)
	if worker {
		srv, err := jobs.NewServer(jobs.ServerConfig{Redis: conn, RDB: rdb, Engine: eng, Concurrency: 8, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(srv.Shutdown)
	}
	client := jobs.NewClient(rdb, conn, eng)
	b.Cleanup(func() { client.Close() })
	sum := sha256.Sum256([]byte(benchSpec))
	return &orchestrator{cat: cat, eng: eng, client: client, rdb: rdb, redisURL: r.URL(rdbNum), conn: conn, dir: dir, db: db,
		srcFile: filepath.Join(dir, "corpus.lance", filepath.FromSlash(m.Fragments[0].Path)),
		entry:   &refresh.UDTFEntry{Kind: "chunker", UDTF: base64.StdEncoding.EncodeToString([]byte(benchSpec)), UDTFSha: hex.EncodeToString(sum[:]), UDTFName: "recursive", UDTFVersion: "1"}}
}

// view creates a chunker view over the corpus.
func (o *orchestrator) view(b *testing.B, name string) []string {
	id := []string{name}
	if _, err := o.eng.CreateView(context.Background(), id, refresh.CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM corpus`, UDTFSpec: o.entry}); err != nil {
		b.Fatal(err)
	}
	return id
}

// run refreshes view through the orchestrator and waits for DONE.
func (o *orchestrator) run(b *testing.B, ctx context.Context, view []string) (*jobs.Job, time.Duration) {
	t0 := time.Now()
	j, err := o.client.Submit(ctx, view, refresh.Options{Concurrency: 8})
	if err != nil {
		b.Fatal(err)
	}
	// The job's event stream ends with its terminal event, which a user
	// streaming the job sees as it happens (a poll would add up to its
	// interval to every measurement).
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := o.client.Events(wctx, j.ID, "", func(e jobs.Event) error {
		if os.Getenv("MVQ_BENCH_TIMELINE") != "" {
			b.Logf("+%v %s %s %s %s rows=%d", time.Since(t0).Round(time.Millisecond), e.Type, e.State, e.Phase, e.Message, e.Progress.RowsWritten)
		}
		return nil
	}); err != nil {
		b.Fatalf("job %s events: %v", j.ID, err)
	}
	d := time.Since(t0)
	if j, err = o.client.Get(ctx, j.ID); err != nil {
		b.Fatal(err)
	}
	if j.State != jobs.StateDone {
		b.Fatalf("job %s: %s %+v", j.ID, j.State, j.Failure)
	}
	return j, d
}

// quiesce leaves the phase that comes next only its own work, as the
// testing package does before each benchmark: the garbage of the phase
// before is collected and swept (else the next phase's allocations sweep
// it: the plain loop leaves twice the refresh's), and the files it wrote
// are on disk (else the kernel writes them back while the next phase
// runs, on the same cores).
func quiesce() {
	runtime.GC()
	syncDisks()
}

// gcCPU is the runtime's estimate of the CPU seconds its collector has
// used so far (marking, assists, pauses).
func gcCPU() float64 {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return s[0].Value.Float64()
}

// writeAllocs writes the allocation profile so far to path: the profile
// after a phase, with the one before it as pprof's -diff_base, is what the
// phase allocated.
func writeAllocs(b *testing.B, path string) {
	runtime.GC() // the profile is as of the last GC
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// cpuProfile writes a CPU profile of what runs until the returned stop to
// path (nothing when path is "").
func cpuProfile(b *testing.B, path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err) // -cpuprofile is set too
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRefreshOrchestrated: a full refresh of a chunker view over
// ~2 KB documents through the whole orchestrator (Redis, asynq, job
// records, a worker pool of concurrency 8 in this process), next to the
// same chunker in an all-core plain loop over the same Lance data file
// (with and without writing its output as Lance files; see plainLoop: a
// script over the file API, which compresses its chunks with FSST where
// the refresh cuts their codes from the source's, lance/file CodeCutter),
// and an incremental refresh after a 1% append. Ratios are
// orchestrated/plain throughput and incremental/full time;
// cpu_ratio_vs_plain+write is the same ratio in CPU seconds of this
// process (user and system), which other load on the machine moves less
// than wall time. Both run once untimed first, and each timed phase
// starts after the garbage and the written files of the one before are
// dealt with (quiesce); -v logs each iteration's times (this machine's
// neighbours move single ones by up to 2x).
// MVQ_BENCH_REFRESH_CPUPROFILE=PATH writes a CPU profile of each full
// refresh alone to PATH.N and one of each plain loop with writes to
// PATH.plain.N (pprof merges the profiles it is given, so the phases
// compare over the same minutes of this noisy machine);
// MVQ_BENCH_REFRESH_MEMPROFILE=PATH the allocation profiles
// before (PATH.before, pprof's -diff_base) and after the last full
// refresh. The log names each phase's page faults and the collector's CPU
// seconds; MVQ_BENCH_TIMELINE=1 logs every job event with its time, and
// MVQ_BENCH_ONLY=plain or refresh runs that phase alone b.N times (for a
// whole-process profiler such as perf, one run per phase).
func BenchmarkRefreshOrchestrated(b *testing.B) {
	// With MVQ_BENCH_ONLY, each iteration's phase has a profile of its
	// own (PATH.only.N); pprof merges them when given them all.
	onlyProf := func(i int) string {
		if p := os.Getenv("MVQ_BENCH_REFRESH_CPUPROFILE"); p != "" {
			return fmt.Sprintf("%s.only.%d", p, i)
		}
		return ""
	}
	ctx := context.Background()
	n := benchDocs()
	o := newOrchestrator(b, n)
	cat, srcFile, dir := o.cat, o.srcFile, o.dir
	var full, incr, plain, plainW time.Duration
	var fullCPU, plainWCPU float64
	var plainRows int64
	// One untimed round of each first, as a worker that has run a
	// refresh before (and a script run twice) is: the first refresh of a
	// process pays one-time costs (DuckDB's answer on whether the query
	// may skip it, the first session, cold caches).
	plainLoop(b, srcFile, dir, true)
	warm := o.view(b, "warmup")
	o.run(b, ctx, warm)
	o.db.Settle()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		prof, plainProf := "", ""
		if p := os.Getenv("MVQ_BENCH_REFRESH_CPUPROFILE"); p != "" {
			prof, plainProf = fmt.Sprintf("%s.%d", p, i), fmt.Sprintf("%s.plain.%d", p, i)
		}
		if only := os.Getenv("MVQ_BENCH_ONLY"); only != "" {
			// A profiling aid: one phase alone, n times.
			quiesce()
			t0, c0, s0 := time.Now(), cpuSeconds(), sysSeconds()
			var stop func()
			if only == "plain" {
				stop = cpuProfile(b, onlyProf(i))
				plainLoop(b, srcFile, dir, true)
			} else {
				view := o.view(b, fmt.Sprintf("only%d", i))
				o.db.Settle()
				quiesce()
				t0, c0, s0 = time.Now(), cpuSeconds(), sysSeconds()
				stop = cpuProfile(b, onlyProf(i))
				o.run(b, ctx, view)
			}
			stop()
			b.Logf("iteration %d: %s %v (%.2f CPU-s, %.2f of it system)", i, only, time.Since(t0).Round(time.Millisecond), cpuSeconds()-c0, sysSeconds()-s0)
			continue
		}
		quiesce()
		t0 := time.Now()
		plainRows = plainLoop(b, srcFile, dir, false)
		plain += time.Since(t0)
		quiesce()
		g0 := gcCPU()
		t0, c0, f0, s0 := time.Now(), cpuSeconds(), minorFaults(), sysSeconds()
		stop := cpuProfile(b, plainProf)
		var ms0, ms1, ms2 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		plainLoop(b, srcFile, dir, true)
		runtime.ReadMemStats(&ms1)
		stop()
		pw, pwCPU, pwFaults, pwSys := time.Since(t0), cpuSeconds()-c0, minorFaults()-f0, sysSeconds()-s0
		pwGC := gcCPU() - g0
		plainW += pw
		plainWCPU += pwCPU

		view := o.view(b, fmt.Sprintf("chunks%d", i))
		// Creating the view ran DuckDB, which opens a fresh session in
		// the background; a worker process does not create views.
		o.db.Settle()
		// The allocation profiles' collections stay outside the counts.
		memProf := os.Getenv("MVQ_BENCH_REFRESH_MEMPROFILE")
		if memProf != "" && i == b.N-1 {
			writeAllocs(b, memProf+".before")
		}
		quiesce()
		c0, f0, g0, s0 = cpuSeconds(), minorFaults(), gcCPU(), sysSeconds()
		stop = cpuProfile(b, prof)
		pre0 := lfile.PrecodedPages()
		j, d := o.run(b, ctx, view)
		pre := lfile.PrecodedPages() - pre0
		stop()
		runtime.ReadMemStats(&ms2)
		fCPU, fFaults, fGC, fSys := cpuSeconds()-c0, minorFaults()-f0, gcCPU()-g0, sysSeconds()-s0
		if memProf != "" && i == b.N-1 {
			writeAllocs(b, memProf)
		}
		fullCPU += fCPU
		full += d
		// Cores used (CPU seconds over wall time) shows a refresh that
		// waits (on the disk, on Redis) apart from one that computes more.
		b.Logf("iteration %d: plain+write %v (%.2f CPU-s, %.2f of it system, %.1f cores, %d GCs, %d MB allocated, %d page faults, %.3f GC CPU-s), refresh %v (%.2f CPU-s, %.2f of it system, %.1f cores, %d GCs, %d MB, %d faults, %.3f GC CPU-s, %d chunk pages written from the source's FSST codes): ratio %.2f, CPU ratio %.2f", i,
			pw.Round(time.Millisecond), pwCPU, pwSys, pwCPU/pw.Seconds(), ms1.NumGC-ms0.NumGC, (ms1.TotalAlloc-ms0.TotalAlloc)>>20, pwFaults, pwGC,
			d.Round(time.Millisecond), fCPU, fSys, fCPU/d.Seconds(), ms2.NumGC-ms1.NumGC, (ms2.TotalAlloc-ms1.TotalAlloc)>>20, fFaults, fGC, pre, pw.Seconds()/d.Seconds(), pwCPU/fCPU)
		if j.Progress.RowsWritten != plainRows {
			b.Fatalf("refresh wrote %d rows, plain loop made %d", j.Progress.RowsWritten, plainRows)
		}

		b.StopTimer()
		src, _ := cat.OpenTable(ctx, []string{"corpus"})
		if _, _, err := src.Insert(ctx, docsReader(n, n+n/100), ""); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		j, d = o.run(b, ctx, view)
		if j.Result.Mode != refresh.ModeIncremental {
			b.Fatalf("second refresh mode %s", j.Result.Mode)
		}
		incr += d
		b.StopTimer()
		// Back to n documents for the next iteration (drops the appended
		// fragment).
		if _, _, err := src.Delete(ctx, fmt.Sprintf("id >= %d", n)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	if os.Getenv("MVQ_BENCH_ONLY") != "" {
		return // one phase ran: no ratios
	}
	secs := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
	b.ReportMetric(float64(n)/secs(full), "refresh_src_rows/s")
	b.ReportMetric(float64(plainRows)/secs(full), "refresh_out_rows/s")
	b.ReportMetric(float64(n)/secs(plain), "plain_src_rows/s")
	b.ReportMetric(float64(n)/secs(plainW), "plain+write_src_rows/s")
	b.ReportMetric(secs(plain)/secs(full), "ratio_vs_plain")
	b.ReportMetric(secs(plainW)/secs(full), "ratio_vs_plain+write")
	if fullCPU > 0 {
		b.ReportMetric(plainWCPU/fullCPU, "cpu_ratio_vs_plain+write")
	}
	b.ReportMetric(secs(incr)/secs(full), "incr1pct/full")
}
