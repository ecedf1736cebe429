package service

import (
	"os"
	"runtime/debug"
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
