package vector

import (
	"context"
	"math"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// vectors are the rows of one fragment's vector column: n rows of dim
// floats, flat; valid[i] is false for a null vector (nil: none null).
type vectors struct {
	dim   int
	flat  []float32
	valid []bool
}

func (v *vectors) rows() int { return len(v.flat) / max(v.dim, 1) }

// flatten copies a fixed_size_list<float32> array into vectors.
func flatten(a arrow.Array, dim int) (*vectors, error) {
	fl, ok := a.(*array.FixedSizeList)
	if !ok {
		return nil, errs.Errorf(errs.CodeInvalidInput, "vector_column: not a fixed_size_list<float32> column")
	}
	vals, ok := fl.ListValues().(*array.Float32)
	if !ok {
		return nil, errs.Errorf(errs.CodeInvalidInput, "vector_column: not a fixed_size_list<float32> column")
	}
	n := fl.Len()
	off := fl.Data().Offset() * dim
	raw := vals.Float32Values()
	v := &vectors{dim: dim, flat: make([]float32, n*dim)}
	copy(v.flat, raw[off:off+n*dim])
	if fl.NullN() > 0 {
		v.valid = make([]bool, n)
		for i := range v.valid {
			v.valid[i] = fl.IsValid(i)
		}
	}
	return v, nil
}

// scorer computes one metric against one query vector.
type scorer struct {
	metric       string
	q            []float32
	qnorm        float32
	lower, upper *float32
}

func newScorer(metric string, q []float32) (*scorer, error) {
	s := &scorer{metric: metric, q: q}
	switch metric {
	case L2, Dot:
	case Cosine:
		s.qnorm = float32(math.Sqrt(float64(dot(q, q))))
	default:
		return nil, errs.Errorf(errs.CodeInvalidInput, "distance_type: %q (want l2, cosine or dot)", metric)
	}
	return s, nil
}

// keep reports whether d is within the query's bounds.
func (s *scorer) keep(d float32) bool {
	if d != d { // NaN: a zero vector under cosine
		return false
	}
	return (s.lower == nil || d >= *s.lower) && (s.upper == nil || d < *s.upper)
}

func (s *scorer) distance(x []float32) float32 {
	switch s.metric {
	case L2:
		return l2(s.q, x)
	case Dot:
		return 1 - dot(s.q, x)
	default:
		xx, qx := norms(x, s.q)
		return 1 - qx/(s.qnorm*float32(math.Sqrt(float64(xx))))
	}
}

// scan offers every row of vs, at addresses base+i, to h.
func (s *scorer) scan(vs *vectors, base uint64, h *topK) {
	dim, n := vs.dim, vs.rows()
	bound := h.bound()
	bounded := s.lower != nil || s.upper != nil
	offer := func(i int, d float32) {
		if d <= bound && (!bounded && d == d || s.keep(d)) {
			h.offer(d, base+uint64(i))
			bound = h.bound()
		}
	}
	switch {
	case vs.valid == nil && s.metric == L2:
		for i := 0; i < n; i++ {
			offer(i, l2(s.q, vs.flat[i*dim:i*dim+dim]))
		}
	case vs.valid == nil && s.metric == Dot:
		for i := 0; i < n; i++ {
			offer(i, 1-dot(s.q, vs.flat[i*dim:i*dim+dim]))
		}
	default:
		for i := 0; i < n; i++ {
			if vs.valid == nil || vs.valid[i] {
				offer(i, s.distance(vs.flat[i*dim:i*dim+dim]))
			}
		}
	}
}

// scanAddrs is scan with an address per row.
func (s *scorer) scanAddrs(vs *vectors, addrs []uint64, h *topK) {
	dim := vs.dim
	for i := 0; i < vs.rows(); i++ {
		if vs.valid != nil && !vs.valid[i] {
			continue
		}
		if d := s.distance(vs.flat[i*dim : i*dim+dim]); s.keep(d) {
			h.offer(d, addrs[i])
		}
	}
}

func l2(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		d0, d1, d2, d3 := a[i]-b[i], a[i+1]-b[i+1], a[i+2]-b[i+2], a[i+3]-b[i+3]
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; i < len(a); i++ {
		d := a[i] - b[i]
		s0 += d * d
	}
	return s0 + s1 + s2 + s3
}

func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// norms answers x·x and q·x in one pass.
func norms(x, q []float32) (float32, float32) {
	q = q[:len(x)]
	var xx0, xx1, qx0, qx1 float32
	i := 0
	for ; i+2 <= len(x); i += 2 {
		xx0 += x[i] * x[i]
		xx1 += x[i+1] * x[i+1]
		qx0 += q[i] * x[i]
		qx1 += q[i+1] * x[i+1]
	}
	for ; i < len(x); i++ {
		xx0 += x[i] * x[i]
		qx0 += q[i] * x[i]
	}
	return xx0 + xx1, qx0 + qx1
}

// fragmentVectors answers the vectors of column col of fragment f, from
// the catalog's decoded cache when a search read the file before (files
// never change).
func fragmentVectors(ctx context.Context, t *table.Table, f table.Fragment, col, dim int, mem memory.Allocator) (*vectors, error) {
	// Keyed by the data file and its column that hold the field: a
	// dropped column shifts the schema's positions (and, in a fragment
	// another Lance writer laid out, the column map's), never a file's.
	path, fcol, inFile, err := f.FieldFile(col)
	if err != nil {
		return nil, err
	}
	// f.Key, not the path alone: a new deletion file over the same data
	// file presents other rows. A field no file holds (all nulls) is not
	// cached.
	key := ""
	if inFile {
		// A layout of parts numbers leaf columns, the others top-level
		// ones: the unit is part of the key.
		unit := "c"
		if f.Parts != "" {
			unit = "p"
		}
		key = t.Location() + "\x00" + f.Key() + "\x00" + path + "\x00" + unit + strconv.Itoa(int(fcol))
	}
	cache := t.Catalog().DecodedCache()
	if c, ok := cache.Get(key); ok && key != "" {
		if v := c.(*vectors); v.dim == dim && int64(v.rows()) == f.Rows {
			return v, nil
		}
	}
	recs, err := t.ReadFragment(ctx, f, []int{col}, mem)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	v := &vectors{dim: dim, flat: make([]float32, 0, int(f.Rows)*dim)}
	for _, r := range recs {
		part, err := flatten(r.Column(0), dim)
		if err != nil {
			return nil, err
		}
		if part.valid != nil && v.valid == nil {
			v.valid = make([]bool, v.rows(), int(f.Rows))
			for i := range v.valid {
				v.valid[i] = true
			}
		}
		if v.valid != nil {
			if part.valid == nil {
				for range part.rows() {
					v.valid = append(v.valid, true)
				}
			} else {
				v.valid = append(v.valid, part.valid...)
			}
		}
		v.flat = append(v.flat, part.flat...)
	}
	if key != "" {
		cache.Put(key, v, int64(len(v.flat)*4+len(v.valid)))
	}
	return v, nil
}
