package table

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Moving mvq's index files out of Lance's way. mvq kept its index
// definitions (_indices/<name>@<seq>.json, _indices/<name>.json) and the
// files of each build (_indices/<uuid>/frag-<id>.idx, centroids.idx) in
// Lance's index folder, where Lance's cleanup deletes every file no Lance
// index names. They now live in IndexDir; Upgrade moves them there, line
// by line, leaving Lance's own indexes (folders no mvq definition names)
// where they are.
//
// Resumable and crash-safe: every file is copied before any is deleted,
// definitions last (a definition never names a build whose files are not
// at its side), and a rerun finds the builds to move from the definitions
// in both folders.

// legacyDefRE matches a mvq index definition file name in LegacyIndexDir.
var legacyDefRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}(@[0-9]{20})?\.json$`)

// legacyIndexes lists line's mvq index files in LegacyIndexDir: the
// definition files, and the files of the builds that a definition (in
// either folder) names, as keys relative to the line's folder.
func (c *Catalog) legacyIndexes(ctx context.Context, line *Table) (defs, builds []string, err error) {
	old := line.LineKey(LegacyIndexDir)
	entries, err := c.wh.List(ctx, old)
	if err != nil || len(entries) == 0 {
		return nil, nil, err
	}
	uuids := map[string]bool{}
	readDefs := func(prefix string, keep bool) error {
		es, err := c.wh.List(ctx, prefix)
		if err != nil {
			return err
		}
		for _, e := range es {
			if e.IsDir || !legacyDefRE.MatchString(e.Name) {
				continue
			}
			b, err := c.wh.Read(ctx, prefix+e.Name)
			if err != nil {
				return err
			}
			var d struct {
				UUID string `json:"uuid"`
			}
			if json.Unmarshal(b, &d) != nil {
				continue // not one of mvq's definitions
			}
			if d.UUID != "" {
				uuids[d.UUID] = true
			}
			if keep {
				defs = append(defs, e.Name)
			}
		}
		return nil
	}
	if err := readDefs(old, true); err != nil {
		return nil, nil, err
	}
	if err := readDefs(line.LineKey(IndexDir), false); err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		if !e.IsDir || !uuids[e.Name] {
			continue
		}
		files, err := c.wh.Walk(ctx, old+e.Name+"/")
		if err != nil {
			return nil, nil, err
		}
		for _, f := range files {
			builds = append(builds, strings.TrimPrefix(f, old))
		}
	}
	return defs, builds, nil
}

// moveIndexes moves line's mvq index files from LegacyIndexDir to IndexDir
// and answers how many it moved.
func (u *upgrader) moveIndexes(ctx context.Context, line *Table) (int, error) {
	defs, builds, err := u.c.legacyIndexes(ctx, line)
	if err != nil || len(defs)+len(builds) == 0 || u.o.DryRun {
		return len(defs) + len(builds), err
	}
	from, to := line.LineKey(LegacyIndexDir), line.LineKey(IndexDir)
	all := append(append([]string(nil), builds...), defs...)
	for _, rel := range all {
		if err := u.step(); err != nil {
			return 0, err
		}
		if err := u.c.wh.CopyObject(ctx, from+rel, to+rel); err != nil {
			return 0, fmt.Errorf("move index file %s: %w", rel, err)
		}
	}
	// Definitions go first, so no old definition names a build whose
	// files are gone.
	for _, rel := range append(append([]string(nil), defs...), builds...) {
		if err := u.step(); err != nil {
			return 0, err
		}
		if err := u.c.wh.Delete(ctx, from+rel); err != nil {
			return 0, fmt.Errorf("remove moved index file %s: %w", rel, err)
		}
	}
	return len(all), nil
}

// hasLegacyIndexes reports whether a line of table t keeps mvq index
// files in LegacyIndexDir, naming the first one.
func (c *Catalog) hasLegacyIndexes(ctx context.Context, t *Table, lines []*Table) (string, error) {
	for _, line := range lines {
		defs, builds, err := c.legacyIndexes(ctx, line)
		if err != nil {
			return "", err
		}
		if len(defs)+len(builds) > 0 {
			return path.Join(line.LineKey(LegacyIndexDir), append(defs, builds...)[0]), nil
		}
	}
	return "", nil
}
