package table

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/duck"
	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
)

var raceSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "y", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

func raceRows(n int) array.RecordReader {
	s := raceSchema
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.Int64Builder).Append(int64(100 + i))
		b.Field(2).(*array.Int64Builder).Append(int64(200 + i))
	}
	r := b.NewRecordBatch()
	rr, _ := array.NewRecordReader(s, []arrow.RecordBatch{r})
	return rr
}

func raceDump(t *testing.T, tb *Table) string {
	rdr, err := tb.Query(context.Background(), QueryOptions{Filter: "id < 3"})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := duck.Collect(rdr)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, r := range recs {
		for i := 0; i < int(r.NumRows()); i++ {
			for c, f := range r.Schema().Fields() {
				fmt.Fprintf(&sb, "%s=%s ", f.Name, r.Column(c).ValueStr(i))
			}
			sb.WriteString("; ")
		}
	}
	return sb.String()
}

// TestDeleteRacesDropColumns: mvq's own drop_columns lands between a
// delete's read and its commit. The delete's fragments keep their data
// files and get deletion files, so they take the layout the drop gave
// them: every column reads its own values and the row is gone.
func TestDeleteRacesDropColumns(t *testing.T) {
	ctx := context.Background()
	_, c := lanceCatalog(t)
	tb, _, err := c.CreateTable(ctx, []string{"docs", "t"}, raceSchema, raceRows(10), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before: %s", raceDump(t, tb))
	hooked := context.WithValue(ctx, rewriteHookKey{}, func() {
		if _, err := tb.DropColumns(ctx, []string{"x"}); err != nil {
			t.Errorf("drop: %v", err)
		}
	})
	if _, _, err := tb.Delete(hooked, "id = 5"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	got := raceDump(t, tb)
	t.Logf("after: %s", got)
	if !strings.Contains(got, "y=200") {
		t.Fatalf("y no longer reads its own values: %s", got)
	}
	if n, err := tb.CountRows(ctx, 0, "id = 5"); err != nil || n != 0 {
		t.Fatalf("the deleted row: %d, %v", n, err)
	}
}

// TestDeleteRacesLanceDBSchemaChange: LanceDB's drop_columns and an added
// null column land between an mvq delete's read and its commit, on
// fragments of two files (LanceDB's add_columns): the delete commits
// with the layout LanceDB left, and mvq and LanceDB read the same rows.
func TestDeleteRacesLanceDBSchemaChange(t *testing.T) {
	o := oracle.Need(t)
	ctx := context.Background()
	root, c := lanceCatalog(t)
	tb, _, err := c.CreateTable(ctx, []string{"docs", "t"}, raceSchema, raceRows(10), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "docs", "t.lance")
	o.AddColumns(t, dir, map[string]string{"w": "id * 2"})
	t.Logf("before: %s", raceDump(t, tb))
	hooked := context.WithValue(ctx, rewriteHookKey{}, func() {
		o.DropColumns(t, dir, "x")
		o.AddNullColumn(t, dir, "z", "int64")
	})
	if _, _, err := tb.Delete(hooked, "id = 5"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	got := raceDump(t, tb)
	t.Logf("after (mvq): %s", got)
	if !strings.Contains(got, "y=200") || !strings.Contains(got, "z=(null)") {
		t.Fatalf("columns misplaced: %s", got)
	}
	if n := o.Count(t, dir, "z IS NULL"); n != 9 {
		t.Fatalf("LanceDB counts %d rows with z null, want 9", n)
	}
	sameAsLanceDB(t, o, tb, dir, 9)
}

// TestUpdateRacesDropColumns: mvq's drop_columns lands between an
// update's read and its commit. The update's rows were rewritten under
// the schema it read, so it is refused as a concurrent change to retry,
// and the table reads as the drop left it.
func TestUpdateRacesDropColumns(t *testing.T) {
	ctx := context.Background()
	_, c := lanceCatalog(t)
	tb, _, err := c.CreateTable(ctx, []string{"docs", "t"}, raceSchema, raceRows(10), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	dropped := false
	hooked := context.WithValue(ctx, rewriteHookKey{}, func() {
		if dropped {
			return
		}
		dropped = true
		if _, err := tb.DropColumns(ctx, []string{"x"}); err != nil {
			t.Errorf("drop: %v", err)
		}
	})
	if _, _, err := tb.Update(hooked, "id = 1", [][2]string{{"y", "7"}}); err == nil || !strings.Contains(err.Error(), "concurrent") {
		t.Fatalf("update across a drop: %v, want a concurrent change to retry", err)
	}
	if got := raceDump(t, tb); !strings.Contains(got, "id=0 y=200 ;") || !strings.Contains(got, "id=1 y=201 ;") {
		t.Fatalf("after the refused update: %s", got)
	}
	if _, n, err := tb.Update(ctx, "id = 1", [][2]string{{"y", "7"}}); err != nil || n != 1 {
		t.Fatalf("the update again: %d, %v", n, err)
	}
	if got := raceDump(t, tb); !strings.Contains(got, "id=1 y=7 ;") {
		t.Fatalf("after the update: %s", got)
	}
}
