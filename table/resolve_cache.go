package table

import (
	"context"
	"errors"
	"os"
)

// Resolve is on the path of every refresh accept (it binds a view's
// source by identity). Two things made it cost: reading the source's latest
// manifest only to learn its identity, and, on file:// warehouses, asking
// fileblob for an _identity/ record that almost never exists (its
// not-found error is built and formatted at length).
//
// Catalog.idents keeps, per table folder, the identity read from one
// version file, keyed by that file as the listing returned it (name, size,
// time, content hash: what the view cache keys on). A hit needs the same
// file to be the table's latest version now, found by the same listing
// Load makes; a manifest file is written once and never changed in place
// (put-if-not-exists), so the same file is the same manifest and the same
// identity. Any new version, a rollback, a drop and re-create changes the
// latest file and misses. Nothing else is cached: the move record is still
// looked at on every call, first, as before.
type identityEntry struct {
	vf       VersionFile
	identity string
}

// identsBytes bounds Catalog.idents: some thousands of tables.
const identsBytes = 1 << 20

// size is the entry's share of identsBytes under key.
func (e identityEntry) size(key string) int64 {
	return int64(len(key)+len(e.identity)+len(e.vf.Name)+len(e.vf.MD5)) + 128
}

// Same reports whether a and b are the same file as listed (a manifest
// file is never changed in place, so the same file is the same manifest).
func (a VersionFile) Same(b VersionFile) bool {
	return a.Version == b.Version && a.Name == b.Name && a.Size == b.Size && a.ModTime.Equal(b.ModTime) && string(a.MD5) == string(b.MD5)
}

// latestIdentity is the identity of the table t (on main) at its latest
// version, as t.Load(ctx, 0) and t.Identity would find it, with the
// identity cached per version file. A table with no version answers
// OpenTable's not-found error.
func (c *Catalog) latestIdentity(ctx context.Context, t *Table) (string, error) {
	for attempt := 0; ; attempt++ {
		vf, err := t.LatestVersion(ctx)
		if err != nil {
			return "", err
		}
		if e, ok := c.idents.Get(t.key); ok && e.vf.Same(vf) {
			return e.identity, nil
		}
		m, err := t.readManifest(ctx, vf)
		if errors.Is(err, os.ErrNotExist) && attempt < 20 {
			continue // removed since the listing (a move, a rollback): list again
		}
		if err != nil {
			return "", err
		}
		id, err := t.Identity(ctx, m)
		if err != nil {
			return "", err
		}
		e := identityEntry{vf: vf, identity: id}
		c.idents.Set(t.key, e, e.size(t.key))
		return id, nil
	}
}
