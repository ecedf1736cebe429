package warehouse

import (
	"os"
	"testing"

	"github.com/mvq-dev/mvq/internal/testenv"
)

// TestMain starts a SeaweedFS S3 server for the run when MVQ_TEST_S3=1
// (make test-s3); the suite then runs on S3 warehouses.
func TestMain(m *testing.M) { os.Exit(testenv.S3ForTestMain(m)) }
