package index_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/table"
)

// TestIndexChangesDuringMove: an index created, or dropped, while a
// rename of its table is under way (the old name sealed, the folder
// already copied) is taken back and answers the move's conflict; the
// renamed table has exactly the indexes it had when it was copied.
func TestIndexChangesDuringMove(t *testing.T) {
	if os.Getenv("MVQ_TEST_NO_MOVE_GUARD") == "1" {
		index.SkipMoveGuard(true) // shows the test fails without the guard
		defer index.SkipMoveGuard(false)
	}
	ctx := context.Background()
	cat := newCatalog(t, table.Options{SealGrace: 3 * time.Second})
	rec := scalarRows(0, 200)
	tb, _, err := cat.CreateTable(ctx, []string{"ns", "a"}, scalarSchema, reader(rec), "", nil)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := index.Create(ctx, tb, index.Spec{Column: "id", Type: index.BTree, Name: "by_id"}); err != nil {
		t.Fatal(err)
	}
	renamed := make(chan error, 1)
	go func() { renamed <- cat.RenameTable(ctx, tb.ID(), []string{"ns", "b"}) }()
	// The rename seals the old name, copies, then waits out the grace:
	// an insert answering "renamed to" says it is in that window.
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec := scalarRows(1000, 1001)
		_, _, err := tb.Insert(ctx, reader(rec), "append")
		rec.Release()
		if err != nil && strings.Contains(err.Error(), "renamed to") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rename never sealed the table (last insert: %v)", err)
		}
	}
	if _, err := index.Create(ctx, tb, index.Spec{Column: "k", Type: index.Bitmap, Name: "by_k"}); errs.CodeOf(err) != errs.CodeConcurrentModification {
		t.Fatalf("index created during the move: %v", err)
	}
	if err := index.Drop(ctx, tb, "by_id"); errs.CodeOf(err) != errs.CodeConcurrentModification {
		t.Fatalf("index dropped during the move: %v", err)
	}
	select {
	case err := <-renamed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the rename never finished")
	}
	moved, err := cat.OpenTable(ctx, []string{"ns", "b"})
	if err != nil {
		t.Fatal(err)
	}
	metas, err := index.List(ctx, moved)
	if err != nil {
		t.Fatal(err)
	}
	if len(metas) != 1 || metas[0].Name != "by_id" {
		var names []string
		for _, m := range metas {
			names = append(names, m.Name)
		}
		t.Fatalf("renamed table's indexes: %v, want [by_id]", names)
	}
}
