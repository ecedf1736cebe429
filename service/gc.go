package service

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// workerGCPercent is the GC target of worker processes unless GOGC says
// otherwise. Expanding work items allocates Arrow buffers at a high rate;
// at Go's default of 100 the collector took ~13% of refresh CPU, and 200
// gave ~10–15% more refresh throughput for about twice the live heap.
const workerGCPercent = 200

// TuneGC applies workerGCPercent when GOGC is unset.
func TuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(workerGCPercent)
	}
}

// apiMinHeapGoal is the heap the API process lets grow before it
// collects, while its live heap is small. The API's live heap is about
// 12 MB and every accept allocates some 15 KB, so at Go's default (collect
// when the heap doubles) it collected about a dozen times a second at 10k
// accepts/s, marking the same live heap each time: a tenth of its CPU
// (BenchmarkAcceptVsPeer). Past half this goal the live heap itself sets
// the pace again (GOGC 100), so a process holding large request bodies
// or query results grows no more than at the default.
const apiMinHeapGoal = 64 << 20

// gcPercentFor is the GC percent that puts the next collection at a
// heap of goal bytes for a live heap of live bytes: at least Go's default
// of 100, at most 1000.
func gcPercentFor(goal, live uint64) int {
	if live == 0 {
		return 1000
	}
	p := int(goal*100/live) - 100
	return min(max(p, 100), 1000)
}

// TuneAPIGC sets the API process's GC percent after every collection
// from its live heap (gcPercentFor apiMinHeapGoal), unless GOGC is set;
// stop ends it (the percent stays as last set).
func TuneAPIGC() (stop func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	return startGCTuner(apiMinHeapGoal)
}

// startGCTuner sets the GC percent for a heap goal of goal bytes now and
// after every collection until stop.
func startGCTuner(goal uint64) (stop func()) {
	t := &gcTuner{goal: goal, set: -1}
	t.tune()
	t.arm()
	return func() {
		t.mu.Lock()
		t.stopped = true
		t.mu.Unlock()
	}
}

// gcTuner runs after each collection: a sentinel object that nothing
// references is freed by the next collection, and its cleanup tunes and
// arms a new one (cleanups run on the runtime's cleanup goroutine, not in
// the collector).
type gcTuner struct {
	goal    uint64
	mu      sync.Mutex
	stopped bool
	set     int // percent last set; -1: none
}

// gcSentinel holds a pointer so that it is never one of the tiny
// allocations the runtime packs together (which may outlive it).
type gcSentinel struct{ _ *int }

func (t *gcTuner) arm() {
	runtime.AddCleanup(&gcSentinel{}, func(t *gcTuner) {
		if t.tune() {
			t.arm()
		}
	}, t)
}

// tune sets the percent for the live heap now; false once stopped.
func (t *gcTuner) tune() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return true
	}
	p := gcPercentFor(t.goal, s[0].Value.Uint64())
	// Setting the percent is cheap but not free: only changes of a tenth.
	if t.set < 0 || p*10 < t.set*9 || p*10 > t.set*11 {
		debug.SetGCPercent(p)
		t.set = p
	}
	return true
}
