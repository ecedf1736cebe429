package httpapi

import (
	"strings"
	"testing"
)

// TestStorageOptionsErrorHidesSecrets: a file the YAML parser refuses is
// reported by position, without quoting the lines around the error (they
// hold credentials).
func TestStorageOptionsErrorHidesSecrets(t *testing.T) {
	_, err := ParseStorageOptions([]byte("storage_options:\n  - principal: alice\n    options: {aws_secret_access_key: s3cr3t-value, aws_region: [\n"))
	if err == nil {
		t.Fatal("a broken file parsed")
	}
	if strings.Contains(err.Error(), "s3cr3t-value") {
		t.Fatalf("the error quotes the file: %v", err)
	}
}
