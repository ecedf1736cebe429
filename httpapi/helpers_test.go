package httpapi_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/table"
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

// manifestFile is where a version's manifest_path points: a path from the
// store's root (what a Lance-format table answers) or one inside the table
// folder tableDir.
func manifestFile(tableDir, manifestPath string) string {
	if strings.HasPrefix(manifestPath, "_versions/") || strings.HasPrefix(manifestPath, "tree/") {
		return filepath.Join(tableDir, manifestPath)
	}
	return "/" + manifestPath
}

// manifestJSON reads a manifest file (a Lance manifest or mvq's JSON one)
// as mvq's JSON staged form, a map a test can edit and stage.
func manifestJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := table.DecodeManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var man map[string]any
	if err := json.Unmarshal(b, &man); err != nil {
		t.Fatal(err)
	}
	return man
}
