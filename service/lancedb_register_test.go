package service_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
)

// TestRegisterLanceDBDataset: a dataset LanceDB wrote itself
// (lancedb.connect(dir), outside mvq) into the folder of a table of the
// warehouse is adopted by register_table; a view mvq defines over it
// refreshes, and LanceDB reads through the REST namespace the view's rows,
// the ones it wrote. A location outside the warehouse and a folder that
// holds no Lance dataset are 400s naming location.
func TestRegisterLanceDBDataset(t *testing.T) {
	o := oracle.Need(t)
	e := start(t, 1, "default") // register needs admin: no auth here
	if st := e.post("/v1/namespace/docs/create", map[string]any{}, nil); st != 200 {
		t.Fatalf("create namespace: %d", st)
	}
	root := strings.TrimPrefix(e.warehouse, "file://")

	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "body", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := int64(0); i < 120; i++ {
		b.Field(0).(*array.Int64Builder).Append(i)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("row %d", i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	dir := filepath.Join(root, "docs", "raw.lance")
	o.Write(t, dir, rec, "2.1", "create")
	o.Delete(t, dir, "id >= 100") // a deletion file, as LanceDB leaves them

	// Hostile locations first: nothing is adopted.
	other := t.TempDir()
	o.Write(t, filepath.Join(other, "out.lance"), rec, "2.1", "create")
	if err := os.MkdirAll(filepath.Join(root, "docs", "notlance"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "docs", "notlance", "x.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ id, loc string }{
		{"docs$out", "file://" + filepath.Join(other, "out.lance")},
		{"docs$notlance", e.warehouse + "/docs/notlance"},
		{"docs$up", e.warehouse + "/docs/../../x"},
	} {
		var problem map[string]any
		st := e.post("/v1/table/"+c.id+"/register", map[string]any{"location": c.loc}, &problem)
		if st != 400 || !strings.HasPrefix(fmt.Sprint(problem["detail"]), "location") {
			t.Fatalf("register %s at %s: %d %v, want a 400 naming location", c.id, c.loc, st, problem)
		}
	}

	var reg map[string]any
	if st := e.post("/v1/table/docs$raw/register", map[string]any{"location": e.warehouse + "/docs/raw.lance"}, &reg); st != 200 {
		t.Fatalf("register the LanceDB dataset: %d %v", st, reg)
	}
	var rows []map[string]any
	e.post("/v1/table/docs$raw/query", map[string]any{"filter": "id >= 95"}, &rows)
	if len(rows) != 5 {
		t.Fatalf("mvq reads the registered dataset's live rows >= 95 as %d rows, want 5", len(rows))
	}

	var created map[string]any
	if st := e.post("/v1/materialized_view/docs$odd/create", map[string]any{
		"kind": "query", "source_query": `SELECT id, body FROM "docs$raw" WHERE id % 2 = 1`, "output_schema": "",
	}, &created); st != 201 {
		t.Fatalf("create a view over the registered table: %d %v", st, created)
	}
	e.mustDone(created["job_id"].(string))
	got := e.lancedb(o, "read", "docs", "odd")
	var want []int64
	for i := int64(1); i < 100; i += 2 {
		want = append(want, i)
	}
	if got["count"] != 50.0 || fmt.Sprint(ints(got["ids"])) != fmt.Sprint(want) {
		t.Fatalf("LanceDB reads the view over the registered table as %v rows: %v", got["count"], got["ids"])
	}
	// LanceDB opens the registered table itself through mvq, live rows only.
	if got := e.lancedb(o, "read", "docs", "raw"); got["count"] != 100.0 {
		t.Fatalf("LanceDB reads the registered table through mvq: %v", got["count"])
	}
}
