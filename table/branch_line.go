package table

import (
	"context"

	"github.com/mvq-dev/mvq/errs"
)

// What other parts keep per line of versions (main or a branch): the
// secondary indexes (package index) live in the line's folder, so each
// line has its own and a branch starts with none; a batch entry names the
// line it commits to (TxnEntry.Branch).

// LineKey returns the warehouse key of rel inside the folder of the
// handle's line: the table folder for main, tree/{b}/ inside it for
// branch b (deleted with the branch).
func (t *Table) LineKey(rel string) string {
	if t.branch == "" {
		return t.key + rel
	}
	return t.key + branchTreeDir + t.branch + "/" + rel
}

// lineHandle is a handle on branch b ("" or "main": main) of table id,
// without checking that either exists.
func (c *Catalog) lineHandle(id []string, b string) *Table {
	t := c.handle(id)
	if b != MainBranch {
		t.branch = b
	}
	return t
}

// maintainLine runs the index maintainer for a commit on a branch (the
// commit hook, auto-refresh, is for main's commits only).
func (c *Catalog) maintainLine(ctx context.Context, t *Table, m *Manifest) {
	c.maintainIndexes(ctx, t, m)
}

// committedOn runs what follows a commit of m on t's line: the commit
// hook (with index maintenance) on main, index maintenance on a branch.
func (c *Catalog) committedOn(ctx context.Context, t *Table, m *Manifest) {
	if t.branch == "" {
		c.committed(ctx, t.id, m)
		return
	}
	c.maintainLine(ctx, t, m)
}

// openLine opens table id (errs.CodeTableNotFound) on branch b ("" or "main":
// main; errs.CodeTableBranchNotFound when it has no such branch).
func (c *Catalog) openLine(ctx context.Context, id []string, b string) (*Table, error) {
	t, err := c.OpenTable(ctx, id)
	if err != nil || b == "" || b == MainBranch {
		return t, err
	}
	return t.OnBranch(ctx, b)
}

// txnsHolding returns the transactions with a marker in any line of t:
// main's _versions/ and every branch's.
func (c *Catalog) txnsHolding(ctx context.Context, t *Table) (map[string]bool, error) {
	folders := []string{t.key + versionsDir}
	trees, err := c.wh.List(ctx, t.key+branchTreeDir)
	if err != nil {
		return nil, err
	}
	for _, e := range trees {
		if e.IsDir {
			folders = append(folders, t.key+branchTreeDir+e.Name+"/"+versionsDir)
		}
	}
	ids := map[string]bool{}
	for _, f := range folders {
		entries, err := c.wh.List(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if mk, ok := parseTxnMarker(e.Name); ok {
				ids[mk.id] = true
			}
		}
	}
	return ids, nil
}

// branchField names an entry's branch field in err's message when err is
// about its branch.
func branchField(field string, err error) string {
	if errs.CodeOf(err) == errs.CodeTableBranchNotFound {
		return field + ".branch"
	}
	return field
}
