package table

import (
	"context"
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/errs"
)

// copyFolder copies every file under from to to (keys ending in "/"), as
// someone with access to the bucket could.
func copyFolder(t *testing.T, c *Catalog, from, to string) {
	t.Helper()
	ctx := context.Background()
	files, err := c.wh.Walk(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := c.wh.CopyObject(ctx, f, to+strings.TrimPrefix(f, from)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRegisterAdoptsOnlyTableRootsOfItsNamespace: register refuses a
// branch folder (tree/) or any other part of a table, another namespace's
// folder, the catalog's own folders, and a folder whose identity another
// table has; nothing moves. A folder deregister left says where it came
// from, and a table root inside the namespace is adopted.
func TestRegisterAdoptsOnlyTableRootsOfItsNamespace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	for _, ns := range []string{"A", "B"} {
		if err := c.CreateNamespace(ctx, []string{ns}, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	secret, _, err := c.CreateTable(ctx, []string{"B", "secret"}, testSchema, rows(t, 0, 10), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := secret.CreateBranch(ctx, "dev", "", 0); err != nil {
		t.Fatal(err)
	}
	m, err := secret.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	secretID, err := secret.Identity(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	mine, _, err := c.CreateTable(ctx, []string{"A", "mine"}, testSchema, rows(t, 0, 3), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mine.CreateBranch(ctx, "dev", "", 0); err != nil {
		t.Fatal(err)
	}
	// A copy of B's table inside A keeps B's identity.
	copyFolder(t, c, "B/secret.lance/", "A/import/")
	uri := c.wh.Root() + "/"
	x := []string{"A", "x"}
	for _, tc := range []struct {
		loc  string
		code errs.Code
	}{
		{"B/secret.lance/tree/dev", errs.CodeInvalidInput}, // another namespace's branch
		{uri + "B/secret.lance/tree/dev/", errs.CodeInvalidInput},
		{"A/mine.lance/tree/dev", errs.CodeInvalidInput}, // even one of the namespace's own tables
		{"B/secret.lance", errs.CodeInvalidInput},
		{"A/mine.lance", errs.CodeInvalidInput},
		{"B", errs.CodeInvalidInput},
		{"A", errs.CodeInvalidInput}, // the namespace itself: it holds tables
		{"_identity", errs.CodeInvalidInput},
		{"A/_refs", errs.CodeInvalidInput},
		{"_deregistered/" + secretID + ".lance/tree/dev", errs.CodeInvalidInput},
		{"_deregistered", errs.CodeInvalidInput},
		{"A//import", errs.CodeInvalidInput},
		{"A/import", errs.CodeTableAlreadyExists}, // B's identity
	} {
		if _, err := c.RegisterTable(ctx, x, tc.loc, "", nil); errs.CodeOf(err) != tc.code {
			t.Errorf("register %s from %q: %v, want code %d", JoinID(x), tc.loc, err, tc.code)
		}
	}
	if ok, _ := c.tableExists(ctx, x); ok {
		t.Fatal("A$x exists after refused registers")
	}
	// B's table and its branch are whole, under B's identity.
	if br, err := secret.OnBranch(ctx, "dev"); err != nil {
		t.Fatalf("B's branch: %v", err)
	} else if n, err := br.CountRows(ctx, 0, ""); err != nil || n != 10 {
		t.Fatalf("B's branch has %d rows (%v)", n, err)
	}
	if got, err := c.Resolve(ctx, []string{"B", "secret"}, secretID); err != nil || JoinID(got.ID()) != "B$secret" {
		t.Fatalf("B's identity resolves to %v (%v)", got, err)
	}

	// A table root inside A with an identity of its own is adopted.
	if err := c.DropTable(ctx, []string{"B", "secret"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterTable(ctx, x, "A/import", "", nil); err != nil {
		t.Fatalf("register a table root inside A: %v", err)
	}

	// A folder deregister left names the table it was.
	loc, err := c.DeregisterTable(ctx, []string{"A", "mine"})
	if err != nil {
		t.Fatal(err)
	}
	var seen RegisterSource
	if _, err := c.RegisterTable(ctx, []string{"B", "taken"}, loc, "", func(s RegisterSource) error {
		seen = s
		return errs.Errorf(errs.CodePermissionDenied, "no")
	}); errs.CodeOf(err) != errs.CodePermissionDenied {
		t.Fatalf("register refused by allow: %v", err)
	}
	if !seen.Deregistered || !seen.Known || JoinID(seen.Namespace) != "A" {
		t.Fatalf("register asked about %+v, want a folder deregistered from A", seen)
	}
	if _, err := c.RegisterTable(ctx, []string{"A", "back"}, loc, "", nil); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.wh.Exists(ctx, deregisteredDir+strings.TrimSuffix(strings.TrimPrefix(loc, uri+deregisteredDir), tableSuffix)+originExt); ok {
		t.Fatal("the origin record outlived the register")
	}
}
