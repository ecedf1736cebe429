package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWarehouseUpgrade runs the whole path with real processes: mvq dev
// in the Parquet + JSON layout makes a table and a view and refreshes
// it; mvq dev in the Lance format then refuses the warehouse, naming the
// command; mvq warehouse upgrade (a dry run, then for real, then again)
// converts it; mvq dev in the Lance format starts on it, reads the same
// rows and refreshes the view after an insert.
func TestWarehouseUpgrade(t *testing.T) {
	wh := filepath.Join(t.TempDir(), "warehouse")
	articles := writeFile(t, "articles.ndjson", `{"id": 1, "lang": "en", "body": "Tables are folders of data files and manifests, versioned."}
{"id": 2, "lang": "en", "body": "A view is refreshed by a job that reads the source table."}
{"id": 3, "lang": "de", "body": "Eine Tabelle ist ein Ordner."}
`)
	d := startDev(t, wh, "MVQ_TABLE_FORMAT=parquet")
	d.ok(t, "ns", "create", "docs")
	d.ok(t, "table", "create", "docs$articles", "--from", articles)
	d.ok(t, "table", "delete", "docs$articles", "--where", "id = 3")
	d.ok(t, "view", "create", "docs$chunks", "--no-data", "--query", `SELECT id, body FROM "docs$articles"`,
		"--chunker", "fixed", "--input", "body", "--output", "chunk", "--size", "20", "--overlap", "0")
	d.ok(t, "refresh", "docs$chunks", "--wait")
	beforeArticles := d.ok(t, "query", "docs$articles", "--output", "json")
	beforeChunks := d.ok(t, "query", "docs$chunks", "--output", "json", "--columns", "id,chunk")
	d.stop()
	if files, _ := filepath.Glob(filepath.Join(wh, "docs", "*.lance", "data", "*.parquet")); len(files) == 0 {
		t.Fatal("the Parquet layout wrote no Parquet files")
	}

	// The Lance format refuses the unconverted warehouse, naming the command.
	cmd := mvqCmd([]string{"MVQ_TABLE_FORMAT=lance", "MVQ_LOG_LEVEL=warn"}, "dev", "-listen", "127.0.0.1:0", "-warehouse", "file://"+wh)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(out.String(), "`mvq warehouse upgrade`") {
			t.Fatalf("mvq dev on an unconverted warehouse: %v: %s", err, out.String())
		}
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("mvq dev started on an unconverted warehouse: %s", out.String())
	}

	run := func(args ...string) string {
		t.Helper()
		c := mvqCmd(nil, append([]string{"warehouse", "upgrade", "--warehouse", "file://" + wh}, args...)...)
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("mvq warehouse upgrade %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	dry := run("--dry-run")
	if !strings.Contains(dry, "would upgrade: 2 tables (2 converted") || !strings.Contains(dry, "would be converted to data/") {
		t.Fatalf("dry run:\n%s", dry)
	}
	if _, err := os.Stat(filepath.Join(wh, "_mvq_warehouse.json")); !os.IsNotExist(err) {
		t.Fatalf("the dry run wrote the marker: %v", err)
	}
	up := run()
	t.Logf("upgrade:\n%s", up)
	if !strings.Contains(up, "upgraded: 2 tables (2 converted, 0 already Lance") || !strings.Contains(up, "marked Lance") {
		t.Fatalf("upgrade:\n%s", up)
	}
	if again := run(); !strings.Contains(again, "upgraded: 2 tables (0 converted, 2 already Lance") {
		t.Fatalf("second run:\n%s", again)
	}
	if files, _ := filepath.Glob(filepath.Join(wh, "docs", "*.lance", "data", "*.parquet")); len(files) != 0 {
		t.Fatalf("Parquet files left: %v", files)
	}

	d = startDev(t, wh, "MVQ_TABLE_FORMAT=lance")
	if got := d.ok(t, "query", "docs$articles", "--output", "json"); got != beforeArticles {
		t.Fatalf("articles after the upgrade:\n%s\nbefore:\n%s", got, beforeArticles)
	}
	if got := d.ok(t, "query", "docs$chunks", "--output", "json", "--columns", "id,chunk"); got != beforeChunks {
		t.Fatalf("chunks after the upgrade:\n%s\nbefore:\n%s", got, beforeChunks)
	}
	more := writeFile(t, "more.ndjson", `{"id": 4, "lang": "en", "body": "Written after the upgrade."}
`)
	d.ok(t, "table", "insert", "docs$articles", "--from", more)
	d.ok(t, "refresh", "docs$chunks", "--wait")
	if got := d.ok(t, "query", "docs$chunks", "--output", "json", "--columns", "id,chunk", "--filter", "id = 4"); !strings.Contains(got, "Written") {
		t.Fatalf("the view after a refresh on the upgraded warehouse: %s", got)
	}
	if files, _ := filepath.Glob(filepath.Join(wh, "docs", "*.lance", "data", "*.parquet")); len(files) != 0 {
		t.Fatalf("the Lance format wrote Parquet files: %v", files)
	}
}
