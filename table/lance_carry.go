package table

import (
	"maps"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/lance/dataset"
	"github.com/mvq-dev/mvq/lance/pb/filepb"
	"github.com/mvq-dev/mvq/lance/pb/tablepb"
	lschema "github.com/mvq-dev/mvq/lance/schema"
)

// What a Lance version holds that mvq carries to the versions it derives
// from it, as a Lance writer does (lanceCarry):
//   - Field ids are stable: a field keeps its id from version to version
//     (through renames, widening and metadata changes), a dropped field's
//     id is never given again, and an added field gets the next unused
//     one. Lance indexes and other Lance writers name fields by id, so an
//     index LanceDB built keeps naming its column after mvq commits, and
//     LanceDB's own commits after a mvq drop_columns line up.
//   - Another writer's config keys, table metadata and index metadata
//     (LanceDB's createIndex) stay; an index whose column was dropped or
//     changed type goes, as Lance's own writers do.
//   - A dataset created with Lance data storage version 2.0 stays 2.0, and
//     each data file keeps the file version it was written with.

// lanceCarry is immutable once made: operations that change it make a
// new one.
type lanceCarry struct {
	// ids[i] are the Lance field ids of the schema's top-level field i and
	// its descendants, depth-first (the order lance/schema makes them).
	ids [][]int32
	// types[id] is the Lance logical type of the field with that id.
	types map[int32]string
	// maxField is the largest field id the table ever used.
	maxField int32
	// config holds the manifest config keys other writers set (not mvq.*).
	config  map[string]string
	tableMD map[string]string
	indices []*tablepb.IndexMetadata
	// storage is the dataset's data storage version ("2.0", "2.1").
	storage string
	// stableRowIDs: the dataset has Lance's stable row ids (each fragment
	// carries its rows' ids), which mvq's commits would drop: writes
	// through mvq are refused (refuseStableRowIDs).
	stableRowIDs bool
}

// subtrees splits Lance fields (a valid field list) into the depth-first
// lists of each top-level field.
func subtrees(fields []*filepb.Field) [][]*filepb.Field {
	kids := map[int32][]*filepb.Field{}
	var top []*filepb.Field
	for _, f := range fields {
		if f.GetParentId() == -1 {
			top = append(top, f)
		} else {
			kids[f.GetParentId()] = append(kids[f.GetParentId()], f)
		}
	}
	out := make([][]*filepb.Field, len(top))
	for i, f := range top {
		var walk func(f *filepb.Field)
		seen := map[int32]bool{}
		walk = func(f *filepb.Field) {
			if seen[f.GetId()] {
				return
			}
			seen[f.GetId()] = true
			out[i] = append(out[i], f)
			for _, k := range kids[f.GetId()] {
				walk(k)
			}
		}
		walk(f)
	}
	return out
}

// newCarry reads what a decoded Lance manifest carries.
func newCarry(mf *dataset.ManifestFile, factsMax int32) *lanceCarry {
	pm := mf.Manifest
	c := &lanceCarry{types: map[int32]string{}, maxField: max(factsMax, -1), tableMD: pm.GetTableMetadata(),
		stableRowIDs: pm.GetReaderFeatureFlags()&dataset.FlagStableRowIDs != 0 || pm.GetWriterFeatureFlags()&dataset.FlagStableRowIDs != 0}
	for _, st := range subtrees(pm.GetFields()) {
		ids := make([]int32, len(st))
		for j, f := range st {
			ids[j] = f.GetId()
		}
		c.ids = append(c.ids, ids)
	}
	for _, f := range pm.GetFields() {
		c.types[f.GetId()] = f.GetLogicalType()
		c.maxField = max(c.maxField, f.GetId())
	}
	for _, fr := range pm.GetFragments() {
		for _, df := range fr.GetFiles() {
			for _, id := range df.GetFields() {
				c.maxField = max(c.maxField, id)
			}
		}
	}
	for k, v := range pm.GetConfig() {
		if !mvqConfigKey(k) {
			if c.config == nil {
				c.config = map[string]string{}
			}
			c.config[k] = v
		}
	}
	if mf.Indices != nil {
		c.indices = mf.Indices.GetIndices()
	}
	if df := pm.GetDataFormat(); df != nil {
		c.storage = df.GetVersion()
	}
	return c
}

func mvqConfigKey(k string) bool {
	return k == lanceUUIDKey || k == lanceVersionKey || len(k) > len(lancePropPrefix) && k[:len(lancePropPrefix)] == lancePropPrefix
}

// withoutFields is c with the top-level fields at the dropped positions
// gone (drop_columns).
func (c *lanceCarry) withoutFields(drop map[int]bool) *lanceCarry {
	if c == nil {
		return nil
	}
	n := *c
	n.ids = nil
	for i, ids := range c.ids {
		if !drop[i] {
			n.ids = append(n.ids, ids)
		}
	}
	return &n
}

// restoredOver is c (an older version's) restored on top of cur: the old
// version's fields, indexes and config, with no field id given again.
func (c *lanceCarry) restoredOver(cur *lanceCarry) *lanceCarry {
	if c == nil || cur == nil {
		return c
	}
	n := *c
	n.maxField = max(c.maxField, cur.maxField)
	return &n
}

// restarted is c for an overwrite: a new schema whose fields get new ids
// and no index; config and storage version stay.
func (c *lanceCarry) restarted() *lanceCarry {
	if c == nil {
		return nil
	}
	n := *c
	n.ids, n.types, n.indices = nil, nil, nil
	return &n
}

// fieldIDs gives the Lance fields of schema s their ids: each top-level
// field keeps the ids it had where its shape (the number of fields under
// it) is unchanged, and new fields get ids after every id used so far. It
// answers the fields, the largest id in use, and the ids whose type
// changed.
func (c *lanceCarry) fieldIDs(s *arrow.Schema) ([]*filepb.Field, int32, map[int32]bool, error) {
	fields, err := lschema.FromArrow(s)
	if err != nil {
		return nil, 0, nil, err
	}
	if c == nil {
		return fields, int32(len(fields)) - 1, nil, nil
	}
	next := c.maxField + 1
	used := map[int32]bool{}
	remap := map[int32]int32{}
	changed := map[int32]bool{}
	for i, st := range subtrees(fields) {
		reuse := i < len(c.ids) && len(c.ids[i]) == len(st)
		if reuse {
			for _, id := range c.ids[i] {
				if used[id] || id < 0 {
					reuse = false
				}
			}
		}
		for j, f := range st {
			if reuse {
				id := c.ids[i][j]
				remap[f.GetId()] = id
				used[id] = true
				if t, ok := c.types[id]; ok && t != f.GetLogicalType() {
					changed[id] = true
				}
				continue
			}
			for used[next] {
				next++
			}
			remap[f.GetId()] = next
			used[next] = true
			next++
		}
	}
	top := c.maxField
	for _, f := range fields { // fresh from FromArrow: changed in place
		if f.ParentId != -1 {
			f.ParentId = remap[f.ParentId]
		}
		f.Id = remap[f.Id]
		top = max(top, f.Id)
	}
	return fields, top, changed, nil
}

// keptIndices are the index metadata that still apply to a version with
// these fields: an index on a field the version lost, or whose type
// changed, goes.
func (c *lanceCarry) keptIndices(fields []*filepb.Field, changed map[int32]bool) []*tablepb.IndexMetadata {
	if c == nil || len(c.indices) == 0 {
		return nil
	}
	have := make(map[int32]bool, len(fields))
	for _, f := range fields {
		have[f.GetId()] = true
	}
	return slices.DeleteFunc(slices.Clone(c.indices), func(ix *tablepb.IndexMetadata) bool {
		return slices.ContainsFunc(ix.GetFields(), func(id int32) bool { return id >= 0 && (!have[id] || changed[id]) })
	})
}

func (c *lanceCarry) foreignConfig() map[string]string {
	if c == nil {
		return nil
	}
	return maps.Clone(c.config)
}

func (c *lanceCarry) tableMetadata() map[string]string {
	if c == nil {
		return nil
	}
	return maps.Clone(c.tableMD)
}

// StorageVersion is the Lance data storage version of the version's
// dataset: "2.1" unless it was created as another (LanceDB's "2.0").
func (m *Manifest) StorageVersion() string {
	if m.carry != nil && m.carry.storage != "" {
		return m.carry.storage
	}
	return lanceStorageVers
}

// StableRowIDs reports whether version m is of a Lance dataset with
// stable row ids (LanceDB's new_table_enable_stable_row_ids).
func (m *Manifest) StableRowIDs() bool { return m != nil && m.carry != nil && m.carry.stableRowIDs }

// refuseStableRowIDs refuses op on a table with stable row ids: mvq reads
// such a table (queries, views over it) but does not write the row id
// sequences its fragments need, so a commit of its own would silently
// drop them, and with them what LanceDB's indexes point at.
func refuseStableRowIDs(id []string, m *Manifest, op string) error {
	if !m.StableRowIDs() {
		return nil
	}
	return errs.Errorf(errs.CodeUnsupported, "%s uses Lance stable row ids, which mvq does not write yet: %s through mvq is refused (it would drop the row ids); write with LanceDB, read and refresh views through mvq", JoinID(id), op)
}

// FieldIDAt answers the Lance field id of the schema's top-level field i
// in version m: a field keeps its id through renames, so two versions
// whose field of one name has different ids hold different columns under
// that name (a swap of two names, a drop and a rename to the dropped
// name). ok is false where m does not know (a version not read back from
// its Lance manifest, or a field added in memory).
func (m *Manifest) FieldIDAt(i int) (id int32, ok bool) {
	if m == nil || m.carry == nil || i < 0 || i >= len(m.carry.ids) || len(m.carry.ids[i]) == 0 {
		return 0, false
	}
	return m.carry.ids[i][0], true
}

// checkIndexFragments refuses a staged Lance manifest whose index
// metadata names fragment ids it has not given out yet (its
// max_fragment_id lowered under an index): the next fragment mvq or
// LanceDB writes would take such an id, and LanceDB would take its rows
// for indexed and not find them.
func (m *Manifest) checkIndexFragments() error {
	if m.carry == nil {
		return nil
	}
	for _, ix := range m.carry.indices {
		raw := ix.GetFragmentBitmap()
		if len(raw) == 0 {
			continue
		}
		bm := roaring.New()
		if err := bm.UnmarshalBinary(raw); err != nil {
			return errs.Errorf(errs.CodeInvalidInput, "manifest_path: index %q: fragment bitmap: %v", ix.GetName(), err)
		}
		if !bm.IsEmpty() && uint64(bm.Maximum()) >= uint64(m.NextFragmentID) {
			return errs.Errorf(errs.CodeInvalidInput, "manifest_path: index %q covers fragment %d, which the manifest has not given out (max_fragment_id %d)", ix.GetName(), bm.Maximum(), int64(m.NextFragmentID)-1)
		}
	}
	return nil
}
