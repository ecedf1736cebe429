//go:build unix

package service_test

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// selfUsage is this process's resource usage so far (zero if unreadable).
func selfUsage() syscall.Rusage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return syscall.Rusage{}
	}
	return ru
}

// cpuSeconds is the user and system CPU time this process has used.
func cpuSeconds() float64 {
	ru := selfUsage()
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// minorFaults is this process's minor page faults so far (pages the
// kernel gave it fresh or found in its page cache).
func minorFaults() int64 { return selfUsage().Minflt }

// syncDisks writes every file's dirty pages back to disk (sync(2)).
func syncDisks() { syscall.Sync() }

// sysSeconds is the system (kernel) CPU time this process has used.
func sysSeconds() float64 {
	ru := selfUsage()
	return float64(ru.Stime.Nano()) / 1e9
}

// benchMemory re-executes a benchmark run with GODEBUG=madvdontneed=0.
// The benchmarks compare phases run one after another in this process,
// and the runtime hands idle heap back to the kernel between them, a
// little at a time. With MADV_DONTNEED (Go's default) every page given
// back faults again when a later phase reuses it, so a phase's time
// depended on how much heap the phases before it left idle, and for how
// long: the plain loop of BenchmarkRefreshOrchestrated (some 750 MB of
// heap, idle while the refresh, the append and the incremental refresh
// ran) took 30-50k page faults and up to 2.3 times as long from its
// second iteration on, and the ratio read twice what it is. With MADV_FREE
// the kernel takes such pages back only under memory pressure, so each
// phase reuses the heap as a process repeating its work does. The
// processes the benchmarks start (workers, whose RSS some of them
// measure) keep the GODEBUG this run was given.
func benchMemory() {
	bench := false
	for i, a := range os.Args[1:] {
		a = strings.TrimLeft(a, "-")
		if v, ok := strings.CutPrefix(a, "test.bench="); ok {
			bench = v != ""
		} else if a == "test.bench" && i+2 < len(os.Args) {
			bench = os.Args[i+2] != ""
		}
	}
	const orig = "MVQ_BENCH_GODEBUG"
	if prev, ok := os.LookupEnv(orig); ok {
		// Re-executed: the runtime has read the setting; children get
		// the GODEBUG of the run.
		os.Unsetenv(orig)
		if prev == "" {
			os.Unsetenv("GODEBUG")
		} else {
			os.Setenv("GODEBUG", prev)
		}
		return
	}
	if !bench || strings.Contains(os.Getenv("GODEBUG"), "madvdontneed") {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	prev := os.Getenv("GODEBUG")
	godebug := "madvdontneed=0"
	if prev != "" {
		godebug = prev + "," + godebug
	}
	env := append(os.Environ(), orig+"="+prev, "GODEBUG="+godebug)
	err = syscall.Exec(exe, os.Args, env)
	fmt.Fprintf(os.Stderr, "benchmarks: re-executing with GODEBUG=%s: %v; phases may pay page faults for heap the runtime gave back\n", godebug, err)
}
