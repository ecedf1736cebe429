package service

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// workerGCPercent is the lowest GC percent of worker processes unless
// GOGC says otherwise. Expanding work items allocates Arrow buffers at a
// high rate; at Go's default of 100 the collector took ~13% of refresh
// CPU, and 200 gave ~10–15% more refresh throughput for about twice the
// live heap.
const workerGCPercent = 200

// workerMinHeapGoal is the heap a worker lets grow before it collects
// while its live heap is small. Between work items the live heap is some
// 10–20 MB, so at workerGCPercent alone a 40k-document chunker refresh
// (350 MB allocated) collected 9–10 times, each marking the same small
// heap beside the items running; with this floor it collects 6–7 times
// and the refresh takes 5–6% less CPU and time (refresh alone, 6
// alternated runs of 6). Peak RSS in BenchmarkWorkerPeakRSS: 242–255 MB
// against 235–252 MB without the floor (target 300); a 96 MiB floor went
// to 265–345 MB. Past a third of the goal the live heap sets the pace
// (workerGCPercent), so a worker holding large items grows as before.
const workerMinHeapGoal = 64 << 20

// workerTuner is the process's worker GC tuner, started once.
var workerTuner struct {
	mu sync.Mutex
	t  *gcTuner // nil: not started
}

// TuneGC sets a worker process's GC percent after every collection from
// its live heap (at least workerGCPercent, more while the heap is below
// workerMinHeapGoal), unless GOGC is set. It runs for the life of the
// process; calling it again does nothing.
func TuneGC() {
	if os.Getenv("GOGC") != "" {
		return
	}
	workerTuner.mu.Lock()
	defer workerTuner.mu.Unlock()
	if workerTuner.t == nil {
		workerTuner.t = newGCTuner(workerMinHeapGoal, workerGCPercent)
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
// heap of goal bytes for a live heap of live bytes: at least floor (Go's
// default is 100), at most 1000.
func gcPercentFor(goal, live uint64, floor int) int {
	if live == 0 {
		return 1000
	}
	p := int(goal*100/live) - 100
	return min(max(p, floor), 1000)
}

// TuneAPIGC sets the API process's GC percent after every collection
// from its live heap (gcPercentFor apiMinHeapGoal), unless GOGC is set;
// stop ends it (the percent stays as last set).
func TuneAPIGC() (stop func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	return startGCTuner(apiMinHeapGoal, 100)
}

// startGCTuner sets the GC percent for a heap goal of goal bytes (a
// percent of at least floor) now and after every collection until stop.
func startGCTuner(goal uint64, floor int) (stop func()) {
	return newGCTuner(goal, floor).stop
}

// newGCTuner starts a tuner (startGCTuner).
func newGCTuner(goal uint64, floor int) *gcTuner {
	t := &gcTuner{goal: goal, floor: floor, set: -1}
	t.tune()
	t.arm()
	return t
}

// stop ends the tuning; the percent stays as last set.
func (t *gcTuner) stop() {
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
}

// gcTuner runs after each collection: a sentinel object that nothing
// references is freed by the next collection, and its cleanup tunes and
// arms a new one (cleanups run on the runtime's cleanup goroutine, not in
// the collector).
type gcTuner struct {
	goal    uint64
	floor   int
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
	p := gcPercentFor(t.goal, s[0].Value.Uint64(), t.floor)
	// Setting the percent is cheap but not free: only changes of a tenth.
	if t.set < 0 || p*10 < t.set*9 || p*10 > t.set*11 {
		debug.SetGCPercent(p)
		t.set = p
	}
	return true
}
