package file

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/mvq-dev/mvq/lance/pb/enc21pb"
)

func TestEmptyReads(t *testing.T) {
	r := openFile(t, filepath.Join("testdata", "vectors_nesting.lance"))
	rec, err := r.Read(t.Context(), nil, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	if rec.NumRows() != 0 || int(rec.NumCols()) != len(r.Schema().Fields()) {
		t.Fatalf("empty read: %d rows, %d cols", rec.NumRows(), rec.NumCols())
	}
	rec.Release()
	rec, err = r.Take(t.Context(), []int{1, 0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec.NumRows() != 0 || rec.NumCols() != 2 || rec.Schema().Field(0).Name != r.Schema().Field(1).Name {
		t.Fatalf("empty take: %v", rec.Schema())
	}
	rec.Release()
	if _, err := r.Read(t.Context(), nil, 0, r.NumRows()+1); err == nil {
		t.Error("read past the end accepted")
	}
	if _, err := r.Take(t.Context(), nil, []uint64{r.NumRows()}); err == nil {
		t.Error("take past the end accepted")
	}
	if _, err := r.Read(t.Context(), []int{99}, 0, 1); err == nil {
		t.Error("unknown column accepted")
	}
}

const (
	layerItem     = enc21pb.RepDefLayer_REPDEF_ALL_VALID_ITEM
	layerNullItem = enc21pb.RepDefLayer_REPDEF_NULLABLE_ITEM
	layerList     = enc21pb.RepDefLayer_REPDEF_ALL_VALID_LIST
	layerNullList = enc21pb.RepDefLayer_REPDEF_NULLABLE_LIST
	layerBothList = enc21pb.RepDefLayer_REPDEF_NULL_AND_EMPTY_LIST
)

// TestUnravel decodes the levels of the format documentation's examples
// and a few more by hand.
func TestUnravel(t *testing.T) {
	t.Run("nested validity", func(t *testing.T) {
		// [{"middle": {"inner": 1}}, NULL, {"middle": NULL}, {"middle": {"inner": NULL}}]
		outs, err := unravel(nil, []uint16{0, 3, 2, 1}, []enc21pb.RepDefLayer{layerNullItem, layerNullItem, layerNullItem}, 4)
		if err != nil {
			t.Fatal(err)
		}
		want := [][]bool{{true, false, false, false}, {true, false, false, true}, {true, false, true, true}}
		for i, w := range want {
			if !slices.Equal(outs[i].valid, w) {
				t.Errorf("layer %d validity %v, want %v", i, outs[i].valid, w)
			}
		}
	})
	t.Run("lists of lists", func(t *testing.T) {
		// [[0, 1], [], [2]], [[3]], [], null, [[4]] as list<list<int>>,
		// the outer list nullable and emptyable, the inner emptyable.
		rep := []uint16{2, 0, 1, 1, 2, 2, 2, 0 + 2}
		def := []uint16{0, 0, 1, 0, 0, 3, 2, 0}
		// levels: inner list empty = 1; outer null = 2, outer empty = 3
		layers := []enc21pb.RepDefLayer{layerItem, enc21pb.RepDefLayer_REPDEF_EMPTYABLE_LIST, layerBothList}
		// Entries: 0 1 | [] | 2 | 3 | outer-empty(def 3) | outer-null(def 2) | 4
		outs, err := unravel(rep, def, layers, 5)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(outs[1].offsets, []int64{0, 2, 2, 3, 4, 5}) {
			t.Errorf("inner offsets %v", outs[1].offsets)
		}
		if !slices.Equal(outs[2].offsets, []int64{0, 3, 4, 4, 4, 5}) {
			t.Errorf("outer offsets %v", outs[2].offsets)
		}
		if !slices.Equal(outs[2].valid, []bool{true, true, true, false, true}) {
			t.Errorf("outer validity %v", outs[2].valid)
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		if _, err := unravel([]uint16{1, 0}, []uint16{0, 9}, []enc21pb.RepDefLayer{layerNullItem, layerNullList}, 2); err == nil {
			t.Error("def level over the maximum accepted")
		}
		if _, err := unravel([]uint16{1, 0, 1}, nil, []enc21pb.RepDefLayer{layerItem, layerList}, 7); err == nil {
			t.Error("item count mismatch accepted")
		}
	})
}
