package httpapi_test

import (
	"os"
	"path/filepath"
	"testing"
)

func readFile(p string) ([]byte, error) { return os.ReadFile(p) }

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
