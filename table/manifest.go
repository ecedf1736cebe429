package table

import (
	"encoding/json"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"
)

// NamingScheme names version manifests under _versions/.
type NamingScheme string

const (
	// NamingV1 is _versions/{version}.manifest.
	NamingV1 NamingScheme = "V1"
	// NamingV2 is _versions/{u64::MAX - version, 20 digits}.manifest: the
	// newest version sorts first.
	NamingV2 NamingScheme = "V2"
)

const versionsDir = "_versions/"
const manifestExt = ".manifest"

// ManifestName returns the file name of version v under scheme.
func ManifestName(v uint64, scheme NamingScheme) string {
	if scheme == NamingV1 {
		return strconv.FormatUint(v, 10) + manifestExt
	}
	return fmt.Sprintf("%020d", uint64(math.MaxUint64)-v) + manifestExt
}

// ParseManifestName returns the version a _versions/ file name stands for
// and its scheme. Names of exactly 20 digits are V2, shorter digit strings
// V1; anything else is not a manifest.
func ParseManifestName(name string) (uint64, NamingScheme, bool) {
	base, ok := strings.CutSuffix(name, manifestExt)
	if !ok || base == "" || len(base) > 20 {
		return 0, "", false
	}
	for i := 0; i < len(base); i++ {
		if base[i] < '0' || base[i] > '9' {
			return 0, "", false
		}
	}
	n, err := strconv.ParseUint(base, 10, 64)
	if err != nil {
		return 0, "", false
	}
	if len(base) == 20 {
		return math.MaxUint64 - n, NamingV2, true
	}
	if len(base) > 1 && base[0] == '0' {
		return 0, "", false // V1 names carry no leading zeros
	}
	return n, NamingV1, true
}

// Fragment is one immutable Parquet data file of a table version.
type Fragment struct {
	ID    uint32 `json:"id"`
	Path  string `json:"path"` // relative to the table folder, e.g. data/….parquet
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
	// Columns maps the version's schema to the file's columns once a
	// column was dropped (schema_evolve.go); empty: the same columns.
	Columns ColumnMap `json:"columns,omitempty"`
	// A Lance fragment may have a deletion file (another Lance writer's
	// delete or update): _deletions/{ID}-{DeletionReadVersion}-{DeletionID}
	// (.arrow, or .bin when DeletionBitmap) lists DeletedRows rows of the
	// data file that are gone. Rows counts the live rows only, and every
	// reader of the fragment sees just those, as offsets 0..Rows-1, as if
	// the file had been rewritten without them; RowIDs says which rows of
	// the data file they are (deletion.go).
	DeletionID          uint64 `json:"deletion_id,omitempty"`
	DeletionReadVersion uint64 `json:"deletion_read_version,omitempty"`
	DeletionBitmap      bool   `json:"deletion_bitmap,omitempty"`
	DeletedRows         int64  `json:"deleted_rows,omitempty"`
	// FileVersion is "2.0" for a Lance 2.0 data file (in a dataset created
	// as 2.0); empty for the 2.1 files mvq writes elsewhere. It travels
	// with the fragment (a refresh worker's results are JSON).
	FileVersion string `json:"file_version,omitempty"`
	// Parts and Extra describe a Lance fragment whose columns are not its
	// first file's in order, or live in several data files (another
	// writer's add_columns or alter_columns): lance_layout.go. Empty for
	// every fragment mvq writes.
	Parts string `json:"parts,omitempty"`
	Extra string `json:"extra,omitempty"`
	// written is the schema WriteFileAt wrote the file with (this process
	// only): Commit checks it still lines up with the table's.
	written *arrow.Schema
	// leaves, in a Lance-format table whose fragment has Columns, are the
	// leaf column counts of the file's top-level columns
	// (lance_manifest.go), so the manifest can say where each leaf is.
	leaves string
}

// Manifest describes one immutable table version.
type Manifest struct {
	Version uint64 `json:"version"`
	// UUID is the table's identity: set when the table is created and
	// carried unchanged to every later version, so a table dropped and
	// created again under the same name is a different table. Tables
	// created before identities were stored have none; see
	// Table.Identity.
	UUID            string     `json:"uuid,omitempty"`
	ParentVersion   uint64     `json:"parent_version"`
	TimestampMillis int64      `json:"timestamp_millis"`
	Operation       string     `json:"operation"`
	Schema          string     `json:"schema"` // base64 Arrow IPC schema
	Fragments       []Fragment `json:"fragments"`
	NextFragmentID  uint32     `json:"next_fragment_id"`
	// Metadata is this version's free-form metadata (version/create).
	Metadata map[string]string `json:"metadata,omitempty"`
	// Transaction is the batch transaction that wrote this version
	// (txn.go); such a version is visible once the transaction committed.
	Transaction string `json:"transaction,omitempty"`
	// Properties are table-level and carried from version to version:
	// views keep their definition and refresh watermark here.
	Properties map[string]json.RawMessage `json:"properties,omitempty"`
	// lance: the version is (to be) stored as a Lance manifest
	// (lance_manifest.go); versions derived from it keep the format.
	lance bool
	// carry is what its Lance manifest holds that versions derived from it
	// keep (lance_carry.go): field ids, other writers' config and indexes.
	carry *lanceCarry
	// parent is the version a commit derived this one from (set by
	// Table.commit before encoding): a Lance manifest carries the change
	// from it as its transaction (lanceTransaction).
	parent *Manifest
	// lanceOp, set by the operation that makes this version (not read
	// back), is the Lance transaction its manifest records (deletion.go).
	lanceOp *lanceOp
}

// ViewProperty is the manifest property that makes a table a materialized
// view (its definition, owned by refresh, which also refuses direct
// writes to it through a WriteGuard).
const ViewProperty = "mvq.view"

// IsView reports whether the version belongs to a materialized view.
func (m *Manifest) IsView() bool { _, ok := m.Properties[ViewProperty]; return ok }

// IdentityProperty is the key under which describe shows a table's
// identity (Table.Identity) among its properties.
const IdentityProperty = "mvq.uuid"

// legacyIdentitySpace is the UUIDv5 name space of LegacyIdentity.
var legacyIdentitySpace = uuid.MustParse("6f1c1b7e-3d1a-4c55-9a53-0d5b2f1e9c40")

// LegacyIdentity is the identity of a table created before identities
// were stored in manifests: a name-based UUID (v5) of the creation time of
// its version 1, in milliseconds. It is stable (version 1 never changes)
// and tells a table created again apart as well as that timestamp ever
// did, which is what refresh used as identity before.
func LegacyIdentity(createdMillis int64) string {
	return uuid.NewSHA1(legacyIdentitySpace, []byte("v1-created-millis:"+strconv.FormatInt(createdMillis, 10))).String()
}

// newIdentity returns a fresh table identity: a UUIDv7 (time-ordered), or
// a random v4 should the clock-based one fail.
func newIdentity() string {
	if u, err := uuid.NewV7(); err == nil {
		return u.String()
	}
	return uuid.NewString()
}

// MaxManifestBytes bounds a manifest we agree to decode.
const MaxManifestBytes = 64 << 20

// DecodeManifest parses and checks a manifest: fragment ids unique and below
// next_fragment_id, paths inside the table folder, counts non-negative.
func DecodeManifest(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestBytes {
		return nil, fmt.Errorf("manifest larger than %d bytes", MaxManifestBytes)
	}
	var m Manifest
	if isLanceManifest(data) {
		lm, err := decodeLance(data)
		if err != nil {
			return nil, err
		}
		m = *lm
	} else if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if m.Schema == "" {
		return nil, fmt.Errorf("manifest: no schema")
	}
	if m.UUID != "" {
		if _, err := uuid.Parse(m.UUID); err != nil || len(m.UUID) != 36 {
			return nil, fmt.Errorf("manifest: uuid %q is not a UUID", m.UUID)
		}
	}
	seen := make(map[uint32]bool, len(m.Fragments))
	for _, f := range m.Fragments {
		if seen[f.ID] {
			return nil, fmt.Errorf("manifest: fragment %d listed twice", f.ID)
		}
		seen[f.ID] = true
		if f.ID >= m.NextFragmentID {
			return nil, fmt.Errorf("manifest: fragment %d not below next_fragment_id %d", f.ID, m.NextFragmentID)
		}
		if _, err := f.Columns.Indices(); err != nil {
			return nil, fmt.Errorf("manifest: fragment %d: %w", f.ID, err)
		}
		if f.Rows < 0 || f.Bytes < 0 {
			return nil, fmt.Errorf("manifest: fragment %d has negative size", f.ID)
		}
		if !dataPathOK(f.Path) {
			return nil, fmt.Errorf("manifest: fragment %d path %q outside data/", f.ID, f.Path)
		}
	}
	return &m, nil
}

// dataPathOK reports whether p names a file under the table's data/ in
// one clean form: no "..", "./" or "//", so the name cleanup lists is the
// name every version references.
func dataPathOK(p string) bool {
	return strings.HasPrefix(p, "data/") && !strings.Contains(p, "..") && path.Clean(p) == p
}

// Encode renders the manifest in its table's format: a Lance manifest
// (lance_manifest.go) or JSON.
func (m *Manifest) Encode() ([]byte, error) {
	if m.lance {
		return m.encodeLance()
	}
	return json.Marshal(m)
}

// IsLance reports whether the version is stored as a Lance manifest.
func (m *Manifest) IsLance() bool { return m.lance }

// NumRows is the row count of the version.
func (m *Manifest) NumRows() int64 {
	var n int64
	for _, f := range m.Fragments {
		n += f.Rows
	}
	return n
}

// NumBytes is the data size of the version.
func (m *Manifest) NumBytes() int64 {
	var n int64
	for _, f := range m.Fragments {
		n += f.DataBytes()
	}
	return n
}

// clone returns a deep-enough copy to derive the next version from.
func (m *Manifest) clone() *Manifest {
	c := *m
	c.Fragments = append([]Fragment(nil), m.Fragments...)
	c.Metadata = nil
	c.Transaction = ""
	c.parent = nil
	c.lanceOp = nil
	if m.Properties != nil {
		c.Properties = make(map[string]json.RawMessage, len(m.Properties))
		for k, v := range m.Properties {
			c.Properties[k] = v
		}
	}
	return &c
}

// RowAddress is (fragment_id << 32) | offset.
func RowAddress(fragment uint32, offset uint32) uint64 {
	return uint64(fragment)<<32 | uint64(offset)
}

// SplitRowAddress is the inverse of RowAddress.
func SplitRowAddress(addr uint64) (fragment uint32, offset uint32) {
	return uint32(addr >> 32), uint32(addr)
}
