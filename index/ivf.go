package index

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/vector"
)

// IVF_FLAT: k-means centroids trained on a sample of the table (a fixed
// seed, so the same rows give the same partitions) are stored once per
// build (_indices/<uuid>/centroids.idx); each fragment's file lists the
// rows of each partition. A query ranks the centroids by distance to
// the query vector, probes the nprobes nearest partitions and scores
// their rows exactly (the vectors themselves are the table's, through
// the vector package's cache, so distances are exact: "flat").
// Fragments the index does not cover are scored whole. For cosine the
// vectors are normalized before training and assignment.

// DefaultNProbes is nprobes when a query gives none.
const DefaultNProbes = 20

type centroidFile struct {
	Dim       int
	Centroids []float32 // partitions × dim
	// IVF_PQ: the codebooks, sub-vector j's entry c at
	// (j*2^Bits+c)*(Dim/SubVectors).
	SubVectors, Bits int
	Codebooks        []float32
}

type ivfFile struct {
	Parts [][]uint32 // partition → rows
	Codes [][]byte   // IVF_PQ: partition → each row's code (SubVectors bytes)
}

// seed makes training deterministic.
const seed = 0x6d7671

// train runs k-means over a sample of m's vectors and writes the
// centroids of im.
func train(ctx context.Context, t *table.Table, m *table.Manifest, col int, im *Meta, spec Spec) error {
	schema, err := m.ArrowSchema()
	if err != nil {
		return err
	}
	dim, _ := vectorDim(schema.Field(col).Type)
	total := m.NumRows()
	parts := spec.Partitions
	if parts == 0 {
		parts = int(math.Max(1, math.Min(4096, math.Round(math.Sqrt(float64(total))))))
	}
	rate := spec.SampleRate
	if rate == 0 {
		rate = 64
	}
	iters := spec.MaxIterations
	if iters == 0 {
		iters = 15
	}
	want := int64(parts) * int64(rate)
	frac := 1.0
	if total > want {
		frac = float64(want) / float64(total)
	}
	rng := rand.New(rand.NewPCG(seed, uint64(parts)))
	var sample []float32
	for _, f := range m.Fragments {
		flat, valid, err := vector.FragmentVectors(ctx, t, f, col, dim)
		if err != nil {
			return err
		}
		for i := 0; i*dim < len(flat); i++ {
			if rng.Float64() >= frac || valid != nil && !valid[i] {
				continue
			}
			v := flat[i*dim : (i+1)*dim]
			if im.Metric == "cosine" {
				v = normalized(v)
			}
			if !finite(v) {
				continue
			}
			sample = append(sample, v...)
		}
	}
	n := len(sample) / dim
	if n == 0 {
		return errs.Errorf(errs.CodeInvalidInput, "column: %q has no non-null vectors to train an IVF index on", im.Column)
	}
	if parts > n {
		parts = n
	}
	cents := kmeans(ctx, sample, dim, parts, iters, rng)
	im.Params = Params{Partitions: parts, MaxIterations: iters, SampleRate: rate}
	cf := &centroidFile{Dim: dim, Centroids: cents}
	if im.Type == IVFPQ {
		pqTrain(ctx, cf, sample, spec.SubVectors, spec.Bits, iters, rng)
		im.Params.SubVectors, im.Params.Bits = spec.SubVectors, spec.Bits
	}
	data, err := encode(cf)
	if err != nil {
		return err
	}
	im.CentroidBytes = int64(len(data))
	return t.Catalog().Warehouse().Write(ctx, centroidKey(t, im.UUID), data)
}

func finite(v []float32) bool {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}

func normalized(v []float32) []float32 {
	n := float32(math.Sqrt(float64(vector.InnerProduct(v, v))))
	out := make([]float32, len(v))
	if n == 0 {
		return out
	}
	for i, x := range v {
		out[i] = x / n
	}
	return out
}

// kmeans runs Lloyd's algorithm from k distinct random sample points; an
// emptied partition takes the point farthest from its centroid.
func kmeans(ctx context.Context, xs []float32, dim, k, iters int, rng *rand.Rand) []float32 {
	n := len(xs) / dim
	cents := make([]float32, k*dim)
	for i, j := range rng.Perm(n)[:k] {
		copy(cents[i*dim:(i+1)*dim], xs[j*dim:(j+1)*dim])
	}
	assign := make([]int32, n)
	dists := make([]float32, n)
	for it := 0; it < iters && ctx.Err() == nil; it++ {
		changed := parallelAssign(xs, dim, cents, k, assign, dists)
		sums := make([]float64, k*dim)
		counts := make([]int, k)
		for i := 0; i < n; i++ {
			c := int(assign[i])
			counts[c]++
			row := xs[i*dim : (i+1)*dim]
			for d, x := range row {
				sums[c*dim+d] += float64(x)
			}
		}
		for c := 0; c < k; c++ {
			if counts[c] == 0 {
				far := 0
				for i := range dists {
					if dists[i] > dists[far] {
						far = i
					}
				}
				copy(cents[c*dim:(c+1)*dim], xs[far*dim:(far+1)*dim])
				dists[far] = 0
				continue
			}
			for d := 0; d < dim; d++ {
				cents[c*dim+d] = float32(sums[c*dim+d] / float64(counts[c]))
			}
		}
		if it > 0 && changed == 0 {
			break
		}
	}
	return cents
}

// parallelAssign sets each point's nearest centroid and distance and
// answers how many assignments changed.
func parallelAssign(xs []float32, dim int, cents []float32, k int, assign []int32, dists []float32) int {
	n := len(xs) / dim
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	changed := make([]int, workers)
	chunk := (n + workers - 1) / workers
	for w := 0; w < workers; w++ {
		lo, hi := w*chunk, min((w+1)*chunk, n)
		if lo >= hi {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				c, d := nearest(xs[i*dim:(i+1)*dim], cents, dim, k)
				if int32(c) != assign[i] {
					changed[w]++
				}
				assign[i], dists[i] = int32(c), d
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, c := range changed {
		total += c
	}
	return total
}

func nearest(v, cents []float32, dim, k int) (int, float32) {
	best, bd := 0, float32(math.Inf(1))
	for c := 0; c < k; c++ {
		if d := vector.SquaredL2(v, cents[c*dim:(c+1)*dim]); d < bd {
			best, bd = c, d
		}
	}
	return best, bd
}

// assignFragment puts each non-null vector of f in its nearest partition.
func assignFragment(ctx context.Context, t *table.Table, im *Meta, col int, f table.Fragment) (*ivfFile, error) {
	cf, found, err := readFile[centroidFile](ctx, t, centroidKey(t, im.UUID))
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errs.Errorf(errs.CodeConcurrentModification, "index %q was replaced or dropped while it was being built", im.Name)
	}
	dim := cf.Dim
	k := len(cf.Centroids) / dim
	flat, valid, err := vector.FragmentVectors(ctx, t, f, col, dim)
	if err != nil {
		return nil, err
	}
	out := &ivfFile{Parts: make([][]uint32, k)}
	for i := 0; i*dim < len(flat); i++ {
		if valid != nil && !valid[i] {
			continue
		}
		v := flat[i*dim : (i+1)*dim]
		if im.Metric == "cosine" {
			v = normalized(v)
		}
		c, _ := nearest(v, cf.Centroids, dim, k)
		out.Parts[c] = append(out.Parts[c], uint32(i))
		if cf.SubVectors > 0 {
			if out.Codes == nil {
				out.Codes = make([][]byte, k)
			}
			r := make([]float32, dim)
			for d := range r {
				r[d] = v[d] - cf.Centroids[c*dim+d]
			}
			out.Codes[c] = pqEncode(cf, r, out.Codes[c])
		}
	}
	return out, nil
}

// Probe is a query's view of an IVF index: the partitions nearest the
// query vector. It is a vector.Candidates.
type Probe struct {
	t     *table.Table
	im    *Meta
	parts []int
	// IVF_PQ: the distance table of each probed partition and the rows
	// each fragment answers (0: every probed row).
	cf     *centroidFile
	tables map[int][]float32
	limit  int
}

// Shortlist has an IVF_PQ probe answer, per fragment, only the n probed
// rows nearest by their codes (the search then ranks them exactly); no
// effect on IVF_FLAT.
func (p *Probe) Shortlist(n int) { p.limit = n }

// NewProbe ranks im's partitions by distance to q and keeps the nprobes
// nearest (0: DefaultNProbes).
func NewProbe(ctx context.Context, t *table.Table, im *Meta, q []float32, nprobes int) (*Probe, error) {
	cf, found, err := readFile[centroidFile](ctx, t, centroidKey(t, im.UUID))
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, nil
	}
	if len(q) != cf.Dim {
		return nil, errs.Errorf(errs.CodeInvalidInput, "vector: %d dimensions, index %q holds vectors of %d", len(q), im.Name, cf.Dim)
	}
	if nprobes <= 0 {
		nprobes = DefaultNProbes
	}
	if im.Metric == "cosine" {
		q = normalized(q)
	}
	k := len(cf.Centroids) / cf.Dim
	order := make([]int, k)
	ds := make([]float32, k)
	for c := range order {
		order[c] = c
		ds[c] = vector.SquaredL2(q, cf.Centroids[c*cf.Dim:(c+1)*cf.Dim])
	}
	sort.Slice(order, func(a, b int) bool {
		return ds[order[a]] < ds[order[b]] || ds[order[a]] == ds[order[b]] && order[a] < order[b]
	})
	p := &Probe{t: t, im: im, parts: order[:min(nprobes, k)]}
	if cf.SubVectors > 0 {
		p.cf, p.tables = cf, map[int][]float32{}
		for _, c := range p.parts {
			p.tables[c] = pqTable(cf, q, c)
		}
	}
	return p, nil
}

// Rows answers the rows of f in the probed partitions (ok=false: f not
// covered).
func (p *Probe) Rows(ctx context.Context, f table.Fragment) ([]uint32, bool, error) {
	if _, ok := p.im.covers(f); !ok {
		return nil, false, nil
	}
	ff, found, err := readFile[ivfFile](ctx, p.t, p.im.fragmentFile(p.t, f))
	if err != nil || !found {
		return nil, false, err
	}
	if p.cf != nil && p.limit > 0 && ff.Codes != nil {
		return shortlist(p.tables, p.parts, ff, p.cf.SubVectors, p.cf.Bits, p.limit), true, nil
	}
	var out []uint32
	for _, c := range p.parts {
		if c < len(ff.Parts) {
			out = append(out, ff.Parts[c]...)
		}
	}
	return out, true, nil
}

// ForVector finds the IVF index on column (""; the table's only vector
// column) of version ("0": the latest) built for metric ("": l2); nil
// when there is none (or the column of that name is not the field the
// index was built over: sameField).
func ForVector(ctx context.Context, t *table.Table, version uint64, column, metric string) (*Meta, error) {
	metas, err := List(ctx, t)
	if err != nil || len(metas) == 0 {
		return nil, err
	}
	if metric == "" {
		metric = "l2"
	}
	m, schema, err := t.LoadSchema(ctx, version)
	if err != nil {
		return nil, err
	}
	if column == "" {
		for _, f := range schema.Fields() {
			if _, ok := vectorDim(f.Type); ok {
				if column != "" {
					return nil, nil // several: the search says which is wanted
				}
				column = f.Name
			}
		}
	}
	for _, im := range metas {
		if (im.Type == IVFFlat || im.Type == IVFPQ) && im.Column == column && im.Metric == metric && im.sameField(m, schema) {
			return im, nil
		}
	}
	return nil, nil
}
