package table

import (
	"context"

	"github.com/mvq-dev/mvq/table/internal/warehouse"
)

// DefaultWarehouse is the warehouse root used when MVQ_WAREHOUSE is unset.
const DefaultWarehouse = warehouse.Default

// ErrExists is returned by PutIfNotExists when the key is already taken.
var ErrExists = warehouse.ErrExists

// ErrNoConditionalWrites is returned by CheckConditionalWrites for a
// store that accepts a second create-if-absent of the same key.
var ErrNoConditionalWrites = warehouse.ErrNoConditionalWrites

// Warehouse is the root of every namespace, table and view
// (table/internal/warehouse).
type Warehouse = warehouse.Warehouse

// Entry is one item of a listing: a child object or a child "directory".
type Entry = warehouse.Entry

// OpenWarehouse opens a warehouse root: file://path, mem://,
// s3://bucket/prefix or gs://bucket/prefix (warehouse.Open).
func OpenWarehouse(ctx context.Context, uri string) (*Warehouse, error) {
	return warehouse.Open(ctx, uri)
}
