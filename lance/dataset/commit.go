package dataset

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mvq-dev/mvq/lance/pb/filepb"
	"github.com/mvq-dev/mvq/lance/pb/tablepb"
)

// ErrConflict is returned by Commit when another writer committed the
// version first and the change cannot simply be rebuilt on the new one:
// re-open the dataset, redo the change and commit again. (Commit rebuilds
// appends, and deletes and updates of fragments nobody else changed, by
// itself.)
var ErrConflict = errors.New("lance commit conflict: the version was committed by another writer")

// Writer identity written into manifests (writer_version). Lance applies its
// own-version workarounds only to library "lance".
const (
	WriterLibrary = "mvq"
	WriterRelease = "0.1.0"
)

// CommitOptions tune Commit. The zero value is LanceDB's defaults.
type CommitOptions struct {
	// Scheme names the manifests of a new dataset (default SchemeV2); an
	// existing dataset keeps its scheme.
	Scheme Scheme
	// StorageVersion is the data_format version ("2.0", "2.1") of a new
	// dataset or an overwrite; by default a new dataset takes it from its
	// data files (2.1 when it has none) and an overwrite keeps the old one.
	StorageVersion string
	// Now stamps the manifest (default time.Now).
	Now func() time.Time
	// Tag is the manifest's and transaction's tag.
	Tag string
}

// Commit makes txn the next version of the dataset in dir: it writes the
// transaction file, then the manifest of version base.Version()+1 (version
// 1, and the folders, when base is nil: then txn must be an Overwrite), with
// put-if-not-exists semantics, then the version hint. base is the version
// txn was made against (txn.ReadVersion). When other writers took that
// version first, Commit reads their transactions and rebuilds txn on the
// newest version when that loses nothing (see checkRebase); otherwise it
// returns an error wrapping ErrConflict.
func Commit(dir string, base *Dataset, txn *tablepb.Transaction, opts CommitOptions) (*Dataset, error) {
	if base == nil && txn.GetReadVersion() != 0 {
		return nil, fmt.Errorf("commit: transaction reads version %d of a dataset not given", txn.GetReadVersion())
	}
	if base != nil && txn.GetReadVersion() != base.Version() {
		return nil, fmt.Errorf("commit: transaction reads version %d, base is version %d", txn.GetReadVersion(), base.Version())
	}
	if opts.Tag != "" {
		txn = proto.Clone(txn).(*tablepb.Transaction)
		txn.Tag = opts.Tag
	}
	if base == nil {
		// Creating where a dataset exists (under either naming scheme) is a
		// conflict, not a second history.
		if vf, err := Latest(dir); err == nil {
			return nil, fmt.Errorf("%w: %s already has version %d", ErrConflict, dir, vf.Version)
		} else if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		for _, sub := range []string{VersionsDir, TransactionsDir, DataDir} {
			if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
				return nil, err
			}
		}
	}
	writeTxnFile := base == nil || base.Manifest().GetWriterFeatureFlags()&FlagDisableTransactionFile == 0
	txnName := ""
	if writeTxnFile {
		var err error
		if txnName, err = WriteTransactionFile(dir, txn); err != nil {
			return nil, fmt.Errorf("commit: %w", err)
		}
	}
	for try := 0; ; try++ {
		d, err := commitOnce(dir, base, txn, txnName, opts)
		if !errors.Is(err, ErrConflict) || base == nil || try >= rebaseRetries {
			return d, err
		}
		latest, err2 := Open(dir)
		if err2 != nil {
			return nil, fmt.Errorf("commit: reopen after conflict: %w", err2)
		}
		if err := checkRebase(dir, txn, base.Version(), latest.Version()); err != nil {
			return nil, err
		}
		base = latest
	}
}

// rebaseRetries bounds how often Commit rebuilds a transaction on a newer
// version after losing a race.
const rebaseRetries = 16

// touched returns the fragment ids a transaction changes or removes, and
// whether it changes the dataset as a whole (schema or every fragment), in
// which case nothing rebases across it.
func touched(t *tablepb.Transaction) (ids []uint64, whole bool) {
	switch op := t.GetOperation().(type) {
	case *tablepb.Transaction_Append_, *tablepb.Transaction_CreateIndex_, *tablepb.Transaction_ReserveFragments_,
		*tablepb.Transaction_UpdateConfig_:
		return nil, false
	case *tablepb.Transaction_Delete_:
		for _, f := range op.Delete.GetUpdatedFragments() {
			ids = append(ids, f.GetId())
		}
		return append(ids, op.Delete.GetDeletedFragmentIds()...), false
	case *tablepb.Transaction_Update_:
		for _, f := range op.Update.GetUpdatedFragments() {
			ids = append(ids, f.GetId())
		}
		return append(ids, op.Update.GetRemovedFragmentIds()...), false
	case *tablepb.Transaction_Rewrite_:
		for _, f := range op.Rewrite.GetOldFragments() {
			ids = append(ids, f.GetId())
		}
		for _, g := range op.Rewrite.GetGroups() {
			for _, f := range g.GetOldFragments() {
				ids = append(ids, f.GetId())
			}
		}
		return ids, false
	}
	return nil, true
}

// checkRebase decides whether txn, made against version from, may be
// rebuilt on version to: appends always; deletes and updates when no commit
// in between touched the same fragments or changed the whole dataset
// (overwrite, merge, project, restore, ...). Otherwise it returns an error
// wrapping ErrConflict that names the commit in the way.
func checkRebase(dir string, txn *tablepb.Transaction, from, to uint64) error {
	mine, whole := touched(txn)
	if _, ok := txn.GetOperation().(*tablepb.Transaction_Append_); ok {
		return nil
	}
	if whole {
		return fmt.Errorf("%w: a %s cannot be rebuilt on version %d", ErrConflict, OperationName(txn), to)
	}
	for v := from + 1; v <= to; v++ {
		d, err := OpenVersion(dir, v)
		if err != nil {
			return fmt.Errorf("%w: version %d: %v", ErrConflict, v, err)
		}
		other, err := d.Transaction()
		if err != nil || other == nil {
			return fmt.Errorf("%w: version %d has no readable transaction (%v)", ErrConflict, v, err)
		}
		ids, all := touched(other)
		_, mineCfg := txn.GetOperation().(*tablepb.Transaction_UpdateConfig_)
		_, otherCfg := other.GetOperation().(*tablepb.Transaction_UpdateConfig_)
		if mineCfg && otherCfg {
			return fmt.Errorf("%w: version %d also updated the config", ErrConflict, v)
		}
		if all {
			return fmt.Errorf("%w: version %d is a %s", ErrConflict, v, OperationName(other))
		}
		for _, id := range ids {
			if slices.Contains(mine, id) {
				return fmt.Errorf("%w: version %d (%s) also changed fragment %d", ErrConflict, v, OperationName(other), id)
			}
		}
	}
	return nil
}

func commitOnce(dir string, base *Dataset, txn *tablepb.Transaction, txnName string, opts CommitOptions) (*Dataset, error) {
	scheme := opts.Scheme
	if base != nil {
		scheme = base.File.Scheme
		if err := CheckWriterFlags(base.Manifest().GetWriterFeatureFlags()); err != nil {
			return nil, fmt.Errorf("%s version %d: %w", dir, base.Version(), err)
		}
	}
	if scheme == 0 {
		scheme = SchemeV2
	}
	var prev *ManifestFile
	if base != nil {
		prev = base.ManifestFile
	}
	mf, err := BuildManifest(prev, txn, txnName, opts)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", OperationName(txn), err)
	}
	b, err := EncodeManifest(mf)
	if err != nil {
		return nil, err
	}
	v := mf.Manifest.GetVersion()
	path := filepath.Join(dir, VersionsDir, ManifestName(scheme, v))
	if err := createFile(path, b); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w (version %d of %s)", ErrConflict, v, dir)
		}
		return nil, fmt.Errorf("commit version %d: %w", v, err)
	}
	// The hint only speeds up finding the latest version (LanceDB lists
	// when it is stale or missing); a failure to write it does not undo the
	// commit, and a newer hint from another writer stays.
	if h, ok, err := ReadHint(dir); err != nil || !ok || h < v {
		_ = WriteHint(dir, v)
	}
	d := &Dataset{Dir: dir, File: VersionFile{Version: v, Scheme: scheme, Path: path, Size: int64(len(b))}}
	// Re-read what was written so the result carries the section positions.
	if d.ManifestFile, err = DecodeManifest(b); err != nil {
		return nil, err
	}
	return d, nil
}

// BuildManifest applies txn to prev (nil for a new dataset) and returns the
// next version's manifest file, with the transaction inline and
// transaction_file set to txnFile ("" for none). It follows the rules of
// Lance's writers: ids for new fragments continue after max_fragment_id
// (from 0 for an overwrite), fragments sorted by id, data files whose fields
// are all absent dropped, feature flags recomputed, indices kept where they
// still apply.
func BuildManifest(prev *ManifestFile, txn *tablepb.Transaction, txnFile string, opts CommitOptions) (*ManifestFile, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	var pm *tablepb.Manifest
	var indices []*tablepb.IndexMetadata
	if prev != nil {
		pm = prev.Manifest
		if prev.Indices != nil {
			indices = prev.Indices.GetIndices()
		}
		if pm.GetReaderFeatureFlags()&FlagStableRowIDs != 0 {
			return nil, &UnsupportedFeatureError{Writer: true, Flags: pm.GetWriterFeatureFlags(), Unknown: FlagStableRowIDs}
		}
	}
	m := &tablepb.Manifest{}
	if pm != nil {
		m.Fields = pm.GetFields()
		m.SchemaMetadata = pm.GetSchemaMetadata()
		m.Version = pm.GetVersion() + 1
		m.MaxFragmentId = pm.MaxFragmentId
		m.NextRowId = pm.GetNextRowId()
		m.DataFormat = pm.GetDataFormat()
		m.Config = maps(pm.GetConfig())
		m.TableMetadata = pm.GetTableMetadata()
		m.BasePaths = pm.GetBasePaths()
		m.Branch = pm.Branch
	} else {
		m.Version = 1
	}
	nextID := func() func() uint64 {
		var id uint64
		switch {
		case pm == nil:
		case pm.MaxFragmentId != nil:
			id = uint64(pm.GetMaxFragmentId()) + 1
		default:
			for _, f := range pm.GetFragments() {
				id = max(id, f.GetId()+1)
			}
		}
		return func() uint64 { id++; return id - 1 }
	}
	withIDs := func(frags []*tablepb.DataFragment, next func() uint64) []*tablepb.DataFragment {
		out := make([]*tablepb.DataFragment, len(frags))
		for i, f := range frags {
			f = proto.Clone(f).(*tablepb.DataFragment)
			f.Id = next()
			out[i] = f
		}
		return out
	}
	existing := func() ([]*tablepb.DataFragment, error) {
		if pm == nil {
			return nil, fmt.Errorf("%s needs an existing dataset", OperationName(txn))
		}
		return slices.Clone(pm.GetFragments()), nil
	}
	var frags []*tablepb.DataFragment
	var err error
	switch op := txn.GetOperation().(type) {
	case *tablepb.Transaction_Append_:
		if frags, err = existing(); err != nil {
			return nil, err
		}
		frags = append(frags, withIDs(op.Append.GetFragments(), nextID())...)
	case *tablepb.Transaction_Overwrite_:
		o := op.Overwrite
		if len(o.GetSchema()) == 0 {
			return nil, errors.New("overwrite without a schema")
		}
		var zero uint64
		frags = withIDs(o.GetFragments(), func() uint64 { zero++; return zero - 1 })
		m.Fields, m.SchemaMetadata = o.GetSchema(), o.GetSchemaMetadata()
		if m.Config == nil && len(o.GetConfigUpsertValues()) > 0 {
			m.Config = map[string]string{}
		}
		for k, v := range o.GetConfigUpsertValues() {
			m.Config[k] = v
		}
		if len(o.GetInitialBases()) > 0 {
			if pm != nil {
				return nil, errors.New("an overwrite cannot register base paths")
			}
			m.BasePaths = o.GetInitialBases()
		}
		indices = nil
		if opts.StorageVersion != "" {
			m.DataFormat = &tablepb.Manifest_DataStorageFormat{FileFormat: "lance", Version: opts.StorageVersion}
		} else if pm == nil {
			v, err := storageVersionOf(frags)
			if err != nil {
				return nil, err
			}
			m.DataFormat = &tablepb.Manifest_DataStorageFormat{FileFormat: "lance", Version: v}
		}
	case *tablepb.Transaction_Delete_:
		if frags, err = existing(); err != nil {
			return nil, err
		}
		frags = replaceFragments(frags, op.Delete.GetDeletedFragmentIds(), op.Delete.GetUpdatedFragments())
	case *tablepb.Transaction_Update_:
		u := op.Update
		if frags, err = existing(); err != nil {
			return nil, err
		}
		frags = replaceFragments(frags, u.GetRemovedFragmentIds(), u.GetUpdatedFragments())
		frags = append(frags, withIDs(u.GetNewFragments(), nextID())...)
		indices = slices.DeleteFunc(slices.Clone(indices), func(ix *tablepb.IndexMetadata) bool {
			for _, f := range ix.GetFields() {
				if f >= 0 && slices.Contains(u.GetFieldsModified(), uint32(f)) {
					return true
				}
			}
			return false
		})
	case *tablepb.Transaction_Merge_:
		if pm == nil {
			return nil, errors.New("merge needs an existing dataset")
		}
		frags = slices.Clone(op.Merge.GetFragments())
		m.Fields, m.SchemaMetadata = op.Merge.GetSchema(), op.Merge.GetSchemaMetadata()
	case *tablepb.Transaction_Project_:
		if frags, err = existing(); err != nil {
			return nil, err
		}
		m.Fields = op.Project.GetSchema()
		keep := fieldIDs(m.Fields)
		for i, f := range frags {
			f = proto.Clone(f).(*tablepb.DataFragment)
			f.Files = slices.DeleteFunc(f.Files, func(df *tablepb.DataFile) bool {
				return !slices.ContainsFunc(df.GetFields(), func(id int32) bool { return keep[id] })
			})
			frags[i] = f
		}
	case *tablepb.Transaction_UpdateConfig_:
		if frags, err = existing(); err != nil {
			return nil, err
		}
		u := op.UpdateConfig
		if len(u.GetUpsertValues()) > 0 || len(u.GetDeleteKeys()) > 0 || len(u.GetSchemaMetadata()) > 0 || len(u.GetFieldMetadata()) > 0 ||
			u.GetSchemaMetadataUpdates() != nil || len(u.GetFieldMetadataUpdates()) > 0 {
			return nil, errors.New("update_config: only config and table metadata updates are supported")
		}
		m.Config = applyMapUpdate(m.Config, u.GetConfigUpdates())
		m.TableMetadata = applyMapUpdate(m.TableMetadata, u.GetTableMetadataUpdates())
	default:
		return nil, fmt.Errorf("operation %s is not supported", OperationName(txn))
	}
	if len(m.Fields) == 0 {
		return nil, errors.New("the dataset has no schema")
	}
	// Drop data files whose every field is absent, then order by id.
	for i, f := range frags {
		if slices.ContainsFunc(f.GetFiles(), allAbsent) {
			f = proto.Clone(f).(*tablepb.DataFragment)
			f.Files = slices.DeleteFunc(f.Files, allAbsent)
			frags[i] = f
		}
	}
	sort.SliceStable(frags, func(i, j int) bool { return frags[i].GetId() < frags[j].GetId() })
	m.Fragments = frags
	if len(frags) > 0 {
		mx := frags[len(frags)-1].GetId()
		if mx > math.MaxUint32 {
			return nil, fmt.Errorf("fragment id %d over the u32 max_fragment_id", mx)
		}
		if m.MaxFragmentId == nil || uint32(mx) > m.GetMaxFragmentId() {
			v := uint32(mx)
			m.MaxFragmentId = &v
		}
	}
	// Indices on fields the schema lost go.
	have := fieldIDs(m.Fields)
	indices = slices.DeleteFunc(slices.Clone(indices), func(ix *tablepb.IndexMetadata) bool {
		return slices.ContainsFunc(ix.GetFields(), func(f int32) bool { return !have[f] })
	})

	var rf, wf uint64
	for _, f := range frags {
		if f.GetDeletionFile() != nil {
			rf |= FlagDeletionFiles
			wf |= FlagDeletionFiles
		}
	}
	if len(m.Config) > 0 {
		wf |= FlagTableConfig
	}
	if len(m.BasePaths) > 0 {
		rf |= FlagBasePaths
		wf |= FlagBasePaths
	}
	if pm != nil {
		wf |= pm.GetWriterFeatureFlags() & FlagDisableTransactionFile
	}
	m.ReaderFeatureFlags, m.WriterFeatureFlags = rf, wf
	m.WriterVersion = &tablepb.Manifest_WriterVersion{Library: WriterLibrary, Version: WriterRelease}
	m.Timestamp = timestamppb.New(now())
	m.Tag = txn.GetTag()
	m.TransactionFile = txnFile
	if err := Validate(m); err != nil {
		return nil, err
	}
	out := &ManifestFile{Manifest: m, Transaction: txn, Major: ManifestMajor, Minor: ManifestMinor}
	if len(indices) > 0 {
		out.Indices = &tablepb.IndexSection{Indices: indices}
	}
	return out, nil
}

func maps(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func allAbsent(df *tablepb.DataFile) bool {
	for _, f := range df.GetFields() {
		if f != FieldAbsent {
			return false
		}
	}
	return true
}

func fieldIDs(fields []*filepb.Field) map[int32]bool {
	out := make(map[int32]bool, len(fields))
	for _, f := range fields {
		out[f.GetId()] = true
	}
	return out
}

// replaceFragments drops the fragments with the removed ids and swaps in the
// updated ones by id.
func replaceFragments(frags []*tablepb.DataFragment, removed []uint64, updated []*tablepb.DataFragment) []*tablepb.DataFragment {
	frags = slices.DeleteFunc(frags, func(f *tablepb.DataFragment) bool { return slices.Contains(removed, f.GetId()) })
	for i, f := range frags {
		for _, u := range updated {
			if u.GetId() == f.GetId() {
				frags[i] = u
			}
		}
	}
	return frags
}

// storageVersionOf names the data_format version of data files: "2.0" for
// file version 0.3, "2.1" for 2.1 (the default without files).
func storageVersionOf(frags []*tablepb.DataFragment) (string, error) {
	v := ""
	for _, f := range frags {
		for _, df := range f.GetFiles() {
			var s string
			switch mm := [2]uint32{df.GetFileMajorVersion(), df.GetFileMinorVersion()}; mm {
			case [2]uint32{0, 3}, [2]uint32{2, 0}:
				s = "2.0"
			case [2]uint32{2, 1}:
				s = "2.1"
			default:
				return "", fmt.Errorf("data file %s has file version %d.%d, not 2.0 or 2.1", df.GetPath(), mm[0], mm[1])
			}
			if v != "" && v != s {
				return "", fmt.Errorf("data files mix storage versions %s and %s", v, s)
			}
			v = s
		}
	}
	if v == "" {
		v = "2.1"
	}
	return v, nil
}

// DeleteRows deletes rows of this version and commits the result: rows maps
// fragment ids to the row offsets to delete in them (offsets already deleted
// may be included). Each touched fragment gets a new deletion file holding
// its old deletions and the new ones; a fragment left with no rows is
// removed. It returns the new version, or d itself when nothing changes.
func (d *Dataset) DeleteRows(rows map[uint64]*roaring.Bitmap, predicate string, opts CommitOptions) (*Dataset, error) {
	var updated []*tablepb.DataFragment
	var removed []uint64
	for _, fr := range d.Fragments() {
		add := rows[fr.GetId()]
		if add == nil || add.IsEmpty() {
			continue
		}
		if uint64(add.Maximum()) >= fr.GetPhysicalRows() {
			return nil, fmt.Errorf("delete row %d of fragment %d, which has %d rows", add.Maximum(), fr.GetId(), fr.GetPhysicalRows())
		}
		del, err := d.DeletedRows(fr)
		if err != nil {
			return nil, err
		}
		before := del.GetCardinality()
		del.Or(add)
		switch n := del.GetCardinality(); {
		case n == before:
			continue
		case n == fr.GetPhysicalRows():
			removed = append(removed, fr.GetId())
			continue
		}
		df, err := WriteDeletionFile(d.Dir, fr.GetId(), d.Version(), del)
		if err != nil {
			return nil, err
		}
		nf := proto.Clone(fr).(*tablepb.DataFragment)
		nf.DeletionFile = df
		updated = append(updated, nf)
	}
	for id := range rows {
		if !slices.ContainsFunc(d.Fragments(), func(f *tablepb.DataFragment) bool { return f.GetId() == id }) {
			return nil, fmt.Errorf("delete rows: no fragment %d in version %d", id, d.Version())
		}
	}
	if len(updated) == 0 && len(removed) == 0 {
		return d, nil
	}
	return Commit(d.Dir, d, Delete(d.Version(), updated, removed, predicate), opts)
}
