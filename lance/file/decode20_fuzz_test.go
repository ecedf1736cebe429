package file

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/mvq-dev/mvq/lance/pb/enc20pb"
)

// fuzzTypes20 are the Arrow types the page fuzzer decodes into.
var fuzzTypes20 = []arrow.DataType{
	arrow.PrimitiveTypes.Int32,
	arrow.PrimitiveTypes.Uint8,
	arrow.PrimitiveTypes.Float64,
	arrow.FixedWidthTypes.Boolean,
	arrow.BinaryTypes.String,
	arrow.BinaryTypes.LargeBinary,
	&arrow.Decimal128Type{Precision: 38, Scale: 2},
	arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Float32),
	&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint8, ValueType: arrow.BinaryTypes.String},
}

// FuzzDecodePage20 decodes arbitrary encodings over arbitrary buffers: the
// decoder must return an array of the asked length or an error, never panic.
func FuzzDecodePage20(f *testing.F) {
	seeds := []struct {
		js string
		dt arrow.DataType
	}{
		{`[1, null, 3, 4]`, arrow.PrimitiveTypes.Int32},
		{`[true, null, false]`, arrow.FixedWidthTypes.Boolean},
		{`["a", null, "", "bcd"]`, arrow.BinaryTypes.String},
		{`[null, null]`, arrow.PrimitiveTypes.Float64},
		{`[[1, 2, 3], null, [null, 5, 6]]`, arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Float32)},
	}
	for i, s := range seeds {
		a, _, err := array.FromJSON(memory.DefaultAllocator, s.dt, strings.NewReader(s.js))
		if err != nil {
			f.Fatal(err)
		}
		enc, bufs, err := encodeArray20(a)
		if err != nil {
			f.Fatal(err)
		}
		raw, _ := proto.Marshal(enc)
		for len(bufs) < 3 {
			bufs = append(bufs, nil)
		}
		typ := uint8(0)
		for k, dt := range fuzzTypes20 {
			if arrow.TypeEqual(dt, s.dt) {
				typ = uint8(k)
			}
		}
		f.Add(raw, bufs[0], bufs[1], bufs[2], uint32(a.Len()), uint32(i%2), uint32(a.Len()-i%2), typ)
	}
	dict, _ := proto.Marshal(eDict(eNoNulls(eFlat(8, 0)), eBinary(eNoNulls(eFlat(64, 1)), eFlat(8, 2), 3), 2))
	f.Add(dict, []byte{2, 0, 1, 2}, u64s(1, 2), []byte("ab"), uint32(4), uint32(0), uint32(4), uint8(4))
	f.Add(dict, []byte{2, 0, 1, 2}, u64s(1, 2), []byte("ab"), uint32(4), uint32(1), uint32(3), uint8(8))
	nullDict, _ := proto.Marshal(eSomeNulls(eFlat(1, 0), eDict(eNoNulls(eFlat(8, 1)), eBinary(eNoNulls(eFlat(64, 2)), eFlat(8, 3), 3), 2)))
	f.Add(nullDict, []byte{0b1101}, []byte{1, 0, 1, 0}, u64s(1, 2), uint32(4), uint32(0), uint32(4), uint8(8))
	f.Fuzz(func(t *testing.T, raw, b0, b1, b2 []byte, rows, skip, take uint32, typ uint8) {
		var enc enc20pb.ArrayEncoding
		if err := proto.Unmarshal(raw, &enc); err != nil {
			return
		}
		dt := fuzzTypes20[int(typ)%len(fuzzTypes20)]
		take %= 1 << 16 // all-null pages may allocate up to 1 GiB: keep runs fast
		bufs := &pageBufs20{page: [][]byte{b0, b1, b2}, column: [][]byte{b1}, file: [][]byte{b2}}
		arr, err := decodePage20(&enc, bufs, uint64(rows), uint64(skip), uint64(take), dt)
		if err != nil {
			return
		}
		defer arr.Release()
		if uint64(arr.Len()) != uint64(take) {
			t.Fatalf("decoded %d rows, asked for %d", arr.Len(), take)
		}
		if !arrow.TypeEqual(arr.DataType(), dt) {
			t.Fatalf("decoded %s, asked for %s", arr.DataType(), dt)
		}
		// Every value must be readable.
		_ = arr.String()
	})
}

// FuzzDecodeListPage20 decodes arbitrary list pages.
func FuzzDecodeListPage20(f *testing.F) {
	f.Add(u64s(2, 9, 2, 5), uint64(7), uint64(5), uint32(4), uint32(1), uint32(3))
	f.Add(u64s(0, 0, 1), uint64(2), uint64(1), uint32(3), uint32(0), uint32(3))
	f.Fuzz(func(t *testing.T, offsets []byte, adj, items uint64, rows, skip, take uint32) {
		l := &enc20pb.List{Offsets: eNoNulls(eFlat(64, 0)), NullOffsetAdjustment: adj, NumItems: items}
		lp, err := decodeListPage20(l, &pageBufs20{page: [][]byte{offsets}}, uint64(rows), uint64(skip), uint64(take))
		if err != nil {
			return
		}
		if len(lp.offsets) != int(take)+1 || lp.itemsStart > lp.itemsEnd || lp.itemsEnd > items {
			t.Fatalf("take %d: %d offsets, items %d..%d of %d", take, len(lp.offsets), lp.itemsStart, lp.itemsEnd, items)
		}
		for i := 1; i < len(lp.offsets); i++ {
			if lp.offsets[i] < lp.offsets[i-1] {
				t.Fatalf("offsets decrease: %v", lp.offsets)
			}
		}
		if lp.offsets[len(lp.offsets)-1] != lp.itemsEnd-lp.itemsStart {
			t.Fatalf("offsets end at %d for items %d..%d", lp.offsets[len(lp.offsets)-1], lp.itemsStart, lp.itemsEnd)
		}
	})
}

// FuzzRead20File reads every column of mutated 2.0 files: an error or a
// batch, never a panic.
func FuzzRead20File(f *testing.F) {
	for _, name := range []string{"alltypes", "multipage", "compressed"} {
		raw, err := os.ReadFile(filepath.Join("testdata", "v20", name+".lance"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	// Small files give the fuzzer more to change per byte.
	small := selectColumns20(allTypes20(12, 2), "i32", "b", "s", "sdict", "li", "st", "nul_i32", "v2")
	f.Add(writeFile20(f, []arrow.RecordBatch{small}, 0))
	small.Release()
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := Open(bytes.NewReader(raw), int64(len(raw)))
		if err != nil || r.Version() != V2_0 {
			return
		}
		n := min(r.NumRows(), 1<<16)
		rec, err := r.Read(context.Background(), nil, 0, n)
		if err == nil {
			if uint64(rec.NumRows()) != n {
				t.Fatalf("read %d rows, asked for %d", rec.NumRows(), n)
			}
			rec.Release()
		}
		if n > 2 {
			rec, err := r.Take(context.Background(), nil, []uint64{n - 1, 0, n / 2})
			if err == nil {
				rec.Release()
			}
		}
	})
}
