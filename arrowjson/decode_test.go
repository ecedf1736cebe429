package arrowjson

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

func TestDecodeRows(t *testing.T) {
	i64 := arrow.PrimitiveTypes.Int64
	str := arrow.BinaryTypes.String
	tests := []struct {
		name   string
		schema *arrow.Schema
		in     string
		want   string // WriteRows rendering of the result
	}{
		{"empty array", sch(nf("a", i64)), `[]`, `[]`},
		{"empty array with spaces", sch(nf("a", i64)), " \n[ ]\n ", `[]`},
		{"bool", sch(nf("a", arrow.FixedWidthTypes.Boolean)), `[{"a":true},{"a":false},{"a":null},{}]`,
			`[{"a":true},{"a":false},{"a":null},{"a":null}]`},
		{"signed ints", sch(nf("a", arrow.PrimitiveTypes.Int8), nf("b", arrow.PrimitiveTypes.Int16), nf("c", arrow.PrimitiveTypes.Int32), nf("d", i64)),
			`[{"a":-128,"b":32767,"c":-2147483648,"d":9223372036854775807},{"a":127,"b":-32768,"c":2147483647,"d":-9223372036854775808}]`,
			`[{"a":-128,"b":32767,"c":-2147483648,"d":9223372036854775807},{"a":127,"b":-32768,"c":2147483647,"d":-9223372036854775808}]`},
		{"unsigned ints", sch(nf("a", arrow.PrimitiveTypes.Uint8), nf("b", arrow.PrimitiveTypes.Uint16), nf("c", arrow.PrimitiveTypes.Uint32), nf("d", arrow.PrimitiveTypes.Uint64)),
			`[{"a":255,"b":65535,"c":4294967295,"d":18446744073709551615},{"a":0,"b":-0,"c":0.0,"d":1e19}]`,
			`[{"a":255,"b":65535,"c":4294967295,"d":18446744073709551615},{"a":0,"b":0,"c":0,"d":10000000000000000000}]`},
		{"integral spellings", sch(nf("a", i64)),
			`[{"a":1e3},{"a":1.0},{"a":12.50e1},{"a":-2E+2},{"a":0e99999999999},{"a":-0.0},{"a":9.223372036854775807e18},{"a":100e-2}]`,
			`[{"a":1000},{"a":1},{"a":125},{"a":-200},{"a":0},{"a":0},{"a":9223372036854775807},{"a":1}]`},
		{"floats", sch(nf("h", arrow.FixedWidthTypes.Float16), nf("f", arrow.PrimitiveTypes.Float32), nf("d", arrow.PrimitiveTypes.Float64)),
			`[{"h":1.5,"f":0.1,"d":0.1},{"h":-65504,"f":3,"d":1e300},{"h":null,"f":1e-50,"d":1e-400}]`,
			`[{"h":1.5,"f":0.1,"d":0.1},{"h":-65504,"f":3,"d":1e+300},{"h":null,"f":0,"d":0}]`},
		{"strings", sch(nf("s", str), nf("l", arrow.BinaryTypes.LargeString)),
			`[{"s":"héllo \"q\" \n \u00e9 \ud83d\ude00","l":""},{"s":null}]`,
			`[{"s":"héllo \"q\" \n é 😀","l":""},{"s":null,"l":null}]`},
		{"binary", sch(nf("b", arrow.BinaryTypes.Binary), nf("lb", arrow.BinaryTypes.LargeBinary), nf("f", &arrow.FixedSizeBinaryType{ByteWidth: 3})),
			`[{"b":"AAEC/w==","lb":"","f":"YWJj"},{"b":null,"lb":"eA==","f":null}]`,
			`[{"b":"AAEC/w==","lb":"","f":"YWJj"},{"b":null,"lb":"eA==","f":null}]`},
		{"timestamps", sch(nf("ts", arrow.FixedWidthTypes.Timestamp_us), nf("ns", arrow.FixedWidthTypes.Timestamp_ns), nf("s", &arrow.TimestampType{Unit: arrow.Second})),
			`[{"ts":"2024-01-02T03:04:05.123456Z","ns":"2024-01-02T03:04:05.123456789+02:00","s":"1970-01-01T00:00:10Z"},` +
				`{"ts":1704164645123456,"ns":1,"s":-1},{"ts":"2024-01-02T03:04:05Z","ns":null}]`,
			`[{"ts":"2024-01-02T03:04:05.123456Z","ns":"2024-01-02T01:04:05.123456789Z","s":"1970-01-01T00:00:10Z"},` +
				`{"ts":"2024-01-02T03:04:05.123456Z","ns":"1970-01-01T00:00:00.000000001Z","s":"1969-12-31T23:59:59Z"},` +
				`{"ts":"2024-01-02T03:04:05Z","ns":null,"s":null}]`},
		{"dates", sch(nf("d", arrow.FixedWidthTypes.Date32), nf("m", arrow.FixedWidthTypes.Date64)),
			`[{"d":"2006-01-02","m":"1969-12-31"},{"d":0,"m":86400000},{"d":"1900-03-01","m":null}]`,
			`[{"d":"2006-01-02","m":"1969-12-31"},{"d":"1970-01-01","m":"1970-01-02"},{"d":"1900-03-01","m":null}]`},
		{"null type", sch(nf("n", arrow.Null), nf("a", i64)), `[{"n":null,"a":1},{"a":2}]`, `[{"n":null,"a":1},{"n":null,"a":2}]`},
		{"lists", sch(nf("l", arrow.ListOf(str)), nf("ll", arrow.LargeListOf(i64)), nf("f", arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float64))),
			`[{"l":["a",null,"c"],"ll":[],"f":[1,2.5]},{"l":[],"ll":null,"f":null},{"l":null,"ll":[1,2],"f":[0,-1]}]`,
			`[{"l":["a",null,"c"],"ll":[],"f":[1,2.5]},{"l":[],"ll":null,"f":null},{"l":null,"ll":[1,2],"f":[0,-1]}]`},
		{"list of lists", sch(nf("l", arrow.ListOf(arrow.ListOf(i64)))), `[{"l":[[1],[],null,[2,3]]}]`, `[{"l":[[1],[],null,[2,3]]}]`},
		{"struct", sch(nf("st", arrow.StructOf(nf("x", i64), nf("tags", arrow.ListOf(str)), nf("inner", arrow.StructOf(nf("y", arrow.FixedWidthTypes.Boolean)))))),
			`[{"st":{"x":1,"tags":["a"],"inner":{"y":true}}},{"st":{"inner":{}}},{"st":null},{}]`,
			`[{"st":{"x":1,"tags":["a"],"inner":{"y":true}}},{"st":{"x":null,"tags":null,"inner":{"y":null}}},{"st":null},{"st":null}]`},
		{"list of structs", sch(nf("l", arrow.ListOf(arrow.StructOf(nf("k", str), nf("v", i64))))),
			`[{"l":[{"k":"a","v":1},{"v":2},null]}]`, `[{"l":[{"k":"a","v":1},{"k":null,"v":2},null]}]`},
		{"key order does not matter", sch(nf("a", i64), nf("b", str)), `[{"b":"x","a":1}]`, `[{"a":1,"b":"x"}]`},
		{"non-nullable present", sch(reqf("id", i64), nf("s", str)), `[{"id":7}]`, `[{"id":7,"s":null}]`},
		{"no fields", sch(), `[{},{}]`, `[{},{}]`},
		{"whitespace everywhere", sch(nf("a", i64), nf("l", arrow.ListOf(i64)), nf("s", arrow.StructOf(nf("x", str)))),
			" [ \n { \"a\" : 1 ,\t\"l\" : [ 1 , 2 ] , \"s\" :{ \"x\" : \"y\" } } ,{ } ,{\"l\":[ ],\"s\":{ }} ] \r\n",
			`[{"a":1,"l":[1,2],"s":{"x":"y"}},{"a":null,"l":null,"s":null},{"a":null,"l":[],"s":{"x":null}}]`},
		{"escaped keys and strings", sch(nf("a", str), nf("b\"c", str)),
			`[{"\u0061":"\/\\\b\f\n\r\t\"","b\"c":"\u00e9"}]`,
			`[{"a":"/\\\b\f\n\r\t\"","b\"c":"é"}]`},
		{"invalid UTF-8 becomes U+FFFD", sch(nf("a", str)), "[{\"a\":\"x\xffy\"}]", "[{\"a\":\"x\ufffdy\"}]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedMem(t)
			rec, err := DecodeRows(strings.NewReader(tc.in), tc.schema, mem)
			if err != nil {
				t.Fatalf("DecodeRows: %v", err)
			}
			defer rec.Release()
			if !rec.Schema().Equal(tc.schema) {
				t.Errorf("schema %s, want %s", rec.Schema(), tc.schema)
			}
			if got := toJSON(t, rec); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestDecodeRowsNoFieldsRowCount(t *testing.T) {
	mem := checkedMem(t)
	rec, err := DecodeRows(strings.NewReader(`[{},{},{}]`), sch(), mem)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if rec.NumRows() != 3 {
		t.Errorf("NumRows = %d, want 3", rec.NumRows())
	}
}

func TestDecodeRowsErrors(t *testing.T) {
	i64 := arrow.PrimitiveTypes.Int64
	str := arrow.BinaryTypes.String
	wide := sch(
		nf("age", i64), reqf("id", i64), nf("i8", arrow.PrimitiveTypes.Int8), nf("u8", arrow.PrimitiveTypes.Uint8),
		nf("u64", arrow.PrimitiveTypes.Uint64), nf("f64", arrow.PrimitiveTypes.Float64), nf("f32", arrow.PrimitiveTypes.Float32),
		nf("f16", arrow.FixedWidthTypes.Float16), nf("b", arrow.FixedWidthTypes.Boolean), nf("s", str),
		nf("bin", arrow.BinaryTypes.Binary), nf("fsb", &arrow.FixedSizeBinaryType{ByteWidth: 2}),
		nf("ts", arrow.FixedWidthTypes.Timestamp_us), nf("tns", arrow.FixedWidthTypes.Timestamp_ns), nf("d", arrow.FixedWidthTypes.Date32),
		nf("l", arrow.ListOf(str)), nf("fsl", arrow.FixedSizeListOf(2, i64)), nf("nn", arrow.ListOfField(reqf("item", i64))),
		nf("meta", arrow.StructOf(nf("tags", arrow.ListOf(str)), reqf("must", i64))), nf("n", arrow.Null),
	)
	tests := []struct {
		name  string
		in    string
		row   int
		field string
		msg   string
	}{
		{"empty body", ``, -1, "", "empty body"},
		{"whitespace body", " \n\t", -1, "", "empty body"},
		{"object body", `{"age":1}`, -1, "", "expected a JSON array of row objects, got object"},
		{"string body", `"rows"`, -1, "", `got string "rows"`},
		{"null body", `null`, -1, "", "got null"},
		{"garbage body", `xyz`, -1, "", "invalid JSON"},
		{"element number", `[{"id":1},1]`, 1, "", "expected a JSON object, got number 1"},
		{"element array", `[[]]`, 0, "", "expected a JSON object, got array"},
		{"element null", `[{"id":1},{"id":2},null]`, 2, "", "got null"},
		{"syntax error in row", `[{"id":1},{"id":}]`, 1, "", "invalid JSON at byte offset"},
		{"missing comma", `[{"id":1} {"id":2}]`, 1, "", "invalid JSON"},
		{"truncated", `[{"id":1},{"id":2`, 1, "", "unexpected end of input"},
		{"truncated after row", `[{"id":1}`, 1, "", "unexpected end of input"},
		{"trailing data", `[{"id":1}] []`, -1, "", "unexpected data after the JSON array"},
		{"trailing garbage", `[] x`, -1, "", "invalid JSON"},
		{"unknown key", `[{"id":1},{"id":2,"agee":3}]`, 1, "agee", "not in the schema"},
		{"unknown nested key", `[{"id":1,"meta":{"must":1,"extra":2}}]`, 0, "meta.extra", "not in the schema"},
		{"duplicate key", `[{"id":1,"id":2}]`, 0, "id", "duplicate key"},
		{"missing non-nullable", `[{"id":1},{"age":2}]`, 1, "id", "missing value: field is not nullable"},
		{"null non-nullable", `[{"id":null}]`, 0, "id", "null is not allowed"},
		{"missing nested non-nullable", `[{"id":1,"meta":{}}]`, 0, "meta.must", "missing value"},
		{"null list element non-nullable", `[{"id":1,"nn":[1,null]}]`, 0, "nn[1]", "null is not allowed"},
		{"int from string", `[{"id":1},{"id":2},{"id":3},{"id":4,"age":"x"}]`, 3, "age", `expected int64, got string "x"`},
		{"int from float", `[{"id":1.5}]`, 0, "id", "expected int64, got number 1.5 (not an integer)"},
		{"int small fraction", `[{"id":1e-400}]`, 0, "id", "not an integer"},
		{"int overflow", `[{"id":9223372036854775808}]`, 0, "id", "out of range"},
		{"int huge exponent", `[{"id":1e999999999999}]`, 0, "id", "out of range"},
		{"int8 overflow", `[{"id":1,"i8":128}]`, 0, "i8", "expected int8, got number 128 (out of range)"},
		{"uint8 negative", `[{"id":1,"u8":-1}]`, 0, "u8", "out of range"},
		{"uint64 overflow", `[{"id":1,"u64":18446744073709551616}]`, 0, "u64", "out of range"},
		{"int from bool", `[{"id":true}]`, 0, "id", "got bool true"},
		{"float from string", `[{"id":1,"f64":"1.5"}]`, 0, "f64", `expected float64, got string "1.5"`},
		{"float64 overflow", `[{"id":1,"f64":1e400}]`, 0, "f64", "out of range"},
		{"float32 overflow", `[{"id":1,"f32":1e39}]`, 0, "f32", "out of range"},
		{"float64 inexact integer", `[{"id":1,"f64":9007199254740993}]`, 0, "f64", "not exactly representable"},
		{"float32 inexact integer", `[{"id":1,"f32":16777217}]`, 0, "f32", "not exactly representable"},
		{"float16 overflow", `[{"id":1,"f16":70000}]`, 0, "f16", "out of range"},
		{"bool from number", `[{"id":1,"b":1}]`, 0, "b", "expected bool, got number 1"},
		{"bool from string", `[{"id":1,"b":"true"}]`, 0, "b", `got string "true"`},
		{"utf8 from number", `[{"id":1,"s":5}]`, 0, "s", "expected utf8, got number 5"},
		{"utf8 from object", `[{"id":1,"s":{}}]`, 0, "s", "got object"},
		{"long string truncated", `[{"id":"` + strings.Repeat("x", 100) + `"}]`, 0, "id", `"` + strings.Repeat("x", 40) + `..."`},
		{"binary bad base64", `[{"id":1,"bin":"!!"}]`, 0, "bin", "illegal base64"},
		{"binary from number", `[{"id":1,"bin":1}]`, 0, "bin", "expected binary (base64 string)"},
		{"fixed binary length", `[{"id":1,"fsb":"YWJj"}]`, 0, "fsb", "got 3 bytes"},
		{"timestamp bad string", `[{"id":1,"ts":"yesterday"}]`, 0, "ts", `expected timestamp (RFC 3339 string or integer microseconds), got string "yesterday"`},
		{"timestamp no zone", `[{"id":1,"ts":"2024-01-02T03:04:05"}]`, 0, "ts", "RFC 3339"},
		{"timestamp float", `[{"id":1,"ts":1.5}]`, 0, "ts", "not an integer"},
		{"timestamp bool", `[{"id":1,"ts":true}]`, 0, "ts", "got bool true"},
		{"timestamp ns out of range", `[{"id":1,"tns":"2500-01-01T00:00:00Z"}]`, 0, "tns", "out of range"},
		{"date bad", `[{"id":1,"d":"2024-13-01"}]`, 0, "d", `expected date32 ("YYYY-MM-DD"`},
		{"date with time", `[{"id":1,"d":"2024-01-01T00:00:00Z"}]`, 0, "d", "date32"},
		{"date int overflow", `[{"id":1,"d":3000000000}]`, 0, "d", "out of range"},
		{"list from string", `[{"id":1,"l":"a"}]`, 0, "l", `expected list (array), got string "a"`},
		{"list element type", `[{"id":1,"l":["a",1]}]`, 0, "l[1]", "expected utf8, got number 1"},
		{"fixed list length", `[{"id":1,"fsl":[1,2,3]}]`, 0, "fsl", "expected fixed_size_list of length 2 (array), got array of length 3"},
		{"fixed list element", `[{"id":1,"fsl":[1,"x"]}]`, 0, "fsl[1]", "expected int64"},
		{"struct from array", `[{"id":1,"meta":[]}]`, 0, "meta", "expected struct (object), got array"},
		{"nested list element", `[{"id":1},{"id":1,"meta":{"must":1,"tags":["a","b",3]}}]`, 1, "meta.tags[2]", "expected utf8, got number 3"},
		{"null type with value", `[{"id":1,"n":0}]`, 0, "n", "expected null, got number 0"},
		{"too deep", `[{"id":1,"l":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}]`, 0,
			"l" + strings.Repeat("[0]", 31), "nesting deeper than 32 levels"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedMem(t)
			rec, err := DecodeRows(strings.NewReader(tc.in), wide, mem)
			if rec != nil {
				rec.Release()
			}
			wantRowError(t, err, tc.row, tc.field, tc.msg)
		})
	}
}

func TestRowErrorString(t *testing.T) {
	tests := []struct {
		err  RowError
		want string
	}{
		{RowError{Row: 3, Field: "age", Message: `expected int64, got string "x"`}, `row 3, field "age": expected int64, got string "x"`},
		{RowError{Row: 0, Message: "expected a JSON object, got number 1"}, `row 0: expected a JSON object, got number 1`},
		{RowError{Row: -1, Message: "empty body"}, `empty body`},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got %q want %q", got, tc.want)
		}
	}
	// The exact example from the API docs.
	mem := checkedMem(t)
	_, err := DecodeRows(strings.NewReader(`[{"age":1},{"age":2},{"age":3},{"age":"x"}]`), sch(nf("age", arrow.PrimitiveTypes.Int64)), mem)
	if err == nil || err.Error() != `row 3, field "age": expected int64, got string "x"` {
		t.Errorf("got %v", err)
	}
}

func TestDecodeRowsSchemaErrors(t *testing.T) {
	mem := checkedMem(t)
	tests := []struct {
		name   string
		schema *arrow.Schema
		want   string
	}{
		{"nil", nil, "nil schema"},
		{"decimal", sch(nf("p", &arrow.Decimal128Type{Precision: 5, Scale: 1})), `field "p"`},
		{"nested map", sch(nf("s", arrow.StructOf(nf("m", arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.String))))), `field "s.m"`},
		{"duplicate names", sch(nf("a", arrow.PrimitiveTypes.Int64), nf("a", arrow.BinaryTypes.String)), "duplicate field name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The body is never read for a bad schema.
			rec, err := DecodeRows(iotest.ErrReader(errors.New("must not read")), tc.schema, mem)
			if rec != nil {
				rec.Release()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want error containing %q", err, tc.want)
			}
			var re *RowError
			if errors.As(err, &re) {
				t.Errorf("schema error should not be a RowError: %v", err)
			}
		})
	}
}

func TestDecodeRowsReaderError(t *testing.T) {
	mem := checkedMem(t)
	r := io.MultiReader(strings.NewReader(`[{"a":1},`), iotest.ErrReader(errors.New("connection reset")))
	rec, err := DecodeRows(r, sch(nf("a", arrow.PrimitiveTypes.Int64)), mem)
	if rec != nil {
		rec.Release()
	}
	var re *RowError
	if !errors.As(err, &re) || re.Row != 1 || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("got %v", err)
	}
}

// TestDecodeRowsStreaming checks that rows are consumed as they arrive: the
// error in row 0 is reported before the rest of the body is produced.
func TestDecodeRowsStreaming(t *testing.T) {
	mem := checkedMem(t)
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = pw.Write([]byte(`[{"a":"bad"},`))
		// Blocks until the decoder reads more or the pipe is closed.
		_, _ = pw.Write([]byte(strings.Repeat(`{"a":1},`, 1000)))
		_ = pw.Close()
	}()
	rec, err := DecodeRows(pr, sch(nf("a", arrow.PrimitiveTypes.Int64)), mem)
	if rec != nil {
		rec.Release()
	}
	wantRowError(t, err, 0, "a", "expected int64")
	_ = pr.CloseWithError(errors.New("done"))
	<-done
}

func TestDecodeRowsDepthLimit(t *testing.T) {
	mem := checkedMem(t)
	// list nested n deep, holding one int64.
	deep := func(n int) (*arrow.Schema, string) {
		var dt arrow.DataType = arrow.PrimitiveTypes.Int64
		for i := 0; i < n; i++ {
			dt = arrow.ListOf(dt)
		}
		return sch(nf("v", dt)), `[{"v":` + strings.Repeat("[", n) + "1" + strings.Repeat("]", n) + `}]`
	}
	// The row object is level 1, so 31 nested arrays is the limit.
	s, in := deep(MaxDepth - 1)
	rec, err := DecodeRows(strings.NewReader(in), s, mem)
	if err != nil {
		t.Fatalf("depth %d: %v", MaxDepth, err)
	}
	rec.Release()
	s, in = deep(MaxDepth)
	_, err = DecodeRows(strings.NewReader(in), s, mem)
	wantRowError(t, err, 0, "v"+strings.Repeat("[0]", MaxDepth-1), "nesting deeper than 32")
}

func TestDecodeRowsManyKeys(t *testing.T) {
	mem := checkedMem(t)
	var fields []arrow.Field
	var row strings.Builder
	row.WriteString("{")
	for i := 0; i < 100; i++ {
		fields = append(fields, nf(fmt.Sprintf("c%d", i), arrow.PrimitiveTypes.Int64))
		if i > 0 {
			row.WriteString(",")
		}
		fmt.Fprintf(&row, `"c%d":%d`, i, i)
	}
	good := row.String() + "}"
	rec, err := DecodeRows(strings.NewReader("["+good+","+good+"]"), sch(fields...), mem)
	if err != nil {
		t.Fatal(err)
	}
	if rec.NumRows() != 2 || rec.NumCols() != 100 {
		t.Errorf("got %dx%d", rec.NumRows(), rec.NumCols())
	}
	rec.Release()
	// A duplicate key after the set switch-over (more than 16 keys).
	_, err = DecodeRows(strings.NewReader("["+row.String()+`,"c50":1}]`), sch(fields...), mem)
	wantRowError(t, err, 0, "c50", "duplicate key")
}

// TestJSONRoundTrip decodes JSON into Arrow, writes it back, and checks the
// text is unchanged and that decoding it again gives an equal record.
func TestJSONRoundTrip(t *testing.T) {
	mem := checkedMem(t)
	s := sch(
		reqf("id", arrow.PrimitiveTypes.Int64), nf("u", arrow.PrimitiveTypes.Uint64), nf("f", arrow.PrimitiveTypes.Float64),
		nf("f32", arrow.PrimitiveTypes.Float32), nf("ok", arrow.FixedWidthTypes.Boolean), nf("name", arrow.BinaryTypes.String),
		nf("blob", arrow.BinaryTypes.LargeBinary), nf("ts", arrow.FixedWidthTypes.Timestamp_us), nf("day", arrow.FixedWidthTypes.Date32),
		nf("tags", arrow.ListOf(arrow.BinaryTypes.String)), nf("vec", arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Float32)),
		nf("meta", arrow.StructOf(nf("k", arrow.BinaryTypes.String), nf("n", arrow.ListOf(arrow.StructOf(nf("x", arrow.PrimitiveTypes.Int32)))))),
	)
	in := `[{"id":1,"u":18446744073709551615,"f":0.1,"f32":1.5,"ok":true,"name":"a \"b\" <c> & \\ \u0001 é","blob":"aGk=",` +
		`"ts":"2024-05-06T07:08:09.000001Z","day":"2024-05-06","tags":["x",null],"vec":[1,2,3],"meta":{"k":"v","n":[{"x":1},null,{"x":null}]}},` +
		`{"id":-9223372036854775808,"u":null,"f":-1.5e-7,"f32":null,"ok":false,"name":"","blob":null,` +
		`"ts":null,"day":null,"tags":[],"vec":null,"meta":null},` +
		`{"id":3,"u":0,"f":1e+21,"f32":0,"ok":null,"name":null,"blob":"","ts":"1969-12-31T23:59:59.5Z","day":"1969-12-31","tags":null,"vec":[0,-0.5,1e-7],"meta":{"k":null,"n":[]}}]`
	rec, err := DecodeRows(strings.NewReader(in), s, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	out := toJSON(t, rec)
	if out != in {
		t.Fatalf("round trip changed the text:\n in  %s\n out %s", in, out)
	}
	rec2, err := DecodeRows(strings.NewReader(out), s, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer rec2.Release()
	if !array.RecordEqual(rec, rec2) {
		t.Error("records differ after a second round trip")
	}
}
