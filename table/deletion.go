package table

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/lance/dataset"
	"github.com/mvq-dev/mvq/lance/pb/tablepb"
	"github.com/mvq-dev/mvq/table/internal/datafile"
)

// Deletion files. Another Lance writer (LanceDB's delete, update or
// merge_insert) removes rows of a fragment by writing a deletion file
// instead of rewriting its data file. This table layer reads such a
// fragment as its live rows only: Fragment.Rows counts them, readers
// (OpenFragment, Scan, …) see offsets 0..Rows-1, and RowIDs gives each
// live row its identity in the data file, (fragment << 32) | position,
// exactly as for an external table's copied fragments, so views over the
// table keep the rows that survive and remove only the deleted ones.
//
// mvq's own delete, update and merge_insert write deletion files too
// (withDeletions): where a Lance-format table's Lance data file loses rows,
// its fragment keeps its id and data file and gets a new deletion file
// holding the old one's positions and the new ones; a fragment that loses
// every row leaves the version. Updated rows are appended as new
// fragments, as Lance's update does, so a one-row update costs one new
// small fragment instead of a rewrite of the whole one. The superseded
// deletion files are removed by CleanupOrphans once no version names them.

// deletionsDir holds a Lance table's deletion files.
const deletionsDir = "_deletions/"

// HasDeletions reports whether the fragment has a deletion file.
func (f Fragment) HasDeletions() bool { return f.DeletedRows > 0 }

// Key identifies the fragment's content: its data file and, when it has
// one, its deletion file (the same fragment id holds other rows once its
// deletion file changes).
func (f Fragment) Key() string {
	p := f.Path
	if f.Extra != "" {
		// Other data files beside the first (another writer's new or
		// rewritten columns): other content. Which columns the files hold
		// (Parts) is not content: a dropped column changes it alone.
		p += "+" + strings.Join(f.DataPaths()[1:], "+")
	}
	if !f.HasDeletions() {
		return p
	}
	return p + "#" + strconv.FormatUint(f.DeletionReadVersion, 10) + "-" + strconv.FormatUint(f.DeletionID, 10)
}

// PhysicalRows is the number of rows of the fragment's data file.
func (f Fragment) PhysicalRows() int64 { return f.Rows + f.DeletedRows }

func (f *Fragment) setDeletion(del *tablepb.DeletionFile) error {
	if del.BaseId != nil {
		return errors.New("its deletion file lives under another base path, which is not supported")
	}
	n := int64(del.GetNumDeletedRows())
	if n <= 0 {
		return errors.New("its deletion file does not say how many rows it deletes")
	}
	if n > f.Rows {
		return fmt.Errorf("its deletion file deletes %d of %d rows", n, f.Rows)
	}
	f.DeletionID, f.DeletionReadVersion = del.GetId(), del.GetReadVersion()
	f.DeletionBitmap = del.GetFileType() == tablepb.DeletionFile_BITMAP
	f.DeletedRows = n
	f.Rows -= n
	return nil
}

func (f Fragment) deletionFile() *tablepb.DeletionFile {
	kind := tablepb.DeletionFile_ARROW_ARRAY
	if f.DeletionBitmap {
		kind = tablepb.DeletionFile_BITMAP
	}
	return &tablepb.DeletionFile{FileType: kind, ReadVersion: f.DeletionReadVersion, Id: f.DeletionID, NumDeletedRows: uint64(f.DeletedRows)}
}

// deletionKey is the warehouse key of the fragment's deletion file.
func (t *Table) deletionKey(f Fragment) string {
	return t.key + f.deletionPath()
}

// Deleted reads the positions of the data file of f that its deletion
// file deletes (nil when it has none), checked against the manifest. The
// bitmap is shared (the catalog caches it): callers must not change it.
func (t *Table) Deleted(ctx context.Context, f Fragment) (*roaring.Bitmap, error) {
	if !f.HasDeletions() {
		return nil, nil
	}
	key := t.deletionKey(f)
	// A deletion file never changes (its name carries a random id): it is
	// decoded once per catalog, like index files.
	if bm, ok := t.c.decoded.Get(key); ok {
		return bm.(*roaring.Bitmap), nil
	}
	b, err := t.c.wh.Read(ctx, key)
	if errors.Is(err, os.ErrNotExist) {
		return nil, &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("fragment %d: its deletion file is missing", f.ID), Err: err}
	}
	if err != nil {
		return nil, err
	}
	var bm *roaring.Bitmap
	if f.DeletionBitmap {
		bm, err = dataset.DecodeDeletionBitmap(b)
	} else {
		bm, err = dataset.DecodeDeletionArrow(b)
	}
	if err != nil {
		return nil, &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("fragment %d: corrupt deletion file", f.ID), Err: err}
	}
	if int64(bm.GetCardinality()) != f.DeletedRows {
		return nil, errs.Errorf(errs.CodeInvalidTableState, "fragment %d: its deletion file deletes %d rows, the manifest says %d", f.ID, bm.GetCardinality(), f.DeletedRows)
	}
	if !bm.IsEmpty() && int64(bm.Maximum()) >= f.PhysicalRows() {
		return nil, errs.Errorf(errs.CodeInvalidTableState, "fragment %d: its deletion file deletes row %d of %d", f.ID, bm.Maximum(), f.PhysicalRows())
	}
	t.c.decoded.Put(key, bm, int64(bm.GetSizeInBytes()))
	return bm, nil
}

// deletedRuns renders deleted positions as sorted [lo, hi) pairs
// (FragmentRowIDs.Deleted).
func deletedRuns(bm *roaring.Bitmap) []uint32 {
	var out []uint32
	it := bm.Iterator()
	for it.HasNext() {
		v := it.Next()
		if n := len(out); n > 0 && out[n-1] == v {
			out[n-1] = v + 1
			continue
		}
		out = append(out, v, v+1)
	}
	return out
}

// RowIDs is RowIDsOf(m) with the fragments that have deletion files: by
// fragment id, the identity of each live row. nil when every row's id is
// its address.
func (t *Table) RowIDs(ctx context.Context, m *Manifest) (map[uint32]FragmentRowIDs, error) {
	out, err := RowIDsOf(m)
	if err != nil {
		return nil, err
	}
	for _, f := range m.Fragments {
		if !f.HasDeletions() {
			continue
		}
		bm, err := t.Deleted(ctx, f)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = map[uint32]FragmentRowIDs{}
		}
		if p, ok := out[f.ID]; ok {
			// A rewritten fragment (its rows keep the ids of an origin)
			// that lost rows since: position q of its data file is the
			// origin's position p.Position(q).
			all := roaring.New()
			for i := 0; i+1 < len(p.Deleted); i += 2 {
				all.AddRange(uint64(p.Deleted[i]), uint64(p.Deleted[i+1]))
			}
			it := bm.Iterator()
			for it.HasNext() {
				all.Add(uint32(p.Position(uint64(it.Next()))))
			}
			out[f.ID] = FragmentRowIDs{Fragment: f.ID, Origin: p.Origin, Deleted: deletedRuns(all)}
			continue
		}
		out[f.ID] = FragmentRowIDs{Fragment: f.ID, Origin: f.ID, Deleted: deletedRuns(bm)}
	}
	return out, nil
}

// NumDeletedRows is the number of rows the version's deletion files hide.
func (m *Manifest) NumDeletedRows() int64 {
	var n int64
	for _, f := range m.Fragments {
		n += f.DeletedRows
	}
	return n
}

// deletionPath is the path of the fragment's deletion file relative to
// the table folder ("" when it has none).
func (f Fragment) deletionPath() string {
	if !f.HasDeletions() {
		return ""
	}
	return deletionsDir + dataset.DeletionFileName(uint64(f.ID), f.deletionFile())
}

// canDelete reports whether rows of fragment f of version m can be
// removed with a deletion file: a Lance-format table's Lance data file
// (what LanceDB reads deletion files with); other fragments are rewritten.
func canDelete(m *Manifest, f Fragment) bool {
	return m.IsLance() && strings.HasSuffix(f.Path, datafile.LanceExt)
}

// physicalRows maps live offsets of a fragment (0..Rows-1, as readers see
// them, ascending) to positions in its data file, given the positions its
// deletion file already deletes (nil: none).
func physicalRows(deleted *roaring.Bitmap, live []uint32) *roaring.Bitmap {
	var dels []uint32
	if deleted != nil {
		dels = deleted.ToArray()
	}
	out := roaring.New()
	j := 0
	for _, o := range live {
		p := o + uint32(j)
		for j < len(dels) && dels[j] <= p {
			j++
			p = o + uint32(j)
		}
		out.Add(p)
	}
	return out
}

// withDeletions writes a deletion file for fragment f of version m that
// deletes the live rows at offsets live (ascending) on top of what its
// current one deletes, and answers the fragment with it (same id and data
// file). gone is true when no row would be left: then nothing is written
// and the fragment is to leave the version. The new file's name is
// random, so a retried or concurrent writer never overwrites a file a
// version names.
func (t *Table) withDeletions(ctx context.Context, m *Manifest, f Fragment, live []uint32) (nf Fragment, gone bool, err error) {
	old, err := t.Deleted(ctx, f)
	if err != nil {
		return Fragment{}, false, err
	}
	if n := len(live); n > 0 && int64(live[n-1]) >= f.Rows {
		return Fragment{}, false, fmt.Errorf("fragment %d: delete of row %d of %d", f.ID, live[n-1], f.Rows)
	}
	del := physicalRows(old, live)
	if old != nil {
		del.Or(old)
	}
	if int64(del.GetCardinality()) >= f.PhysicalRows() {
		return Fragment{}, true, nil
	}
	df, b, err := dataset.EncodeDeletionFile(m.Version, del)
	if err != nil {
		return Fragment{}, false, err
	}
	nf = f
	nf.Rows = f.PhysicalRows() - int64(del.GetCardinality())
	nf.DeletionID, nf.DeletionReadVersion = df.GetId(), df.GetReadVersion()
	nf.DeletionBitmap = df.GetFileType() == tablepb.DeletionFile_BITMAP
	nf.DeletedRows = int64(del.GetCardinality())
	if err := t.c.wh.PutIfNotExists(ctx, t.key+nf.deletionPath(), b); err != nil {
		return Fragment{}, false, fmt.Errorf("fragment %d: write deletion file: %w", f.ID, err)
	}
	return nf, false, nil
}

// lanceOp is what a delete, update or merge_insert did to the fragments, recorded as
// the version's Lance transaction (the manifest's inline transaction
// section), so Lance readers see a Delete or Update in the history: a
// Delete when it only gave fragments deletion files and removed whole
// ones, an Update when it also added fragments (an update's new rows, a
// rewritten Parquet fragment).
type lanceOp struct {
	predicate string
	updated   []uint32 // fragments that got a new deletion file
	removed   []uint32 // fragments that left the version
	added     []uint32 // fragments it added
}

// rewriteLanceOp describes the version next that applying reps and
// appending fragments made from a base whose next fragment id was
// nextID.
func rewriteLanceOp(predicate string, reps []Replacement, nextID uint32, next *Manifest) *lanceOp {
	op := &lanceOp{predicate: predicate}
	for _, r := range reps {
		if r.InPlace {
			op.updated = append(op.updated, r.Old)
		} else {
			op.removed = append(op.removed, r.Old)
		}
	}
	for _, f := range next.Fragments {
		if f.ID >= nextID {
			op.added = append(op.added, f.ID)
		}
	}
	return op
}

// transaction renders the op for a manifest whose fragments are frags
// (nil when there is no op).
func (o *lanceOp) transaction(readVersion uint64, frags []*tablepb.DataFragment) *tablepb.Transaction {
	if o == nil {
		return nil
	}
	byID := make(map[uint64]*tablepb.DataFragment, len(frags))
	for _, f := range frags {
		byID[f.GetId()] = f
	}
	pick := func(ids []uint32) []*tablepb.DataFragment {
		var out []*tablepb.DataFragment
		for _, id := range ids {
			if f, ok := byID[uint64(id)]; ok {
				out = append(out, f)
			}
		}
		return out
	}
	removed := make([]uint64, len(o.removed))
	for i, id := range o.removed {
		removed[i] = uint64(id)
	}
	switch {
	case len(o.added) == 0:
		return dataset.Delete(readVersion, pick(o.updated), removed, o.predicate)
	case len(o.updated) == 0 && len(removed) == 0:
		return dataset.Append(readVersion, pick(o.added)) // a merge that only inserted
	}
	return dataset.Update(readVersion, removed, pick(o.updated), pick(o.added), nil)
}

// livePositions is the data-file position of each live row of f (index:
// the live offset readers see), or nil when f has no deletion file and
// the two are the same.
func (t *Table) livePositions(ctx context.Context, f Fragment) ([]uint32, error) {
	del, err := t.Deleted(ctx, f)
	if err != nil || del == nil {
		return nil, err
	}
	return roaring.Flip(del, 0, uint64(f.PhysicalRows())).ToArray(), nil
}

// LanceRowAddrs rewrites row addresses of version m from the live form
// this package's readers and indexes use, (fragment << 32) | live offset,
// into Lance's, (fragment << 32) | position in the data file, which is
// what LanceDB answers for _rowaddr and what a view's source row ids
// hold. They differ only in fragments with a deletion file. An address of
// a fragment m does not have, or past its rows, is an error.
func (t *Table) LanceRowAddrs(ctx context.Context, m *Manifest, addrs []uint64) error {
	byID := map[uint32]Fragment{}
	for _, f := range m.Fragments {
		if f.HasDeletions() {
			byID[f.ID] = f
		}
	}
	if len(byID) == 0 {
		return nil
	}
	pos := map[uint32][]uint32{}
	for i, a := range addrs {
		fid, o := SplitRowAddress(a)
		f, ok := byID[fid]
		if !ok {
			continue
		}
		p, ok := pos[fid]
		if !ok {
			var err error
			if p, err = t.livePositions(ctx, f); err != nil {
				return err
			}
			pos[fid] = p
		}
		if int(o) >= len(p) {
			return fmt.Errorf("row address %d: fragment %d has %d rows", a, fid, len(p))
		}
		addrs[i] = RowAddress(fid, p[o])
	}
	return nil
}

// LanceRowAddrArray is LanceRowAddrs over a uint64 array of live
// addresses, answered as a new array (a is left as it is).
func (t *Table) LanceRowAddrArray(ctx context.Context, m *Manifest, a arrow.Array, mem memory.Allocator) (arrow.Array, error) {
	u, ok := a.(*array.Uint64)
	if !ok {
		return nil, fmt.Errorf("row addresses are %s, not uint64", a.DataType())
	}
	vals := append([]uint64(nil), u.Uint64Values()...)
	if err := t.LanceRowAddrs(ctx, m, vals); err != nil {
		return nil, err
	}
	b := array.NewUint64Builder(mem)
	defer b.Release()
	b.AppendValues(vals, nil)
	return b.NewArray(), nil
}
