package table

import (
	"encoding/json"
	"slices"

	"github.com/mvq-dev/mvq/errs"
)

// RowIDsProperty is the manifest property of an external table whose
// fragments do not all hold whole files: a data file another engine
// deleted rows of is copied again without them, into a new fragment, but
// its rows keep the ids they had, (origin << 32) | position in the data
// file, so views over the table (package refresh) keep their rows for
// the rows that survive and remove only the deleted ones. The value is a
// RowIDs. Readers of the table itself see plain fragments; only code
// that keeps row identities across versions reads this.
const RowIDsProperty = "mvq.row_ids"

// RowIDs lists the fragments of a version whose rows' ids are not
// (fragment << 32) | offset.
type RowIDs struct {
	Fragments []FragmentRowIDs `json:"fragments"`
}

// FragmentRowIDs says which ids the rows of fragment Fragment have: the
// k-th row's is (Origin << 32) | p, p the k-th position of 0, 1, 2, ...
// not in Deleted (sorted, disjoint [lo, hi) runs, as pairs).
type FragmentRowIDs struct {
	Fragment uint32   `json:"fragment"`
	Origin   uint32   `json:"origin"`
	Deleted  []uint32 `json:"deleted,omitempty"`
}

// RowIDsOf decodes m's RowIDsProperty: by fragment id; nil when m has
// none (every row's id is its address).
func RowIDsOf(m *Manifest) (map[uint32]FragmentRowIDs, error) {
	raw, ok := m.Properties[RowIDsProperty]
	if !ok {
		return nil, nil
	}
	var r RowIDs
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, &errs.Error{Code: errs.CodeInvalidTableState, Message: "row ids of the external table are corrupt", Err: err}
	}
	out := make(map[uint32]FragmentRowIDs, len(r.Fragments))
	for _, f := range r.Fragments {
		if len(f.Deleted)%2 != 0 || !slices.IsSorted(f.Deleted) {
			return nil, errs.Errorf(errs.CodeInvalidTableState, "row ids of fragment %d: deleted runs are not sorted pairs", f.Fragment)
		}
		out[f.Fragment] = f
	}
	return out, nil
}

// Position is the position in the origin data file of the k-th row.
func (f FragmentRowIDs) Position(k uint64) uint64 {
	p := k
	for i := 0; i+1 < len(f.Deleted); i += 2 {
		lo, hi := uint64(f.Deleted[i]), uint64(f.Deleted[i+1])
		if lo > p {
			break
		}
		p += hi - lo
	}
	return p
}

// IsDeleted reports whether position p of the origin file is deleted.
func (f FragmentRowIDs) IsDeleted(p uint32) bool {
	// The first run starting after p; p is deleted if the one before
	// it covers p.
	i, _ := slices.BinarySearch(f.Deleted, p+1)
	// i indexes the first element > p; an odd i means p lies within
	// [Deleted[i-1], Deleted[i]) (a run's lo <= p < hi).
	return i%2 == 1
}

// pruneRowIDs drops from m's RowIDsProperty the fragments m no longer
// has (a compaction merged them: the merged rows take new ids).
func pruneRowIDs(m *Manifest) error {
	ids, err := RowIDsOf(m)
	if err != nil || ids == nil {
		return err
	}
	var keep RowIDs
	for _, f := range m.Fragments {
		if id, ok := ids[f.ID]; ok {
			keep.Fragments = append(keep.Fragments, id)
		}
	}
	if len(keep.Fragments) == 0 {
		delete(m.Properties, RowIDsProperty)
		return nil
	}
	raw, err := json.Marshal(keep)
	if err != nil {
		return err
	}
	m.Properties[RowIDsProperty] = raw
	return nil
}
