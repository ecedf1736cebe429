package file

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/zstd"

	"github.com/mvq-dev/mvq/lance/pb/enc20pb"
)

// Builders of 2.0 encodings for the tests.

func pbuf(i uint32) *enc20pb.Buffer { return &enc20pb.Buffer{BufferIndex: i} }

func eFlat(bits uint64, i uint32) *enc20pb.ArrayEncoding { return flatEnc20(bits, pbuf(i)) }

func eNoNulls(v *enc20pb.ArrayEncoding) *enc20pb.ArrayEncoding {
	return &enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_Nullable{Nullable: &enc20pb.Nullable{
		Nullability: &enc20pb.Nullable_NoNulls{NoNulls: &enc20pb.Nullable_NoNull{Values: v}}}}}
}

func eSomeNulls(valid, v *enc20pb.ArrayEncoding) *enc20pb.ArrayEncoding {
	return &enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_Nullable{Nullable: &enc20pb.Nullable{
		Nullability: &enc20pb.Nullable_SomeNulls{SomeNulls: &enc20pb.Nullable_SomeNull{Validity: valid, Values: v}}}}}
}

func eAllNulls() *enc20pb.ArrayEncoding {
	return &enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_Nullable{Nullable: &enc20pb.Nullable{
		Nullability: &enc20pb.Nullable_AllNulls{AllNulls: &enc20pb.Nullable_AllNull{}}}}}
}

func eBinary(idx, bytes *enc20pb.ArrayEncoding, adj uint64) *enc20pb.ArrayEncoding {
	return &enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_Binary{Binary: &enc20pb.Binary{Indices: idx, Bytes: bytes, NullAdjustment: adj}}}
}

func eFSL(dim uint32, items *enc20pb.ArrayEncoding) *enc20pb.ArrayEncoding {
	return &enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_FixedSizeList{FixedSizeList: &enc20pb.FixedSizeList{Dimension: dim, Items: items}}}
}

func eDict(idx, items *enc20pb.ArrayEncoding, n uint32) *enc20pb.ArrayEncoding {
	return &enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_Dictionary{Dictionary: &enc20pb.Dictionary{Indices: idx, Items: items, NumDictionaryItems: n}}}
}

func u64s(v ...uint64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	return b
}

func i32s(v ...int32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

// fromJSON builds an array of type dt from its JSON form.
func fromJSON(t *testing.T, dt arrow.DataType, js string) arrow.Array {
	t.Helper()
	a, _, err := array.FromJSON(memory.DefaultAllocator, dt, strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestDecodePage20(t *testing.T) {
	zenc, _ := zstd.NewWriter(nil)
	zipped := zenc.EncodeAll(i32s(10, 20, 30, 40, 50), nil)
	vec := arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32)
	for _, tc := range []struct {
		name             string
		enc              *enc20pb.ArrayEncoding
		bufs             [][]byte
		rows, skip, take uint64
		dt               arrow.DataType
		want             string
	}{
		{"flat int32", eNoNulls(eFlat(32, 0)), [][]byte{i32s(1, -2, 3, 4)}, 4, 1, 2, arrow.PrimitiveTypes.Int32, `[-2, 3]`},
		{"some nulls", eSomeNulls(eFlat(1, 0), eFlat(32, 1)), [][]byte{{0b1101}, i32s(1, 2, 3, 4)}, 4, 0, 4, arrow.PrimitiveTypes.Int32, `[1, null, 3, 4]`},
		{"some nulls, skipped", eSomeNulls(eFlat(1, 0), eFlat(32, 1)), [][]byte{{0b1101}, i32s(1, 2, 3, 4)}, 4, 1, 2, arrow.PrimitiveTypes.Int32, `[null, 3]`},
		{"bools across a byte", eNoNulls(eFlat(1, 0)), [][]byte{{0b10000000, 0b00000001}}, 16, 6, 4, arrow.FixedWidthTypes.Boolean, `[false, true, true, false]`},
		{"all null", eAllNulls(), nil, 5, 1, 3, arrow.BinaryTypes.String, `[null, null, null]`},
		{"zstd flat", eNoNulls(&enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_Flat{Flat: &enc20pb.Flat{BitsPerValue: 32, Buffer: pbuf(0), Compression: &enc20pb.Compression{Scheme: "zstd"}}}}),
			[][]byte{zipped}, 5, 2, 3, arrow.PrimitiveTypes.Int32, `[30, 40, 50]`},
		// "a", null, "", "bcd": ends 1, 1(+5), 1, 4; null_adjustment 5.
		{"binary", eBinary(eNoNulls(eFlat(64, 0)), eFlat(8, 1), 5), [][]byte{u64s(1, 6, 1, 4), []byte("abcd")}, 4, 0, 4, arrow.BinaryTypes.String, `["a", null, "", "bcd"]`},
		{"binary, skipped", eBinary(eNoNulls(eFlat(64, 0)), eFlat(8, 1), 5), [][]byte{u64s(1, 6, 1, 4), []byte("abcd")}, 4, 2, 2, arrow.BinaryTypes.LargeString, `["", "bcd"]`},
		{"binary, null first", eBinary(eNoNulls(eFlat(64, 0)), eFlat(8, 1), 3), [][]byte{u64s(3, 2), []byte("xy")}, 2, 1, 1, arrow.BinaryTypes.Binary, `["eHk="]`},
		{"dictionary", eDict(eNoNulls(eFlat(8, 0)), eBinary(eNoNulls(eFlat(64, 1)), eFlat(8, 2), 3), 2),
			[][]byte{{2, 0, 1, 2}, u64s(1, 2), []byte("ab")}, 4, 0, 4, arrow.BinaryTypes.String, `["b", null, "a", "b"]`},
		{"dictionary of a null item", eDict(eNoNulls(eFlat(8, 0)), eBinary(eNoNulls(eFlat(64, 1)), eFlat(8, 2), 1), 1),
			[][]byte{{0, 0}, u64s(1), nil}, 2, 0, 2, arrow.BinaryTypes.String, `[null, null]`},
		{"nullable Arrow dictionary", eSomeNulls(eFlat(1, 0), eDict(eNoNulls(eFlat(8, 1)), eBinary(eNoNulls(eFlat(64, 2)), eFlat(8, 3), 3), 2)),
			[][]byte{{0b1101}, {1, 0, 1, 0}, u64s(1, 2), []byte("ab")}, 4, 0, 4,
			&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint8, ValueType: arrow.BinaryTypes.String}, `{ dictionary: ["a" "b"]
  indices: [1 (null) 1 0] }`},
		{"vectors", eSomeNulls(eFlat(1, 0), eFSL(2, eSomeNulls(eFlat(1, 1), eFlat(32, 2)))),
			[][]byte{{0b101}, {0b101111}, i32s(0x3f800000, 0x40000000, 0, 0, 0x40400000, 0x40800000)}, 3, 0, 3, vec, `[[1, 2], null, [null, 4]]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodePage20(tc.enc, &pageBufs20{page: tc.bufs}, tc.rows, tc.skip, tc.take, tc.dt)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if tc.dt.ID() == arrow.DICTIONARY {
				if got.String() != tc.want {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
				return
			}
			want := fromJSON(t, tc.dt, tc.want)
			defer want.Release()
			if !array.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}

func TestDecodeListPage20(t *testing.T) {
	// [[A, B], null, [], [C, D, E]] with null_offset_adjustment 7 (the
	// example of encodings_v2_0.proto): offsets [2, 9, 2, 5].
	l := &enc20pb.List{Offsets: eNoNulls(eFlat(64, 0)), NullOffsetAdjustment: 7, NumItems: 5}
	bufs := &pageBufs20{page: [][]byte{u64s(2, 9, 2, 5)}}
	for _, tc := range []struct {
		skip, take uint64
		offsets    []uint64
		nulls      []bool
		items      [2]uint64
	}{
		{0, 4, []uint64{0, 2, 2, 2, 5}, []bool{false, true, false, false}, [2]uint64{0, 5}},
		{1, 2, []uint64{0, 0, 0}, []bool{true, false}, [2]uint64{2, 2}},
		{3, 1, []uint64{0, 3}, []bool{false}, [2]uint64{2, 5}},
		{0, 1, []uint64{0, 2}, []bool{false}, [2]uint64{0, 2}},
	} {
		lp, err := decodeListPage20(l, bufs, 4, tc.skip, tc.take)
		if err != nil {
			t.Fatal(err)
		}
		if !equalU64(lp.offsets, tc.offsets) || lp.itemsStart != tc.items[0] || lp.itemsEnd != tc.items[1] {
			t.Errorf("rows %d+%d: offsets %v items %d..%d, want %v %v", tc.skip, tc.take, lp.offsets, lp.itemsStart, lp.itemsEnd, tc.offsets, tc.items)
		}
		for i, null := range tc.nulls {
			isNull := lp.validity != nil && lp.validity[i/8]&(1<<(i%8)) == 0
			if isNull != null {
				t.Errorf("rows %d+%d: list %d null=%v, want %v", tc.skip, tc.take, i, isNull, null)
			}
		}
	}
}

func equalU64(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestDecodePage20Corrupt(t *testing.T) {
	deep := eFlat(32, 0)
	for i := 0; i < 40; i++ {
		deep = eNoNulls(deep)
	}
	for _, tc := range []struct {
		name             string
		enc              *enc20pb.ArrayEncoding
		bufs             [][]byte
		rows, skip, take uint64
		dt               arrow.DataType
	}{
		{"short flat buffer", eNoNulls(eFlat(32, 0)), [][]byte{i32s(1, 2)}, 4, 0, 4, arrow.PrimitiveTypes.Int32},
		{"width mismatch", eNoNulls(eFlat(64, 0)), [][]byte{u64s(1, 2)}, 2, 0, 2, arrow.PrimitiveTypes.Int32},
		{"missing buffer", eNoNulls(eFlat(32, 3)), [][]byte{i32s(1)}, 1, 0, 1, arrow.PrimitiveTypes.Int32},
		{"short bitmap", eNoNulls(eFlat(1, 0)), [][]byte{{1}}, 9, 0, 9, arrow.FixedWidthTypes.Boolean},
		{"rows past the page", eNoNulls(eFlat(32, 0)), [][]byte{i32s(1, 2)}, 2, 1, 2, arrow.PrimitiveTypes.Int32},
		{"binary offsets decrease", eBinary(eNoNulls(eFlat(64, 0)), eFlat(8, 1), 9), [][]byte{u64s(3, 1), []byte("abc")}, 2, 0, 2, arrow.BinaryTypes.String},
		{"binary bytes short", eBinary(eNoNulls(eFlat(64, 0)), eFlat(8, 1), 99), [][]byte{u64s(3, 50), []byte("abc")}, 2, 0, 2, arrow.BinaryTypes.String},
		{"binary for ints", eBinary(eNoNulls(eFlat(64, 0)), eFlat(8, 1), 9), [][]byte{u64s(1), []byte("a")}, 1, 0, 1, arrow.PrimitiveTypes.Int32},
		{"dictionary index past items", eDict(eNoNulls(eFlat(8, 0)), eBinary(eNoNulls(eFlat(64, 1)), eFlat(8, 2), 3), 2),
			[][]byte{{3}, u64s(1, 2), []byte("ab")}, 1, 0, 1, arrow.BinaryTypes.String},
		{"dictionary items beyond their buffers", eDict(eNoNulls(eFlat(8, 0)), eBinary(eNoNulls(eFlat(64, 1)), eFlat(8, 2), 3), 1<<30),
			[][]byte{{1}, u64s(1, 2), []byte("ab")}, 1, 0, 1, arrow.BinaryTypes.String},
		{"fsl dimension mismatch", eNoNulls(eFSL(3, eNoNulls(eFlat(32, 0)))), [][]byte{i32s(1, 2)}, 1, 0, 1, arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32)},
		{"nested too deep", deep, [][]byte{i32s(1)}, 1, 0, 1, arrow.PrimitiveTypes.Int32},
		{"empty encoding", &enc20pb.ArrayEncoding{}, nil, 1, 0, 1, arrow.PrimitiveTypes.Int32},
		{"nullable without nullability", &enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_Nullable{Nullable: &enc20pb.Nullable{}}}, nil, 1, 0, 1, arrow.PrimitiveTypes.Int32},
		{"all null past the budget", eAllNulls(), nil, 1 << 40, 0, 1 << 40, arrow.FixedSizeListOf(1536, arrow.PrimitiveTypes.Float32)},
		{"zstd bomb", eNoNulls(&enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_Flat{Flat: &enc20pb.Flat{BitsPerValue: 8, Buffer: pbuf(0), Compression: &enc20pb.Compression{Scheme: "zstd"}}}}),
			[][]byte{zstdOf(make([]byte, 1<<20))}, 16, 0, 16, arrow.PrimitiveTypes.Uint8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodePage20(tc.enc, &pageBufs20{page: tc.bufs}, tc.rows, tc.skip, tc.take, tc.dt)
			if err == nil {
				got.Release()
				t.Fatalf("decoded %v, want an error", got)
			}
			if !errors.Is(err, errCorrupt20) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
		})
	}
	for _, l := range []*enc20pb.List{
		{Offsets: eNoNulls(eFlat(64, 0)), NullOffsetAdjustment: 0, NumItems: 0},
		{Offsets: eNoNulls(eFlat(64, 0)), NullOffsetAdjustment: 7, NumItems: 3},
		{Offsets: eNoNulls(eFlat(64, 0)), NullOffsetAdjustment: 7, NumItems: 9},
	} {
		if _, err := decodeListPage20(l, &pageBufs20{page: [][]byte{u64s(2, 5, 4)}}, 3, 0, 3); !errors.Is(err, errCorrupt20) {
			t.Errorf("list %v: error %v, want errCorrupt20", l, err)
		}
	}
}

func TestDecodePage20Unsupported(t *testing.T) {
	constant := &enc20pb.ArrayEncoding{ArrayEncoding: &enc20pb.ArrayEncoding_Constant{Constant: &enc20pb.Constant{Value: []byte{1}}}}
	_, err := decodePage20(constant, &pageBufs20{}, 1, 0, 1, arrow.PrimitiveTypes.Int8)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `"constant"`) {
		t.Fatalf("error %v, want ErrUnsupported naming the encoding", err)
	}
}

func zstdOf(b []byte) []byte {
	w, _ := zstd.NewWriter(nil)
	return w.EncodeAll(b, nil)
}

func TestCheckVersion(t *testing.T) {
	for _, v := range []Version{V2_0, V2_1} {
		if err := checkVersion(v); err != nil {
			t.Errorf("%v: %v", v, err)
		}
	}
	for v, want := range map[Version]string{
		{0, 2}: "legacy",
		{2, 2}: "2.2",
		{2, 3}: "2.3",
		{3, 0}: "3.0",
		{1, 5}: "1.5",
	} {
		err := checkVersion(v)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: error %v, want one naming %q", v, err, want)
		}
		if v != (Version{1, 5}) && !strings.Contains(err.Error(), "data_storage_version") {
			t.Errorf("%v: error %v does not say how to convert", v, err)
		}
	}
}
