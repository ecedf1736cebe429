package file

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand"
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
	"github.com/mvq-dev/mvq/lance/schema"
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
		arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.Binary, arrow.BinaryTypes.LargeBinary,
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
		name, err := schema.LogicalType(dt)
		if err != nil {
			t.Fatal(err)
		}
		fields = append(fields,
			arrow.Field{Name: "nn_" + name, Type: dt},
			arrow.Field{Name: "some_" + name, Type: dt, Nullable: true},
			arrow.Field{Name: "all_" + name, Type: dt, Nullable: true})
		pats = append(pats, noNulls, someNulls, allNulls)
	}
	s := arrow.NewSchema(fields, nil)
	recs := []arrow.RecordBatch{makeBatch(t, s, 3000, pats, 1), makeBatch(t, s, 1234, pats, 2)}
	root := t.TempDir()
	file := writeTestDataset(t, root, "prims", recs, WriterOptions{})
	assertOracleEqual(t, root, "prims", recs)
	assertReaderEqual(t, file, recs)

	// Slices at odd offsets (validity and boolean bitmaps not byte aligned,
	// string offsets not starting at 0), over small pages.
	sliced := []arrow.RecordBatch{recs[0].NewSlice(3, 2001), recs[1].NewSlice(13, 14), recs[0].NewSlice(2001, 2999)}
	file = writeTestDataset(t, root, "sliced", sliced, WriterOptions{PageSize: 4 << 10})
	assertOracleEqual(t, root, "sliced", sliced)
	assertReaderEqual(t, file, sliced)
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
	file := writeTestDataset(t, root, "nested", recs, WriterOptions{})
	assertOracleEqual(t, root, "nested", recs)
	assertReaderEqual(t, file, recs)
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
		{Name: "url", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	var recs []arrow.RecordBatch
	for k, n := range []int{900, 333} {
		ub := array.NewStringBuilder(memory.DefaultAllocator)
		for i := 0; i < n; i++ {
			if i%13 == 5 {
				ub.AppendNull()
				continue
			}
			ub.Append(fmt.Sprintf("https://www.example.com/lance/format/%d/item?id=%d&page=%d", k, i*7919, i%17))
		}
		cols := []arrow.Array{longStrings(t, n, false, false, int64(k)), longStrings(t, n, true, false, int64(k+10)), longStrings(t, n, true, true, int64(k+20)), ub.NewArray()}
		recs = append(recs, array.NewRecordBatch(s, cols, int64(n)))
	}
	root := t.TempDir()
	file := writeTestDataset(t, root, "long", recs, WriterOptions{})
	assertOracleEqual(t, root, "long", recs)
	assertReaderEqual(t, file, recs)
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
			file := writeTestDataset(t, root, "mp", recs, WriterOptions{PageSize: ps})
			assertOracleEqual(t, root, "mp", recs)
			assertReaderEqual(t, file, recs)
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

// TestWriter21QueriesLanceDB checks LanceDB's filters and vector search
// over a Go-written file: counts for predicates on dictionary, FSST,
// bitpacked and nullable columns, and flat k-NN over 128- and 768-dim
// vectors against distances computed here.
func TestWriter21QueriesLanceDB(t *testing.T) {
	tables := benchTables(t)
	recs := tables["scalars"][:2]
	root := t.TempDir()
	writeTestDataset(t, root, "q", recs, WriterOptions{})
	o := oracle.Need(t)
	dir := filepath.Join(root, "q.lance")
	count := func(pred func(r arrow.RecordBatch, i int) bool) int64 {
		var n int64
		for _, r := range recs {
			for i := 0; i < int(r.NumRows()); i++ {
				if pred(r, i) {
					n++
				}
			}
		}
		return n
	}
	for _, c := range []struct {
		where string
		pred  func(r arrow.RecordBatch, i int) bool
	}{
		{"category = 'garden'", func(r arrow.RecordBatch, i int) bool {
			return r.Column(5).(*array.String).Value(i) == "garden"
		}},
		{"price IS NULL", func(r arrow.RecordBatch, i int) bool { return r.Column(2).IsNull(i) }},
		{"qty > 250 AND flag", func(r arrow.RecordBatch, i int) bool {
			q := r.Column(3).(*array.Int32)
			return q.IsValid(i) && q.Value(i) > 250 && r.Column(4).(*array.Boolean).Value(i)
		}},
		{"title LIKE '%lance format%'", func(r arrow.RecordBatch, i int) bool {
			s := r.Column(6).(*array.String)
			return s.IsValid(i) && strings.Contains(s.Value(i), "lance format")
		}},
		{"id >= 41000 AND id < 41010", func(r arrow.RecordBatch, i int) bool {
			v := r.Column(0).(*array.Int64).Value(i)
			return v >= 41000 && v < 41010
		}},
	} {
		want := count(c.pred)
		if want == 0 {
			t.Fatalf("%s: test data has no matches", c.where)
		}
		if got := o.Count(t, dir, c.where); got != want {
			t.Errorf("countRows(%s) = %d, want %d", c.where, got, want)
		}
		tbl := o.Read(t, dir, oracle.ReadOpts{Where: c.where, Columns: []string{"id"}})
		if tbl.NumRows() != want {
			t.Errorf("query().where(%s): %d rows, want %d", c.where, tbl.NumRows(), want)
		}
		tbl.Release()
	}

	for _, dim := range []int{128, 768} {
		rng := rand.New(rand.NewSource(int64(dim)))
		s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: vec(dim)}}, nil)
		n := 3000
		ib := array.NewInt64Builder(memory.DefaultAllocator)
		fb := array.NewFixedSizeListBuilder(memory.DefaultAllocator, int32(dim), arrow.PrimitiveTypes.Float32)
		vb := fb.ValueBuilder().(*array.Float32Builder)
		vals := make([]float32, 0, n*dim)
		for i := 0; i < n; i++ {
			ib.Append(int64(i))
			fb.Append(true)
			for k := 0; k < dim; k++ {
				x := float32(rng.NormFloat64())
				vb.Append(x)
				vals = append(vals, x)
			}
		}
		rec := array.NewRecordBatch(s, []arrow.Array{ib.NewArray(), fb.NewArray()}, int64(n))
		name := fmt.Sprintf("vec%d", dim)
		writeTestDataset(t, root, name, []arrow.RecordBatch{rec}, WriterOptions{})
		q := make([]float32, dim)
		for k := range q {
			q[k] = float32(rng.NormFloat64())
		}
		type hit struct {
			id int
			d  float64
		}
		hits := make([]hit, n)
		for i := 0; i < n; i++ {
			var d float64
			for k := 0; k < dim; k++ {
				x := float64(vals[i*dim+k] - q[k])
				d += x * x
			}
			hits[i] = hit{i, d}
		}
		sort.Slice(hits, func(a, b int) bool { return hits[a].d < hits[b].d })
		res := o.Search(t, filepath.Join(root, name+".lance"), oracle.SearchOpts{Column: "v", Vector: q, K: 10})
		ids := concatColumn(t, res, "id").(*array.Int64)
		dists := concatColumn(t, res, "_distance").(*array.Float32)
		if ids.Len() != 10 {
			t.Fatalf("dim %d: search returned %d rows", dim, ids.Len())
		}
		for k := 0; k < 10; k++ {
			if int(ids.Value(k)) != hits[k].id || math.Abs(float64(dists.Value(k))-hits[k].d) > 1e-3*hits[k].d {
				t.Errorf("dim %d: hit %d is id %d at %.4f, want id %d at %.4f", dim, k, ids.Value(k), dists.Value(k), hits[k].id, hits[k].d)
			}
		}
		res.Release()
	}
}

// TestWriter21EmptyListRunsLanceDB writes 60k empty lists around a few
// values (more levels than one mini-block chunk can count), which the
// writer splits into smaller pages, some of them all empty.
func TestWriter21EmptyListRunsLanceDB(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{
		{Name: "l", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
	}, nil)
	lb := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Int32)
	vb := lb.ValueBuilder().(*array.Int32Builder)
	for i := 0; i < 60000; i++ {
		switch {
		case i == 40000 || i == 59999:
			lb.Append(true)
			vb.Append(int32(i))
			vb.AppendNull()
		case i%1000 == 999:
			lb.AppendNull()
		default:
			lb.Append(true)
		}
	}
	rec := array.NewRecordBatch(s, []arrow.Array{lb.NewArray()}, 60000)
	root := t.TempDir()
	file := writeTestDataset(t, root, "runs", []arrow.RecordBatch{rec}, WriterOptions{})
	assertOracleEqual(t, root, "runs", []arrow.RecordBatch{rec})
	assertReaderEqual(t, file, []arrow.RecordBatch{rec})
}

// TestWriter21Refuses checks the writer's errors: nulls in a non-nullable
// field, a batch whose type changed, and writes after Close.
func TestWriter21Refuses(t *testing.T) {
	nn := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int32}}, nil)
	ib := array.NewInt32Builder(memory.DefaultAllocator)
	ib.AppendValues([]int32{1, 2}, []bool{true, false})
	nullable := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}, nil)
	withNull := array.NewRecordBatch(nullable, []arrow.Array{ib.NewArray()}, 2)

	w, err := NewWriter(io.Discard, testFields(t, nn), WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(withNull); err == nil {
		t.Error("nulls in a non-nullable field: no error")
	}
	if _, err := w.Close(); err == nil {
		t.Error("Close after a failed Write: no error")
	}

	w, err = NewWriter(io.Discard, testFields(t, nullable), WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(withNull); err != nil {
		t.Fatal(err)
	}
	i64 := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	lb := array.NewInt64Builder(memory.DefaultAllocator)
	lb.Append(3)
	if err := w.Write(array.NewRecordBatch(i64, []arrow.Array{lb.NewArray()}, 1)); err == nil {
		t.Error("type change between batches: no error")
	}

	w, err = NewWriter(io.Discard, testFields(t, i64), WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(withNull); err == nil {
		t.Error("int32 batch for an int64 field: no error")
	}
	nested := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true}}, nil)
	nestedOther := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true}}, nil)
	w, err = NewWriter(io.Discard, testFields(t, nested), WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(makeBatch(t, nestedOther, 0, []nullPattern{noNulls}, 1)); err != nil {
		t.Fatal(err) // no rows: nothing to check yet
	}
	ob := array.NewListBuilder(memory.DefaultAllocator, arrow.BinaryTypes.String)
	ob.Append(true)
	ob.ValueBuilder().(*array.StringBuilder).Append("x")
	if err := w.Write(array.NewRecordBatch(nestedOther, []arrow.Array{ob.NewArray()}, 1)); err == nil {
		t.Error("list<string> batch for a list<int32> field: no error")
	}

	w, err = NewWriter(io.Discard, testFields(t, nullable), WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(withNull); err == nil {
		t.Error("write after Close: no error")
	}
}

// TestWriter21NoRowsLanceDB writes a file with a schema and no rows.
func TestWriter21NoRowsLanceDB(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}, {Name: "v", Type: vec(8)}}, nil)
	rec := makeBatch(t, s, 0, []nullPattern{noNulls, noNulls}, 1)
	root := t.TempDir()
	file := writeTestDataset(t, root, "empty", []arrow.RecordBatch{rec}, WriterOptions{})
	r, err := Open(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	if r.NumRows() != 0 || r.Schema().NumFields() != 2 {
		t.Fatalf("Reader: %d rows, schema %s", r.NumRows(), r.Schema())
	}
	o := oracle.Need(t)
	if n := o.Count(t, filepath.Join(root, "empty.lance"), ""); n != 0 {
		t.Fatalf("LanceDB countRows = %d, want 0", n)
	}
	tbl := o.Read(t, filepath.Join(root, "empty.lance"), oracle.ReadOpts{})
	defer tbl.Release()
	if tbl.NumRows() != 0 || tbl.NumCols() != 2 {
		t.Fatalf("LanceDB read %d rows, %d columns", tbl.NumRows(), tbl.NumCols())
	}
}

// TestWriter21RunsLanceDB writes sorted and repetitive columns (run-length
// and bitpacked pages, runs longer than 255, nulls in runs) and reads them
// with LanceDB.
func TestWriter21RunsLanceDB(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{
		{Name: "grp", Type: arrow.PrimitiveTypes.Int32},
		{Name: "code", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "level", Type: arrow.PrimitiveTypes.Float64},
		{Name: "day", Type: &arrow.TimestampType{Unit: arrow.Millisecond}, Nullable: true},
		{Name: "small", Type: arrow.PrimitiveTypes.Uint16},
	}, nil)
	mk := func(n, first int) arrow.RecordBatch {
		rng := rand.New(rand.NewSource(int64(first)))
		b := array.NewRecordBuilder(memory.DefaultAllocator, s)
		defer b.Release()
		for i := first; i < first+n; i++ {
			b.Field(0).(*array.Int32Builder).Append(int32(i / 700))
			if i%5000 < 40 {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.Int8Builder).Append(int8(i / 3000 % 5))
			}
			b.Field(2).(*array.Float64Builder).Append(float64(i/100) * 0.25)
			if i%9000 > 8900 {
				b.Field(3).AppendNull()
			} else {
				b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(i/2000) * 86400000))
			}
			b.Field(4).(*array.Uint16Builder).Append(uint16(rng.Intn(100)))
		}
		return b.NewRecordBatch()
	}
	recs := []arrow.RecordBatch{mk(15000, 0), mk(12345, 15000)}
	root := t.TempDir()
	file := writeTestDataset(t, root, "runs2", recs, WriterOptions{PageSize: 64 << 10})
	assertOracleEqual(t, root, "runs2", recs)
	assertReaderEqual(t, file, recs)
	if got := oracle.Need(t).Count(t, filepath.Join(root, "runs2.lance"), "grp = 20 AND code IS NOT NULL"); got != 700 {
		t.Errorf("countRows(grp = 20 AND code IS NOT NULL) = %d, want 700", got)
	}
}

// TestWriter21BigTextLanceDB writes documents of up to 120 KiB (per-value
// zstd in full-zip pages), mixed with short, empty and null ones.
func TestWriter21BigTextLanceDB(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{{Name: "doc", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "blob", Type: arrow.BinaryTypes.LargeBinary}}, nil)
	rng := rand.New(rand.NewSource(9))
	words := []string{"lance ", "columnar ", "format ", "vector ", "search ", "page ", "zstd ", "fragment "}
	db := array.NewStringBuilder(memory.DefaultAllocator)
	bb := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.LargeBinary)
	n := 60
	for i := 0; i < n; i++ {
		var sb strings.Builder
		size := 40000 + rng.Intn(80000)
		switch i % 6 {
		case 1:
			size = 10
		case 2:
			size = 0
		}
		for sb.Len() < size {
			sb.WriteString(words[rng.Intn(len(words))])
		}
		if i%6 == 3 {
			db.AppendNull()
		} else {
			db.Append(sb.String())
		}
		bb.Append([]byte(sb.String()))
	}
	rec := array.NewRecordBatch(s, []arrow.Array{db.NewArray(), bb.NewArray()}, int64(n))
	root := t.TempDir()
	file := writeTestDataset(t, root, "big", []arrow.RecordBatch{rec}, WriterOptions{})
	if raw := rec.Column(1).(*array.LargeBinary).ValueOffsets()[n]; int64(len(file))*2 > raw {
		t.Errorf("file of %d bytes for %d bytes of repetitive text: not compressed", len(file), raw)
	}
	assertOracleEqual(t, root, "big", []arrow.RecordBatch{rec})
	assertReaderEqual(t, file, []arrow.RecordBatch{rec})
}

// TestWriter21VectorItemNullsLanceDB writes vectors with null items (and
// null vectors) in mini-block (8 dims) and full-zip (128 dims) pages.
func TestWriter21VectorItemNullsLanceDB(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{
		{Name: "v8", Type: vec(8), Nullable: true},
		{Name: "v128", Type: vec(128)},
	}, nil)
	rng := rand.New(rand.NewSource(8))
	n := 3000
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	for i := 0; i < n; i++ {
		for c, d := range []int{8, 128} {
			fb := b.Field(c).(*array.FixedSizeListBuilder)
			if c == 0 && i%10 == 4 {
				fb.AppendNull()
				continue
			}
			fb.Append(true)
			vb := fb.ValueBuilder().(*array.Float32Builder)
			for k := 0; k < d; k++ {
				if (i+k)%13 == 0 {
					vb.AppendNull()
				} else {
					vb.Append(rng.Float32())
				}
			}
		}
	}
	rec := b.NewRecordBatch()
	root := t.TempDir()
	file := writeTestDataset(t, root, "vnull", []arrow.RecordBatch{rec}, WriterOptions{})
	assertOracleEqual(t, root, "vnull", []arrow.RecordBatch{rec})
	assertReaderEqual(t, file, []arrow.RecordBatch{rec})
}

// TestWriter21LanceDBRewrites lets LanceDB update, delete from and append
// to a Go-written dataset (it reads our pages to rewrite them) and checks
// the rows it ends with.
func TestWriter21LanceDBRewrites(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "tags", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
		{Name: "v", Type: vec(16)},
	}, nil)
	rec := nestedBatch(t, s, 5000, 11)
	ids := array.NewInt64Builder(memory.DefaultAllocator)
	for i := 0; i < 5000; i++ {
		ids.Append(int64(i))
	}
	cols := rec.Columns()
	cols[0] = ids.NewArray()
	rec = array.NewRecordBatch(s, cols, 5000)
	root := t.TempDir()
	writeTestDataset(t, root, "rw", []arrow.RecordBatch{rec}, WriterOptions{})
	o := oracle.Need(t)
	dir := filepath.Join(root, "rw.lance")
	o.Delete(t, dir, "id < 1000")
	o.Update(t, dir, "id >= 4000", map[string]string{"name": "'renamed'"})
	o.Write(t, dir, rec.NewSlice(0, 10), "2.1", "append")
	if n := o.Count(t, dir, ""); n != 4010 {
		t.Fatalf("countRows = %d, want 4010", n)
	}
	if n := o.Count(t, dir, "name = 'renamed'"); n != 1000 {
		t.Fatalf("renamed rows = %d, want 1000", n)
	}
	got := o.Read(t, dir, oracle.ReadOpts{Where: "id >= 1000 AND id < 4000"})
	defer got.Release()
	want := rec.NewSlice(1000, 4000)
	for i, f := range s.Fields() {
		act := concatColumn(t, got, f.Name)
		if !array.Equal(want.Column(i), act) {
			t.Errorf("%s after LanceDB's rewrite: %s", f.Name, firstDiff21w(want.Column(i), act))
		}
	}
}

// TestWriter21AllNullNestedLanceDB writes nested columns with nothing
// valid inside: null structs, null lists, lists of nulls, empty lists, and
// a column of the null type.
func TestWriter21AllNullNestedLanceDB(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}, arrow.Field{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
		{Name: "nulllists", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "listofnulls", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "empties", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32)},
		{Name: "v", Type: vec(32), Nullable: true},
		{Name: "nothing", Type: arrow.Null, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	n := 2500
	for i := 0; i < n; i++ {
		if i%3 == 0 {
			b.Field(0).(*array.StructBuilder).Append(true)
			b.Field(0).(*array.StructBuilder).FieldBuilder(0).AppendNull()
			b.Field(0).(*array.StructBuilder).FieldBuilder(1).AppendNull()
		} else {
			b.Field(0).AppendNull()
		}
		b.Field(1).AppendNull()
		lb := b.Field(2).(*array.ListBuilder)
		if i%4 == 0 {
			lb.AppendNull()
		} else {
			lb.Append(true)
			for k := 0; k < i%3; k++ {
				lb.ValueBuilder().AppendNull()
			}
		}
		b.Field(3).(*array.ListBuilder).Append(true)
		b.Field(4).AppendNull()
		b.Field(5).AppendNull()
	}
	rec := b.NewRecordBatch()
	root := t.TempDir()
	file := writeTestDataset(t, root, "allnull", []arrow.RecordBatch{rec}, WriterOptions{})
	assertOracleEqual(t, root, "allnull", []arrow.RecordBatch{rec})
	assertReaderEqual(t, file, []arrow.RecordBatch{rec})
}
