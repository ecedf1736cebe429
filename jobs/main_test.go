package jobs

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/mvq-dev/mvq/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopShared()
	if duckDB != nil {
		duckDB.Close()
	}
	if code == 0 {
		// Every Server and Client a test made is shut down by its cleanup:
		// nothing of theirs may outlive them.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
