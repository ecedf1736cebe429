package table

import (
	"context"
	"path/filepath"
	"testing"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
)

// TestLanceDropLastColumnThenMvqCommit: LanceDB drops the schema's last
// column; an mvq delete then writes the fragments again, with the layout
// read from LanceDB's listing (their files still hold the dropped column
// last). mvq must not read its own version as if the files held only the
// schema's columns: mvq and LanceDB read the same rows.
func TestLanceDropLastColumnThenMvqCommit(t *testing.T) {
	o := oracle.Need(t)
	t.Parallel()
	ctx := context.Background()
	root, c := lanceCatalog(t)
	tb, _, err := c.CreateTable(ctx, []string{"docs", "t"}, lanceTestSchema, lanceRows(t, 0, 150), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "docs", "t.lance")
	o.DropColumns(t, dir, "score")
	sameAsLanceDB(t, o, tb, dir, 150)
	if _, _, err := tb.Delete(ctx, "id < 5"); err != nil {
		t.Fatal(err)
	}
	sameAsLanceDB(t, o, tb, dir, 145)
}

// TestLanceMvqDropLastRacesLanceDBDelete: mvq drops the last column while
// a LanceDB delete is open; the delete rebases over mvq's Project (its
// fragments carry LanceDB's older listing); an mvq delete then writes
// them again. mvq and LanceDB read the same rows at each step.
func TestLanceMvqDropLastRacesLanceDBDelete(t *testing.T) {
	o := oracle.Need(t)
	t.Parallel()
	ctx := context.Background()
	root, c := lanceCatalog(t)
	tb, _, err := c.CreateTable(ctx, []string{"docs", "t"}, lanceTestSchema, lanceRows(t, 0, 150), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "docs", "t.lance")
	del := o.StartDelete(t, dir, "id < 10")
	if _, err := tb.DropColumns(ctx, []string{"score"}); err != nil {
		t.Fatal(err)
	}
	if err := del.Finish(); err != nil {
		t.Fatal(err)
	}
	sameAsLanceDB(t, o, tb, dir, 140)
	if _, _, err := tb.Delete(ctx, "id >= 145"); err != nil {
		t.Fatal(err)
	}
	sameAsLanceDB(t, o, tb, dir, 135)
}
