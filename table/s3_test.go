package table

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/internal/testenv"
)

// BenchmarkCommitLatency reports the p50 and p99 of one small append's
// commit on a file:// warehouse and, in S3 mode, on the S3 one.
func BenchmarkCommitLatency(b *testing.B) {
	ctx := context.Background()
	uris := map[string]string{"file": "file://" + b.TempDir()}
	if testenv.S3Mode() {
		uris["s3"] = testenv.Warehouse(b)
	}
	for name, u := range uris {
		b.Run(name, func(b *testing.B) {
			wh, err := OpenWarehouse(ctx, u)
			if err != nil {
				b.Fatal(err)
			}
			defer wh.Close()
			c := NewCatalog(wh, testDB(b), Options{})
			tb, _, err := c.CreateTable(ctx, []string{"lat"}, testSchema, nil, "", nil)
			if err != nil {
				b.Fatal(err)
			}
			const n = 100
			for b.Loop() {
				var d []time.Duration
				for i := range n {
					start := time.Now()
					if _, _, err := tb.Insert(ctx, rows(b, i, i+1), ""); err != nil {
						b.Fatal(err)
					}
					d = append(d, time.Since(start))
				}
				sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
				b.ReportMetric(float64(d[n/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(d[n*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}
