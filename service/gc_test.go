package service

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestAPIGCPercent(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 1000}, {1 << 20, 1000}, {8 << 20, 700}, {16 << 20, 300}, {32 << 20, 100}, {60 << 20, 100}, {1 << 30, 100},
	} {
		if got := apiGCPercent(c.live); got != c.want {
			t.Errorf("live %d MiB: percent %d, want %d", c.live>>20, got, c.want)
		}
	}
}

// TuneAPIGC sets the percent from the live heap after collections, and
// stops when told.
func TestTuneAPIGCFollowsCollections(t *testing.T) {
	if testing.Short() {
		t.Skip("changes the test process's GC")
	}
	t.Setenv("GOGC", "") // os.Getenv answers "" as for unset
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	gogc := func() int64 {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return int64(s[0].Value.Uint64())
	}
	live := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	stop := TuneAPIGC()
	// After a collection the percent follows the live heap: above Go's
	// default for this process's few MiB, back to it with ~48 MiB held.
	settles := func(what string, ok func(p int64) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok(gogc()) || gogc() != int64(apiGCPercent(live())) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: with %d MiB live the GC percent is %d (for that live heap: %d)", what, live()>>20, gogc(), apiGCPercent(live()))
			}
			runtime.GC()
			time.Sleep(time.Millisecond) // the cleanup goroutine runs
		}
	}
	settles("small heap", func(p int64) bool { return p > 100 })
	hold := make([][]byte, 48)
	for i := range hold {
		hold[i] = make([]byte, 1<<20)
	}
	settles("48 MiB held", func(p int64) bool { return p == 100 })
	runtime.KeepAlive(hold)
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
