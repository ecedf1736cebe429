package refresh

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/chunker"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// bounded is a bundle whose engine has the given item output bounds.
func boundedBundle(t testing.TB, rows, bytes int64) *bundle {
	b := setup(t, table.Options{})
	b.e = NewEngineWith(b.cat, EngineOptions{MaxItemOutputRows: rows, MaxItemOutputBytes: bytes})
	return b
}

func chunkSpec(size int, keepInput bool) string {
	return fmt.Sprintf(`{"chunker":"fixed","input_column":"body","output_column":"chunk","chunk_size":%d,"chunk_overlap":0,"keep_input":%t}`, size, keepInput)
}

// expandErr plans a refresh of view id and expands item index, which must
// fail past the bounds, naming what to change, not retryable.
func (b *bundle) expandErr(t *testing.T, id []string, opts Options, index int, want ...string) {
	t.Helper()
	p := b.plan(t, id, "job-big", opts)
	_, err := b.e.Expand(b.ctx, p, index)
	if err == nil || errs.CodeOf(err) != errs.CodeInvalidInput || retryable(err) {
		t.Fatalf("expand item %d: %v, want a non-retryable bound error", index, err)
	}
	for _, w := range append(want, "MVQ_MAX_ITEM_OUTPUT_ROWS", "MVQ_MAX_ITEM_OUTPUT_BYTES") {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("expand item %d: %q does not say %q", index, err, w)
		}
	}
	if n := b.stagedFiles(t, id, p.JobID); n != 0 {
		t.Fatalf("%d staged files left by the failed item", n)
	}
}

func TestItemOutputBounds(t *testing.T) {
	t.Parallel()
	t.Run("one row makes too many chunks", func(t *testing.T) {
		t.Parallel()
		b := boundedBundle(t, 1000, 1<<30)
		b.source(t, []article{{1, "Big", "en", strings.Repeat("x", 5000)}})
		id := b.create(t, "chunks", CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$articles"`, UDTFSpec: chunkerEntry(chunkSpec(1, false))})
		b.expandErr(t, id, Options{}, 0, "larger chunk_size (now 1)", "smaller source_task_size (now 1024; this item reads 1 source rows)")
	})
	t.Run("rows under the bound add up past it", func(t *testing.T) {
		t.Parallel()
		b := boundedBundle(t, 1000, 1<<30)
		var rows []article
		for i := range 3 {
			rows = append(rows, article{int64(i), "t", "en", strings.Repeat("y", 600)})
		}
		b.source(t, rows)
		// Overlapping chunks: each row makes more than the lower bound
		// the rows are checked against before they are cut.
		spec := `{"chunker":"fixed","input_column":"body","output_column":"chunk","chunk_size":2,"chunk_overlap":1}`
		id := b.create(t, "chunks", CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$articles"`, UDTFSpec: chunkerEntry(spec)})
		b.expandErr(t, id, Options{}, 0, "stopped at 1198 rows", "larger chunk_size")
		// One row per item fits.
		_, res := b.refresh(t, id, "job-small", Options{SourceTaskSize: 1})
		if res.RowsAdded != 3*599 {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("copied input counts against the bytes bound", func(t *testing.T) {
		t.Parallel()
		b := boundedBundle(t, 1<<40, 1<<20)
		b.source(t, []article{{1, "Big", "en", strings.Repeat("z", 100_000)}})
		id := b.create(t, "chunks", CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$articles"`, UDTFSpec: chunkerEntry(chunkSpec(1000, true))})
		b.expandErr(t, id, Options{}, 0, "larger chunk_size (now 1000)")
	})
	t.Run("SQL output", func(t *testing.T) {
		t.Parallel()
		b := boundedBundle(t, 1<<40, 1<<20)
		b.source(t, frag0)
		id := b.create(t, "big", CreateRequest{Kind: "query", SourceQuery: `SELECT id, repeat(title, 1000000) AS t FROM "docs$articles"`})
		b.expandErr(t, id, Options{}, 0, "SQL output too large", "smaller source_task_size")
	})
	t.Run("udtf", func(t *testing.T) {
		t.Parallel()
		b := boundedBundle(t, 2, 1<<30)
		b.source(t, frag0)
		id := b.create(t, "all", CreateRequest{Kind: "udtf", SourceQuery: `SELECT id FROM "docs$articles"`})
		b.expandErr(t, id, Options{}, 0, "udtf view is computed as one item")
	})
}

func TestMinChunks(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		unit        string
		size        int
		text        string
		chunks, len int64
	}{
		{"chars", 1, "abc", 3, 3},
		{"chars", 2, "a b c", 2, 3},
		{"chars", 4, "  ", 0, 0},
		{"chars", 3, "héé", 1, 5},
		{"words", 2, "one two  three\nfour", 2, 15},
	} {
		n, l := minChunks(&chunker.Spec{ChunkSize: c.size, Unit: c.unit}, c.text)
		if n != c.chunks || l != c.len {
			t.Errorf("%s/%d %q: %d chunks, %d bytes; want %d, %d", c.unit, c.size, c.text, n, l, c.chunks, c.len)
		}
	}
}

// TestHugeRowMemory measures the peak memory of a refresh of one 8 MB
// text row with chunk_size 1, with and without the item output bounds, in
// child processes (so each peak RSS is its own). It runs only when
// MVQ_MEASURE_ITEM_MEMORY is set: it takes seconds and a gigabyte.
func TestHugeRowMemory(t *testing.T) {
	if mode := os.Getenv("MVQ_HUGE_ROW_CHILD"); mode != "" {
		hugeRowChild(t, mode)
		return
	}
	if os.Getenv("MVQ_MEASURE_ITEM_MEMORY") == "" {
		t.Skip("set MVQ_MEASURE_ITEM_MEMORY=1 to measure")
	}
	for _, mode := range []string{"baseline", "unbounded", "bounded", "bounded/2", "bounded/3"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHugeRowMemory$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "MVQ_HUGE_ROW_CHILD="+mode)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, out)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "huge row:") {
				t.Logf("%-9s peak RSS %4d MiB; %s", mode, ru.Maxrss>>10, strings.TrimSpace(line))
			}
		}
	}
}

// hugeRowChild: baseline sets up the source and view only; bounded/N
// uses chunk_size N (default 1).
func hugeRowChild(t *testing.T, mode string) {
	size := 1
	if _, n, ok := strings.Cut(mode, "/"); ok {
		fmt.Sscan(n, &size)
	}
	b := setup(t, table.Options{})
	if mode == "unbounded" {
		b.e = NewEngineWith(b.cat, EngineOptions{MaxItemOutputRows: 1 << 40, MaxItemOutputBytes: 1 << 40})
	}
	b.source(t, []article{{1, "Huge", "en", strings.Repeat("lorem ipsum dolor sit amet ", 8<<20/27)}})
	id := b.create(t, "chunks", CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$articles"`, UDTFSpec: chunkerEntry(chunkSpec(size, false))})
	runtime.GC()
	if mode == "baseline" {
		fmt.Printf("huge row: source and view set up, no refresh\n")
		return
	}
	var peak atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	p := b.plan(t, id, "job-huge", Options{})
	var res Result
	results, err := []ItemResult{}, error(nil)
	for i := range p.Items {
		var r ItemResult
		if r, err = b.e.Expand(b.ctx, p, i); err != nil {
			break
		}
		results = append(results, r)
	}
	if err == nil {
		res, err = b.e.Commit(b.ctx, p, results)
	}
	close(done)
	<-stopped
	msg := fmt.Sprintf("rows added %d", res.RowsAdded)
	if err != nil {
		msg = "failed: " + err.Error()[:min(len(err.Error()), 120)]
	}
	fmt.Printf("huge row: peak Go heap in use %d MiB, %s, %s\n", peak.Load()>>20, time.Since(start).Round(time.Millisecond), msg)
}
