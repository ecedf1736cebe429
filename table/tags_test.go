package table

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/errs"
)

// TestTaggedVersionSurvivesCleanup: deleting versions leaves their data
// files to cleanup, which removes those no version references; a tagged
// version can neither be deleted nor lose its files, and stays readable.
func TestTaggedVersionSurvivesCleanup(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rows := func(ids ...int64) array.RecordReader {
		b := array.NewInt64Builder(memory.DefaultAllocator)
		defer b.Release()
		b.AppendValues(ids, nil)
		col := b.NewArray()
		defer col.Release()
		rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(len(ids)))
		defer rec.Release()
		r, _ := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
		return r
	}
	tb, _, err := c.CreateTable(ctx, []string{"t"}, schema, rows(1, 2), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Delete(ctx, "id = 1"); err != nil { // v2 rewrites v1's file
		t.Fatal(err)
	}
	if _, _, err := tb.Delete(ctx, "id = 2"); err != nil { // v3
		t.Fatal(err)
	}
	if err := tb.CreateTag(ctx, "keep", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.DeleteVersions(ctx, []VersionRange{{Start: 1, End: 2}}); errs.CodeOf(err) != errs.CodeInvalidInput {
		t.Fatalf("delete a tagged version: %v", err)
	}
	if n, err := tb.DeleteVersions(ctx, []VersionRange{{Start: 2, End: 3}}); err != nil || n != 1 {
		t.Fatalf("delete v2: %d %v", n, err)
	}
	res, err := tb.CleanupOrphans(ctx, -time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed < 1 || res.Referenced != 1 {
		t.Fatalf("cleanup: want v2's file removed and v1's kept: %+v", res)
	}
	n, err := tb.CountRows(ctx, 1, "")
	if err != nil || n != 2 {
		t.Fatalf("tagged version 1 after cleanup: %d rows, %v", n, err)
	}
}
