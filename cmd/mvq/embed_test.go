package main

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/service"
)

// TestCLIEmbeddings: on a plain mvq dev (no runtimes file), column add
// with the built-in local-embed fills every chunk of a chunker view with a
// 64-dimension unit vector (equal texts, equal vectors), a refresh fills
// the chunks of new rows, and search --text finds the matching chunk
// first.
func TestCLIEmbeddings(t *testing.T) {
	d := startDev(t, "")
	d.ok(t, "ns", "create", "docs")
	d.ok(t, "table", "create", "docs$a", "--from", writeFile(t, "a.ndjson", strings.Join([]string{
		`{"id": 1, "body": "Solar panels turn sunlight into electricity on the roof."}`,
		`{"id": 2, "body": "Bread rises because yeast makes bubbles of gas in the dough."}`,
		`{"id": 3, "body": "Whales are mammals that breathe air and live in the ocean."}`,
		`{"id": 4, "body": "Bread rises because yeast makes bubbles of gas in the dough."}`,
	}, "\n")+"\n"))
	job := strings.TrimSpace(d.ok(t, "view", "create", "docs$chunks", "--source", "docs$a", "--chunker", "fixed",
		"--input", "body", "--output", "chunk", "--size", "200"))
	d.ok(t, "jobs", "watch", job)

	if r := d.mvq(t, nil, "column", "add", "docs$chunks", "--name", "vec", "--from", "chunk"); r.code != 2 || !strings.Contains(r.stderr, "--runtime") {
		t.Fatalf("column add without --runtime: %+v", r)
	}
	if r := d.mvq(t, nil, "column", "add", "docs$chunks", "--name", "v2", "--from", "chunk", "--runtime", "nope"); r.code != 1 || !strings.Contains(r.stderr, "local-embed") {
		t.Fatalf("column add with an unknown runtime: %+v", r)
	}
	if r := d.mvq(t, nil, "column", "add", "docs$chunks", "--name", "vec", "--from", "chunk", "--runtime", "local-embed", "--wait"); r.code != 0 || !strings.Contains(r.stderr, "DONE") {
		t.Fatalf("column add --wait: %+v", r)
	}

	d.ok(t, "table", "insert", "docs$a", "--from", writeFile(t, "b.ndjson", `{"id": 5, "body": "Solar panels turn sunlight into electricity on the roof."}`+"\n"))
	d.ok(t, "refresh", "docs$chunks", "--wait")

	var rows []struct {
		ID    int       `json:"id"`
		Chunk string    `json:"chunk"`
		Vec   []float32 `json:"vec"`
	}
	if err := json.Unmarshal([]byte(d.ok(t, "query", "docs$chunks", "--columns", "id,chunk,vec")), &rows); err != nil || len(rows) != 5 {
		t.Fatalf("rows: %v %v", rows, err)
	}
	byText := map[string][]float32{}
	for _, r := range rows {
		var norm float64
		for _, x := range r.Vec {
			norm += float64(x) * float64(x)
		}
		if len(r.Vec) != 64 || math.Abs(norm-1) > 1e-4 {
			t.Fatalf("row %d: %d dimensions, norm² %v", r.ID, len(r.Vec), norm)
		}
		if prev, ok := byText[r.Chunk]; ok {
			for i := range prev {
				if prev[i] != r.Vec[i] {
					t.Fatalf("equal texts, different vectors: %q", r.Chunk)
				}
			}
		}
		byText[r.Chunk] = r.Vec
	}
	if len(byText) != 3 {
		t.Fatalf("%d distinct chunks, want 3", len(byText))
	}

	var hits []map[string]any
	out := d.ok(t, "search", "docs$chunks", "--text", "whales in the ocean", "--vector-column", "vec", "-k", "2", "--columns", "id,chunk")
	if err := json.Unmarshal([]byte(out), &hits); err != nil || len(hits) != 2 || hits[0]["id"] != float64(3) || hits[0]["_distance"] == nil {
		t.Fatalf("search: %s %v", out, err)
	}
	if r := d.mvq(t, nil, "search", "docs$chunks", "--vector-column", "vec"); r.code != 2 {
		t.Fatalf("search without --text or --vector: %+v", r)
	}
}

// TestDemoOwnServerDeclaresLocalEmbed: the server mvq demo starts when
// none answers (startOwnServer) declares local-embed as mvq dev does, so the
// README's embedding steps run against it: column add --runtime local-embed
// fills the vectors, and search --text finds the matching chunk.
func TestDemoOwnServerDeclaresLocalEmbed(t *testing.T) {
	wh := filepath.Join(t.TempDir(), "wh")
	cfg, err := service.LoadConfig("mvq demo", []string{"-warehouse", "file://" + wh}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.LogLevel = "127.0.0.1:0", "warn"
	addr, stop, err := startOwnServer(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	d := &dev{url: "http://" + addr, warehouse: wh}

	d.ok(t, "ns", "create", "docs")
	d.ok(t, "table", "create", "docs$a", "--from", writeFile(t, "a.ndjson",
		`{"id": 1, "body": "Whales are mammals that breathe air."}`+"\n"+`{"id": 2, "body": "Yeast makes the bread rise."}`+"\n"))
	job := strings.TrimSpace(d.ok(t, "view", "create", "docs$chunks", "--source", "docs$a", "--chunker", "fixed",
		"--input", "body", "--output", "chunk", "--size", "200"))
	d.ok(t, "jobs", "watch", job)
	if r := d.mvq(t, nil, "column", "add", "docs$chunks", "--name", "vec", "--from", "chunk", "--runtime", "local-embed", "--wait"); r.code != 0 || !strings.Contains(r.stderr, "DONE") {
		t.Fatalf("column add --runtime local-embed on the demo's server: %+v", r)
	}
	var hits []map[string]any
	out := d.ok(t, "search", "docs$chunks", "--text", "whales", "--vector-column", "vec", "-k", "1", "--columns", "id")
	if err := json.Unmarshal([]byte(out), &hits); err != nil || len(hits) != 1 || hits[0]["id"] != float64(1) {
		t.Fatalf("search: %s %v", out, err)
	}
}
