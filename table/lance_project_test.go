package table

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
	"github.com/mvq-dev/mvq/lance/dataset"
)

// TestLanceSchemaChangeRacesLanceDB: mvq's drop_columns and renames change
// only the schema, and their versions carry a Lance Project transaction
// (as LanceDB writes for its own): a LanceDB append and a LanceDB delete
// opened before them rebase over them and land, and mvq and LanceDB then
// read the same rows.
func TestLanceSchemaChangeRacesLanceDB(t *testing.T) {
	o := oracle.Need(t)
	t.Parallel()
	ctx := context.Background()
	root, c := lanceCatalog(t)
	tb, _, err := c.CreateTable(ctx, []string{"docs", "t"}, lanceTestSchema, lanceRows(t, 0, 150), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "docs", "t.lance")
	extra := lanceRows(t, 1000, 1010)
	defer extra.Release()
	if !extra.Next() {
		t.Fatal("no rows")
	}
	app := o.StartAppend(t, dir, extra.RecordBatch())
	del := o.StartDelete(t, dir, "id < 10")
	if app.Version != 1 || del.Version != 1 {
		t.Fatalf("LanceDB opened versions %d and %d, want 1", app.Version, del.Version)
	}
	m2, err := tb.DropColumns(ctx, []string{"score"})
	if err != nil {
		t.Fatal(err)
	}
	rename := "title"
	m3, err := tb.AlterColumns(ctx, []Alteration{{Field: "alterations[0]", Path: "text", Rename: &rename}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []uint64{m2.Version, m3.Version} {
		txn := inlineTxn(t, root, v)
		if got := dataset.OperationName(txn); got != "project" || txn.GetReadVersion() != v-1 {
			t.Fatalf("version %d: transaction %s reading %d, want project reading %d", v, got, txn.GetReadVersion(), v-1)
		}
	}
	if err := app.Finish(); err != nil {
		t.Fatalf("LanceDB's append over mvq's schema changes: %v", err)
	}
	if err := del.Finish(); err != nil {
		t.Fatalf("LanceDB's delete over mvq's schema changes: %v", err)
	}
	m, err := tb.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != m3.Version+2 {
		t.Fatalf("latest version %d, want %d (both LanceDB commits)", m.Version, m3.Version+2)
	}
	sc, err := m.ArrowSchema()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(fieldNames(sc), ","); got != "id,title,vec,meta" {
		t.Fatalf("schema after the race: %s", got)
	}
	sameAsLanceDB(t, o, tb, dir, 150)
	if n, err := tb.CountRows(ctx, 0, "title = 'doc 1005'"); err != nil || n != 1 {
		t.Fatalf("mvq counts %d rows of LanceDB's append by the renamed column (%v), want 1", n, err)
	}
	if n, err := tb.CountRows(ctx, 0, "id < 10"); err != nil || n != 0 {
		t.Fatalf("mvq counts %d rows LanceDB deleted (%v), want 0", n, err)
	}

}

func fieldNames(s *arrow.Schema) []string {
	var out []string
	for _, f := range s.Fields() {
		out = append(out, f.Name)
	}
	return out
}
