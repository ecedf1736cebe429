package table

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/lance/dataset"
	"github.com/mvq-dev/mvq/lance/pb/filepb"
	"github.com/mvq-dev/mvq/lance/pb/tablepb"
	lschema "github.com/mvq-dev/mvq/lance/schema"
	"github.com/mvq-dev/mvq/table/internal/datafile"
)

// Lance manifests. A table in the Lance format (Options.Format) keeps each
// version as a Lance manifest (package lance/dataset), so LanceDB opens
// it: the schema as Lance fields, each fragment as a Lance fragment whose
// data file maps the schema's leaf fields to the file's columns. What only
// mvq knows lives in the manifest's config, which Lance carries from
// version to version and never deletes (mvq's commits keep another
// writer's keys, table metadata and indexes: lance_carry.go):
//
//	mvq.uuid             the table's identity (Table.Identity)
//	mvq.property.NAME    a table property (a view's definition, …), raw JSON
//	mvq.version          this version's own facts (versionFacts), JSON
//
// mvq.version names the version it describes: a later version written by
// another Lance writer carries it along unchanged, and then it is ignored
// (the version's schema comes from the Lance fields, its operation from
// its transaction), but for the column maps of the fragments mvq wrote
// and the largest field id mvq used.
//
// A version mvq commits also carries its Lance transaction inline (the
// change from its parent: lanceTransaction), which is what a Lance writer
// that lost the race for the version reads to rebase its own commit.
//
// Field ids are stable from version to version (lance_carry.go); a data
// file's column_indices say where each leaf is in that file, which is all
// a Lance reader needs to map a version's fields to a file's columns.

const (
	lanceUUIDKey     = "mvq.uuid"
	lancePropPrefix  = "mvq.property."
	lanceVersionKey  = "mvq.version"
	lanceFileMajor   = 2
	lanceFileMinor   = 1
	lanceStorageVers = "2.1"
)

// versionFacts is what a mvq version records of itself beyond the Lance
// manifest.
type versionFacts struct {
	Version       uint64            `json:"v"`
	ParentVersion uint64            `json:"parent"`
	Operation     string            `json:"op,omitempty"`
	Transaction   string            `json:"txn,omitempty"`
	Schema        string            `json:"schema"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	// Maps holds the column maps of fragments whose file columns are not
	// the schema's fields in order (after drop_columns), by fragment id.
	Maps map[string]fragMaps `json:"maps,omitempty"`
	// MaxField is the largest Lance field id the table ever used
	// (lance_carry.go): a dropped field's id is not given again.
	MaxField *int32 `json:"max_field,omitempty"`
}

type fragMaps struct {
	Columns ColumnMap `json:"columns,omitempty"`
	// Leaves are the leaf column counts of the file's top-level columns,
	// comma-separated.
	Leaves string `json:"leaves"`
	// Path is the fragment's data file the map is of (absent in maps
	// written before it was recorded).
	Path string `json:"path,omitempty"`
	// Parts marks a fragment mvq wrote with a layout of parts (another
	// writer's files: lanceFiles lists only the fields' columns, not the
	// unused ones), whose layout is read from the manifest's listing.
	Parts bool `json:"parts,omitempty"`
}

// formatCounts and parseCounts render leaf counts as "1,3,1".
func formatCounts(counts []int) string {
	parts := make([]string, len(counts))
	for i, n := range counts {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func parseCounts(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	out := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 1<<20 {
			return nil, fmt.Errorf("leaf counts %q: bad entry %q", s, p)
		}
		out[i] = n
	}
	return out, nil
}

// isLanceManifest reports whether b is a Lance manifest file (it ends in
// the Lance magic) rather than a JSON one.
func isLanceManifest(b []byte) bool {
	return len(b) >= 16 && bytes.HasSuffix(b, []byte("LANC"))
}

// leafCounts answers the number of Lance leaf fields (file columns) of
// each top-level field of s.
func leafCounts(s *arrow.Schema) ([]int, []*filepb.Field, error) {
	fields, err := lschema.FromArrow(s)
	if err != nil {
		return nil, nil, err
	}
	return countsOf(fields, s.NumFields()), fields, nil
}

// countsOf answers the number of leaves under each of the n top-level
// fields of a Lance field list.
func countsOf(fields []*filepb.Field, n int) []int {
	top := map[int32]int{}
	counts := make([]int, n)
	i := 0
	for _, f := range fields {
		if f.GetParentId() == -1 {
			top[f.GetId()] = i
			i++
		} else {
			top[f.GetId()] = top[f.GetParentId()]
		}
	}
	for _, f := range lschema.Leaves(fields) {
		counts[top[f.GetId()]]++
	}
	return counts
}

// encodeLance renders m as a Lance manifest file.
func (m *Manifest) encodeLance() ([]byte, error) {
	s, err := decodeSchema(m.Schema)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	fields, maxField, changed, err := m.carry.fieldIDs(s)
	if err != nil {
		return nil, fmt.Errorf("manifest: schema: %w", err)
	}
	counts := countsOf(fields, s.NumFields())
	leaves := lschema.Leaves(fields)
	// leafIDs[i]: the leaf ids of top-level field i, in order.
	leafIDs := make([][]int32, len(counts))
	k := 0
	for i, n := range counts {
		for j := 0; j < n; j++ {
			leafIDs[i] = append(leafIDs[i], leaves[k].GetId())
			k++
		}
	}
	facts := versionFacts{Version: m.Version, ParentVersion: m.ParentVersion, Operation: m.Operation,
		Transaction: m.Transaction, Schema: m.Schema, Metadata: m.Metadata, MaxField: &maxField}
	pm := &tablepb.Manifest{
		Fields:     fields,
		Version:    m.Version,
		Timestamp:  timestamppb.New(time.UnixMilli(m.TimestampMillis)),
		DataFormat: &tablepb.Manifest_DataStorageFormat{FileFormat: "lance", Version: m.StorageVersion()},
		WriterVersion: &tablepb.Manifest_WriterVersion{
			Library: dataset.WriterLibrary, Version: dataset.WriterRelease},
		Config:        m.carry.foreignConfig(),
		TableMetadata: m.carry.tableMetadata(),
	}
	if pm.Config == nil {
		pm.Config = map[string]string{}
	}
	if md := s.Metadata(); md.Len() > 0 {
		pm.SchemaMetadata = map[string][]byte{}
		for i, k := range md.Keys() {
			pm.SchemaMetadata[k] = []byte(md.Values()[i])
		}
	}
	if m.NextFragmentID > 0 {
		v := m.NextFragmentID - 1
		pm.MaxFragmentId = &v
	}
	for _, f := range m.Fragments {
		df := dataFile(f.Path, f.Bytes, f.FileVersion)
		files := []*tablepb.DataFile{df}
		cols, err := f.Columns.Indices()
		if err != nil {
			return nil, err
		}
		if f.Parts != "" {
			if files, err = lanceFiles(f, df, leafIDs); err != nil {
				return nil, fmt.Errorf("manifest: %w", err)
			}
			if len(files) == 1 {
				// One file that may hold columns the listing leaves out
				// (a dropped last column): a reader must not take it as
				// the schema's own layout.
				if facts.Maps == nil {
					facts.Maps = map[string]fragMaps{}
				}
				facts.Maps[strconv.FormatUint(uint64(f.ID), 10)] = fragMaps{Path: f.Path, Parts: true}
			}
		} else if cols == nil {
			col := int32(0)
			for _, ids := range leafIDs {
				for _, id := range ids {
					df.Fields = append(df.Fields, id)
					df.ColumnIndices = append(df.ColumnIndices, col)
					col++
				}
			}
		} else {
			fl, err := parseCounts(f.leaves)
			if err != nil || len(fl) == 0 {
				return nil, fmt.Errorf("manifest: fragment %d has a column map but no leaf counts", f.ID)
			}
			if len(cols) != len(leafIDs) {
				return nil, fmt.Errorf("manifest: fragment %d: column map of %d entries for %d fields", f.ID, len(cols), len(leafIDs))
			}
			base := make([]int32, len(fl)+1)
			for i, n := range fl {
				base[i+1] = base[i] + int32(n)
			}
			for i, ids := range leafIDs {
				c := cols[i]
				if c < 0 || c >= len(fl) || fl[c] != len(ids) {
					return nil, fmt.Errorf("manifest: fragment %d: field %d maps to file column %d of a different shape", f.ID, i, c)
				}
				for j, id := range ids {
					df.Fields = append(df.Fields, id)
					df.ColumnIndices = append(df.ColumnIndices, base[c]+int32(j))
				}
			}
			// The file's columns no field maps to (a dropped column) are
			// listed as Lance's tombstones: a reader that takes a file
			// listing exactly the schema's fields as holding only them
			// (mvq does, and another writer keeps the list as it is)
			// must not find them missing from the list.
			used := make([]bool, len(fl))
			for _, c := range cols {
				used[c] = true
			}
			for c, n := range fl {
				for j := 0; j < n && !used[c]; j++ {
					df.Fields = append(df.Fields, dataset.FieldAbsent)
					df.ColumnIndices = append(df.ColumnIndices, base[c]+int32(j))
				}
			}
			if facts.Maps == nil {
				facts.Maps = map[string]fragMaps{}
			}
			facts.Maps[strconv.FormatUint(uint64(f.ID), 10)] = fragMaps{Columns: f.Columns, Leaves: f.leaves, Path: f.Path}
		}
		fr := &tablepb.DataFragment{Id: uint64(f.ID), Files: files, PhysicalRows: uint64(max(f.Rows, 0) + f.DeletedRows)}
		if f.HasDeletions() {
			fr.DeletionFile = f.deletionFile()
			pm.ReaderFeatureFlags |= dataset.FlagDeletionFiles
			pm.WriterFeatureFlags |= dataset.FlagDeletionFiles
		}
		pm.Fragments = append(pm.Fragments, fr)
	}
	if m.UUID != "" {
		pm.Config[lanceUUIDKey] = m.UUID
	}
	for k, v := range m.Properties {
		if !utf8.ValidString(k) || !utf8.Valid(v) {
			return nil, errs.Errorf(errs.CodeInvalidInput, "property %q is not valid UTF-8", k)
		}
		pm.Config[lancePropPrefix+k] = string(v)
	}
	fb, err := json.Marshal(facts)
	if err != nil {
		return nil, err
	}
	pm.Config[lanceVersionKey] = string(fb)
	pm.WriterFeatureFlags |= dataset.FlagTableConfig
	out := &dataset.ManifestFile{Manifest: pm, Major: dataset.ManifestMajor, Minor: dataset.ManifestMinor,
		Transaction: m.lanceTransaction(pm)}
	if ix := m.carry.keptIndices(fields, changed); len(ix) > 0 {
		out.Indices = &tablepb.IndexSection{Indices: ix}
	}
	return dataset.EncodeManifest(out)
}

// lanceTransaction is the Lance transaction of the commit that made m
// (encoded as pm), written inline in its manifest. A Lance writer that
// loses a race to this version reads it to decide whether its own commit
// still applies (LanceDB refuses to rebase over a version without one):
// fragments only added are an Append, fragments removed or replaced (new
// deletion files, rewritten rows) an Update, a new schema over the same
// data a Project, a first version or a new schema with new data an
// Overwrite. A version whose parent is unknown has none (every
// commit path sets it: Commit, and CreateVersion and batches for the
// versions they re-encode).
func (m *Manifest) lanceTransaction(pm *tablepb.Manifest) *tablepb.Transaction {
	if m.lanceOp != nil {
		// A delete, update or merge_insert says what it did (a Delete
		// where it only wrote deletion files and dropped fragments).
		return m.lanceOp.transaction(m.ParentVersion, pm.Fragments)
	}
	if m.parent == nil {
		if m.Version != 1 {
			return nil
		}
		return dataset.Overwrite(0, pm.Fields, pm.SchemaMetadata, pm.Fragments, nil)
	}
	p := m.parent
	if p.Schema != m.Schema {
		if sameData(p.Fragments, m.Fragments) {
			// Only the schema changed (columns dropped or renamed, made
			// nullable, their metadata): a Project, as Lance writes for
			// its own drop and rename, so a LanceDB append or delete
			// racing it rebases instead of failing.
			return dataset.Project(p.Version, pm.Fields)
		}
		return dataset.Overwrite(p.Version, pm.Fields, pm.SchemaMetadata, pm.Fragments, nil)
	}
	old := make(map[uint32]Fragment, len(p.Fragments))
	for _, f := range p.Fragments {
		old[f.ID] = f
	}
	var added, updated []*tablepb.DataFragment
	for i, f := range m.Fragments {
		o, ok := old[f.ID]
		switch {
		case !ok:
			added = append(added, pm.Fragments[i])
		case !sameFragment(o, f):
			updated = append(updated, pm.Fragments[i])
		}
		delete(old, f.ID)
	}
	var removed []uint64
	for _, f := range p.Fragments {
		if _, ok := old[f.ID]; ok {
			removed = append(removed, uint64(f.ID))
		}
	}
	if len(updated) == 0 && len(removed) == 0 {
		return dataset.Append(p.Version, added)
	}
	return dataset.Update(p.Version, removed, updated, added, nil)
}

// sameData reports whether two versions' fragments hold the same rows in
// the same files: the same ids, data files, row counts and deletion
// files (how their columns map to the schema may differ).
func sameData(a, b []Fragment) bool {
	if len(a) != len(b) {
		return false
	}
	byID := make(map[uint32]Fragment, len(a))
	for _, f := range a {
		byID[f.ID] = f
	}
	for _, f := range b {
		if o, ok := byID[f.ID]; !ok || !sameFiles(o, f) {
			return false
		}
	}
	return true
}

// sameFragment reports whether a and b are the same fragment unchanged:
// the same file, rows and deletions.
func sameFragment(a, b Fragment) bool {
	return a.Path == b.Path && a.Rows == b.Rows && a.DeletedRows == b.DeletedRows &&
		a.DeletionID == b.DeletionID && a.DeletionReadVersion == b.DeletionReadVersion && a.Columns == b.Columns &&
		a.Parts == b.Parts && a.Extra == b.Extra
}

// dataFile is the manifest's entry for data file rel (data/…) of size
// bytes: a Lance file in format 2.1, or 2.0 when version says so.
func dataFile(rel string, bytes int64, version string) *tablepb.DataFile {
	df := &tablepb.DataFile{Path: strings.TrimPrefix(rel, "data/"), FileSizeBytes: uint64(max(bytes, 0))}
	if strings.HasSuffix(rel, datafile.LanceExt) {
		df.FileMajorVersion, df.FileMinorVersion = lanceFileMajor, lanceFileMinor
		if version == "2.0" {
			df.FileMinorVersion = 0
		}
	}
	return df
}

// fileVersion is Fragment.FileVersion of data file df: "2.0" for a Lance
// 2.0 file, else "".
func fileVersion(df *tablepb.DataFile) string {
	if df.GetFileMajorVersion() == 2 && df.GetFileMinorVersion() == 0 {
		return "2.0"
	}
	return ""
}

// decodeLance parses a Lance manifest file into a Manifest. Versions
// another Lance writer made are read as far as this table layer can hold
// them: one data file per fragment, no deletion files.
func decodeLance(b []byte) (*Manifest, error) {
	mf, err := dataset.DecodeManifest(b)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	pm := mf.Manifest
	if err := dataset.CheckReaderFlags(pm.GetReaderFeatureFlags() &^ dataset.FlagDeletionFiles); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	m := &Manifest{Version: pm.GetVersion(), lance: true, UUID: pm.GetConfig()[lanceUUIDKey]}
	if ts := pm.GetTimestamp(); ts != nil {
		m.TimestampMillis = ts.AsTime().UnixMilli()
	}
	var facts versionFacts
	own, stale := false, false
	if raw, ok := pm.GetConfig()[lanceVersionKey]; ok {
		if err := json.Unmarshal([]byte(raw), &facts); err == nil {
			// Facts of an earlier version (another writer carried them
			// along) still tell the largest field id mvq used and the
			// column maps of the fragments mvq wrote then.
			own, stale = facts.Version == m.Version, facts.Version != m.Version
		}
	}
	factsMax := int32(-1)
	if facts.MaxField != nil {
		factsMax = *facts.MaxField
	}
	m.carry = newCarry(mf, factsMax)
	var counts []int // leaf counts of the schema's fields, with own facts
	if own {
		// The facts are only trusted when they agree with the Lance
		// fields: the schema they carry must have the same leaves.
		counts, err = checkFacts(&facts, pm.GetFields())
		if err != nil {
			return nil, fmt.Errorf("manifest: %s: %w", lanceVersionKey, err)
		}
		m.ParentVersion, m.Operation, m.Transaction, m.Schema, m.Metadata = facts.ParentVersion, facts.Operation, facts.Transaction, facts.Schema, facts.Metadata
	} else {
		md := pm.GetSchemaMetadata()
		s, err := lschema.ToArrow(pm.GetFields(), md)
		if err != nil {
			return nil, fmt.Errorf("manifest: schema: %w", err)
		}
		if m.Schema, err = encodeSchema(s); err != nil {
			return nil, fmt.Errorf("manifest: schema: %w", err)
		}
		if m.Version > 0 {
			m.ParentVersion = m.Version - 1
		}
		m.Operation = "lance"
		if mf.Transaction != nil {
			m.Operation = strings.ToLower(dataset.OperationName(mf.Transaction))
		}
	}
	for k, v := range pm.GetConfig() {
		if name, ok := strings.CutPrefix(k, lancePropPrefix); ok {
			if m.Properties == nil {
				m.Properties = map[string]json.RawMessage{}
			}
			if !json.Valid([]byte(v)) {
				return nil, fmt.Errorf("manifest: property %q is not JSON", name)
			}
			m.Properties[name] = json.RawMessage(v)
		}
	}
	var next uint64
	for _, fr := range pm.GetFragments() {
		if fr.GetId() > math.MaxUint32-1 {
			return nil, fmt.Errorf("manifest: fragment id %d is too large", fr.GetId())
		}
		if len(fr.GetFiles()) == 0 {
			return nil, fmt.Errorf("manifest: fragment %d has no data file", fr.GetId())
		}
		df := fr.GetFiles()[0]
		if df.GetBaseId() != 0 {
			return nil, fmt.Errorf("manifest: fragment %d lives under another base path, which is not supported", fr.GetId())
		}
		f := Fragment{ID: uint32(fr.GetId()), Path: "data/" + df.GetPath(), Rows: int64(fr.GetPhysicalRows()), Bytes: int64(df.GetFileSizeBytes()), FileVersion: fileVersion(df)}
		if del := fr.GetDeletionFile(); del != nil {
			if err := f.setDeletion(del); err != nil {
				return nil, fmt.Errorf("manifest: fragment %d: %w", fr.GetId(), err)
			}
		}
		mp, mapped := facts.Maps[strconv.FormatUint(fr.GetId(), 10)]
		switch {
		case len(fr.GetFiles()) > 1, mapped && mp.Parts && mp.Path == f.Path:
			// Several data files (a LanceDB Merge), or one that mvq
			// wrote with a layout of parts (its listing names only the
			// fields' columns): the layout is in the manifest.
			if err := lanceLayout(&f, fr, pm.GetFields()); err != nil {
				return nil, fmt.Errorf("manifest: fragment %d: %w", fr.GetId(), err)
			}
		case own && mapped:
			if err := checkMap(mp, counts); err != nil {
				return nil, fmt.Errorf("manifest: fragment %d: %w", fr.GetId(), err)
			}
			f.Columns, f.leaves = mp.Columns, mp.Leaves
		case stale && mapped && (mp.Path == "" || mp.Path == f.Path) && carriedMap(mp, pm.GetFields(), df) == nil:
			// A fragment mvq wrote with a column map, carried along by
			// another writer: its map is in the facts of the version mvq
			// wrote, when the data file still has the layout it says.
			// Before the identity check: versions mvq wrote before it
			// listed a dropped column's tombstones name only the mapped
			// columns of such a file, which then looks like the schema's.
			f.Columns, f.leaves = mp.Columns, mp.Leaves
		case identityColumns(pm.GetFields(), df) == nil:
		default:
			// One data file with other columns than the schema's, in
			// another order (a dropped or retyped column, a field in no
			// file).
			if err := lanceLayout(&f, fr, pm.GetFields()); err != nil {
				return nil, fmt.Errorf("manifest: fragment %d: %w", fr.GetId(), err)
			}
		}
		m.Fragments = append(m.Fragments, f)
		next = max(next, fr.GetId()+1)
	}
	if pm.MaxFragmentId != nil {
		next = max(next, uint64(pm.GetMaxFragmentId())+1)
	}
	m.NextFragmentID = uint32(next)
	if m.Schema == "" {
		return nil, fmt.Errorf("manifest: no schema")
	}
	return m, nil
}

// identityColumns checks that data file df holds every leaf of the schema
// fields, in order, at columns 0, 1, …: the layout this table layer reads
// without a column map.
func identityColumns(fields []*filepb.Field, df *tablepb.DataFile) error {
	leaves := lschema.Leaves(fields)
	if len(df.GetFields()) != len(leaves) {
		return fmt.Errorf("data file %s holds %d fields of the schema's %d leaves; other layouts are not supported yet", df.GetPath(), len(df.GetFields()), len(leaves))
	}
	for i, f := range leaves {
		if df.GetFields()[i] != f.GetId() {
			return fmt.Errorf("data file %s: field %d is id %d, want %d", df.GetPath(), i, df.GetFields()[i], f.GetId())
		}
		if ci := df.GetColumnIndices(); len(ci) > 0 && (len(ci) != len(leaves) || ci[i] != int32(i)) {
			return fmt.Errorf("data file %s: field %d is in column %d, want %d", df.GetPath(), i, ci[i], i)
		}
	}
	return nil
}

// checkFacts checks a version's own facts against its Lance fields: the
// Arrow schema they carry decodes, is one a table can hold, and has the
// same leaves. It answers the schema's leaf counts per field.
func checkFacts(facts *versionFacts, fields []*filepb.Field) ([]int, error) {
	s, err := decodeSchema(facts.Schema)
	if err != nil {
		return nil, err
	}
	if err := checkSchema(s); err != nil {
		return nil, err
	}
	counts, own, err := leafCounts(s)
	if err != nil {
		return nil, err
	}
	if a, b := len(lschema.Leaves(own)), len(lschema.Leaves(fields)); a != b {
		return nil, fmt.Errorf("its schema has %d leaf fields, the manifest %d", a, b)
	}
	return counts, nil
}

// carriedMap checks that data file df places the leaves of fields where
// column map mp says they are.
func carriedMap(mp fragMaps, fields []*filepb.Field, df *tablepb.DataFile) error {
	counts := countsOf(fields, len(subtrees(fields)))
	if err := checkMap(mp, counts); err != nil {
		return err
	}
	cols, _ := mp.Columns.Indices()
	fl, _ := parseCounts(mp.Leaves)
	base := make([]int32, len(fl)+1)
	for i, n := range fl {
		base[i+1] = base[i] + int32(n)
	}
	var want []int32
	for i, n := range counts {
		for j := 0; j < n; j++ {
			want = append(want, base[cols[i]]+int32(j))
		}
	}
	// The file's tombstones (its columns no field maps to) come after
	// the mapped fields.
	ids, at := df.GetFields(), df.GetColumnIndices()
	leaves := lschema.Leaves(fields)
	if len(ids) < len(leaves) || len(at) != len(ids) || !slices.Equal(at[:len(leaves)], want) {
		return fmt.Errorf("data file %s does not have the layout of its column map", df.GetPath())
	}
	for i, f := range leaves {
		if ids[i] != f.GetId() {
			return fmt.Errorf("data file %s: field %d is id %d, want %d", df.GetPath(), i, ids[i], f.GetId())
		}
	}
	for _, id := range ids[len(leaves):] {
		if id != dataset.FieldAbsent {
			return fmt.Errorf("data file %s holds field id %d the schema lacks", df.GetPath(), id)
		}
	}
	return nil
}

// checkMap checks a fragment's column map and leaf counts: one file
// column per schema field, each of the field's shape.
func checkMap(mp fragMaps, counts []int) error {
	cols, err := mp.Columns.Indices()
	if err != nil {
		return err
	}
	leaves, err := parseCounts(mp.Leaves)
	if err != nil {
		return err
	}
	if len(cols) != len(counts) {
		return fmt.Errorf("column map of %d entries for %d fields", len(cols), len(counts))
	}
	for i, c := range cols {
		if c >= len(leaves) || leaves[c] != counts[i] {
			return fmt.Errorf("field %d maps to file column %d, which is not of its shape", i, c)
		}
	}
	return nil
}
