package arrowjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// oneColumn builds a one-column record from an array built by fill.
func oneColumn(t *testing.T, mem memory.Allocator, name string, dt arrow.DataType, fill func(b array.Builder)) arrow.RecordBatch {
	t.Helper()
	s := sch(nf(name, dt))
	rb := array.NewRecordBuilder(mem, s)
	defer rb.Release()
	fill(rb.Field(0))
	return rb.NewRecordBatch()
}

func TestWriteRowsTypes(t *testing.T) {
	tests := []struct {
		name string
		dt   arrow.DataType
		fill func(b array.Builder)
		want string
	}{
		{"null", arrow.Null, func(b array.Builder) { b.AppendNulls(2) }, `[{"c":null},{"c":null}]`},
		{"bool", arrow.FixedWidthTypes.Boolean, func(b array.Builder) {
			b.(*array.BooleanBuilder).AppendValues([]bool{true, false}, nil)
			b.AppendNull()
		}, `[{"c":true},{"c":false},{"c":null}]`},
		{"int8", arrow.PrimitiveTypes.Int8, func(b array.Builder) {
			b.(*array.Int8Builder).AppendValues([]int8{-128, 127}, nil)
		}, `[{"c":-128},{"c":127}]`},
		{"int64", arrow.PrimitiveTypes.Int64, func(b array.Builder) {
			b.(*array.Int64Builder).AppendValues([]int64{math.MinInt64, math.MaxInt64, 0}, []bool{true, true, false})
		}, `[{"c":-9223372036854775808},{"c":9223372036854775807},{"c":null}]`},
		{"uint16", arrow.PrimitiveTypes.Uint16, func(b array.Builder) {
			b.(*array.Uint16Builder).AppendValues([]uint16{65535}, nil)
		}, `[{"c":65535}]`},
		{"uint32", arrow.PrimitiveTypes.Uint32, func(b array.Builder) {
			b.(*array.Uint32Builder).AppendValues([]uint32{4294967295}, nil)
		}, `[{"c":4294967295}]`},
		{"uint64", arrow.PrimitiveTypes.Uint64, func(b array.Builder) {
			b.(*array.Uint64Builder).AppendValues([]uint64{math.MaxUint64}, nil)
		}, `[{"c":18446744073709551615}]`},
		{"float64", arrow.PrimitiveTypes.Float64, func(b array.Builder) {
			b.(*array.Float64Builder).AppendValues([]float64{0.1, 1e21, 1e20, 1e-7, 1e-6, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), 123456789.125}, nil)
		}, `[{"c":0.1},{"c":1e+21},{"c":100000000000000000000},{"c":1e-7},{"c":0.000001},{"c":-0},{"c":null},{"c":null},{"c":null},{"c":123456789.125}]`},
		{"float32", arrow.PrimitiveTypes.Float32, func(b array.Builder) {
			b.(*array.Float32Builder).AppendValues([]float32{0.1, float32(math.NaN()), 3.4028235e38}, nil)
		}, `[{"c":0.1},{"c":null},{"c":3.4028235e+38}]`},
		{"float16", arrow.FixedWidthTypes.Float16, func(b array.Builder) {
			b.(*array.Float16Builder).AppendValues([]float16.Num{float16.New(1.5), float16.New(float32(math.Inf(1)))}, nil)
		}, `[{"c":1.5},{"c":null}]`},
		{"string escapes", arrow.BinaryTypes.String, func(b array.Builder) {
			b.(*array.StringBuilder).AppendValues([]string{"q\"b\\", "\n\r\t\b\f\x01\x1f", "<a>&", "\u2028\u2029", "bad\xffutf8", "héllo 😀"}, nil)
		}, `[{"c":"q\"b\\"},{"c":"\n\r\t\b\f\u0001\u001f"},{"c":"<a>&"},{"c":"\u2028\u2029"},{"c":"bad\ufffdutf8"},{"c":"héllo 😀"}]`},
		{"large string", arrow.BinaryTypes.LargeString, func(b array.Builder) {
			b.(*array.LargeStringBuilder).Append("x")
			b.AppendNull()
		}, `[{"c":"x"},{"c":null}]`},
		{"string view", arrow.BinaryTypes.StringView, func(b array.Builder) {
			b.(*array.StringViewBuilder).Append("a fairly long string that is not inlined")
		}, `[{"c":"a fairly long string that is not inlined"}]`},
		{"binary", arrow.BinaryTypes.Binary, func(b array.Builder) {
			b.(*array.BinaryBuilder).AppendValues([][]byte{{0, 1, 2, 255}, {}}, nil)
			b.AppendNull()
		}, `[{"c":"AAEC/w=="},{"c":""},{"c":null}]`},
		{"fixed size binary", &arrow.FixedSizeBinaryType{ByteWidth: 2}, func(b array.Builder) {
			b.(*array.FixedSizeBinaryBuilder).Append([]byte("hi"))
		}, `[{"c":"aGk="}]`},
		{"timestamp us", arrow.FixedWidthTypes.Timestamp_us, func(b array.Builder) {
			b.(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{0, 1704164645123456, -1}, nil)
		}, `[{"c":"1970-01-01T00:00:00Z"},{"c":"2024-01-02T03:04:05.123456Z"},{"c":"1969-12-31T23:59:59.999999Z"}]`},
		{"timestamp ms with zone", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "America/New_York"}, func(b array.Builder) {
			b.(*array.TimestampBuilder).Append(1500)
		}, `[{"c":"1970-01-01T00:00:01.5Z"}]`},
		{"date32", arrow.FixedWidthTypes.Date32, func(b array.Builder) {
			b.(*array.Date32Builder).AppendValues([]arrow.Date32{0, 19723, -1}, nil)
		}, `[{"c":"1970-01-01"},{"c":"2024-01-01"},{"c":"1969-12-31"}]`},
		{"date64", arrow.FixedWidthTypes.Date64, func(b array.Builder) {
			b.(*array.Date64Builder).Append(86400000)
		}, `[{"c":"1970-01-02"}]`},
		{"list", arrow.ListOf(arrow.PrimitiveTypes.Int32), func(b array.Builder) {
			lb := b.(*array.ListBuilder)
			vb := lb.ValueBuilder().(*array.Int32Builder)
			lb.Append(true)
			vb.AppendValues([]int32{1, 2}, nil)
			vb.AppendNull()
			lb.Append(true)
			lb.AppendNull()
		}, `[{"c":[1,2,null]},{"c":[]},{"c":null}]`},
		{"large list", arrow.LargeListOf(arrow.BinaryTypes.String), func(b array.Builder) {
			lb := b.(*array.LargeListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.StringBuilder).Append("x")
		}, `[{"c":["x"]}]`},
		{"fixed size list", arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32), func(b array.Builder) {
			lb := b.(*array.FixedSizeListBuilder)
			vb := lb.ValueBuilder().(*array.Float32Builder)
			lb.Append(true)
			vb.AppendValues([]float32{1, 2.5}, nil)
			lb.AppendNull()
			lb.Append(true)
			vb.AppendValues([]float32{3, 4}, nil)
		}, `[{"c":[1,2.5]},{"c":null},{"c":[3,4]}]`},
		{"struct", arrow.StructOf(nf("a", arrow.PrimitiveTypes.Int64), nf("b\"", arrow.ListOf(arrow.BinaryTypes.String))), func(b array.Builder) {
			sb := b.(*array.StructBuilder)
			ab := sb.FieldBuilder(0).(*array.Int64Builder)
			lb := sb.FieldBuilder(1).(*array.ListBuilder)
			sb.Append(true)
			ab.Append(1)
			lb.Append(true)
			lb.ValueBuilder().(*array.StringBuilder).Append("t")
			sb.AppendNull()
			sb.Append(true)
			ab.AppendNull()
			lb.AppendNull()
		}, `[{"c":{"a":1,"b\"":["t"]}},{"c":null},{"c":{"a":null,"b\"":null}}]`},
		{"dictionary", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}, func(b array.Builder) {
			db := b.(*array.BinaryDictionaryBuilder)
			_ = db.AppendString("red")
			_ = db.AppendString("blue")
			_ = db.AppendString("red")
			db.AppendNull()
		}, `[{"c":"red"},{"c":"blue"},{"c":"red"},{"c":null}]`},
		{"decimal fallback", &arrow.Decimal128Type{Precision: 10, Scale: 2}, func(b array.Builder) {
			b.(*array.Decimal128Builder).Append(decimal128.FromI64(12345))
			b.AppendNull()
		}, `[{"c":"123.45"},{"c":null}]`},
		{"time fallback", arrow.FixedWidthTypes.Time32s, func(b array.Builder) {
			b.(*array.Time32Builder).Append(3661)
		}, `[{"c":"01:01:01"}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedMem(t)
			rec := oneColumn(t, mem, "c", tc.dt, tc.fill)
			defer rec.Release()
			got := toJSON(t, rec)
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("invalid JSON: %s", got)
			}
		})
	}
}

func TestWriteRowsReader(t *testing.T) {
	mem := checkedMem(t)
	s := sch(nf("id", arrow.PrimitiveTypes.Int64), nf("s", arrow.StructOf(nf("l", arrow.ListOf(arrow.PrimitiveTypes.Int64)))))
	rec, err := DecodeRows(strings.NewReader(`[{"id":1,"s":{"l":[1]}},{"id":2,"s":null},{"id":3,"s":{"l":[3,3]}},{"id":4,"s":{"l":null}}]`), s, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	// Slices exercise array offsets in lists and structs.
	a, b := rec.NewSlice(0, 1), rec.NewSlice(2, 4)
	defer a.Release()
	defer b.Release()
	empty := rec.NewSlice(1, 1)
	defer empty.Release()
	rdr, err := array.NewRecordReader(s, []arrow.RecordBatch{a, empty, b})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var buf bytes.Buffer
	if err := WriteRows(&buf, rdr); err != nil {
		t.Fatal(err)
	}
	want := `[{"id":1,"s":{"l":[1]}},{"id":3,"s":{"l":[3,3]}},{"id":4,"s":{"l":null}}]`
	if buf.String() != want {
		t.Errorf("got  %s\nwant %s", buf.String(), want)
	}

	empty2, err := array.NewRecordReader(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer empty2.Release()
	buf.Reset()
	if err := WriteRows(&buf, empty2); err != nil || buf.String() != "[]" {
		t.Errorf("empty reader: %q, %v", buf.String(), err)
	}
}

type failingWriter struct{ after int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.after <= 0 {
		return 0, errors.New("disk full")
	}
	w.after--
	return len(p), nil
}

type errReader struct {
	array.RecordReader
	err error
}

func (r errReader) Next() bool { return false }
func (r errReader) Err() error { return r.err }

func TestWriteRowsErrors(t *testing.T) {
	mem := checkedMem(t)
	s := sch(nf("s", arrow.BinaryTypes.String))
	rb := array.NewRecordBuilder(mem, s)
	defer rb.Release()
	for i := 0; i < 2000; i++ {
		rb.Field(0).(*array.StringBuilder).Append(strings.Repeat("x", 100))
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()

	// The error from the writer comes back, both mid-stream and at the end.
	if err := WriteRecords(&failingWriter{after: 1}, []arrow.RecordBatch{rec}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("mid-stream: %v", err)
	}
	if err := WriteRecords(&failingWriter{}, nil); err == nil {
		t.Error("final flush: no error")
	}

	// The reader's error comes back.
	rdr, _ := array.NewRecordReader(s, nil)
	defer rdr.Release()
	if err := WriteRows(&bytes.Buffer{}, errReader{rdr, errors.New("scan failed")}); err == nil || err.Error() != "scan failed" {
		t.Errorf("reader error: %v", err)
	}
}

// TestAppendStringMatchesEncodingJSON compares the string escaper with
// encoding/json on assorted strings (decoding both must give the same value).
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	inputs := []string{"", "plain", "\x00\x7f", "\"\\/", "<script>", "\u2028x\u2029", "\xed\xa0\x80", "a\xc3", "日本語", "\t\n", strings.Repeat("é", 50)}
	for c := 0; c < 0x80; c++ {
		inputs = append(inputs, string(rune(c)))
	}
	for _, s := range inputs {
		got := appendString(nil, s)
		if !json.Valid(got) {
			t.Errorf("%q: invalid JSON %s", s, got)
			continue
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		want := s
		if !utf8.ValidString(s) {
			want = strings.ToValidUTF8(s, "\ufffd")
			// encoding/json replaces each invalid byte; so do we.
			ref, _ := json.Marshal(s)
			_ = json.Unmarshal(ref, &want)
		}
		if back != want {
			t.Errorf("%q: decoded back as %q, want %q", s, back, want)
		}
	}
}
