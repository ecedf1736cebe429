package index

import (
	"cmp"
	"context"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/mvq-dev/mvq/table"
)

// keyIndex answers a merge_insert's matches from a scalar index: the
// input's key values sorted once, then joined with each covered
// fragment's sorted keys (a merge join of two sorted lists).
type keyIndex struct {
	t    *table.Table
	im   *Meta
	kind byte
	ints []int64
	flts []float64
	strs []string
	rows []int32 // the input row of each sorted key
}

// KeyIndexFor is the table.KeyIndexFinder of scalar indexes: a BTREE (or
// else BITMAP) index on column, when its key kind is the column's; nil
// when there is none.
func KeyIndexFor(ctx context.Context, t *table.Table, m *table.Manifest, column string, keys arrow.Array) (table.KeyIndex, error) {
	metas, err := List(ctx, t)
	if err != nil {
		return nil, err
	}
	var im *Meta
	for _, x := range metas {
		if x.Column == column && (x.Type == BTree || x.Type == Bitmap && im == nil) && x.sameField(m, nil) {
			im = x
		}
	}
	if im == nil {
		return nil, nil
	}
	kind, err := keyKind(column, keys.DataType())
	if err != nil {
		return nil, nil
	}
	cv := &columnValues{}
	cv.add(keys, 0) // nulls skipped, NaNs apart: they match nothing
	ki := &keyIndex{t: t, im: im, kind: kind}
	switch kind {
	case kindInt:
		ki.ints, ki.rows = sortInput(cv.ints, cv.rows)
	case kindFloat:
		ki.flts, ki.rows = sortInput(cv.floats, cv.rows)
	default:
		ki.strs, ki.rows = sortInput(cv.strs, cv.rows)
	}
	return ki, nil
}

func sortInput[K cmp.Ordered](keys []K, rows []uint32) ([]K, []int32) {
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return keys[idx[a]] < keys[idx[b]] })
	sk := make([]K, len(keys))
	sr := make([]int32, len(keys))
	for i, j := range idx {
		sk[i], sr[i] = keys[j], int32(rows[j])
	}
	return sk, sr
}

// Match implements table.KeyIndex.
func (ki *keyIndex) Match(ctx context.Context, f table.Fragment) ([]uint32, []int32, bool, error) {
	cov, ok := ki.im.covers(f)
	if !ok {
		return nil, nil, false, nil
	}
	if !ki.mayHold(cov) {
		return nil, nil, true, nil // no input key within the fragment's keys
	}
	sf, found, err := readFile[scalarFile](ctx, ki.t, ki.im.fragmentFile(ki.t, f))
	if err != nil || !found {
		return nil, nil, false, err
	}
	if sf.Kind != ki.kind {
		return nil, nil, false, nil // the column changed type: scan
	}
	var pairs [][2]uint32
	switch sf.Kind {
	case kindInt:
		pairs = joinSorted(sf.Ints, sf.Rows, sf.Starts, ki.ints, ki.rows)
	case kindFloat:
		pairs = joinSorted(sf.Floats, sf.Rows, sf.Starts, ki.flts, ki.rows)
	default:
		pairs = joinSorted(sf.Strs, sf.Rows, sf.Starts, ki.strs, ki.rows)
	}
	slices.SortFunc(pairs, func(a, b [2]uint32) int { return cmp.Compare(a[0], b[0]) })
	off := make([]uint32, len(pairs))
	src := make([]int32, len(pairs))
	for i, p := range pairs {
		off[i], src[i] = p[0], int32(p[1])
	}
	return off, src, true, nil
}

// joinSorted pairs each file row whose key equals an input key with that
// input row. keys/rows/starts are a scalar file's (starts nil: BTREE, one
// row per key; else BITMAP postings); in/inRows the sorted input keys
// (distinct: merge input keys are unique).
func joinSorted[K cmp.Ordered](keys []K, rows, starts []uint32, in []K, inRows []int32) [][2]uint32 {
	var out [][2]uint32
	i, j := 0, 0
	for i < len(keys) && j < len(in) {
		switch {
		case keys[i] < in[j]:
			// Skip ahead: the input is usually much smaller than a fragment.
			i += sort.Search(len(keys)-i, func(n int) bool { return keys[i+n] >= in[j] })
		case in[j] < keys[i]:
			j++
		default:
			if starts == nil {
				out = append(out, [2]uint32{rows[i], uint32(inRows[j])})
			} else {
				for _, r := range rows[starts[i]:starts[i+1]] {
					out = append(out, [2]uint32{r, uint32(inRows[j])})
				}
			}
			i++
		}
	}
	return out
}

// mayHold reports whether an input key lies within the fragment's key
// range (true when the definition has no range).
func (ki *keyIndex) mayHold(c Covered) bool {
	switch {
	case ki.kind == kindInt && c.IntRange != nil:
		return inRange(ki.ints, c.IntRange[0], c.IntRange[1])
	case ki.kind == kindFloat && c.FloatRange != nil:
		return inRange(ki.flts, c.FloatRange[0], c.FloatRange[1])
	case ki.kind == kindString && c.StrRange != nil:
		return inRange(ki.strs, c.StrRange[0], c.StrRange[1])
	}
	return true
}

// inRange reports whether sorted keys hold a value in [lo, hi].
func inRange[K cmp.Ordered](keys []K, lo, hi K) bool {
	i := sort.Search(len(keys), func(n int) bool { return keys[n] >= lo })
	return i < len(keys) && keys[i] <= hi
}
