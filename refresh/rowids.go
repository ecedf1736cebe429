package refresh

import (
	"context"
	"errors"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// Row ids of a source row. A source row's __source_row_id is its address
// (fragment << 32 | offset), except in an external table whose manifest
// maps fragments to other ids (table.RowIDsProperty): a data file another
// engine deleted rows of is copied again, without them, into a new
// fragment whose rows keep the ids they had (origin << 32 | position in
// the data file). For the row-wise diff such a fragment is its origin:
// the watermark's fragments are origins, the view rows of its surviving
// rows stay, and the rows of the positions deleted since are removed
// (Plan.RemovedSourceRows), so __source_row_id is stable per (data file,
// row position).

// rowIDs maps a source version's fragments to the ids of their rows; a
// fragment it does not list numbers its rows by their offset.
type rowIDs map[uint32]table.FragmentRowIDs

// rowIDsOf reads the row ids of version m of t: an external table's
// (its property) and those of fragments with deletion files.
func rowIDsOf(ctx context.Context, t *table.Table, m *table.Manifest) (rowIDs, error) {
	r, err := t.RowIDs(ctx, m)
	return rowIDs(r), err
}

// origin is the fragment id the rows of fragment id are numbered under.
func (r rowIDs) origin(id uint32) uint32 {
	if f, ok := r[id]; ok {
		return f.Origin
	}
	return id
}

// origins are the origins of frags, a set.
func (r rowIDs) origins(frags []table.Fragment) IDSet {
	ids := make([]uint32, len(frags))
	for i, f := range frags {
		ids[i] = r.origin(f.ID)
	}
	return NewIDSet(ids)
}

// addrs are the row ids of n rows of fragment frag from offset off.
func (r rowIDs) addrs(mem memory.Allocator, frag uint32, off uint64, n int) arrow.Array {
	f, ok := r[frag]
	if !ok {
		return table.RowAddrs(mem, frag, off, n)
	}
	b := array.NewUint64Builder(mem)
	defer b.Release()
	b.Reserve(n)
	for i := 0; i < n; i++ {
		b.UnsafeAppend(table.RowAddress(f.Origin, 0) | f.Position(off+uint64(i)))
	}
	return b.NewArray()
}

// RemovedRows are the rows of one source origin removed since the last
// refresh while the origin stays: the positions Deleted (sorted [lo, hi)
// pairs; rows already removed before may be among them).
type RemovedRows struct {
	Origin  uint32   `json:"origin"`
	Deleted []uint32 `json:"deleted"`
}

// removal is what a refresh removes from the view: the rows of whole
// source origins, and single rows of others.
type removal struct {
	frags IDSet
	rows  map[uint32]table.FragmentRowIDs
}

func newRemoval(frags []uint32, rows []RemovedRows) removal {
	r := removal{frags: NewIDSet(frags)}
	for _, x := range rows {
		if r.rows == nil {
			r.rows = map[uint32]table.FragmentRowIDs{}
		}
		r.rows[x.Origin] = table.FragmentRowIDs{Origin: x.Origin, Deleted: x.Deleted}
	}
	return r
}

func (r removal) empty() bool { return len(r.frags) == 0 && len(r.rows) == 0 }

// has reports whether the view row of source row id addr is removed.
func (r removal) has(addr uint64) bool {
	frag, off := table.SplitRowAddress(addr)
	if r.frags.Has(frag) {
		return true
	}
	f, ok := r.rows[frag]
	return ok && f.IsDeleted(uint32(off))
}

// touches reports whether a source origin in [lo, hi] loses single rows.
func (r removal) touches(lo, hi uint32) bool {
	for o := range r.rows {
		if lo <= o && o <= hi {
			return true
		}
	}
	return false
}

// changedOrigins are the origins both versions hold in different
// fragments (deletes applied since), with the rows deleted now; errRevived
// when a fragment both hold deletes fewer rows now (a restore);
// errReplaced when a fragment id both hold names another first data file
// and a version since may have replaced it (a Lance overwrite numbers its
// fragments from 0 again; replacedSince). A version that is
// gone (another writer's cleanup) is an error: without it neither
// deletes, nor replaced fragments, nor moved columns can be told.
func changedOrigins(ctx context.Context, src *table.Table, prevVersion uint64, cur *table.Manifest, curIDs rowIDs) ([]RemovedRows, error) {
	prev, err := src.Load(ctx, prevVersion)
	if err != nil {
		return nil, fmt.Errorf("source version %d last refreshed from: %w", prevVersion, err)
	}
	prevIDs, err := rowIDsOf(ctx, src, prev)
	if err != nil {
		return nil, err
	}
	held := map[uint32]uint32{} // origin -> fragment, in prev
	key := map[uint32]string{}  // fragment -> its content (Fragment.Key), in prev
	path := map[uint32]string{} // fragment -> its first data file, in prev
	for _, f := range prev.Fragments {
		held[prevIDs.origin(f.ID)] = f.ID
		key[f.ID] = f.Key()
		path[f.ID] = f.Path
	}
	var out []RemovedRows
	moved := false
	for _, f := range cur.Fragments {
		if p, ok := path[f.ID]; ok && p != f.Path {
			moved = true
		}
		ids, ok := curIDs[f.ID]
		if k, held := key[f.ID]; held && k != f.Key() && revived(prevIDs[f.ID].Deleted, ids.Deleted) {
			// The same fragment deletes fewer rows than before (a restore
			// of an older version): rows come back, which only a full
			// refresh puts in their place.
			return nil, errRevived
		}
		if !ok {
			continue
		}
		// Another fragment now holds the origin's rows, or the same one
		// with another deletion file.
		if was, ok := held[ids.Origin]; ok && (was != f.ID || key[was] != f.Key()) {
			out = append(out, RemovedRows{Origin: ids.Origin, Deleted: ids.Deleted})
		}
	}
	if moved {
		replaced, err := replacedSince(ctx, src, prevVersion, cur.Version)
		if err != nil {
			return nil, err
		}
		if replaced {
			return nil, errReplaced
		}
	}
	return out, nil
}

// replacedSince reports whether a version after from, up to to, may have
// put other rows under a fragment id: an overwrite (Lance's numbers its
// fragments from 0 again), a restore, or a version whose operation is not
// known (another writer's without its transaction inline), or a version
// that is gone. Writes that move a fragment's columns to another data
// file under the same id (add or drop columns, a widening, a conversion
// by warehouse upgrade) keep its rows; rewrittenReads compares where each
// read column sits. Only read when a kept fragment's first data file
// changed.
func replacedSince(ctx context.Context, src *table.Table, from, to uint64) (bool, error) {
	for v := from + 1; v <= to; v++ {
		m, err := src.Load(ctx, v)
		if errs.CodeOf(err) == errs.CodeTableVersionNotFound {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		switch m.Operation {
		case "overwrite", "restore", "lance", "":
			return true, nil
		}
	}
	return false, nil
}

// errRevived: rows the last refreshed source version had deleted are live
// again in a fragment both versions hold.
var errRevived = errors.New("rows deleted from the source came back")

// errReplaced: a fragment id both versions hold names other data now.
var errReplaced = errors.New("a source fragment id holds other data")

// revived reports whether a position deleted before (prev, sorted [lo, hi)
// pairs) is not deleted now (cur).
func revived(prev, cur []uint32) bool {
	if len(prev) == 0 {
		return false
	}
	p, c := roaring.New(), roaring.New()
	for i := 0; i+1 < len(prev); i += 2 {
		p.AddRange(uint64(prev[i]), uint64(prev[i+1]))
	}
	for i := 0; i+1 < len(cur); i += 2 {
		c.AddRange(uint64(cur[i]), uint64(cur[i+1]))
	}
	p.AndNot(c)
	return !p.IsEmpty()
}
