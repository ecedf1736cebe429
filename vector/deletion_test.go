package vector

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/lance/dataset"
	"github.com/mvq-dev/mvq/lance/pb/tablepb"
	"github.com/mvq-dev/mvq/table"
)

// deleteRow gives fragment 0 of tb a deletion file (as a Lance writer's
// delete does) holding positions rows, counted as want in the manifest.
func deleteRow(t *testing.T, tb *table.Table, id uint64, rows []uint32, want int64) {
	t.Helper()
	ctx := context.Background()
	m, err := tb.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := m.Fragments[0]
	df := &tablepb.DeletionFile{FileType: tablepb.DeletionFile_ARROW_ARRAY, ReadVersion: m.Version, Id: id, NumDeletedRows: uint64(want)}
	b, err := dataset.EncodeDeletionArrow(roaring.BitmapOf(rows...))
	if err != nil {
		t.Fatal(err)
	}
	dir := strings.TrimPrefix(tb.Location(), "file://")
	if err := os.MkdirAll(dir+"/_deletions", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/_deletions/"+dataset.DeletionFileName(uint64(f.ID), df), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Commit(ctx, func(base *table.Manifest) (*table.Manifest, error) {
		fr := &base.Fragments[0]
		fr.DeletionID, fr.DeletionReadVersion, fr.DeletedRows = id, m.Version, want
		fr.Rows = fr.PhysicalRows() - want
		base.Operation = "delete"
		return base, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestSearchAfterDeletionFile: a search that cached a fragment's vectors
// does not use them once a deletion file changes the fragment's rows; a
// deletion file that disagrees with its manifest is an error, not a panic.
func TestSearchAfterDeletionFile(t *testing.T) {
	const n, dim = 20, 4
	vec := randVec(7, dim)
	tb := vecTableOpts(t, n, dim, vec, table.Options{Format: table.FormatLance, MaxRowsPerFragment: 1000})
	ctx := context.Background()
	if _, err := Search(ctx, tb, Query{Vector: vec(5), K: 1, Columns: []string{"id"}}, nil); err != nil {
		t.Fatal(err)
	}
	deleteRow(t, tb, 7, []uint32{0}, 1)
	for _, q := range []int{5, 0} {
		rec, err := Search(ctx, tb, Query{Vector: vec(q), K: 1, Columns: []string{"id"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprint(ids(t, rec))
		if q == 5 && got != "[5]" || q == 0 && got == "[0]" {
			t.Fatalf("after deleting id 0, the nearest to vector %d is %s", q, got)
		}
	}
	// The manifest says 2 deleted rows, the file holds none.
	deleteRow(t, tb, 9, nil, 2)
	m, err := tb.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Deleted(ctx, m.Fragments[0]); errs.CodeOf(err) != errs.CodeInvalidTableState {
		t.Fatalf("a deletion file that disagrees with the manifest: %v", err)
	}
}
