package table

import (
	"context"
	"testing"
	"time"
)

// BenchmarkBatchTransaction measures what the batch protocol costs on a
// file:// warehouse: a reader's version resolution (Table.LatestVersion)
// with no batch in flight (the baseline) and while a batch holds an
// undecided version of the table, and a two-table batch commit against
// two single-table version creates of the same manifests. It checks what
// each reader saw.
func BenchmarkBatchTransaction(b *testing.B) {
	ctx := context.Background()
	const reads = 500
	var plain, pending, batch, single time.Duration
	for i := 0; i < b.N; i++ {
		c := newCatalog(b, b.TempDir(), Options{})
		ta, tb := twoTables(b, c)
		resolve := func(want uint64) time.Duration {
			start := time.Now()
			for k := 0; k < reads; k++ {
				if v := latest(b, ta); v != want {
					b.Fatalf("reader saw version %d, want %d", v, want)
				}
			}
			return time.Since(start)
		}
		plain += resolve(1)

		// A batch paused after writing its first table's version.
		entries := []BatchVersion{stageAppend(b, ta, "a2", 10, 11), stageAppend(b, tb, "b2", 10, 11)}
		paused, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, _, err := withStepHook(c, func(step string) {
				if step == "manifest-0" {
					close(paused)
					<-release
				}
			}, func() (string, []BatchResult, error) { return c.CommitBatch(ctx, "batch-create", entries) })
			done <- err
		}()
		<-paused
		pending += resolve(1)
		close(release)
		if err := <-done; err != nil {
			b.Fatal(err)
		}

		// Commit cost: a batch of two tables, then the same two versions
		// one table at a time.
		e3 := []BatchVersion{stageAppend(b, ta, "a3", 20, 21), stageAppend(b, tb, "b3", 20, 21)}
		start := time.Now()
		if _, _, err := c.CommitBatch(ctx, "batch-create", e3); err != nil {
			b.Fatal(err)
		}
		batch += time.Since(start)
		e4 := []BatchVersion{stageAppend(b, ta, "a4", 30, 31), stageAppend(b, tb, "b4", 30, 31)}
		start = time.Now()
		for _, e := range e4 {
			if _, _, _, err := c.handle(e.ID).CreateVersion(ctx, e.Version, e.ManifestPath, e.Scheme, nil); err != nil {
				b.Fatal(err)
			}
		}
		single += time.Since(start)
		if latest(b, ta) != 4 || latest(b, tb) != 4 {
			b.Fatal("versions missing")
		}
	}
	n := float64(b.N)
	us := func(d time.Duration, per float64) float64 { return float64(d.Microseconds()) / per }
	b.ReportMetric(us(plain, n*reads), "resolve_us")
	b.ReportMetric(us(pending, n*reads), "resolve_during_batch_us")
	b.ReportMetric(float64(pending)/float64(plain), "resolve_ratio")
	b.ReportMetric(us(batch, n)/1000, "batch_commit_2_tables_ms")
	b.ReportMetric(us(single, n)/1000, "two_single_commits_ms")
	b.ReportMetric(float64(batch)/float64(single), "commit_ratio")
	b.Logf("resolve %.1fµs, %.1fµs during a batch (×%.2f); batch of 2 tables %.2fms vs 2 single commits %.2fms (×%.2f)",
		us(plain, n*reads), us(pending, n*reads), float64(pending)/float64(plain), us(batch, n)/1000, us(single, n)/1000, float64(batch)/float64(single))
}
