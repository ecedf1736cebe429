package lanceoracle

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// sample builds a batch of n rows with the types mvq accepts, nulls in
// every nullable column.
func sample(t testing.TB, n int) arrow.RecordBatch {
	t.Helper()
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "tsn", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}, Nullable: true},
		{Name: "dec", Type: &arrow.Decimal128Type{Precision: 12, Scale: 3}, Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "v", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32), Nullable: true},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "d64", Type: arrow.FixedWidthTypes.Date64, Nullable: true},
		{Name: "tss", Type: &arrow.TimestampType{Unit: arrow.Second, TimeZone: "Europe/Paris"}, Nullable: true},
		{Name: "lb", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
		{Name: "fsb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 3}, Nullable: true},
		{Name: "dict", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, Nullable: true},
		{Name: "st", Type: arrow.StructOf(
			arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "y", Type: arrow.BinaryTypes.String, Nullable: true},
		), Nullable: true},
	}
	schema := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := 0; i < n; i++ {
		null := i%5 == 3
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		for c := 1; c < len(fields); c++ {
			if null {
				b.Field(c).AppendNull()
				continue
			}
			switch fb := b.Field(c).(type) {
			case *array.Int8Builder:
				fb.Append(int8(i%256 - 128))
			case *array.Uint32Builder:
				fb.Append(uint32(i) * 2654435761)
			case *array.Uint64Builder:
				fb.Append(uint64(i) * 0x9E3779B97F4A7C15)
			case *array.Int16Builder:
				fb.Append(int16(i * 1000))
			case *array.Float32Builder:
				fb.Append(float32(i) / 3)
			case *array.Date64Builder:
				fb.Append(arrow.Date64((19000 + int64(i)) * 86_400_000))
			case *array.FixedSizeBinaryBuilder:
				fb.Append([]byte{byte(i), 1, 2})
			case *array.BinaryDictionaryBuilder:
				if err := fb.AppendString([]string{"red", "green", "blue"}[i%3]); err != nil {
					t.Fatal(err)
				}
			case *array.Float64Builder:
				fb.Append(float64(i) / 7)
			case *array.BooleanBuilder:
				fb.Append(i%2 == 0)
			case *array.StringBuilder:
				fb.Append(strings.Repeat("é", i%4) + "s" + string(rune('a'+i%26)))
			case *array.LargeStringBuilder:
				fb.Append(strings.Repeat("L", i%7))
			case *array.BinaryBuilder:
				fb.Append([]byte{byte(i), 0, byte(i >> 8)})
			case *array.Date32Builder:
				fb.Append(arrow.Date32(19000 + i))
			case *array.TimestampBuilder:
				fb.Append(arrow.Timestamp(1_700_000_000_000_000 + int64(i)*1_000_003))
			case *array.Decimal128Builder:
				fb.Append(decimal128.FromI64(int64(i)*1001 - 5000))
			case *array.ListBuilder:
				fb.Append(true)
				vb := fb.ValueBuilder().(*array.Int32Builder)
				for k := 0; k < i%3; k++ {
					vb.Append(int32(i + k))
				}
			case *array.FixedSizeListBuilder:
				fb.Append(true)
				vb := fb.ValueBuilder().(*array.Float32Builder)
				for k := 0; k < 4; k++ {
					vb.Append(float32(i) + float32(k)/4)
				}
			case *array.StructBuilder:
				fb.Append(true)
				fb.FieldBuilder(0).(*array.Int32Builder).Append(int32(-i))
				fb.FieldBuilder(1).(*array.StringBuilder).Append("y")
			default:
				t.Fatalf("sample: no case for %T", fb)
			}
		}
	}
	return b.NewRecordBatch()
}

// column returns column i of tbl as one array (the caller releases it).
func column(t testing.TB, tbl arrow.Table, i int) arrow.Array {
	t.Helper()
	chunks := tbl.Column(i).Data().Chunks()
	if len(chunks) == 0 {
		return array.MakeArrayOfNull(memory.DefaultAllocator, tbl.Schema().Field(i).Type, 0)
	}
	a, err := array.Concatenate(chunks, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// requireSame fails unless tbl holds exactly rec's columns and values.
func requireSame(t *testing.T, rec arrow.RecordBatch, tbl arrow.Table) {
	t.Helper()
	requireSameExcept(t, rec, tbl, false)
}

// requireSameExcept is requireSame allowing for what LanceDB 0.31 does to
// data in 2.0 files (storage20): a null struct reads back as a non-null
// struct of null fields, and a dictionary reads back with an extra null
// entry (the same values row by row). Both are checked to be exactly that.
func requireSameExcept(t *testing.T, rec arrow.RecordBatch, tbl arrow.Table, storage20 bool) {
	t.Helper()
	if tbl.NumRows() != rec.NumRows() || int(tbl.NumCols()) != int(rec.NumCols()) {
		t.Fatalf("got %d rows x %d cols, want %d x %d", tbl.NumRows(), tbl.NumCols(), rec.NumRows(), rec.NumCols())
	}
	for i := 0; i < int(rec.NumCols()); i++ {
		want, got := rec.Schema().Field(i), tbl.Schema().Field(i)
		if want.Name != got.Name || !arrow.TypeEqual(want.Type, got.Type) || want.Nullable != got.Nullable {
			t.Errorf("column %d: got %s %s (nullable %v), want %s %s (nullable %v)", i, got.Name, got.Type, got.Nullable, want.Name, want.Type, want.Nullable)
			continue
		}
		a := column(t, tbl, i)
		w := rec.Column(i)
		switch {
		case array.Equal(w, a):
		case storage20 && w.DataType().ID() == arrow.STRUCT:
			ws, gs := w.(*array.Struct), a.(*array.Struct)
			if gs.NullN() != 0 {
				t.Errorf("column %s: 2.0 struct has %d nulls; LanceDB 0.31 was seen to drop them", want.Name, gs.NullN())
			}
			for f := 0; f < ws.NumField(); f++ {
				if !array.Equal(ws.Field(f), gs.Field(f)) {
					t.Errorf("column %s: struct field %d differs:\n got %v\nwant %v", want.Name, f, gs.Field(f), ws.Field(f))
				}
			}
		case storage20 && w.DataType().ID() == arrow.DICTIONARY:
			for r := 0; r < w.Len(); r++ {
				if w.IsNull(r) != a.IsNull(r) || w.ValueStr(r) != a.ValueStr(r) {
					t.Errorf("column %s row %d: got %s, want %s", want.Name, r, a.ValueStr(r), w.ValueStr(r))
					break
				}
			}
		default:
			t.Errorf("column %s differs:\n got %v\nwant %v", want.Name, a, w)
		}
		a.Release()
	}
}

func TestRoundTrip(t *testing.T) {
	o := Need(t)
	for _, version := range []string{"2.0", "2.1"} {
		t.Run(version, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t.lance")
			rec := sample(t, 50)
			defer rec.Release()
			o.Write(t, dir, rec, version, "create")
			// The data file footer ends in u16 major, u16 minor, "LANC":
			// 0.3 for storage version 2.0, 2.1 for 2.1.
			files, _ := filepath.Glob(filepath.Join(dir, "data", "*.lance"))
			if len(files) != 1 {
				t.Fatalf("data files: %v", files)
			}
			b, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			foot := b[len(b)-8:]
			got := fmt.Sprintf("%d.%d %s", binary.LittleEndian.Uint16(foot), binary.LittleEndian.Uint16(foot[2:]), foot[4:])
			if want := map[string]string{"2.0": "0.3 LANC", "2.1": "2.1 LANC"}[version]; got != want {
				t.Fatalf("data file version %s, want %s", got, want)
			}

			tbl := o.Read(t, dir, ReadOpts{})
			defer tbl.Release()
			requireSameExcept(t, rec, tbl, version == "2.0")

			if n := o.Count(t, dir, "id >= 10 AND id < 20"); n != 10 {
				t.Errorf("count where: got %d, want 10", n)
			}
			proj := o.Read(t, dir, ReadOpts{Columns: []string{"s", "id"}, Where: "id < 5"})
			defer proj.Release()
			if proj.NumRows() != 5 || proj.NumCols() != 2 || proj.Schema().Field(0).Name != "s" {
				t.Errorf("projection: got %v", proj.Schema())
			}

			o.Write(t, dir, rec, "", "append")
			o.Delete(t, dir, "id < 10")
			o.Update(t, dir, "id = 20", map[string]string{"s": "'changed'"})
			if n := o.Count(t, dir, ""); n != 80 {
				t.Errorf("count after append, delete: got %d, want 80", n)
			}
			if n := o.Count(t, dir, "s = 'changed'"); n != 2 {
				t.Errorf("count updated: got %d, want 2", n)
			}
			if n := o.CountAt(t, dir, "", 1); n != 50 {
				t.Errorf("count at version 1: got %d, want 50", n)
			}
			vs := o.Versions(t, dir)
			if len(vs) != 4 || vs[0].Version != 1 || vs[3].Version != 4 {
				t.Fatalf("versions: got %+v", vs)
			}
			if vs[3].Metadata["total_rows"] != "80" {
				t.Errorf("version 4 metadata: %v", vs[3].Metadata)
			}

			res := o.Search(t, dir, SearchOpts{Column: "v", Vector: []float32{30, 30.25, 30.5, 30.75}, K: 3, Columns: []string{"id"}})
			defer res.Release()
			if res.NumRows() != 3 {
				t.Fatalf("search: %d rows", res.NumRows())
			}
			ids := column(t, res, 0).(*array.Int64)
			defer ids.Release()
			if ids.Value(0) != 30 {
				t.Errorf("nearest: got id %d, want 30", ids.Value(0))
			}
		})
	}
}

func TestEmptyRead(t *testing.T) {
	o := Need(t)
	dir := filepath.Join(t.TempDir(), "t.lance")
	rec := sample(t, 5)
	defer rec.Release()
	o.Write(t, dir, rec, "", "")
	tbl := o.Read(t, dir, ReadOpts{Where: "id > 100", Columns: []string{"id", "v"}})
	defer tbl.Release()
	if tbl.NumRows() != 0 || tbl.NumCols() != 2 || !arrow.TypeEqual(tbl.Schema().Field(1).Type, rec.Schema().Field(13).Type) {
		t.Fatalf("empty read: %d rows, schema %v", tbl.NumRows(), tbl.Schema())
	}
}

func TestCreateTwiceFails(t *testing.T) {
	o := Need(t)
	dir := filepath.Join(t.TempDir(), "t.lance")
	rec := sample(t, 3)
	defer rec.Release()
	o.Write(t, dir, rec, "", "create")
	if err := o.WriteErr(t, dir, rec, "", "create"); err == nil {
		t.Fatal("second create succeeded")
	}
}

// TestJSArrowPaths checks every type of the sample through LanceDB's public
// JavaScript paths (the JS Arrow library decodes and encodes the data on the
// way in and on the way out) against the byte-for-byte path.
func TestJSArrowPaths(t *testing.T) {
	o := Need(t)
	rec := sample(t, 20)
	defer rec.Release()
	dir := filepath.Join(t.TempDir(), "t.lance")
	if err := o.WriteViaJS(t, dir, rec, "", "create"); err != nil {
		t.Fatal(err)
	}
	for _, js := range []bool{false, true} {
		tbl := o.Read(t, dir, ReadOpts{ViaJS: js})
		requireSame(t, rec, tbl)
		tbl.Release()
	}
}
