package index

import (
	"context"
	"math/rand/v2"
	"sort"

	"github.com/mvq-dev/mvq/vector"
)

// IVF_PQ: the IVF partitions of IVF_FLAT, and for each row a product-
// quantization code of its residual (the vector minus its partition's
// centroid): the residual is cut into num_sub_vectors sub-vectors, each
// replaced by the nearest of 2^num_bits centroids trained by k-means on
// the sample's residuals in that subspace (the codebooks live in the
// centroids file; the codes, one byte per sub-vector, in each fragment's
// file beside its partition rows). A query computes, for each probed
// partition, the table of squared distances from its residual's
// sub-vectors to every codebook entry; a row's approximate distance is
// the sum of its codes' entries. Each fragment answers the k ×
// refine_factor rows of smallest approximate distance, which the search
// then ranks by exact distance (so distances returned are exact, and
// refine_factor trades work for recall). With a prefilter the shortlist
// is not used (a shortlist could hold no row the filter keeps): every
// probed row is scored exactly, as IVF_FLAT does. l2 and cosine only.

// pqTrain trains the codebooks of im from sample (n × dim, already
// normalized for cosine) and the IVF centroids.
func pqTrain(ctx context.Context, cf *centroidFile, sample []float32, subs, bits, iters int, rng *rand.Rand) {
	dim := cf.Dim
	n := len(sample) / dim
	k := len(cf.Centroids) / dim
	res := make([]float32, len(sample))
	for i := 0; i < n; i++ {
		v := sample[i*dim : (i+1)*dim]
		c, _ := nearest(v, cf.Centroids, dim, k)
		for d := range v {
			res[i*dim+d] = v[d] - cf.Centroids[c*dim+d]
		}
	}
	sub := dim / subs
	codes := 1 << bits
	cb := make([]float32, subs*codes*sub)
	part := make([]float32, n*sub)
	for j := 0; j < subs; j++ {
		for i := 0; i < n; i++ {
			copy(part[i*sub:(i+1)*sub], res[i*dim+j*sub:i*dim+(j+1)*sub])
		}
		kk := min(codes, n)
		cents := kmeans(ctx, part, sub, kk, iters, rng)
		copy(cb[j*codes*sub:], cents)
		for c := kk; c < codes; c++ { // fewer sample points than codes: repeat
			copy(cb[(j*codes+c)*sub:(j*codes+c+1)*sub], cents[(c%kk)*sub:(c%kk+1)*sub])
		}
	}
	cf.SubVectors, cf.Bits, cf.Codebooks = subs, bits, cb
}

// pqEncode appends the code of residual r to out.
func pqEncode(cf *centroidFile, r []float32, out []byte) []byte {
	sub := cf.Dim / cf.SubVectors
	codes := 1 << cf.Bits
	for j := 0; j < cf.SubVectors; j++ {
		c, _ := nearest(r[j*sub:(j+1)*sub], cf.Codebooks[j*codes*sub:(j+1)*codes*sub], sub, codes)
		out = append(out, byte(c))
	}
	return out
}

// pqTable is the distance table of query q against partition c: entry
// [j*codes+code] is the squared distance from the residual's sub-vector j
// to codebook entry code.
func pqTable(cf *centroidFile, q []float32, c int) []float32 {
	dim, sub, codes := cf.Dim, cf.Dim/cf.SubVectors, 1<<cf.Bits
	r := make([]float32, dim)
	for d := range r {
		r[d] = q[d] - cf.Centroids[c*dim+d]
	}
	out := make([]float32, cf.SubVectors*codes)
	for j := 0; j < cf.SubVectors; j++ {
		for code := 0; code < codes; code++ {
			out[j*codes+code] = vector.SquaredL2(r[j*sub:(j+1)*sub], cf.Codebooks[(j*codes+code)*sub:(j*codes+code+1)*sub])
		}
	}
	return out
}

// defaultSubVectors: dim/4 sub-vectors (4 dimensions each) when 4
// divides dim, else the largest divisor of dim up to dim/2 (1 for a
// prime dim).
func defaultSubVectors(dim int) int {
	if dim%4 == 0 {
		return dim / 4
	}
	for s := dim / 2; s > 1; s-- {
		if dim%s == 0 {
			return s
		}
	}
	return 1
}

// shortlist answers the n rows of parts (partition → rows, codes) with
// the smallest approximate distance under the tables.
func shortlist(tables map[int][]float32, parts []int, ff *ivfFile, subs, bits, n int) []uint32 {
	type cand struct {
		d   float32
		row uint32
	}
	codes := 1 << bits
	var all []cand
	for _, c := range parts {
		if c >= len(ff.Parts) || c >= len(ff.Codes) {
			continue
		}
		tb := tables[c]
		rows, cs := ff.Parts[c], ff.Codes[c]
		for i, row := range rows {
			code := cs[i*subs : (i+1)*subs]
			var d float32
			for j, x := range code {
				d += tb[j*codes+int(x)]
			}
			all = append(all, cand{d, row})
		}
	}
	if len(all) > n {
		sort.Slice(all, func(a, b int) bool { return all[a].d < all[b].d || all[a].d == all[b].d && all[a].row < all[b].row })
		all = all[:n]
	}
	out := make([]uint32, len(all))
	for i, c := range all {
		out[i] = c.row
	}
	return out
}
