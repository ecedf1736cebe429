package table

import (
	"context"
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/errs"
)

// TestRegisterErrorHidesWarehouseRoot: a register location outside the
// warehouse is a 400 naming the field, not the warehouse's absolute root
// (issue: errors showed the absolute warehouse URI to any caller).
func TestRegisterErrorHidesWarehouseRoot(t *testing.T) {
	dir := t.TempDir()
	c := newCatalog(t, dir, Options{})
	ctx := context.Background()
	if err := c.CreateNamespace(ctx, []string{"docs"}, "", nil); err != nil {
		t.Fatal(err)
	}
	root := strings.TrimPrefix(strings.TrimRight(c.Warehouse().URI(), "/"), "file://")
	for _, loc := range []string{"s3://elsewhere/t.lance", "file:///elsewhere/t.lance", "../x"} {
		_, err := c.RegisterTable(ctx, []string{"docs", "r"}, loc, "", nil)
		if errs.CodeOf(err) != errs.CodeInvalidInput || !strings.Contains(err.Error(), "location") {
			t.Fatalf("%s: %v, want invalid input naming location", loc, err)
		}
		if strings.Contains(err.Error(), root) {
			t.Errorf("%s: the error shows the warehouse root %s: %v", loc, root, err)
		}
	}
}
