package testenv

import (
	"testing"
	"time"
)

// WaitFor polls cond every 10 ms until it holds, failing the test when d
// passes first: tests wait on a condition with a deadline, never on a
// fixed sleep.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
