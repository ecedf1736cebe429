package testenv

import (
	"fmt"
	"os"
	"time"
)

// FailpointEnv names the step a kill test's subprocess pauses at; the
// parent sets it in the child's environment.
const FailpointEnv = "MVQ_TXN_FAILPOINT"

// PauseAt returns a step hook (table.Options.StepHook) that, at step,
// writes "mvq-txn-failpoint STEP" to stderr and blocks forever, so the
// parent test can kill the process there. An empty step never pauses.
func PauseAt(step string) func(string) {
	return func(s string) {
		if step == "" || s != step {
			return
		}
		fmt.Fprintf(os.Stderr, "mvq-txn-failpoint %s\n", s)
		for {
			time.Sleep(time.Hour)
		}
	}
}

// PauseAtEnv is PauseAt of the step FailpointEnv names in this process's
// environment (read once, when called).
func PauseAtEnv() func(string) { return PauseAt(os.Getenv(FailpointEnv)) }
