package table

import (
	"context"
	"fmt"
	"time"
)

// CleanupResult reports what CleanupOrphans found.
type CleanupResult struct {
	Referenced int   // data and deletion files some version references
	Removed    int   // orphan data and deletion files deleted
	Bytes      int64 // their size
	Recent     int   // orphans younger than the grace period, kept
}

// CleanupOrphans deletes data files (data/) and deletion files
// (_deletions/) that no version of the table references: what failed or
// killed writers, cancelled refreshes and losing commits left behind, and
// the deletion files a later delete superseded once the versions naming
// them are deleted. Files younger than grace are kept, since a
// writer may still be about to commit them (use at least the longest
// write-to-commit time, e.g. an hour). Readers are never affected: only
// unreferenced files are removed.
func (t *Table) CleanupOrphans(ctx context.Context, grace time.Duration) (CleanupResult, error) {
	return t.CleanupOrphansKeep(ctx, grace, nil)
}

// CleanupOrphansKeep is CleanupOrphans that also keeps the orphans for
// which keep (given the name under data/) returns true, whatever their
// age: files a writer still working on them will commit. keep may be nil;
// it is asked about data files only.
func (t *Table) CleanupOrphansKeep(ctx context.Context, grace time.Duration, keep func(name string) bool) (CleanupResult, error) {
	var res CleanupResult
	// List the files first: a file written after this listing is not a
	// candidate, and one committed after it is in a version read below.
	files, err := t.c.wh.List(ctx, t.key+"data/")
	if err != nil {
		return res, err
	}
	dels, err := t.c.wh.List(ctx, t.key+deletionsDir)
	if err != nil {
		return res, err
	}
	used := map[string]bool{}
	read := map[string]bool{} // version files already read
	if err := t.markUsed(ctx, used, read); err != nil {
		return res, err
	}
	res.Referenced = len(used)
	cutoff := time.Now().Add(-grace)
	type candidate struct {
		Entry
		rel  string
		data bool
	}
	var cands []candidate
	for _, f := range files {
		cands = append(cands, candidate{f, "data/" + f.Name, true})
	}
	for _, f := range dels {
		cands = append(cands, candidate{f, deletionsDir + f.Name, false})
	}
	var orphans []candidate
	for _, f := range cands {
		if f.IsDir || used[f.rel] {
			continue
		}
		if f.ModTime.After(cutoff) || (f.data && keep != nil && keep(f.Name)) {
			res.Recent++
			continue
		}
		orphans = append(orphans, f)
	}
	if len(orphans) == 0 {
		return res, nil
	}
	// keep answers false for the files of a writer that has finished,
	// and a writer commits before it finishes: the versions read again
	// now hold every commit of a file keep gave up (one that happened
	// after the first read included).
	if err := t.markUsed(ctx, used, read); err != nil {
		return res, err
	}
	for _, f := range orphans {
		if used[f.rel] {
			res.Recent++
			continue
		}
		if err := t.c.wh.Delete(ctx, t.key+f.rel); err != nil {
			return res, err
		}
		res.Removed++
		res.Bytes += f.Size
	}
	return res, nil
}

// markUsed adds to used the files every version of the table and of its
// branches references, reading only the version files not in read (which
// it extends).
func (t *Table) markUsed(ctx context.Context, used, read map[string]bool) error {
	vs, err := t.Versions(ctx)
	if err != nil {
		return err
	}
	for _, vf := range vs {
		if read[vf.Name] {
			continue
		}
		m, err := t.readManifest(ctx, vf)
		if err != nil {
			return fmt.Errorf("cleanup %s: %w", JoinID(t.id), err)
		}
		fragmentFiles(m, used)
		read[vf.Name] = true
	}
	// Branches share the table's data files: what a branch references
	// is in use too.
	if err := t.branchPaths(ctx, used); err != nil {
		return fmt.Errorf("cleanup %s: %w", JoinID(t.id), err)
	}
	return nil
}

// fragmentFiles adds to used the files the fragments of m name: data
// files and deletion files, relative to the table folder.
func fragmentFiles(m *Manifest, used map[string]bool) {
	for _, f := range m.Fragments {
		for _, p := range f.DataPaths() {
			used[p] = true
		}
		if f.HasDeletions() {
			used[f.deletionPath()] = true
		}
	}
}
