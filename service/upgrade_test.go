package service

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/table"
)

// legacyTable writes one table in the Parquet + JSON layout.
func legacyTable(t *testing.T, uri string) {
	t.Helper()
	ctx := context.Background()
	wh, err := table.OpenWarehouse(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	db, err := duck.Open(duck.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := table.NewCatalog(wh, db, table.Options{Format: table.FormatParquet})
	if err := c.CreateNamespace(ctx, []string{"docs"}, "", nil); err != nil {
		t.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, _ := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	if _, _, err := c.CreateTable(ctx, []string{"docs", "t"}, schema, rdr, "", nil); err != nil {
		t.Fatal(err)
	}
}

// The API and the worker refuse to start, in the Lance table format, on a
// warehouse of the Parquet + JSON layout, naming the command that
// converts it; after it ran they start; an empty warehouse is marked.
func TestServicesRefuseUnconvertedWarehouse(t *testing.T) {
	t.Setenv("MVQ_TABLE_FORMAT", "lance")
	ctx := context.Background()
	uri := "file://" + t.TempDir()
	legacyTable(t, uri)
	env := func(k string) string {
		if k == "MVQ_AUTH" {
			return "none"
		}
		return ""
	}
	never := func(context.Context, string) { t.Error("ready was called") }
	args := map[string][]string{"api": {"-listen", "127.0.0.1:0"}, "worker": {"-metrics-listen", "127.0.0.1:0"}}
	for role, run := range map[string]Runner{
		"api": func(ctx context.Context, cfg Config, _ func(string)) error {
			return RunAPI(ctx, cfg, func(a string) { never(ctx, a) })
		},
		"worker": func(ctx context.Context, cfg Config, _ func(string)) error {
			return RunWorker(ctx, cfg, func(a string) { never(ctx, a) })
		},
	} {
		var out, errOut bytes.Buffer
		err := Run(ctx, role, run, append([]string{"-warehouse", uri}, args[role]...), env, &out, &errOut)
		if err == nil || !strings.Contains(errOut.String(), "mvq "+role+": ") || !strings.Contains(errOut.String(), "`mvq warehouse upgrade`") {
			t.Fatalf("%s: err %v, stderr %q", role, err, errOut.String())
		}
	}
	cfg := Config{Warehouse: uri}
	core, err := OpenCore(ctx, cfg)
	if err == nil {
		core.Close()
		t.Fatal("OpenCore opened an unconverted warehouse")
	}
	wh, err := table.OpenWarehouse(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	db, err := duck.Open(duck.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := table.Upgrade(ctx, table.NewCatalog(wh, db, table.Options{}), table.UpgradeOptions{}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	wh.Close()
	if core, err = OpenCore(ctx, cfg); err != nil {
		t.Fatalf("after the upgrade: %v", err)
	}
	core.Close()

	empty := "file://" + t.TempDir()
	if core, err = OpenCore(ctx, Config{Warehouse: empty}); err != nil {
		t.Fatalf("empty warehouse: %v", err)
	}
	ok, err := table.WarehouseUpgraded(ctx, core.Catalog)
	core.Close()
	if !ok || err != nil {
		t.Fatalf("empty warehouse: marker %v, %v", ok, err)
	}
}
