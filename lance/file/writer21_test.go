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
