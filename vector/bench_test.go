package vector

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// benchVectors is the table size of BenchmarkSearch: MVQ_BENCH_VECTORS,
// default 1M (1M × 384 floats is 1.5 GB, held several times over while
// the table is built, the search's cache and the baseline's slice: about
// 10 GB peak resident; set a smaller size on a smaller machine).
func benchVectors() int {
	if n, err := strconv.Atoi(os.Getenv("MVQ_BENCH_VECTORS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// BenchmarkSearch: exact k=10 search (l2) over n × 384 vectors in a table
// (fragments of 131072 rows, warm cache), against a plain Go loop over the
// same floats in one slice with the same heap, measured in the same run.
func BenchmarkSearch(b *testing.B) {
	const dim = 384
	n := benchVectors()
	vec := randVec(3, dim)
	tb := vecTable(b, n, 131072, dim, vec)
	flat := make([]float32, 0, n*dim)
	for i := 0; i < n; i++ {
		if i == 3 {
			flat = append(flat, make([]float32, dim)...)
			continue
		}
		flat = append(flat, vec(i)...)
	}
	q := randVec(5, dim)(0)
	ctx := context.Background()
	if _, err := Search(ctx, tb, Query{Vector: q, K: 10}, nil); err != nil { // warm the cache
		b.Fatal(err)
	}
	var loop, search time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		h := newTopK(10)
		for r := 0; r < n; r++ {
			var s float32
			row := flat[r*dim : r*dim+dim]
			for k, x := range row {
				d := x - q[k]
				s += d * d
			}
			if s < h.bound() {
				h.offer(s, uint64(r))
			}
		}
		loop += time.Since(start)
		start = time.Now()
		rec, err := Search(ctx, tb, Query{Vector: q, K: 10}, nil)
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
		search += time.Since(start)
	}
	b.ReportMetric(float64(n), "vectors")
	b.ReportMetric(float64(loop.Milliseconds())/float64(b.N), "loop-ms")
	b.ReportMetric(float64(search.Milliseconds())/float64(b.N), "search-ms")
	b.ReportMetric(loop.Seconds()/search.Seconds(), "search-speed/loop")
}
