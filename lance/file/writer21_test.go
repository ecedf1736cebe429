package file

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/decimal256"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// nullPattern says which rows are null: nulls at the start, the end and
// scattered in between, or none, or all.
type nullPattern int

const (
	noNulls nullPattern = iota
	someNulls
	allNulls
)

func (p nullPattern) null(i, n int) bool {
	switch p {
	case someNulls:
		return i == 0 || i == n-1 || i%7 == 3 || (i > n/2 && i < n/2+20)
	case allNulls:
		return true
	}
	return false
}

// fill appends n generated values to b; rng makes them deterministic.
func fill(b array.Builder, n int, p nullPattern, rng *rand.Rand) {
	for i := 0; i < n; i++ {
		if p.null(i, n) {
			b.AppendNull()
			continue
		}
		appendOne(b, i, rng)
	}
}

func appendOne(b array.Builder, i int, rng *rand.Rand) {
	switch bb := b.(type) {
	case *array.Int8Builder:
		bb.Append(int8(rng.Intn(256) - 128))
	case *array.Int16Builder:
		bb.Append(int16(rng.Intn(65536) - 32768))
	case *array.Int32Builder:
		bb.Append(rng.Int31() - rng.Int31())
	case *array.Int64Builder:
		bb.Append(rng.Int63() - rng.Int63())
	case *array.Uint8Builder:
		bb.Append(uint8(rng.Intn(256)))
	case *array.Uint16Builder:
		bb.Append(uint16(rng.Intn(65536)))
	case *array.Uint32Builder:
		bb.Append(rng.Uint32())
	case *array.Uint64Builder:
		bb.Append(rng.Uint64())
	case *array.Float16Builder:
		bb.Append(float16.New(rng.Float32()*100 - 50))
	case *array.Float32Builder:
		bb.Append(rng.Float32()*1e6 - 5e5)
	case *array.Float64Builder:
		bb.Append(rng.NormFloat64() * 1e9)
	case *array.BooleanBuilder:
		bb.Append(rng.Intn(3) == 0)
	case *array.StringBuilder:
		bb.Append(genString(i, rng))
	case *array.LargeStringBuilder:
		bb.Append(genString(i, rng))
	case *array.BinaryBuilder:
		bb.Append([]byte(genString(i, rng)))
	case *array.Date32Builder:
		bb.Append(arrow.Date32(rng.Intn(40000) - 10000))
	case *array.Date64Builder:
		bb.Append(arrow.Date64((rng.Int63n(4e12) - 1e12) / 86400000 * 86400000))
	case *array.TimestampBuilder:
		bb.Append(arrow.Timestamp(rng.Int63n(4e15) - 1e15))
	case *array.Time32Builder:
		bb.Append(arrow.Time32(rng.Intn(86400)))
	case *array.Time64Builder:
		bb.Append(arrow.Time64(rng.Int63n(86400e6)))
	case *array.DurationBuilder:
		bb.Append(arrow.Duration(rng.Int63() - rng.Int63()))
	case *array.Decimal128Builder:
		bb.Append(decimal128.FromI64(rng.Int63() - rng.Int63()).Mul(decimal128.FromU64(uint64(rng.Intn(1000000)))))
	case *array.Decimal256Builder:
		bb.Append(decimal256.FromI64(rng.Int63() - rng.Int63()))
	case *array.FixedSizeBinaryBuilder:
		v := make([]byte, bb.Type().(*arrow.FixedSizeBinaryType).ByteWidth)
		rng.Read(v)
		bb.Append(v)
	case *array.FixedSizeListBuilder:
		bb.Append(true)
		vb := bb.ValueBuilder().(*array.Float32Builder)
		d := int(bb.Type().(*arrow.FixedSizeListType).Len())
		for k := 0; k < d; k++ {
			vb.Append(rng.Float32())
		}
	default:
		panic(fmt.Sprintf("no generator for %T", b))
	}
}

// genString makes short strings with repeats, empty strings and unicode.
func genString(i int, rng *rand.Rand) string {
	switch rng.Intn(6) {
	case 0:
		return ""
	case 1:
		return "héllo wörld ✓"
	case 2:
		return fmt.Sprintf("value-%d", rng.Intn(50))
	default:
		b := make([]byte, rng.Intn(40))
		for k := range b {
			b[k] = byte('a' + rng.Intn(26))
		}
		return string(b)
	}
}

func makeBatch(t testing.TB, s *arrow.Schema, n int, pats []nullPattern, seed int64) arrow.RecordBatch {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	for i := range s.Fields() {
		fill(b.Field(i), n, pats[i], rng)
	}
	return b.NewRecordBatch()
}

func primitiveTypes() []arrow.DataType {
	return []arrow.DataType{
		arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64,
		arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64,
		arrow.FixedWidthTypes.Float16, arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64,
		arrow.FixedWidthTypes.Boolean,
		arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.Binary,
		arrow.FixedWidthTypes.Date32, arrow.FixedWidthTypes.Date64,
		&arrow.TimestampType{Unit: arrow.Second}, &arrow.TimestampType{Unit: arrow.Millisecond},
		&arrow.TimestampType{Unit: arrow.Microsecond}, &arrow.TimestampType{Unit: arrow.Nanosecond},
		&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"},
		&arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "America/New_York"},
		arrow.FixedWidthTypes.Time32s, arrow.FixedWidthTypes.Time64us, arrow.FixedWidthTypes.Duration_ms,
		&arrow.Decimal128Type{Precision: 38, Scale: 10}, &arrow.Decimal256Type{Precision: 76, Scale: 20},
		&arrow.FixedSizeBinaryType{ByteWidth: 16},
	}
}

// TestWriter21PrimitivesLanceDB writes every primitive type with no nulls,
// scattered nulls and only nulls, in two batches, and reads it with LanceDB.
func TestWriter21PrimitivesLanceDB(t *testing.T) {
	var fields []arrow.Field
	var pats []nullPattern
	for _, dt := range primitiveTypes() {
		name := testLogicalType(dt)
		fields = append(fields,
			arrow.Field{Name: "nn_" + name, Type: dt},
			arrow.Field{Name: "some_" + name, Type: dt, Nullable: true},
			arrow.Field{Name: "all_" + name, Type: dt, Nullable: true})
		pats = append(pats, noNulls, someNulls, allNulls)
	}
	s := arrow.NewSchema(fields, nil)
	recs := []arrow.RecordBatch{makeBatch(t, s, 3000, pats, 1), makeBatch(t, s, 1234, pats, 2)}
	root := t.TempDir()
	writeTestDataset(t, root, "prims", recs, WriterOptions{})
	assertOracleEqual(t, root, "prims", recs)
}

// genNested appends one value to b: at every level a null (when nullable),
// an empty list, or a generated value.
func genNested(b array.Builder, nullable bool, i int, rng *rand.Rand) {
	if nullable && rng.Intn(6) == 0 {
		b.AppendNull()
		return
	}
	switch bb := b.(type) {
	case *array.StructBuilder:
		bb.Append(true)
		st := bb.Type().(*arrow.StructType)
		for k := 0; k < bb.NumField(); k++ {
			genNested(bb.FieldBuilder(k), st.Field(k).Nullable, i, rng)
		}
	case *array.ListBuilder:
		n := rng.Intn(5)
		bb.Append(true)
		el := bb.Type().(*arrow.ListType).ElemField()
		for k := 0; k < n; k++ {
			genNested(bb.ValueBuilder(), el.Nullable, i, rng)
		}
	case *array.LargeListBuilder:
		n := rng.Intn(4)
		bb.Append(true)
		el := bb.Type().(*arrow.LargeListType).ElemField()
		for k := 0; k < n; k++ {
			genNested(bb.ValueBuilder(), el.Nullable, i, rng)
		}
	default:
		appendOne(b, i, rng)
	}
}

func nestedBatch(t testing.TB, s *arrow.Schema, n int, seed int64) arrow.RecordBatch {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	for i := 0; i < n; i++ {
		for k, f := range s.Fields() {
			genNested(b.Field(k), f.Nullable, i, rng)
		}
	}
	return b.NewRecordBatch()
}

func vec(d int) arrow.DataType { return arrow.FixedSizeListOf(int32(d), arrow.PrimitiveTypes.Float32) }

// TestWriter21NestedLanceDB covers structs, lists (with nulls and empty
// lists at every level), lists of structs, structs of lists, nested lists,
// vectors from 4 to 1536 dimensions and long strings (full-zip).
func TestWriter21NestedLanceDB(t *testing.T) {
	i32 := arrow.PrimitiveTypes.Int32
	str := arrow.BinaryTypes.String
	s := arrow.NewSchema([]arrow.Field{
		{Name: "st", Type: arrow.StructOf(
			arrow.Field{Name: "a", Type: i32, Nullable: true},
			arrow.Field{Name: "b", Type: str, Nullable: true},
			arrow.Field{Name: "inner", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true}), Nullable: true},
		), Nullable: true},
		{Name: "st_nn", Type: arrow.StructOf(arrow.Field{Name: "a", Type: i32}, arrow.Field{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true})},
		{Name: "li", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: i32, Nullable: true}), Nullable: true},
		{Name: "li_nn", Type: arrow.ListOfNonNullable(i32)},
		{Name: "ls", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: str, Nullable: true}), Nullable: true},
		{Name: "lls", Type: arrow.LargeListOfField(arrow.Field{Name: "item", Type: arrow.BinaryTypes.LargeString, Nullable: true}), Nullable: true},
		{Name: "lst", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.StructOf(
			arrow.Field{Name: "k", Type: str, Nullable: true},
			arrow.Field{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), Nullable: true}), Nullable: true},
		{Name: "stl", Type: arrow.StructOf(arrow.Field{Name: "tags", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: str, Nullable: true}), Nullable: true}), Nullable: true},
		{Name: "ll", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: i32, Nullable: true}), Nullable: true}), Nullable: true},
		{Name: "v4", Type: vec(4), Nullable: true},
		{Name: "v16", Type: vec(16)},
		{Name: "v64", Type: vec(64), Nullable: true},
		{Name: "v128", Type: vec(128)},
		{Name: "v768", Type: vec(768), Nullable: true},
		{Name: "v1536", Type: vec(1536)},
		{Name: "lv", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: vec(8), Nullable: true}), Nullable: true},
	}, nil)
	recs := []arrow.RecordBatch{nestedBatch(t, s, 1500, 3), nestedBatch(t, s, 700, 4)}
	root := t.TempDir()
	writeTestDataset(t, root, "nested", recs, WriterOptions{})
	assertOracleEqual(t, root, "nested", recs)
}

// longStrings makes strings of 200 to 3000 bytes (full-zip), some empty.
func longStrings(t testing.TB, n int, nullable bool, large bool, seed int64) arrow.Array {
	rng := rand.New(rand.NewSource(seed))
	var b array.Builder
	if large {
		b = array.NewLargeStringBuilder(memory.DefaultAllocator)
	} else {
		b = array.NewStringBuilder(memory.DefaultAllocator)
	}
	defer b.Release()
	for i := 0; i < n; i++ {
		if nullable && (i == 0 || i%5 == 2 || i == n-1) {
			b.AppendNull()
			continue
		}
		l := 200 + rng.Intn(2800)
		if i%11 == 0 {
			l = 0
		}
		buf := make([]byte, l)
		for k := range buf {
			buf[k] = byte('a' + rng.Intn(26))
		}
		switch bb := b.(type) {
		case *array.StringBuilder:
			bb.Append(string(buf))
		case *array.LargeStringBuilder:
			bb.Append(string(buf))
		}
	}
	return b.NewArray()
}

func TestWriter21LongStringsLanceDB(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{
		{Name: "text", Type: arrow.BinaryTypes.String},
		{Name: "text_null", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "large_text", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	}, nil)
	var recs []arrow.RecordBatch
	for k, n := range []int{900, 333} {
		cols := []arrow.Array{longStrings(t, n, false, false, int64(k)), longStrings(t, n, true, false, int64(k+10)), longStrings(t, n, true, true, int64(k+20))}
		recs = append(recs, array.NewRecordBatch(s, cols, int64(n)))
	}
	root := t.TempDir()
	writeTestDataset(t, root, "long", recs, WriterOptions{})
	assertOracleEqual(t, root, "long", recs)
}

// TestWriter21MultiPageLanceDB writes 25k rows split over many pages (a
// small page size for scalars and lists, the default for 768-dim vectors)
// and checks LanceDB reads every row, with and without a filter.
func TestWriter21MultiPageLanceDB(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "tags", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
		{Name: "v", Type: vec(768)},
	}, nil)
	mk := func(n, first int, seed int64) arrow.RecordBatch {
		rec := nestedBatch(t, s, n, seed)
		ids := array.NewInt64Builder(memory.DefaultAllocator)
		for i := 0; i < n; i++ {
			ids.Append(int64(first + i))
		}
		cols := rec.Columns()
		cols[0] = ids.NewArray()
		return array.NewRecordBatch(s, cols, int64(n))
	}
	recs := []arrow.RecordBatch{mk(12000, 0, 5), mk(13001, 12000, 6)}
	for _, ps := range []int{64 << 10, DefaultPageSize} {
		t.Run(fmt.Sprint(ps), func(t *testing.T) {
			root := t.TempDir()
			writeTestDataset(t, root, "mp", recs, WriterOptions{PageSize: ps})
			assertOracleEqual(t, root, "mp", recs)
			n, got := oracleRead(t, root, "mp", "id >= 20000 AND id < 20100")
			if n != 100 {
				t.Fatalf("countRows(where) = %d, want 100", n)
			}
			ids := concatColumn(t, got, "id").(*array.Int64)
			if ids.Len() != 100 || ids.Value(0) != 20000 || ids.Value(99) != 20099 {
				t.Fatalf("filtered ids: %d rows, %v..", ids.Len(), ids.Value(0))
			}
		})
	}
}
