package index

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// A scalar index file holds one fragment's non-null values of the column
// with their row offsets. BTREE keeps every (value, row) pair sorted by
// value (ties by row): equality, IN and ranges are binary searches.
// BITMAP keeps each distinct value once with its sorted posting list:
// equality and IN read postings without sorting. Float NaNs (which
// DuckDB orders above every number and finds equal to each other) are
// kept apart and are candidates for every predicate.

// Key kinds.
const (
	kindInt    = 'i'
	kindFloat  = 'f'
	kindString = 's'
)

type scalarFile struct {
	Kind   byte
	Ints   []int64
	Floats []float64
	Strs   []string
	// Rows: BTREE, the row of each key; BITMAP, the postings of the
	// distinct keys one after another, Starts[i]:Starts[i+1] for key i.
	Rows   []uint32
	Starts []uint32
	NaN    []uint32
}

// keyKind answers the key kind of a column type, or an error naming it.
func keyKind(column string, t arrow.DataType) (byte, error) {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32:
		return kindInt, nil
	case arrow.FLOAT64:
		return kindFloat, nil
	case arrow.STRING, arrow.LARGE_STRING:
		return kindString, nil
	}
	return 0, errs.Errorf(errs.CodeInvalidInput, "column: %q is %s; scalar indexes take integer (up to int64, uint32), float64 and string columns", column, t)
}

// columnValues collects the column's values (nulls skipped) with their
// row offsets, and the rows holding NaN.
type columnValues struct {
	ints   []int64
	floats []float64
	strs   []string
	rows   []uint32
	nan    []uint32
}

func (cv *columnValues) add(a arrow.Array, base uint32) {
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) {
			continue
		}
		row := base + uint32(i)
		switch x := a.(type) {
		case *array.Int8:
			cv.ints = append(cv.ints, int64(x.Value(i)))
		case *array.Int16:
			cv.ints = append(cv.ints, int64(x.Value(i)))
		case *array.Int32:
			cv.ints = append(cv.ints, int64(x.Value(i)))
		case *array.Int64:
			cv.ints = append(cv.ints, x.Value(i))
		case *array.Uint8:
			cv.ints = append(cv.ints, int64(x.Value(i)))
		case *array.Uint16:
			cv.ints = append(cv.ints, int64(x.Value(i)))
		case *array.Uint32:
			cv.ints = append(cv.ints, int64(x.Value(i)))
		case *array.Float64:
			v := x.Value(i)
			if math.IsNaN(v) {
				cv.nan = append(cv.nan, row)
				continue
			}
			cv.floats = append(cv.floats, v)
		case *array.String:
			cv.strs = append(cv.strs, x.Value(i))
		case *array.LargeString:
			cv.strs = append(cv.strs, x.Value(i))
		default:
			continue
		}
		cv.rows = append(cv.rows, row)
	}
}

// buildScalar builds the file of one fragment from its column values.
func buildScalar(typ string, kind byte, cv *columnValues) *scalarFile {
	sf := &scalarFile{Kind: kind, NaN: cv.nan}
	switch kind {
	case kindInt:
		sf.Ints, sf.Rows, sf.Starts = sortKeys(typ, cv.ints, cv.rows)
	case kindFloat:
		sf.Floats, sf.Rows, sf.Starts = sortKeys(typ, cv.floats, cv.rows)
	default:
		sf.Strs, sf.Rows, sf.Starts = sortKeys(typ, cv.strs, cv.rows)
	}
	return sf
}

// sortKeys sorts (key, row) pairs by key then row; for BITMAP it keeps
// each key once and answers the posting starts.
func sortKeys[K cmp.Ordered](typ string, keys []K, rows []uint32) ([]K, []uint32, []uint32) {
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool {
		ka, kb := keys[idx[a]], keys[idx[b]]
		if ka != kb {
			return ka < kb
		}
		return rows[idx[a]] < rows[idx[b]]
	})
	sk := make([]K, len(keys))
	sr := make([]uint32, len(keys))
	for i, j := range idx {
		sk[i], sr[i] = keys[j], rows[j]
	}
	if typ != Bitmap {
		return sk, sr, nil
	}
	var distinct []K
	var starts []uint32
	for i, k := range sk {
		if i == 0 || k != sk[i-1] {
			distinct = append(distinct, k)
			starts = append(starts, uint32(i))
		}
	}
	starts = append(starts, uint32(len(sk)))
	return distinct, sr, starts
}

// bound is one end of a range; set false means unbounded.
type bound struct {
	set       bool
	val       any // int64, float64 or string: the file's kind
	inclusive bool
}

// lookup answers the sorted rows whose key lies between lo and hi (an
// equality is lo = hi, both inclusive), NaN rows included.
func (sf *scalarFile) lookup(lo, hi bound) []uint32 {
	var out []uint32
	switch sf.Kind {
	case kindInt:
		out = rangeRows(sf.Ints, sf.Rows, sf.Starts, lo, hi)
	case kindFloat:
		out = rangeRows(sf.Floats, sf.Rows, sf.Starts, lo, hi)
	default:
		out = rangeRows(sf.Strs, sf.Rows, sf.Starts, lo, hi)
	}
	if len(sf.NaN) > 0 {
		out = append(out, sf.NaN...)
		slices.Sort(out)
	}
	return out
}

func rangeRows[K cmp.Ordered](keys []K, rows, starts []uint32, lo, hi bound) []uint32 {
	from, to := 0, len(keys)
	if lo.set {
		v := lo.val.(K)
		from = sort.Search(len(keys), func(i int) bool {
			if lo.inclusive {
				return keys[i] >= v
			}
			return keys[i] > v
		})
	}
	if hi.set {
		v := hi.val.(K)
		to = sort.Search(len(keys), func(i int) bool {
			if hi.inclusive {
				return keys[i] > v
			}
			return keys[i] >= v
		})
	}
	if from >= to {
		return nil
	}
	var out []uint32
	if starts == nil {
		out = slices.Clone(rows[from:to])
		if to-from > 1 && !(lo.set && hi.set && lo.val == hi.val) {
			slices.Sort(out) // one key's rows are sorted already
		}
		return out
	}
	out = slices.Clone(rows[starts[from]:starts[to]])
	if to-from > 1 {
		slices.Sort(out)
	}
	return out
}

// fragmentValues reads column col (index in schema) of fragment f.
func fragmentValues(ctx context.Context, t *table.Table, f table.Fragment, col int) (*columnValues, error) {
	recs, err := t.ReadFragment(ctx, f, []int{col}, t.Catalog().Options().Mem)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	cv := &columnValues{}
	var base uint32
	for _, r := range recs {
		cv.add(r.Column(0), base)
		base += uint32(r.NumRows())
	}
	if int64(base) != f.Rows {
		return nil, fmt.Errorf("fragment %d: read %d rows, manifest says %d", f.ID, base, f.Rows)
	}
	return cv, nil
}

// keyRange records the file's least and greatest key in c.
func (sf *scalarFile) keyRange(c *Covered) {
	switch {
	case len(sf.Ints) > 0:
		c.IntRange = &[2]int64{sf.Ints[0], sf.Ints[len(sf.Ints)-1]}
	case len(sf.Floats) > 0:
		c.FloatRange = &[2]float64{sf.Floats[0], sf.Floats[len(sf.Floats)-1]}
	case len(sf.Strs) > 0:
		lo, hi := sf.Strs[0], sf.Strs[len(sf.Strs)-1]
		if len(lo) <= 256 && len(hi) <= 256 {
			c.StrRange = &[2]string{lo, hi}
		}
	}
}
