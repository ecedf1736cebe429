package file

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/decimal256"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
)

// kitchenSink builds n rows of every type mvq accepts, with nulls in
// varied positions (leading, trailing, runs, scattered), empty strings,
// low-cardinality and long text, and all-null columns.
func kitchenSink(t testing.TB, n int) arrow.RecordBatch {
	t.Helper()
	ts := func(u arrow.TimeUnit, tz string) arrow.DataType { return &arrow.TimestampType{Unit: u, TimeZone: tz} }
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "u8", Type: arrow.PrimitiveTypes.Uint8, Nullable: true},
		{Name: "u16", Type: arrow.PrimitiveTypes.Uint16, Nullable: true},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "lbin", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
		{Name: "cat", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "d32", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "d64", Type: arrow.FixedWidthTypes.Date64, Nullable: true},
		{Name: "ts_s", Type: ts(arrow.Second, "Europe/Paris"), Nullable: true},
		{Name: "ts_ms", Type: ts(arrow.Millisecond, ""), Nullable: true},
		{Name: "ts_us", Type: ts(arrow.Microsecond, "UTC"), Nullable: true},
		{Name: "ts_ns", Type: ts(arrow.Nanosecond, ""), Nullable: true},
		{Name: "dec", Type: &arrow.Decimal128Type{Precision: 18, Scale: 4}, Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "ll", Type: arrow.LargeListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "v4", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32), Nullable: true},
		{Name: "st", Type: arrow.StructOf(
			arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "y", Type: arrow.BinaryTypes.String, Nullable: true},
		), Nullable: true},
		{Name: "nullc", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "nulls", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "const", Type: arrow.PrimitiveTypes.Int64},
		{Name: "sorted", Type: arrow.PrimitiveTypes.Int32},
	}
	schema := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"alpha", "beta", "gamma", "", "delta", "é✓", "epsilon"}
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		for c := 1; c < len(fields); c++ {
			name := fields[c].Name
			// Nulls: the first and last rows, runs of 7 every 100 rows,
			// and every 13th row.
			null := i == 0 || i == n-1 || i%100 < 7 || i%13 == 5
			switch name {
			case "nullc", "nulls":
				null = true
			case "const", "sorted":
				null = false
			case "cat":
				null = i%11 == 0
			}
			if null {
				b.Field(c).AppendNull()
				continue
			}
			switch fb := b.Field(c).(type) {
			case *array.Int8Builder:
				fb.Append(int8(rng.IntN(256) - 128))
			case *array.Int16Builder:
				fb.Append(int16(i % 3000))
			case *array.Int32Builder:
				switch name {
				case "sorted":
					fb.Append(int32(i / 300))
				default:
					fb.Append(int32(rng.Uint32()))
				}
			case *array.Int64Builder:
				if name == "const" {
					fb.Append(42)
				} else {
					fb.Append(int64(rng.Uint64()) >> uint(i%60))
				}
			case *array.Uint8Builder:
				fb.Append(uint8(i % 7))
			case *array.Uint16Builder:
				fb.Append(uint16(rng.IntN(65536)))
			case *array.Uint32Builder:
				fb.Append(uint32(i) * 2654435761)
			case *array.Uint64Builder:
				fb.Append(uint64(i) * 0x9E3779B97F4A7C15)
			case *array.Float32Builder:
				fb.Append(float32(rng.NormFloat64()))
			case *array.Float64Builder:
				fb.Append(float64(i) / 7)
			case *array.BooleanBuilder:
				fb.Append(rng.IntN(3) == 0)
			case *array.StringBuilder:
				switch name {
				case "cat":
					fb.Append([]string{"red", "green", "blue", ""}[i%4])
				case "text":
					// Long text (over 256 bytes), some rows short.
					if i%5 == 0 {
						fb.Append(words[i%len(words)])
					} else {
						fb.Append(strings.Repeat(words[i%len(words)]+" lorem ipsum dolor sit amet ", 10+i%7) + fmt.Sprint(i))
					}
				default:
					fb.Append(words[rng.IntN(len(words))] + fmt.Sprint(rng.IntN(1_000_000)))
				}
			case *array.LargeStringBuilder:
				fb.Append(strings.Repeat("L", i%9))
			case *array.BinaryBuilder:
				fb.Append([]byte{byte(i), 0, byte(i >> 8), 255})
			case *array.Date32Builder:
				fb.Append(arrow.Date32(19000 + i))
			case *array.Date64Builder:
				fb.Append(arrow.Date64((19000 + int64(i)) * 86_400_000))
			case *array.TimestampBuilder:
				fb.Append(arrow.Timestamp(1_700_000_000 + int64(i)*1_000_003))
			case *array.Decimal128Builder:
				fb.Append(decimal128.FromI64(int64(i)*1001 - 5000))
			case *array.ListBuilder:
				fb.Append(true)
				vb := fb.ValueBuilder().(*array.Int32Builder)
				for k := 0; k < i%4; k++ {
					if k == 2 && i%3 == 0 {
						vb.AppendNull()
					} else {
						vb.Append(int32(i + k))
					}
				}
			case *array.LargeListBuilder:
				fb.Append(true)
				vb := fb.ValueBuilder().(*array.StringBuilder)
				for k := 0; k < i%3; k++ {
					vb.Append(words[(i+k)%len(words)])
				}
			case *array.FixedSizeListBuilder:
				fb.Append(true)
				vb := fb.ValueBuilder().(*array.Float32Builder)
				for k := 0; k < 4; k++ {
					vb.Append(float32(i) + float32(k)/4)
				}
			case *array.StructBuilder:
				fb.Append(true)
				if i%17 == 0 {
					fb.FieldBuilder(0).(*array.Int32Builder).AppendNull()
				} else {
					fb.FieldBuilder(0).(*array.Int32Builder).Append(int32(-i))
				}
				fb.FieldBuilder(1).(*array.StringBuilder).Append(words[i%len(words)])
			default:
				t.Fatalf("kitchenSink: no case for %T", fb)
			}
		}
	}
	return b.NewRecordBatch()
}

// lanceWrite has LanceDB write rec as a new 2.1 dataset and returns the
// dataset folder and its data files.
func lanceWrite(t testing.TB, o *oracle.Oracle, rec arrow.RecordBatch) (string, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "t.lance")
	o.Write(t, dir, rec, "2.1", "create")
	files, err := filepath.Glob(filepath.Join(dir, "data", "*.lance"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no data files in %s: %v", dir, err)
	}
	sort.Strings(files)
	return dir, files
}

func openFile(t testing.TB, path string) *Reader {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func tableColumn(t testing.TB, tbl arrow.Table, i int) arrow.Array {
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

// requireEqual fails unless got holds exactly want's columns (names,
// types, nulls and values).
func requireEqual(t testing.TB, want arrow.Table, got arrow.RecordBatch) {
	t.Helper()
	if want.NumRows() != got.NumRows() || want.NumCols() != got.NumCols() {
		t.Fatalf("got %d rows x %d cols, want %d x %d", got.NumRows(), got.NumCols(), want.NumRows(), want.NumCols())
	}
	for i := 0; i < int(got.NumCols()); i++ {
		wf, gf := want.Schema().Field(i), got.Schema().Field(i)
		if wf.Name != gf.Name || !arrow.TypeEqual(wf.Type, gf.Type) {
			t.Errorf("column %d: got %s %s, want %s %s", i, gf.Name, gf.Type, wf.Name, wf.Type)
			continue
		}
		w := tableColumn(t, want, i)
		g := got.Column(i)
		if !array.Equal(w, g) {
			t.Errorf("column %s differs: %s", wf.Name, firstDiff(w, g))
		}
		w.Release()
	}
}

func firstDiff(w, g arrow.Array) string {
	if w.Len() != g.Len() {
		return fmt.Sprintf("length %d, want %d", g.Len(), w.Len())
	}
	if w.NullN() != g.NullN() {
		for i := 0; i < w.Len(); i++ {
			if w.IsNull(i) != g.IsNull(i) {
				return fmt.Sprintf("%d nulls, want %d; first at row %d (want null %v)", g.NullN(), w.NullN(), i, w.IsNull(i))
			}
		}
	}
	for i := 0; i < w.Len(); i++ {
		ws, gs := w.ValueStr(i), g.ValueStr(i)
		if ws != gs {
			return fmt.Sprintf("row %d: got %.200s, want %.200s", i, gs, ws)
		}
	}
	return "arrays differ (no row differs as a string)"
}

// readAll reads every data file of a dataset LanceDB wrote with one
// fragment, in order.
func readAll(t testing.TB, files []string, columns []int) arrow.RecordBatch {
	t.Helper()
	if len(files) != 1 {
		t.Fatalf("%d data files, want 1", len(files))
	}
	r := openFile(t, files[0])
	rec, err := r.Read(context.Background(), columns, 0, r.NumRows())
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestReadLanceDBKitchenSink(t *testing.T) {
	o := oracle.Need(t)
	for _, n := range []int{1, 300, 25_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			if n > 1000 && testing.Short() {
				t.Skip("large file skipped in -short mode")
			}
			rec := kitchenSink(t, n)
			defer rec.Release()
			dir, files := lanceWrite(t, o, rec)
			want := o.Read(t, dir, oracle.ReadOpts{})
			defer want.Release()
			got := readAll(t, files, nil)
			defer got.Release()
			requireEqual(t, want, got)
			if n > 1 {
				checkRangesAndTake(t, openFile(t, files[0]), want)
			}
			if keep := os.Getenv("MVQ_LANCE_KEEP"); keep != "" {
				b, _ := os.ReadFile(files[0])
				os.WriteFile(filepath.Join(keep, fmt.Sprintf("sink%d.lance", n)), b, 0o644)
			}
		})
	}
}

// vectorsAndNesting builds n rows of vectors of several sizes (mini-block
// and full-zip), deeper nesting, all-null nested columns and columns whose
// field metadata asks LanceDB for general compression, byte stream split
// and packed structs.
func vectorsAndNesting(t testing.TB, n int) arrow.RecordBatch {
	t.Helper()
	md := func(kv ...string) arrow.Metadata {
		var k, v []string
		for i := 0; i < len(kv); i += 2 {
			k, v = append(k, kv[i]), append(v, kv[i+1])
		}
		return arrow.NewMetadata(k, v)
	}
	fsl := func(d int32) arrow.DataType { return arrow.FixedSizeListOf(d, arrow.PrimitiveTypes.Float32) }
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v64", Type: fsl(64), Nullable: true},
		{Name: "v384", Type: fsl(384)},
		{Name: "v768", Type: fsl(768), Nullable: true},
		{Name: "v1536", Type: fsl(1536)},
		{Name: "ls", Type: arrow.ListOf(arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
		)), Nullable: true},
		{Name: "sl", Type: arrow.StructOf(
			arrow.Field{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
			arrow.Field{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "z", Type: arrow.PrimitiveTypes.Float64, Nullable: true}), Nullable: true},
		), Nullable: true},
		{Name: "lli", Type: arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Int32)), Nullable: true},
		{Name: "nl", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "nst", Type: arrow.StructOf(arrow.Field{Name: "q", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
		{Name: "zs", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: md("lance-encoding:compression", "zstd")},
		{Name: "zi", Type: arrow.PrimitiveTypes.Int64, Nullable: true, Metadata: md("lance-encoding:compression", "zstd")},
		{Name: "lz", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: md("lance-encoding:compression", "lz4")},
		{Name: "bss", Type: arrow.PrimitiveTypes.Float64, Nullable: true, Metadata: md("lance-encoding:compression", "zstd", "lance-encoding:bss", "on")},
		{Name: "lv", Type: arrow.ListOf(fsl(4)), Nullable: true},
		{Name: "sv", Type: arrow.StructOf(arrow.Field{Name: "e", Type: fsl(8), Nullable: true}), Nullable: true},
		{Name: "ps", Type: arrow.StructOf(
			arrow.Field{Name: "p", Type: arrow.PrimitiveTypes.Int32},
			arrow.Field{Name: "q", Type: arrow.PrimitiveTypes.Float64},
		), Metadata: md("lance-encoding:packed", "true")},
	}
	schema := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		for c := 1; c < len(fields); c++ {
			name := fields[c].Name
			null := fields[c].Nullable && (i%9 == 4 || i == n-1)
			if name == "nl" || name == "nst" {
				null = true
			}
			if null {
				b.Field(c).AppendNull()
				continue
			}
			switch fb := b.Field(c).(type) {
			case *array.FixedSizeListBuilder:
				fb.Append(true)
				vb := fb.ValueBuilder().(*array.Float32Builder)
				d := int(fields[c].Type.(*arrow.FixedSizeListType).Len())
				for k := 0; k < d; k++ {
					if name == "v64" && k == 3 && i%5 == 0 {
						vb.AppendNull()
						continue
					}
					vb.Append(float32(rng.NormFloat64()))
				}
			case *array.ListBuilder:
				fb.Append(true)
				switch vb := fb.ValueBuilder().(type) {
				case *array.StructBuilder:
					for k := 0; k < i%4; k++ {
						if k == 1 && i%6 == 0 {
							vb.AppendNull()
							vb.FieldBuilder(0).AppendNull()
							vb.FieldBuilder(1).AppendNull()
							continue
						}
						vb.Append(true)
						vb.FieldBuilder(0).(*array.Int32Builder).Append(int32(i * k))
						vb.FieldBuilder(1).(*array.StringBuilder).Append(fmt.Sprint("b", k))
					}
				case *array.FixedSizeListBuilder:
					for k := 0; k < i%3; k++ {
						vb.Append(true)
						for m := 0; m < 4; m++ {
							vb.ValueBuilder().(*array.Float32Builder).Append(float32(i*10 + m))
						}
					}
				case *array.ListBuilder:
					for k := 0; k < i%3; k++ {
						if k == 1 && i%4 == 0 {
							vb.AppendNull()
							continue
						}
						vb.Append(true)
						ib := vb.ValueBuilder().(*array.Int32Builder)
						for m := 0; m < (i+k)%3; m++ {
							ib.Append(int32(m))
						}
					}
				}
			case *array.StructBuilder:
				fb.Append(true)
				switch name {
				case "sl":
					lb := fb.FieldBuilder(0).(*array.ListBuilder)
					if i%7 == 1 {
						lb.AppendNull()
					} else {
						lb.Append(true)
						for k := 0; k < i%3; k++ {
							lb.ValueBuilder().(*array.Int64Builder).Append(int64(i - k))
						}
					}
					sb := fb.FieldBuilder(1).(*array.StructBuilder)
					if i%5 == 2 {
						sb.AppendNull()
						sb.FieldBuilder(0).AppendNull()
					} else {
						sb.Append(true)
						sb.FieldBuilder(0).(*array.Float64Builder).Append(float64(i) / 3)
					}
				case "sv":
					eb := fb.FieldBuilder(0).(*array.FixedSizeListBuilder)
					if i%3 == 1 {
						eb.AppendNull()
						continue
					}
					eb.Append(true)
					for m := 0; m < 8; m++ {
						eb.ValueBuilder().(*array.Float32Builder).Append(float32(i) - float32(m))
					}
				case "ps":
					fb.FieldBuilder(0).(*array.Int32Builder).Append(int32(i * 3))
					fb.FieldBuilder(1).(*array.Float64Builder).Append(float64(i) * 1.5)
				}
			case *array.StringBuilder:
				fb.Append(strings.Repeat(fmt.Sprint("w", i%50, " "), 1+i%5))
			case *array.Int64Builder:
				fb.Append(int64(i % 1000))
			case *array.Float64Builder:
				fb.Append(100 + float64(i%100)/8)
			default:
				t.Fatalf("vectorsAndNesting: no case for %T", fb)
			}
		}
	}
	return b.NewRecordBatch()
}

func TestReadLanceDBVectorsAndNesting(t *testing.T) {
	o := oracle.Need(t)
	for _, n := range []int{7, 21_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			if n > 1000 && testing.Short() {
				t.Skip("large file skipped in -short mode")
			}
			rec := vectorsAndNesting(t, n)
			defer rec.Release()
			dir, files := lanceWrite(t, o, rec)
			want := o.Read(t, dir, oracle.ReadOpts{})
			defer want.Release()
			got := readAll(t, files, nil)
			defer got.Release()
			requireEqual(t, want, got)
			checkRangesAndTake(t, openFile(t, files[0]), want)
			if keep := os.Getenv("MVQ_LANCE_KEEP"); keep != "" {
				b, _ := os.ReadFile(files[0])
				os.WriteFile(filepath.Join(keep, fmt.Sprintf("vec%d.lance", n)), b, 0o644)
			}
		})
	}
}

// checkRangesAndTake reads row ranges, projections and takes from r and
// compares them with the matching rows of want (LanceDB's full read).
func checkRangesAndTake(t *testing.T, r *Reader, want arrow.Table) {
	t.Helper()
	ctx := context.Background()
	n := uint64(want.NumRows())
	rng := rand.New(rand.NewPCG(5, 6))
	full := make([]arrow.Array, want.NumCols())
	for i := range full {
		full[i] = tableColumn(t, want, i)
		defer full[i].Release()
	}
	ncols := int(want.NumCols())
	check := func(what string, got arrow.RecordBatch, cols []int, expect func(a arrow.Array) arrow.Array) {
		t.Helper()
		defer got.Release()
		if int(got.NumCols()) != len(cols) {
			t.Fatalf("%s: %d columns, want %d", what, got.NumCols(), len(cols))
		}
		for k, c := range cols {
			w := expect(full[c])
			if !array.Equal(w, got.Column(k)) {
				t.Errorf("%s: column %s: %s", what, want.Schema().Field(c).Name, firstDiff(w, got.Column(k)))
			}
			w.Release()
		}
	}
	// Row ranges: page and chunk edges, single rows, the end.
	ranges := [][2]uint64{{0, 1}, {n - 1, n}, {0, n}, {1023, 1025}, {n / 3, n/3 + 4097}, {n / 2, n}}
	for k := 0; k < 6; k++ {
		s := rng.Uint64N(n)
		ranges = append(ranges, [2]uint64{s, s + rng.Uint64N(n-s) + 1})
	}
	for _, rg := range ranges {
		if rg[1] > n || rg[0] >= rg[1] {
			continue
		}
		cols := []int{rng.IntN(ncols), rng.IntN(ncols), 0}
		if rg[1]-rg[0] < 2000 {
			cols = nil
			for c := 0; c < ncols; c++ {
				cols = append(cols, c)
			}
		}
		got, err := r.Read(ctx, cols, rg[0], rg[1])
		if err != nil {
			t.Fatalf("read [%d, %d): %v", rg[0], rg[1], err)
		}
		check(fmt.Sprintf("read [%d, %d)", rg[0], rg[1]), got, cols, func(a arrow.Array) arrow.Array {
			return array.NewSlice(a, int64(rg[0]), int64(rg[1]))
		})
	}
	// Take: random rows, unsorted, with repeats.
	rows := make([]uint64, 300)
	for i := range rows {
		rows[i] = rng.Uint64N(n)
	}
	rows = append(rows, rows[7], 0, n-1)
	all := make([]int, ncols)
	for c := range all {
		all[c] = c
	}
	got, err := r.Take(ctx, all, rows)
	if err != nil {
		t.Fatalf("take: %v", err)
	}
	check("take", got, all, func(a arrow.Array) arrow.Array {
		// One slice per row, concatenated: independent of the reader's
		// own gathering.
		parts := make([]arrow.Array, len(rows))
		for i, row := range rows {
			parts[i] = array.NewSlice(a, int64(row), int64(row)+1)
		}
		out, err := array.Concatenate(parts, memory.DefaultAllocator)
		releaseAll(parts)
		if err != nil {
			t.Fatal(err)
		}
		return out
	})
}

// TestReadLanceDBDictionaryType reads an Arrow dictionary<int32, utf8>
// column (a "dict:string:int32:false" field).
func TestReadLanceDBDictionaryType(t *testing.T) {
	o := oracle.Need(t)
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "dict", Type: dt, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := 0; i < 3000; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%7 == 2 {
			b.Field(1).AppendNull()
		} else if err := b.Field(1).(*array.BinaryDictionaryBuilder).AppendString([]string{"red", "green", "blue", ""}[i%4]); err != nil {
			t.Fatal(err)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	dir, files := lanceWrite(t, o, rec)
	want := o.Read(t, dir, oracle.ReadOpts{})
	defer want.Release()
	if keep := os.Getenv("MVQ_LANCE_KEEP"); keep != "" {
		b, _ := os.ReadFile(files[0])
		os.WriteFile(filepath.Join(keep, "dict.lance"), b, 0o644)
	}
	got := readAll(t, files, nil)
	defer got.Release()
	requireEqual(t, want, got)
	checkRangesAndTake(t, openFile(t, files[0]), want)
}

// TestReadLanceDBMoreTypes covers the remaining fixed-width types:
// fixed_size_binary, time32/64, duration, float16 and decimal256.
func TestReadLanceDBMoreTypes(t *testing.T) {
	o := oracle.Need(t)
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "fsb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 5}, Nullable: true},
		{Name: "t32", Type: arrow.FixedWidthTypes.Time32ms, Nullable: true},
		{Name: "t64", Type: arrow.FixedWidthTypes.Time64us, Nullable: true},
		{Name: "dur", Type: arrow.FixedWidthTypes.Duration_ns, Nullable: true},
		{Name: "f16", Type: arrow.FixedWidthTypes.Float16, Nullable: true},
		{Name: "bigfsb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 300}, Nullable: true},
		{Name: "d256", Type: &arrow.Decimal256Type{Precision: 40, Scale: 5}, Nullable: true},
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	for i := 0; i < 2500; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		for c := 1; c < len(fields); c++ {
			if i%6 == 1 {
				b.Field(c).AppendNull()
				continue
			}
			switch fb := b.Field(c).(type) {
			case *array.FixedSizeBinaryBuilder:
				v := make([]byte, fields[c].Type.(*arrow.FixedSizeBinaryType).ByteWidth)
				for k := range v {
					v[k] = byte(i + k)
				}
				fb.Append(v)
			case *array.Time32Builder:
				fb.Append(arrow.Time32(i * 1000))
			case *array.Time64Builder:
				fb.Append(arrow.Time64(int64(i) * 1_000_000))
			case *array.DurationBuilder:
				fb.Append(arrow.Duration(int64(i) * 7))
			case *array.Float16Builder:
				fb.Append(float16.New(float32(i) / 8))
			case *array.Decimal256Builder:
				fb.Append(decimal256.FromI64(int64(i)*12345 - 77))
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	dir, files := lanceWrite(t, o, rec)
	want := o.Read(t, dir, oracle.ReadOpts{})
	defer want.Release()
	got := readAll(t, files, nil)
	defer got.Release()
	requireEqual(t, want, got)
	checkRangesAndTake(t, openFile(t, files[0]), want)
}

// TestReadLanceDBFullZipNested covers full-zip pages with repetition: lists
// of long strings and lists of large vectors, with null and empty lists,
// and long binary values with nulls.
func TestReadLanceDBFullZipNested(t *testing.T) {
	o := oracle.Need(t)
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "lt", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "lv", Type: arrow.ListOf(arrow.FixedSizeListOf(128, arrow.PrimitiveTypes.Float32)), Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "doc", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	rng := rand.New(rand.NewPCG(11, 12))
	long := func(i int) string {
		return strings.Repeat(fmt.Sprintf("row %d says something long enough; ", i), 8+rng.IntN(10))
	}
	for i := 0; i < 3000; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		lt := b.Field(1).(*array.ListBuilder)
		lv := b.Field(2).(*array.ListBuilder)
		switch i % 6 {
		case 1:
			lt.AppendNull()
			lv.AppendNull()
		case 2:
			lt.Append(true)
			lv.Append(true)
		default:
			lt.Append(true)
			lv.Append(true)
			for k := 0; k < 1+i%4; k++ {
				if k == 1 && i%5 == 0 {
					lt.ValueBuilder().AppendNull()
				} else {
					lt.ValueBuilder().(*array.StringBuilder).Append(long(i))
				}
				fb := lv.ValueBuilder().(*array.FixedSizeListBuilder)
				fb.Append(true)
				for m := 0; m < 128; m++ {
					fb.ValueBuilder().(*array.Float32Builder).Append(float32(i*m) / 7)
				}
			}
		}
		if i%4 == 3 {
			b.Field(3).AppendNull()
		} else {
			v := make([]byte, 200+rng.IntN(400))
			for k := range v {
				v[k] = byte(rng.Uint32())
			}
			b.Field(3).(*array.BinaryBuilder).Append(v)
		}
		sb := b.Field(4).(*array.StructBuilder)
		switch i % 7 {
		case 2:
			sb.AppendNull()
			sb.FieldBuilder(0).AppendNull()
		case 4:
			sb.Append(true)
			sb.FieldBuilder(0).AppendNull()
		default:
			sb.Append(true)
			sb.FieldBuilder(0).(*array.StringBuilder).Append(long(i))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	dir, files := lanceWrite(t, o, rec)
	want := o.Read(t, dir, oracle.ReadOpts{})
	defer want.Release()
	r := openFile(t, files[0])
	for _, l := range encodingSummary(t, r) {
		t.Log(l)
	}
	got := readAll(t, files, nil)
	defer got.Release()
	requireEqual(t, want, got)
	checkRangesAndTake(t, r, want)
}

// TestReadLanceDBNestedFixedSizeList covers fixed-size lists of fixed-size
// lists: small ones (mini-block) and large ones (full-zip), with nulls at
// the row, the inner-list and the item level, in files of both versions.
func TestReadLanceDBNestedFixedSizeList(t *testing.T) {
	o := oracle.Need(t)
	rec := nestedFSL(t, 3000)
	defer rec.Release()
	for _, version := range []string{"2.0", "2.1"} {
		t.Run(version, func(t *testing.T) { compareVersion(t, o, rec, version) })
	}
}

// nestedFSL builds n rows of nested fixed-size lists (see
// TestReadLanceDBNestedFixedSizeList).
func nestedFSL(t testing.TB, n int) arrow.RecordBatch {
	small := arrow.FixedSizeListOfField(3, arrow.Field{Name: "item", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32), Nullable: true})
	large := arrow.FixedSizeListOfField(8, arrow.Field{Name: "item", Type: arrow.FixedSizeListOf(16, arrow.PrimitiveTypes.Float32), Nullable: true})
	plain := arrow.FixedSizeListOf(2, arrow.FixedSizeListOfNonNullable(2, arrow.PrimitiveTypes.Int32))
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "small", Type: small, Nullable: true},
		{Name: "large", Type: large, Nullable: true},
		{Name: "plain", Type: plain},
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	fill := func(fb *array.FixedSizeListBuilder, outer, inner, i int, nulls bool) {
		if nulls && i%7 == 3 {
			fb.AppendNull()
			return
		}
		fb.Append(true)
		ib := fb.ValueBuilder().(*array.FixedSizeListBuilder)
		for k := 0; k < outer; k++ {
			if nulls && (i+k)%5 == 1 {
				ib.AppendNull()
				continue
			}
			ib.Append(true)
			for m := 0; m < inner; m++ {
				switch vb := ib.ValueBuilder().(type) {
				case *array.Float32Builder:
					if nulls && (i+k+m)%11 == 2 {
						vb.AppendNull()
					} else {
						vb.Append(float32(i*100+k*10+m) / 4)
					}
				case *array.Int32Builder:
					vb.Append(int32(i*100 + k*10 + m))
				}
			}
		}
	}
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		fill(b.Field(1).(*array.FixedSizeListBuilder), 3, 4, i, true)
		fill(b.Field(2).(*array.FixedSizeListBuilder), 8, 16, i, true)
		fill(b.Field(3).(*array.FixedSizeListBuilder), 2, 2, i, false)
	}
	return b.NewRecordBatch()
}

// TestReadLanceDBBlob covers the blob layout (large_binary fields with
// lance-encoding:blob): the values live outside the page, which holds
// (position, size) descriptions. LanceDB's toArrow() returns those
// descriptions; this reader returns the bytes they point at, so the test
// resolves LanceDB's descriptions against the file and compares.
func TestReadLanceDBBlob(t *testing.T) {
	o := oracle.Need(t)
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "blob", Type: arrow.BinaryTypes.LargeBinary, Nullable: true, Metadata: arrow.NewMetadata([]string{"lance-encoding:blob"}, []string{"true"})},
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	const n = 600
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		switch i % 5 {
		case 1:
			b.Field(1).AppendNull()
		case 2:
			b.Field(1).(*array.BinaryBuilder).Append([]byte{})
		default:
			v := make([]byte, 1000+i*37)
			for k := range v {
				v[k] = byte(i*7 + k)
			}
			b.Field(1).(*array.BinaryBuilder).Append(v)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	for _, version := range []string{"2.0", "2.1"} {
		t.Run(version, func(t *testing.T) { readBlob(t, o, rec, version) })
	}
}

func readBlob(t *testing.T, o *oracle.Oracle, rec arrow.RecordBatch, version string) {
	n := int(rec.NumRows())
	dir := filepath.Join(t.TempDir(), "t.lance")
	o.Write(t, dir, rec, version, "create")
	files, _ := filepath.Glob(filepath.Join(dir, "data", "*.lance"))
	if len(files) != 1 {
		t.Fatalf("%d data files, want 1", len(files))
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	want := o.Read(t, dir, oracle.ReadOpts{})
	defer want.Release()
	if int(want.NumRows()) != n || want.Column(1).Len() != n {
		t.Fatalf("LanceDB read %d rows", want.NumRows())
	}
	descs, ok := want.Column(1).Data().Chunk(0).(*array.Struct)
	if !ok || want.Column(1).Data().Len() != descs.Len() {
		t.Fatalf("LanceDB returned the blob column as %v, want one chunk of descriptions", want.Column(1).DataType())
	}
	r := openFile(t, files[0])
	check := func(got arrow.Array, rows []int) {
		t.Helper()
		gb, ok := got.(*array.LargeBinary)
		if !ok {
			t.Fatalf("blob column read as %v, want large_binary", got.DataType())
		}
		for i, row := range rows {
			if rec.Column(1).IsNull(row) {
				// LanceDB describes a null as a null (2.1) or as (1, 0) (2.0).
				if !gb.IsNull(i) {
					t.Fatalf("row %d: written as null, got %d bytes", row, len(gb.Value(i)))
				}
				if descs.IsValid(row) && descs.Field(1).(*array.Uint64).Value(row) != 0 {
					t.Fatalf("row %d: written as null, LanceDB describes %d bytes", row, descs.Field(1).(*array.Uint64).Value(row))
				}
				continue
			}
			if descs.IsNull(row) {
				t.Fatalf("row %d: LanceDB has null for a value written", row)
			}
			pos := descs.Field(0).(*array.Uint64).Value(row)
			size := descs.Field(1).(*array.Uint64).Value(row)
			if pos+size > uint64(len(raw)) {
				t.Fatalf("row %d: LanceDB's description [%d, +%d) is outside the %d-byte file", row, pos, size, len(raw))
			}
			if gb.IsNull(i) || !bytes.Equal(gb.Value(i), raw[pos:pos+size]) {
				t.Fatalf("row %d: got %d bytes (null %v), LanceDB points at %d bytes", row, len(gb.Value(i)), gb.IsNull(i), size)
			}
			if !bytes.Equal(gb.Value(i), rec.Column(1).(*array.LargeBinary).Value(row)) {
				t.Fatalf("row %d: the value differs from the one written", row)
			}
		}
	}
	all, err := r.Read(context.Background(), nil, 0, r.NumRows())
	if err != nil {
		t.Fatal(err)
	}
	defer all.Release()
	rows := make([]int, n)
	for i := range rows {
		rows[i] = i
	}
	check(all.Column(1), rows)
	part, err := r.Read(context.Background(), []int{1}, 123, 457)
	if err != nil {
		t.Fatal(err)
	}
	defer part.Release()
	check(part.Column(0), rows[123:457])
	take := []int{599, 1, 2, 300, 3, 3}
	take64 := make([]uint64, len(take))
	for i, v := range take {
		take64[i] = uint64(v)
	}
	got, err := r.Take(context.Background(), []int{1}, take64)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	check(got.Column(0), take)
}

// TestReadLanceDBPackedStruct covers packed structs (lance-encoding:packed)
// at the top level and inside a struct, in files of both versions. A
// fixed-size list inside a packed struct is 2.0 only: LanceDB refuses it in
// 2.1 ("variable packed struct encoding requires Lance file version 2.2").
func TestReadLanceDBPackedStruct(t *testing.T) {
	o := oracle.Need(t)
	for _, version := range []string{"2.0", "2.1"} {
		t.Run(version, func(t *testing.T) { readPackedStruct(t, o, version, version == "2.0") })
	}
}

func readPackedStruct(t *testing.T, o *oracle.Oracle, version string, withList bool) {
	packed := arrow.NewMetadata([]string{"lance-encoding:packed"}, []string{"true"})
	pf := []arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int32},
		{Name: "b", Type: arrow.PrimitiveTypes.Float64},
	}
	if withList {
		pf = append(pf, arrow.Field{Name: "v", Type: arrow.FixedSizeListOfNonNullable(3, arrow.PrimitiveTypes.Float32)})
	}
	pt := arrow.StructOf(pf...)
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "p", Type: pt, Metadata: packed},
		{Name: "outer", Type: arrow.StructOf(
			arrow.Field{Name: "x", Type: arrow.BinaryTypes.String},
			arrow.Field{Name: "q", Type: pt, Metadata: packed},
		)},
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	fillPacked := func(sb *array.StructBuilder, i int) {
		sb.Append(true)
		sb.FieldBuilder(0).(*array.Int32Builder).Append(int32(i * 3))
		sb.FieldBuilder(1).(*array.Float64Builder).Append(float64(i) / 3)
		if !withList {
			return
		}
		vb := sb.FieldBuilder(2).(*array.FixedSizeListBuilder)
		vb.Append(true)
		for k := 0; k < 3; k++ {
			vb.ValueBuilder().(*array.Float32Builder).Append(float32(i + k))
		}
	}
	for i := 0; i < 4000; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		fillPacked(b.Field(1).(*array.StructBuilder), i)
		ob := b.Field(2).(*array.StructBuilder)
		ob.Append(true)
		ob.FieldBuilder(0).(*array.StringBuilder).Append(fmt.Sprintf("x%d", i))
		fillPacked(ob.FieldBuilder(1).(*array.StructBuilder), i*7)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	compareVersion(t, o, rec, version)
}

// compareVersion has LanceDB write rec as a one-file dataset of the given
// storage version and checks that this package reads it (whole, in
// ranges and by take) as LanceDB does.
func compareVersion(t *testing.T, o *oracle.Oracle, rec arrow.RecordBatch, version string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "t.lance")
	o.Write(t, dir, rec, version, "create")
	files, err := filepath.Glob(filepath.Join(dir, "data", "*.lance"))
	if err != nil || len(files) != 1 {
		t.Fatalf("data files %v: %v", files, err)
	}
	want := o.Read(t, dir, oracle.ReadOpts{})
	defer want.Release()
	r := openFile(t, files[0])
	if got := r.Version().String(); got != version {
		t.Fatalf("LanceDB wrote a %s file, want %s", got, version)
	}
	if version == "2.1" {
		for _, l := range encodingSummary(t, r) {
			t.Log(l)
		}
	}
	got := readAll(t, files, nil)
	defer got.Release()
	requireEqual(t, want, got)
	checkRangesAndTake(t, r, want)
}
