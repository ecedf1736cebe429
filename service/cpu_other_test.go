//go:build !unix

package service_test

// cpuSeconds is 0 where getrusage is missing: no CPU ratio is reported.
func cpuSeconds() float64 { return 0 }

func minorFaults() int64 { return 0 }

// syncDisks does nothing where sync(2) is missing.
func syncDisks() {}

func sysSeconds() float64 { return 0 }

// benchMemory does nothing where the runtime gives memory back otherwise.
func benchMemory() {}
