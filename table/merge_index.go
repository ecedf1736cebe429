package table

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
)

// KeyIndex finds a merge's matches in a fragment from a scalar index on
// its (one-column) key, instead of reading the fragment's key column
// (merge_insert with use_index).
type KeyIndex interface {
	// Match answers the (target offset, input row) pairs of fragment f
	// whose key equals an input key, sorted by offset (null and NaN keys
	// match nothing, as in the hash join); ok=false when the index does
	// not cover f, which is then scanned.
	Match(ctx context.Context, f Fragment) (off []uint32, src []int32, ok bool, err error)
}

// KeyIndexFinder answers a KeyIndex over version m of t for key column
// column and the input's key values keys (input row i is keys[i]), or
// nil when no index on the column can answer equality.
type KeyIndexFinder func(ctx context.Context, t *Table, m *Manifest, column string, keys arrow.Array) (KeyIndex, error)

// mergeKeyIndex answers the key index a merge may match with: only with
// use_index, a one-column key and no delete-by-source (which must see
// every unmatched row, so it reads the key column anyway); nil otherwise
// or when no index applies.
func (t *Table) mergeKeyIndex(ctx context.Context, m *Manifest, in *mergeInput, o MergeOptions) (KeyIndex, error) {
	fn := t.c.Indexes().KeyIndex
	if fn == nil || !o.UseIndex || len(in.keys) != 1 || o.WhenNotMatchedBySourceDelete {
		return nil, nil
	}
	return fn(ctx, t, m, in.rec.Schema().Field(in.keys[0]).Name, in.rec.Column(in.keys[0]))
}
