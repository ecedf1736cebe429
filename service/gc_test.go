package service

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 1000}, {1 << 20, 1000}, {8 << 20, 700}, {16 << 20, 300}, {32 << 20, 100}, {60 << 20, 100}, {1 << 30, 100},
	} {
		if got := gcPercentFor(apiMinHeapGoal, c.live, 100); got != c.want {
			t.Errorf("live %d MiB: percent %d, want %d", c.live>>20, got, c.want)
		}
	}
	// A worker's goal is 64 MiB and its percent never under 200.
	for _, c := range []struct {
		live uint64
		want int
	}{
		{4 << 20, 1000}, {8 << 20, 700}, {16 << 20, 300}, {20 << 20, 220}, {32 << 20, 200}, {64 << 20, 200}, {1 << 30, 200},
	} {
		if got := gcPercentFor(workerMinHeapGoal, c.live, workerGCPercent); got != c.want {
			t.Errorf("worker, live %d MiB: percent %d, want %d", c.live>>20, got, c.want)
		}
	}
}

// TuneGC starts one tuner for the process, with the worker's goal: a
// small live heap gets more than workerGCPercent.
func TestTuneGCWorkerFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("changes the test process's GC")
	}
	t.Setenv("GOGC", "")
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	runtime.GC() // the live heap the tuner reads
	workerTuner.mu.Lock()
	if workerTuner.t != nil { // started by an earlier test: start afresh
		workerTuner.t.stop()
		workerTuner.t = nil
	}
	workerTuner.mu.Unlock()
	TuneGC()
	workerTuner.mu.Lock()
	first := workerTuner.t
	workerTuner.mu.Unlock()
	TuneGC()
	workerTuner.mu.Lock()
	defer func() {
		workerTuner.t.stop()
		workerTuner.t = nil
		workerTuner.mu.Unlock()
	}()
	if first == nil || first != workerTuner.t {
		t.Fatal("TuneGC twice: want one tuner, started once")
	}
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	got, live := int(s[0].Value.Uint64()), s[1].Value.Uint64()
	if want := gcPercentFor(workerMinHeapGoal, live, workerGCPercent); got != want {
		t.Fatalf("live heap %d MiB: GC percent %d, want %d", live>>20, got, want)
	}
	if live < 24<<20 && got <= workerGCPercent {
		t.Fatalf("live heap %d MiB: GC percent %d, want more than %d below the worker's heap floor", live>>20, got, workerGCPercent)
	}
}

// The tuner sets the percent from the live heap after every collection,
// and stops when told. Its goal is set from this process's live heap, so
// the test holds whatever other tests left live.
func TestGCTunerFollowsCollections(t *testing.T) {
	if testing.Short() {
		t.Skip("changes the test process's GC")
	}
	// A worker started in this process by an earlier test tunes too.
	workerTuner.mu.Lock()
	if workerTuner.t != nil {
		workerTuner.t.stop()
	}
	workerTuner.mu.Unlock()
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	gogc := func() int {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return int(s[0].Value.Uint64())
	}
	live := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	runtime.GC()
	base := live()
	goal := 4*base + 64<<20 // 300% or more over today's live heap
	stop := startGCTuner(goal, 100)
	defer stop()
	if got := gogc(); got < 300 {
		t.Fatalf("with %d MiB live and a goal of %d MiB the tuner set %d%%, want 300%% or more", base>>20, goal>>20, got)
	}
	// settles collects until the percent is the one for the live heap
	// (the tuner runs after a collection, on the runtime's cleanup
	// goroutine) and ok holds.
	settles := func(what string, ok func(p int) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok(gogc()) || gogc() != gcPercentFor(goal, live(), 100) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: with %d MiB live the GC percent is %d (for that live heap: %d)", what, live()>>20, gogc(), gcPercentFor(goal, live(), 100))
			}
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
	}
	// Holding the goal's worth: back to Go's default.
	hold := make([][]byte, goal>>20)
	for i := range hold {
		hold[i] = make([]byte, 1<<20)
	}
	settles("the goal held", func(p int) bool { return p == 100 })
	runtime.KeepAlive(hold)
	hold = nil
	settles("the goal let go", func(p int) bool { return p >= 300 })
	stop()
	// Stopped: the percent stays as set by hand.
	debug.SetGCPercent(123)
	for range 3 {
		runtime.GC()
	}
	if got := gogc(); got != 123 {
		t.Fatalf("after stop the tuner set the percent to %d", got)
	}
}
