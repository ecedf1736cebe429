package httpapi

import (
	"context"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/vector"
)

// vectorQuery reads the vector search of a query request: vector (an
// array of numbers, or {"single_vector": [...]}), k (default 10),
// distance_type, vector_column, lower_bound and upper_bound. ok is false
// for a query without a vector (an empty one counts as none).
func (req queryRequest) vectorQuery(q table.QueryOptions) (vector.Query, bool, error) {
	var vq vector.Query
	raw := req.Vector
	if obj, isObj := raw.(map[string]any); isObj {
		if len(obj) == 0 {
			raw = nil
		} else {
			for k := range obj {
				if k != "single_vector" && k != "multi_vector" {
					return vq, false, badInput("vector: unknown field %q (want single_vector)", k)
				}
			}
			if _, multi := obj["multi_vector"]; multi {
				return vq, false, badInput("vector.multi_vector: multi-vector search is not supported; send one query per vector")
			}
			raw = obj["single_vector"]
		}
	}
	arr, isArr := raw.([]any)
	if raw == nil || isArr && len(arr) == 0 {
		for name, set := range map[string]bool{"distance_type": req.DistanceType != nil, "vector_column": req.VectorColumn != nil,
			"lower_bound": req.LowerBound != nil, "upper_bound": req.UpperBound != nil} {
			if set {
				return vq, false, badInput("%s: only with a vector", name)
			}
		}
		return vq, false, nil
	}
	if !isArr {
		return vq, false, badInput("vector: want an array of numbers or {\"single_vector\": [...]}")
	}
	vq.Vector = make([]float32, len(arr))
	for i, x := range arr {
		f, ok := x.(float64)
		if !ok || math.IsNaN(f) || math.Abs(f) > math.MaxFloat32 {
			return vq, false, badInput("vector: element %d is not a finite float32", i)
		}
		vq.Vector[i] = float32(f)
	}
	if req.Limit != nil && req.K != nil && *req.Limit != *req.K {
		return vq, false, badInput("k, limit: give one (they are the same for a vector search)")
	}
	vq.K = vector.DefaultK
	if q.Limit > 0 {
		vq.K = int(q.Limit)
	}
	if int64(vq.K)+q.Offset > vector.MaxK {
		return vq, false, badInput("k: k + offset must be at most %d", vector.MaxK)
	}
	vq.K += int(q.Offset)
	if req.DistanceType != nil {
		vq.Metric = strings.ToLower(*req.DistanceType)
	}
	if req.VectorColumn != nil {
		if *req.VectorColumn == "" {
			return vq, false, badInput("vector_column: empty")
		}
		vq.Column = *req.VectorColumn
	}
	vq.Lower, vq.Upper = req.LowerBound, req.UpperBound
	vq.Filter, vq.Columns, vq.Version, vq.RowAddr = q.Filter, q.Columns, q.Version, q.RowAddr
	// prefilter false: the filter applies to the nearest rows found
	// without it (fewer than k may remain).
	vq.Postfilter = req.Prefilter != nil && !*req.Prefilter && q.Filter != ""
	return vq, true, nil
}

// vectorSearch runs vq and answers its rows after q's offset, with q's
// aliases.
func vectorSearch(ctx context.Context, t *table.Table, vq vector.Query, q table.QueryOptions) (array.RecordReader, error) {
	rec, err := vector.Search(ctx, t, vq, t.Catalog().Options().Mem)
	if err != nil {
		return nil, err
	}
	return searchRows(rec, q)
}

// searchRows answers a search's ranked rows after q's offset, with q's
// aliases; it releases rec.
func searchRows(rec arrow.RecordBatch, q table.QueryOptions) (array.RecordReader, error) {
	defer rec.Release()
	if q.Offset > 0 {
		off := min(q.Offset, rec.NumRows())
		s := rec.NewSlice(off, rec.NumRows())
		defer s.Release()
		rec = s
	}
	schema := rec.Schema()
	if q.Aliases != nil {
		fields := schema.Fields()
		for i, a := range q.Aliases {
			fields[i].Name = a
		}
		schema = arrow.NewSchema(fields, nil)
		rec = array.NewRecordBatch(schema, rec.Columns(), rec.NumRows())
		defer rec.Release()
	}
	return array.NewRecordReader(schema, []arrow.RecordBatch{rec})
}
