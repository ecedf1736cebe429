package file

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
)

// readColumns21 decodes the given top-level columns over the sorted,
// disjoint row ranges, concatenated.
func (r *Reader) readColumns21(ctx context.Context, columns []int, ranges []rowRange) ([]arrow.Array, error) {
	return nil, unsupportedf("2.1 decoding is not built yet")
}
