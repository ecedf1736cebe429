package table

import (
	"context"
	"fmt"
	"time"
)

// CleanupResult reports what CleanupOrphans found.
type CleanupResult struct {
	Referenced int   // data files some version references
	Removed    int   // orphan data files deleted
	Bytes      int64 // their size
	Recent     int   // orphans younger than the grace period, kept
}

// CleanupOrphans deletes data files that no version of the table
// references: what failed or killed writers, cancelled refreshes and
// losing commits left behind. Files younger than grace are kept, since a
// writer may still be about to commit them (use at least the longest
// write-to-commit time, e.g. an hour). Readers are never affected: only
// unreferenced files are removed.
func (t *Table) CleanupOrphans(ctx context.Context, grace time.Duration) (CleanupResult, error) {
	return t.CleanupOrphansKeep(ctx, grace, nil)
}

// CleanupOrphansKeep is CleanupOrphans that also keeps the orphans for
// which keep (given the name under data/) returns true, whatever their
// age: files a writer still working on them will commit. keep may be nil.
func (t *Table) CleanupOrphansKeep(ctx context.Context, grace time.Duration, keep func(name string) bool) (CleanupResult, error) {
	var res CleanupResult
	// List the files first: a file written after this listing is not a
	// candidate, and one committed after it is in a version read below.
	files, err := t.c.wh.List(ctx, t.key+"data/")
	if err != nil {
		return res, err
	}
	vs, err := t.Versions(ctx)
	if err != nil {
		return res, err
	}
	used := map[string]bool{}
	for _, vf := range vs {
		m, err := t.readManifest(ctx, vf)
		if err != nil {
			return res, fmt.Errorf("cleanup %s: %w", JoinID(t.id), err)
		}
		for _, f := range m.Fragments {
			used[f.Path] = true
		}
	}
	// Branches share the table's data files: what a branch references
	// is in use too.
	if err := t.branchPaths(ctx, used); err != nil {
		return res, fmt.Errorf("cleanup %s: %w", JoinID(t.id), err)
	}
	res.Referenced = len(used)
	cutoff := time.Now().Add(-grace)
	for _, f := range files {
		rel := "data/" + f.Name
		if f.IsDir || used[rel] {
			continue
		}
		if f.ModTime.After(cutoff) || (keep != nil && keep(f.Name)) {
			res.Recent++
			continue
		}
		if err := t.c.wh.Delete(ctx, t.key+rel); err != nil {
			return res, err
		}
		res.Removed++
		res.Bytes += f.Size
	}
	return res, nil
}
