package index_test

import (
	"context"
	"testing"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/vector"
)

// TestIVFPQRecallWithRefine: an IVF_PQ index shortlists each fragment's
// probed rows by their codes and the search ranks the shortlist exactly:
// with refine_factor 10, recall@10 against exact search is at least 0.95,
// and a shortlist of k alone recalls no more. Bad parameters are 400s
// naming them.
func TestIVFPQRecallWithRefine(t *testing.T) {
	ctx := context.Background()
	cat := newCatalog(t, table.Options{MaxRowsPerFragment: 2500})
	data, queries := clustered(10000, 32, 3)
	tb := vectorTable(t, cat, "v", data)
	im, err := index.Create(ctx, tb, index.Spec{Column: "emb", Type: "IVF_PQ", SubVectors: 8})
	if err != nil {
		t.Fatal(err)
	}
	if im.Params.SubVectors != 8 || im.Params.Bits != 8 || im.Type != index.IVFPQ {
		t.Fatalf("params: %+v", im)
	}
	var exact, refined, plain [][]int64
	for _, q := range queries {
		rec, err := vector.Search(ctx, tb, vector.Query{Vector: q, K: 10, Columns: []string{"id"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		exact = append(exact, ids(t, rec))
		for _, c := range []struct {
			refine int
			out    *[][]int64
		}{{10, &refined}, {1, &plain}} {
			p, err := index.NewProbe(ctx, tb, im, q, 0)
			if err != nil || p == nil {
				t.Fatalf("probe: %v", err)
			}
			p.Shortlist(10 * c.refine)
			m, _ := tb.Load(ctx, 0)
			rows, ok, err := p.Rows(ctx, m.Fragments[0])
			if err != nil || !ok || len(rows) > 10*c.refine {
				t.Fatalf("shortlist of %d answers %d rows (%v %v)", 10*c.refine, len(rows), ok, err)
			}
			rec, err := vector.Search(ctx, tb, vector.Query{Vector: q, K: 10, Columns: []string{"id"}, Index: p, Refine: c.refine}, nil)
			if err != nil {
				t.Fatal(err)
			}
			*c.out = append(*c.out, ids(t, rec))
		}
	}
	r, r1 := Recall(exact, refined), Recall(exact, plain)
	t.Logf("IVF_PQ recall@10: refine 10 %.3f, refine 1 %.3f", r, r1)
	if r < 0.95 {
		t.Fatalf("recall@10 with refine_factor 10: %.3f", r)
	}
	if r1 > r {
		t.Fatalf("refine 1 recall %.3f above refine 10's %.3f", r1, r)
	}
	for _, c := range []struct {
		sp    index.Spec
		field string
	}{
		{index.Spec{Column: "emb", Type: "IVF_PQ", SubVectors: 5}, "num_sub_vectors"},
		{index.Spec{Column: "emb", Type: "IVF_PQ", Bits: 9}, "num_bits"},
		{index.Spec{Column: "emb", Type: "IVF_PQ", Metric: "dot"}, "distance_type"},
		{index.Spec{Column: "emb", Type: "IVF_FLAT", SubVectors: 8}, "num_sub_vectors"},
	} {
		if _, err := index.Create(ctx, tb, c.sp); errs.CodeOf(err) != errs.CodeInvalidInput || !containsStr(err.Error(), c.field) {
			t.Fatalf("create %+v: %v, want a 400 naming %s", c.sp, err, c.field)
		}
	}
}

func containsStr(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
