package refresh

import (
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// TestViewRefusesDirectWrites: the write guard refresh registers refuses
// direct writes to a view with the messages users see, and leaves plain
// tables writable.
func TestViewRefusesDirectWrites(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	src := b.source(t, frag0)
	id := b.create(t, "v", CreateRequest{Kind: "query", SourceQuery: queryView})
	v, err := b.cat.OpenTable(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error, want string) {
		t.Helper()
		if errs.CodeOf(err) != errs.CodeInvalidInput || !strings.Contains(err.Error(), want) {
			t.Errorf("%s on a view: %v", what, err)
		}
	}
	_, _, err = v.Delete(b.ctx, "id > 0")
	refused("delete", err, "docs$v is a materialized view: delete is not allowed; refresh it instead")
	_, _, err = v.Update(b.ctx, "id > 0", [][2]string{{"title", "'x'"}})
	refused("update", err, "docs$v is a materialized view: update is not allowed; refresh it instead")
	_, err = v.DropColumns(b.ctx, []string{"title"})
	refused("drop_columns", err, "docs$v is a materialized view:")
	err = b.cat.RenameTable(b.ctx, id, []string{"docs", "v2"})
	refused("rename", err, "docs$v is a materialized view: rename is not allowed (its jobs know it by name); create the view again under the new name")
	if _, _, err := src.Delete(b.ctx, "id = 1"); err != nil {
		t.Fatalf("delete on a table: %v", err)
	}
}
