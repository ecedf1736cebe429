package table

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"github.com/mvq-dev/mvq/errs"
)

// Managed versioning (the Lance Namespace's version/create, list and
// describe, which a Lance client uses instead of committing to storage
// itself when describe answers managed_versioning): a Lance client names
// a manifest by its path from the root of its object store, not from the
// table folder: for file:// the absolute path without its leading "/",
// for s3:// and gs:// the key in the bucket. RootPath and RootManifestPath
// give that form; stageVersion accepts it.

// Format is the table format the catalog creates (Options.Format).
func (c *Catalog) Format() string { return c.opts.Format }

// ManagedVersioning reports whether a Lance client should commit version
// m's table through the namespace's version routes: a Lance-format table.
func (m *Manifest) ManagedVersioning() bool { return m.lance }

// RootPath is the table folder as a path from the object store's root
// (no leading or trailing "/").
func (t *Table) RootPath() string {
	loc := t.Location()
	u, err := url.Parse(loc)
	if err != nil || u.Scheme == "" {
		return strings.Trim(loc, "/")
	}
	return strings.Trim(u.Path, "/")
}

// RootManifestPath is ManifestPath from the object store's root.
func (t *Table) RootManifestPath(vf VersionFile) string {
	return t.RootPath() + "/" + t.ManifestPath(vf)
}

// tableRel turns a manifest_path into a path relative to the table
// folder: a full URI of the table, a path from the store's root, or one
// already relative.
func (t *Table) tableRel(p string) string {
	if rel, ok := strings.CutPrefix(p, t.Location()+"/"); ok {
		return rel
	}
	if root := t.RootPath(); root != "" {
		if rel, ok := strings.CutPrefix(p, root+"/"); ok {
			return rel
		}
	}
	return p
}

// CreateDeclaredVersion publishes version 1 of declared table id from a
// manifest its client staged: a Lance client under managed versioning
// creates a declared table with its first version/create. The checks are
// CreateVersionIf's; the table's identity is then that of its version 1
// (Table.Identity), as for any table whose manifests carry none.
func (c *Catalog) CreateDeclaredVersion(ctx context.Context, id []string, v uint64, manifestPath string, scheme NamingScheme, metadata map[string]string, manifestSize *int64, etag string) (*Table, VersionFile, *Manifest, []byte, error) {
	var vf VersionFile
	var data []byte
	t, m, err := c.CreateDeclared(ctx, id, func() (*Table, *Manifest, error) {
		if v != 1 {
			return nil, nil, errs.Errorf(errs.CodeInvalidInput, "version: the first version of declared table %s is 1, not %d", JoinID(id), v)
		}
		t := c.handle(id)
		st, err := t.readStaged(ctx, v, manifestPath, scheme)
		if err != nil {
			return nil, nil, err
		}
		if err := st.m.checkIndexFragments(); err != nil {
			return nil, nil, err
		}
		if err := t.checkFiles(ctx, st.m, nil); err != nil {
			return nil, nil, err
		}
		if err := t.expectStaged(st, manifestSize, etag); err != nil {
			return nil, nil, err
		}
		m := st.m
		data = st.data // the outer data: the caller's e_tag is of what is published
		if metadata != nil || m.Transaction != "" || !m.lance {
			if metadata != nil {
				m.Metadata = metadata
			}
			m.Transaction = ""
			m.lance = c.opts.Format == FormatLance || m.lance
			if m.UUID == "" {
				m.UUID = newIdentity()
			}
			if data, err = m.Encode(); err != nil {
				return nil, nil, stagedEncodeErr(err)
			}
		}
		name := ManifestName(1, scheme)
		err = t.putVersion(ctx, 1, scheme, name, data)
		if errors.Is(err, ErrExists) {
			return nil, nil, errs.Errorf(errs.CodeConcurrentModification, "version 1 already exists")
		}
		if err != nil {
			return nil, nil, err
		}
		vf = VersionFile{Version: 1, Scheme: scheme, Name: name, Size: int64(len(data))}
		return t, m, nil
	})
	if err != nil {
		return nil, VersionFile{}, nil, nil, err
	}
	t.notify(ctx, m)
	return t, vf, m, data, nil
}
