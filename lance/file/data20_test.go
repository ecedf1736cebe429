package file

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// allTypes20 builds n rows of every type mvq accepts, with nulls in every
// nullable position (every 7th row, and more inside lists and structs),
// empty strings and all-null columns. dims lists the fixed-size-list
// dimensions to include.
func allTypes20(n int, dims ...int) arrow.RecordBatch {
	nullable := func(name string, dt arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: dt, Nullable: true}
	}
	fields := []arrow.Field{
		nullable("i8", arrow.PrimitiveTypes.Int8),
		nullable("i16", arrow.PrimitiveTypes.Int16),
		nullable("i32", arrow.PrimitiveTypes.Int32),
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64},
		nullable("u8", arrow.PrimitiveTypes.Uint8),
		nullable("u16", arrow.PrimitiveTypes.Uint16),
		nullable("u32", arrow.PrimitiveTypes.Uint32),
		nullable("u64", arrow.PrimitiveTypes.Uint64),
		nullable("f16", arrow.FixedWidthTypes.Float16),
		nullable("f32", arrow.PrimitiveTypes.Float32),
		nullable("f64", arrow.PrimitiveTypes.Float64),
		nullable("b", arrow.FixedWidthTypes.Boolean),
		{Name: "bnn", Type: arrow.FixedWidthTypes.Boolean},
		nullable("s", arrow.BinaryTypes.String),
		{Name: "snn", Type: arrow.BinaryTypes.String},
		nullable("sdict", arrow.BinaryTypes.String),
		nullable("ls", arrow.BinaryTypes.LargeString),
		nullable("bin", arrow.BinaryTypes.Binary),
		nullable("lbin", arrow.BinaryTypes.LargeBinary),
		nullable("d32", arrow.FixedWidthTypes.Date32),
		nullable("d64", arrow.FixedWidthTypes.Date64),
		nullable("ts_s", &arrow.TimestampType{Unit: arrow.Second}),
		nullable("ts_ms", &arrow.TimestampType{Unit: arrow.Millisecond}),
		nullable("ts_us", &arrow.TimestampType{Unit: arrow.Microsecond}),
		nullable("ts_ns", &arrow.TimestampType{Unit: arrow.Nanosecond}),
		nullable("tsz_us", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}),
		nullable("tsz_ms", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "America/New_York"}),
		nullable("dec", &arrow.Decimal128Type{Precision: 38, Scale: 10}),
		nullable("dec2", &arrow.Decimal128Type{Precision: 10, Scale: 2}),
		nullable("li", arrow.ListOf(arrow.PrimitiveTypes.Int32)),
		nullable("lstr", arrow.ListOf(arrow.BinaryTypes.String)),
		nullable("llf", arrow.LargeListOf(arrow.PrimitiveTypes.Float64)),
		nullable("lli", arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Int16))),
		nullable("st", arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "c", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
		)),
		nullable("lst", arrow.ListOf(arrow.StructOf(
			arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
			arrow.Field{Name: "y", Type: arrow.BinaryTypes.String, Nullable: true},
		))),
		nullable("nul_i32", arrow.PrimitiveTypes.Int32),
		nullable("nul_s", arrow.BinaryTypes.String),
		nullable("nul_f64", arrow.PrimitiveTypes.Float64),
		nullable("nul_b", arrow.FixedWidthTypes.Boolean),
		nullable("nul_li", arrow.ListOf(arrow.PrimitiveTypes.Int32)),
		nullable("empty_s", arrow.BinaryTypes.String),
	}
	for _, d := range dims {
		fields = append(fields, nullable(fmt.Sprintf("v%d", d), arrow.FixedSizeListOf(int32(d), arrow.PrimitiveTypes.Float32)))
	}
	sc := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := 0; i < n; i++ {
		null := i%7 == 3
		for j, f := range fields {
			fb := b.Field(j)
			if f.Nullable && (null || f.Name[:min(4, len(f.Name))] == "nul_") {
				fb.AppendNull()
				continue
			}
			appendRow20(fb, f.Name, i)
		}
	}
	return b.NewRecordBatch()
}

func appendRow20(fb array.Builder, name string, i int) {
	switch fb := fb.(type) {
	case *array.Int8Builder:
		fb.Append(int8(i))
	case *array.Int16Builder:
		fb.Append(int16(i * 3))
	case *array.Int32Builder:
		fb.Append(int32(i * -1000))
	case *array.Int64Builder:
		fb.Append(int64(i) << 33)
	case *array.Uint8Builder:
		fb.Append(uint8(i))
	case *array.Uint16Builder:
		fb.Append(uint16(i * 7))
	case *array.Uint32Builder:
		fb.Append(uint32(i) * 100003)
	case *array.Uint64Builder:
		fb.Append(uint64(i) * 1e12)
	case *array.Float16Builder:
		fb.Append(float16.New(float32(i%2048) / 4))
	case *array.Float32Builder:
		fb.Append(float32(i) / 3)
	case *array.Float64Builder:
		fb.Append(float64(i) / 7)
	case *array.BooleanBuilder:
		fb.Append(i%3 == 0)
	case *array.StringBuilder:
		switch name {
		case "sdict":
			fb.Append(fmt.Sprintf("cat%d", i%5))
		case "empty_s":
			fb.Append("")
		default:
			if i%5 == 0 {
				fb.Append("")
			} else {
				fb.Append(fmt.Sprintf("str-%d-%s", i, "ünï"))
			}
		}
	case *array.LargeStringBuilder:
		fb.Append(fmt.Sprintf("large-%d", i*i))
	case *array.BinaryBuilder:
		if i%11 == 0 {
			fb.Append([]byte{})
		} else {
			fb.Append([]byte{byte(i), byte(i >> 8), 0, 0xff})
		}
	case *array.Date32Builder:
		fb.Append(arrow.Date32(i - 5000))
	case *array.Date64Builder:
		fb.Append(arrow.Date64(int64(i) * 86400000))
	case *array.TimestampBuilder:
		fb.Append(arrow.Timestamp(int64(i)*1_000_003 - 7))
	case *array.Decimal128Builder:
		fb.Append(decimal128.FromI64(int64(i)*12345 - 999))
	case *array.ListBuilder:
		fb.Append(true)
		for k := 0; k < i%4; k++ {
			vb := fb.ValueBuilder()
			if k == 2 {
				vb.AppendNull()
				continue
			}
			if lb, ok := vb.(*array.ListBuilder); ok {
				lb.Append(true)
				for m := 0; m < (i+k)%3; m++ {
					lb.ValueBuilder().(*array.Int16Builder).Append(int16(i + m))
				}
				continue
			}
			appendRow20(vb, name, i+k)
		}
	case *array.LargeListBuilder:
		fb.Append(true)
		for k := 0; k < i%3; k++ {
			appendRow20(fb.ValueBuilder(), name, i+k)
		}
	case *array.FixedSizeListBuilder:
		fb.Append(true)
		vb := fb.ValueBuilder().(*array.Float32Builder)
		d := int(fb.Type().(*arrow.FixedSizeListType).Len())
		for k := 0; k < d; k++ {
			vb.Append(float32(i)*0.5 + float32(k))
		}
	case *array.StructBuilder:
		fb.Append(true)
		for k := 0; k < fb.NumField(); k++ {
			if (i+k)%4 == 1 {
				fb.FieldBuilder(k).AppendNull()
				continue
			}
			appendRow20(fb.FieldBuilder(k), name, i+k)
		}
	default:
		panic(fmt.Sprintf("no value for %T", fb))
	}
}
