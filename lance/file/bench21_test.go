package file

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
)

// The read benchmark: a table of int64 ids, text and 384-dim float32
// vectors written by LanceDB (MVQ_BENCH_LANCE_ROWS rows, 20,000 by default;
// the figure is 1,000,000), read by this package and by LanceDB
// itself (query().toArrow() in node, timed inside the process). Each
// sub-benchmark reports speed_vs_lancedb = LanceDB's time / ours: above 1
// this reader is faster, the issue asks for at least 0.5.

type benchData struct {
	dir     string
	files   []string
	rows    int
	offsets []uint64 // the 1,000 random rows of the take benchmark
	lance   struct{ FullMs, ProjMs, TakeMs float64 }
	err     error
}

func benchRows() int {
	if s := os.Getenv("MVQ_BENCH_LANCE_ROWS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return 20_000
}

func benchBatch(from, n int) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "text", Type: arrow.BinaryTypes.String},
		{Name: "vec", Type: arrow.FixedSizeListOf(384, arrow.PrimitiveTypes.Float32)},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	rng := rand.New(rand.NewPCG(uint64(from), 9))
	words := strings.Fields("the quick brown fox jumps over a lazy dog while lance stores columns in pages of chunks")
	var sb strings.Builder
	for i := from; i < from+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		sb.Reset()
		for k := 0; k < 8+rng.IntN(24); k++ {
			sb.WriteString(words[rng.IntN(len(words))])
			sb.WriteByte(' ')
		}
		b.Field(1).(*array.StringBuilder).Append(sb.String())
		fb := b.Field(2).(*array.FixedSizeListBuilder)
		fb.Append(true)
		vb := fb.ValueBuilder().(*array.Float32Builder)
		for k := 0; k < 384; k++ {
			vb.Append(float32(rng.NormFloat64()))
		}
	}
	return b.NewRecordBatch()
}

// setupBench writes the dataset (removed when b ends) and times LanceDB.
func setupBench(b *testing.B) *benchData {
	o := oracle.Need(b)
	var bench benchData
	{
		bench.err = func() error {
			root, err := os.MkdirTemp("", "lance-bench-")
			if err != nil {
				return err
			}
			b.Cleanup(func() { os.RemoveAll(root) })
			bench.rows = benchRows()
			bench.dir = filepath.Join(root, "bench.lance")
			const batch = 100_000
			for from := 0; from < bench.rows; from += batch {
				rec := benchBatch(from, min(batch, bench.rows-from))
				mode := "create"
				if from > 0 {
					mode = "append"
				}
				if err := o.WriteErr(b, bench.dir, rec, "2.1", mode); err != nil {
					rec.Release()
					return err
				}
				rec.Release()
			}
			bench.files, _ = filepath.Glob(filepath.Join(bench.dir, "data", "*.lance"))
			sort.Slice(bench.files, func(i, j int) bool { return fileOrder(bench.files[i]) < fileOrder(bench.files[j]) })
			rng := rand.New(rand.NewPCG(7, 7))
			bench.offsets = make([]uint64, 1000)
			for i := range bench.offsets {
				bench.offsets[i] = rng.Uint64N(uint64(bench.rows))
			}
			offs, _ := json.Marshal(bench.offsets)
			takeFile := filepath.Join(root, "offsets.json")
			if err := os.WriteFile(takeFile, offs, 0o644); err != nil {
				return err
			}
			odir, err := oracle.Dir()
			if err != nil {
				return err
			}
			node, err := exec.LookPath("node")
			if err != nil {
				return err
			}
			cmd := exec.Command(node, filepath.Join("testdata", "bench_read.mjs"), odir, bench.dir, "5", takeFile)
			cmd.Env = append(os.Environ(), "LANCEDB_LOG=error", "RUST_LOG=error")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				return fmt.Errorf("bench_read.mjs: %v: %s", err, stderr.String())
			}
			var res struct {
				Full float64 `json:"full_ms"`
				Proj float64 `json:"proj_ms"`
				Take float64 `json:"take_ms"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				return fmt.Errorf("bench_read.mjs output %q: %v", out, err)
			}
			bench.lance.FullMs, bench.lance.ProjMs, bench.lance.TakeMs = res.Full, res.Proj, res.Take
			return nil
		}()
	}
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return &bench
}

// fileOrder orders data files as LanceDB wrote them (fragment order): by
// modification time, which is what the benchmark's sequential appends give.
func fileOrder(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.ModTime().UnixNano()
}

type openedBench struct {
	readers []*Reader
	starts  []uint64
}

func openBench(b *testing.B, d *benchData) openedBench {
	var ob openedBench
	var start uint64
	for _, f := range d.files {
		r := openFile(b, f)
		ob.readers = append(ob.readers, r)
		ob.starts = append(ob.starts, start)
		start += r.NumRows()
	}
	if start != uint64(d.rows) {
		b.Fatalf("files hold %d rows, want %d", start, d.rows)
	}
	return ob
}

func report(b *testing.B, lanceMs float64) {
	per := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / 1e6
	b.ReportMetric(lanceMs, "lancedb_ms")
	b.ReportMetric(lanceMs/per, "speed_vs_lancedb")
}

func BenchmarkRead21(b *testing.B) {
	d := setupBench(b)
	ctx := context.Background()
	b.Run(fmt.Sprintf("full_scan/rows=%d", d.rows), func(b *testing.B) {
		ob := openBench(b, d)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for _, r := range ob.readers {
				rec, err := r.Read(ctx, nil, 0, r.NumRows())
				if err != nil {
					b.Fatal(err)
				}
				rec.Release()
			}
		}
		report(b, d.lance.FullMs)
	})
	b.Run(fmt.Sprintf("project_id_text/rows=%d", d.rows), func(b *testing.B) {
		ob := openBench(b, d)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for _, r := range ob.readers {
				rec, err := r.Read(ctx, []int{0, 1}, 0, r.NumRows())
				if err != nil {
					b.Fatal(err)
				}
				rec.Release()
			}
		}
		report(b, d.lance.ProjMs)
	})
	b.Run(fmt.Sprintf("take_1000/rows=%d", d.rows), func(b *testing.B) {
		ob := openBench(b, d)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for fi, r := range ob.readers {
				var rows []uint64
				for _, o := range d.offsets {
					if o >= ob.starts[fi] && o < ob.starts[fi]+r.NumRows() {
						rows = append(rows, o-ob.starts[fi])
					}
				}
				if len(rows) == 0 {
					continue
				}
				rec, err := r.Take(ctx, nil, rows)
				if err != nil {
					b.Fatal(err)
				}
				rec.Release()
			}
		}
		report(b, d.lance.TakeMs)
	})
}

// BenchmarkReadGolden reads the golden files (no node needed): every
// column of every row, and 100 random rows.
func BenchmarkReadGolden(b *testing.B) {
	ctx := context.Background()
	for _, g := range goldens {
		r := openFile(b, filepath.Join("testdata", g.name+".lance"))
		b.Run(g.name+"/scan", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				rec, err := r.Read(ctx, nil, 0, r.NumRows())
				if err != nil {
					b.Fatal(err)
				}
				rec.Release()
			}
		})
		rng := rand.New(rand.NewPCG(1, 1))
		rows := make([]uint64, 100)
		for i := range rows {
			rows[i] = rng.Uint64N(r.NumRows())
		}
		b.Run(g.name+"/take100", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				rec, err := r.Take(ctx, nil, rows)
				if err != nil {
					b.Fatal(err)
				}
				rec.Release()
			}
		})
	}
}
