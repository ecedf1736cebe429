//go:build unix

package service_test

import "syscall"

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
