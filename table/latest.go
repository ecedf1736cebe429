package table

import (
	"context"
	"sort"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table/internal/warehouse"
)

// Finding a table's latest version (and whether it has one) is on the path
// of every refresh accept, so on file:// warehouses it reads the names of
// _versions/ straight from the directory (one open and getdents) instead of
// through fileblob's List, which walks the folder, tries a sidecar
// attribute file and stats every entry. Only the version chosen is stat'ed
// (its size and time key caches), and while the folder is as the kept
// listing found it, that stat is answered from memory too (the warehouse's
// StatListed: a manifest is never written in place, so an unchanged
// folder holds the same file). The names are judged exactly as
// Versions judges a listing (the same parse, the same transaction
// markers), so the answer is the same; other stores list as before.
//
// A latest-version hint object (read with one GET, then probing forward)
// was weighed and left: a stale hint below a version deleted from the
// middle of the history (cleanup keeps tagged versions, delete_table_versions
// takes any range) would stop the probe early, and the batch transaction
// markers that hide versions are found only by listing.

// versionNames returns the table's versions as Versions does, ascending,
// without their sizes and times on file:// warehouses (stat them with
// statVersion); other stores list, with them.
func (t *Table) versionNames(ctx context.Context) ([]VersionFile, error) {
	vs, _, err := t.listVersionNames(ctx)
	return vs, err
}

// versionNamesAt is versionNames with the state of the folder they were
// read in, for statVersionAt. The versions judged from a kept listing
// with no transaction marker and no seal (whose judgement reads those
// files) are kept with it (Catalog.listed): the same names give the same
// versions. Callers must not change the slice.
func (t *Table) versionNamesAt(ctx context.Context) ([]VersionFile, warehouse.Listed, error) {
	if t.c.wh.Dir() == "" {
		vs, _, l, err := t.listVersionNamesAt(ctx)
		return vs, l, err
	}
	entries, l, err := t.c.wh.ListNamesAt(t.versionsKey())
	if err != nil {
		return nil, l, err
	}
	if l.Kept() {
		if vs, ok := t.c.listed.Get(l); ok {
			return vs, l, nil
		}
	}
	vs, _, plain, err := t.judgeVersions(ctx, entries)
	if err == nil && plain && l.Kept() {
		size := int64(64)
		for _, vf := range vs {
			size += int64(len(vf.Name)) + 96
		}
		t.c.listed.Put(l, vs, size)
	}
	return vs, l, err
}

// listedBytes bounds Catalog.listed.
const listedBytes = 4 << 20

// latestVersion is LatestVersion on the cheapest listing the store has.
func (t *Table) latestVersion(ctx context.Context) (VersionFile, error) {
	for range 3 {
		vs, l, err := t.versionNamesAt(ctx)
		if err != nil {
			return VersionFile{}, err
		}
		if len(vs) == 0 {
			return VersionFile{}, t.noVersions()
		}
		vf, ok, err := t.statVersionAt(l, vs[len(vs)-1])
		if err != nil {
			return VersionFile{}, err
		}
		if ok {
			return vf, nil
		}
		// Gone between the listing and the stat (a rollback, a drop):
		// look again.
	}
	vs, err := t.Versions(ctx)
	if err != nil {
		return VersionFile{}, err
	}
	if len(vs) == 0 {
		return VersionFile{}, t.noVersions()
	}
	return vs[len(vs)-1], nil
}

// version is Version on the cheapest listing the store has.
func (t *Table) version(ctx context.Context, v uint64) (VersionFile, error) {
	vs, l, err := t.versionNamesAt(ctx)
	if err != nil {
		return VersionFile{}, err
	}
	i := sort.Search(len(vs), func(i int) bool { return vs[i].Version >= v })
	if i == len(vs) || vs[i].Version != v {
		return VersionFile{}, errs.Errorf(errs.CodeTableVersionNotFound, "table %s has no version %d", JoinID(t.id), v)
	}
	vf, ok, err := t.statVersionAt(l, vs[i])
	if err != nil {
		return VersionFile{}, err
	}
	if !ok {
		// Removed meanwhile.
		return VersionFile{}, errs.Errorf(errs.CodeTableVersionNotFound, "table %s has no version %d", JoinID(t.id), v)
	}
	return vf, nil
}

// statVersion fills in the size and time of a version versionNames
// found on a file:// warehouse (others have them already); ok is false
// when the file is gone.
func (t *Table) statVersion(vf VersionFile) (VersionFile, bool, error) {
	return t.statVersionAt(warehouse.Listed{}, vf)
}

// statVersionAt is statVersion for a version of a listing read at l: from
// the warehouse's memory while the folder is as l found it (the readers'
// LatestVersion and Version; a commit stats afresh).
func (t *Table) statVersionAt(l warehouse.Listed, vf VersionFile) (VersionFile, bool, error) {
	if t.c.wh.Dir() == "" {
		return vf, true, nil
	}
	size, mtime, ok, err := t.c.wh.StatListed(l, t.versionsKey(), vf.Name)
	if !ok || err != nil {
		return vf, false, err
	}
	vf.Size, vf.ModTime = size, mtime
	return vf, true, nil
}

// versionsOf judges a listing of _versions/: manifests by name (V2 wins
// over V1 for one version), versions of batch transactions that did not
// commit hidden; ascending.
func (t *Table) versionsOf(ctx context.Context, entries []Entry) ([]VersionFile, *Manifest, error) {
	vs, seal, _, err := t.judgeVersions(ctx, entries)
	return vs, seal, err
}

// judgeVersions is versionsOf; plain is true when the listing held no
// transaction marker and no seal, so the versions follow from the names
// alone.
func (t *Table) judgeVersions(ctx context.Context, entries []Entry) ([]VersionFile, *Manifest, bool, error) {
	byVersion := make(map[uint64]VersionFile, len(entries))
	var markers []txnMarker
	var seals []sealMarker
	for _, e := range entries {
		if e.IsDir {
			continue
		}
		v, scheme, ok := ParseManifestName(e.Name)
		if !ok {
			if mk, ok := parseTxnMarker(e.Name); ok {
				markers = append(markers, mk)
			} else if mk, ok := parseSealMarker(e.Name); ok {
				seals = append(seals, mk)
			}
			continue
		}
		if old, dup := byVersion[v]; dup && old.Scheme == NamingV2 {
			continue
		}
		byVersion[v] = VersionFile{Version: v, Scheme: scheme, Name: e.Name, Size: e.Size, ModTime: e.ModTime, MD5: e.MD5}
	}
	// Versions of a batch transaction that has not committed are not
	// versions yet (txn.go).
	if len(markers) > 0 {
		if err := t.hideUncommitted(ctx, byVersion, markers); err != nil {
			return nil, nil, false, err
		}
	}
	// A move's seal is not a version (seal.go).
	var seal *Manifest
	if len(seals) > 0 {
		var err error
		if seal, err = t.hideSeals(ctx, byVersion, seals); err != nil {
			return nil, nil, false, err
		}
	}
	out := make([]VersionFile, 0, len(byVersion))
	for _, vf := range byVersion {
		out = append(out, vf)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, seal, len(markers) == 0 && len(seals) == 0, nil
}
