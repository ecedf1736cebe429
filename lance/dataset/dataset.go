package dataset

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/mvq-dev/mvq/lance/pb/tablepb"
	"github.com/mvq-dev/mvq/lance/schema"
)

// FieldAbsent in a data file's fields or column_indices marks a column the
// file does not hold (a dropped or not yet written field).
const FieldAbsent = -2

// Dataset is one version of a Lance dataset in a local folder: its manifest
// and what it points at.
type Dataset struct {
	Dir  string      // the dataset folder (the `.lance` folder)
	File VersionFile // the manifest file read
	*ManifestFile
}

// Open reads the latest version of the dataset in dir.
func Open(dir string) (*Dataset, error) {
	vf, err := Latest(dir)
	if err != nil {
		return nil, err
	}
	return openFile(dir, vf)
}

// OpenVersion reads version v of the dataset in dir.
func OpenVersion(dir string, v uint64) (*Dataset, error) {
	vf, err := FindVersion(dir, v)
	if err != nil {
		return nil, err
	}
	return openFile(dir, vf)
}

func openFile(dir string, vf VersionFile) (*Dataset, error) {
	b, err := readCapped(vf.Path, MaxManifestSize)
	if err != nil {
		return nil, err
	}
	mf, err := DecodeManifest(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", vf.Path, err)
	}
	if got := mf.Manifest.GetVersion(); got != vf.Version {
		return nil, fmt.Errorf("%s: %w", vf.Path, corrupt("manifest says version %d", got))
	}
	if err := CheckReaderFlags(mf.Manifest.GetReaderFeatureFlags()); err != nil {
		return nil, fmt.Errorf("%s version %d: %w", dir, vf.Version, err)
	}
	if err := Validate(mf.Manifest); err != nil {
		return nil, fmt.Errorf("%s: %w", vf.Path, err)
	}
	return &Dataset{Dir: dir, File: vf, ManifestFile: mf}, nil
}

// Validate checks what a reader relies on in a manifest: field ids unique,
// parents known, fragment ids unique, data file paths that stay inside their
// folder, fields and column_indices of equal length, base ids that exist.
// Errors wrap ErrCorrupt.
func Validate(m *tablepb.Manifest) error {
	ids := make(map[int32]bool, len(m.GetFields()))
	for _, f := range m.GetFields() {
		if f.GetId() < 0 || ids[f.GetId()] {
			return corrupt("field %q has id %d (negative or repeated)", f.GetName(), f.GetId())
		}
		ids[f.GetId()] = true
	}
	for _, f := range m.GetFields() {
		if p := f.GetParentId(); p != -1 && !ids[p] {
			return corrupt("field %q has unknown parent %d", f.GetName(), p)
		}
	}
	bases := make(map[uint32]bool, len(m.GetBasePaths()))
	for _, b := range m.GetBasePaths() {
		bases[b.GetId()] = true
	}
	frags := make(map[uint64]bool, len(m.GetFragments()))
	for _, fr := range m.GetFragments() {
		if frags[fr.GetId()] {
			return corrupt("fragment id %d repeated", fr.GetId())
		}
		frags[fr.GetId()] = true
		if mx := m.MaxFragmentId; mx != nil && fr.GetId() > uint64(*mx) {
			return corrupt("fragment id %d over max_fragment_id %d", fr.GetId(), *mx)
		}
		for _, df := range fr.GetFiles() {
			if !localName(df.GetPath(), true) {
				return corrupt("fragment %d: data file path %q leaves its folder", fr.GetId(), df.GetPath())
			}
			if n := len(df.GetColumnIndices()); n != 0 && n != len(df.GetFields()) {
				return corrupt("fragment %d: %s has %d fields but %d column indices", fr.GetId(), df.GetPath(), len(df.GetFields()), n)
			}
			if df.BaseId != nil && !bases[df.GetBaseId()] {
				return corrupt("fragment %d: %s names unknown base path %d", fr.GetId(), df.GetPath(), df.GetBaseId())
			}
		}
		if del := fr.GetDeletionFile(); del != nil {
			if del.BaseId != nil && !bases[del.GetBaseId()] {
				return corrupt("fragment %d: deletion file names unknown base path %d", fr.GetId(), del.GetBaseId())
			}
			if del.GetNumDeletedRows() > fr.GetPhysicalRows() {
				return corrupt("fragment %d deletes %d of %d rows", fr.GetId(), del.GetNumDeletedRows(), fr.GetPhysicalRows())
			}
		}
	}
	if tf := m.GetTransactionFile(); tf != "" && !localName(tf, false) {
		return corrupt("transaction file %q is not a plain file name", tf)
	}
	return nil
}

// localName reports whether p is a relative path that stays inside its
// folder (subfolders allowed when sub is true).
func localName(p string, sub bool) bool {
	if p == "" || strings.ContainsRune(p, '\\') || strings.ContainsRune(p, 0) {
		return false
	}
	if !sub && strings.ContainsRune(p, '/') {
		return false
	}
	return filepath.IsLocal(filepath.FromSlash(p))
}

// Manifest returns the dataset's manifest.
func (d *Dataset) Manifest() *tablepb.Manifest { return d.ManifestFile.Manifest }

// Version is the dataset version read.
func (d *Dataset) Version() uint64 { return d.Manifest().GetVersion() }

// Fragments returns the manifest's fragments.
func (d *Dataset) Fragments() []*tablepb.DataFragment { return d.Manifest().GetFragments() }

// basePath returns the local folder of base path id.
func (d *Dataset) basePath(id uint32) (*tablepb.BasePath, string, error) {
	for _, b := range d.Manifest().GetBasePaths() {
		if b.GetId() != id {
			continue
		}
		p, err := LocalPath(b.GetPath())
		if err != nil {
			return nil, "", fmt.Errorf("base path %d: %w", id, err)
		}
		return b, p, nil
	}
	return nil, "", corrupt("no base path %d", id)
}

// LocalPath turns a base path URI into a local folder: an absolute path or a
// file:// URI. Other schemes (s3://, gs://, ...) are an error naming them.
func LocalPath(uri string) (string, error) {
	if strings.HasPrefix(uri, "/") {
		return filepath.Clean(uri), nil
	}
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("base path %q: %w", uri, err)
	}
	if u.Scheme == "file" && u.Path != "" {
		return filepath.Clean(u.Path), nil
	}
	return "", fmt.Errorf("base path %q: only local folders are supported, not %q", uri, u.Scheme)
}

// DataFilePath is the local path of a data file: under the dataset's `data/`
// folder, or under its base path (that base's `data/` when the base is a
// dataset root).
func (d *Dataset) DataFilePath(df *tablepb.DataFile) (string, error) {
	if !localName(df.GetPath(), true) {
		return "", corrupt("data file path %q leaves its folder", df.GetPath())
	}
	dir := filepath.Join(d.Dir, DataDir)
	if df.BaseId != nil {
		b, p, err := d.basePath(df.GetBaseId())
		if err != nil {
			return "", err
		}
		dir = p
		if b.GetIsDatasetRoot() {
			dir = filepath.Join(p, DataDir)
		}
	}
	return filepath.Join(dir, filepath.FromSlash(df.GetPath())), nil
}

// DeletionFilePath is the local path of a fragment's deletion file, "" when
// it has none.
func (d *Dataset) DeletionFilePath(fr *tablepb.DataFragment) (string, error) {
	del := fr.GetDeletionFile()
	if del == nil {
		return "", nil
	}
	root := d.Dir
	if del.BaseId != nil {
		b, p, err := d.basePath(del.GetBaseId())
		if err != nil {
			return "", err
		}
		if !b.GetIsDatasetRoot() {
			return "", corrupt("deletion file of fragment %d names base path %d, which is not a dataset root", fr.GetId(), del.GetBaseId())
		}
		root = p
	}
	return filepath.Join(root, DeletionsDir, DeletionFileName(fr.GetId(), del)), nil
}

// DeletedRows returns the row offsets the fragment has deleted (empty when it
// has no deletion file). It checks them against the fragment: every offset
// below physical_rows, and as many as num_deleted_rows says when that is set.
func (d *Dataset) DeletedRows(fr *tablepb.DataFragment) (*roaring.Bitmap, error) {
	p, err := d.DeletionFilePath(fr)
	if err != nil || p == "" {
		return roaring.New(), err
	}
	bm, err := ReadDeletionFile(p, fr.GetDeletionFile().GetFileType())
	if err != nil {
		return nil, err
	}
	if !bm.IsEmpty() && uint64(bm.Maximum()) >= fr.GetPhysicalRows() {
		return nil, corrupt("%s deletes row %d of a fragment of %d rows", p, bm.Maximum(), fr.GetPhysicalRows())
	}
	if n := fr.GetDeletionFile().GetNumDeletedRows(); n != 0 && n != bm.GetCardinality() {
		return nil, corrupt("%s holds %d rows, the manifest says %d", p, bm.GetCardinality(), n)
	}
	return bm, nil
}

// FragmentRows is the number of live rows of a fragment: physical_rows less
// the deleted ones (num_deleted_rows, or the deletion file when that is 0).
func (d *Dataset) FragmentRows(fr *tablepb.DataFragment) (uint64, error) {
	del := fr.GetDeletionFile()
	if del == nil {
		return fr.GetPhysicalRows(), nil
	}
	n := del.GetNumDeletedRows()
	if n == 0 {
		bm, err := d.DeletedRows(fr)
		if err != nil {
			return 0, err
		}
		n = bm.GetCardinality()
	}
	if n > fr.GetPhysicalRows() {
		return 0, corrupt("fragment %d deletes %d of %d rows", fr.GetId(), n, fr.GetPhysicalRows())
	}
	return fr.GetPhysicalRows() - n, nil
}

// CountRows is the number of live rows of the dataset.
func (d *Dataset) CountRows() (uint64, error) {
	var total uint64
	for _, fr := range d.Fragments() {
		n, err := d.FragmentRows(fr)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// Transaction returns the transaction that made this version: the inline
// section when present, else the manifest's transaction file; nil when it
// has neither (old versions).
func (d *Dataset) Transaction() (*tablepb.Transaction, error) {
	if d.ManifestFile.Transaction != nil {
		return d.ManifestFile.Transaction, nil
	}
	if name := d.Manifest().GetTransactionFile(); name != "" {
		return ReadTransactionFile(d.Dir, name)
	}
	return nil, nil
}

// Schema is the dataset's schema as Arrow (fields and schema metadata).
func (d *Dataset) Schema() (*arrow.Schema, error) {
	return schema.ToArrow(d.Manifest().GetFields(), d.Manifest().GetSchemaMetadata())
}

// StorageVersion is the data file format version of the dataset, "2.0" or
// "2.1" (the manifest's data_format; "legacy" for 0.2 files).
func (d *Dataset) StorageVersion() string {
	return d.Manifest().GetDataFormat().GetVersion()
}
