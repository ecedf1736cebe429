package arrowjson

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func TestSchemaRoundTrip(t *testing.T) {
	md := arrow.NewMetadata([]string{"k"}, []string{"v"})
	tests := []struct {
		name     string
		field    arrow.Field
		wantJSON string // JSON of the field's type; "" to skip
	}{
		{"null", nf("x", arrow.Null), `{"type":"null"}`},
		{"bool", nf("x", arrow.FixedWidthTypes.Boolean), `{"type":"bool"}`},
		{"int8", nf("x", arrow.PrimitiveTypes.Int8), `{"type":"int8"}`},
		{"int16", nf("x", arrow.PrimitiveTypes.Int16), `{"type":"int16"}`},
		{"int32", nf("x", arrow.PrimitiveTypes.Int32), `{"type":"int32"}`},
		{"int64", reqf("x", arrow.PrimitiveTypes.Int64), `{"type":"int64"}`},
		{"uint8", nf("x", arrow.PrimitiveTypes.Uint8), `{"type":"uint8"}`},
		{"uint16", nf("x", arrow.PrimitiveTypes.Uint16), `{"type":"uint16"}`},
		{"uint32", nf("x", arrow.PrimitiveTypes.Uint32), `{"type":"uint32"}`},
		{"uint64", nf("x", arrow.PrimitiveTypes.Uint64), `{"type":"uint64"}`},
		{"float16", nf("x", arrow.FixedWidthTypes.Float16), `{"type":"float16"}`},
		{"float32", nf("x", arrow.PrimitiveTypes.Float32), `{"type":"float32"}`},
		{"float64", nf("x", arrow.PrimitiveTypes.Float64), `{"type":"float64"}`},
		{"utf8", nf("x", arrow.BinaryTypes.String), `{"type":"utf8"}`},
		{"large_utf8", nf("x", arrow.BinaryTypes.LargeString), `{"type":"large_utf8"}`},
		{"binary", nf("x", arrow.BinaryTypes.Binary), `{"type":"binary"}`},
		{"large_binary", nf("x", arrow.BinaryTypes.LargeBinary), `{"type":"large_binary"}`},
		{"fixed_size_binary", nf("x", &arrow.FixedSizeBinaryType{ByteWidth: 16}), `{"type":"fixed_size_binary","length":16}`},
		{"date32", nf("x", arrow.FixedWidthTypes.Date32), `{"type":"date32"}`},
		{"date64", nf("x", arrow.FixedWidthTypes.Date64), `{"type":"date64"}`},
		{"timestamp", nf("x", arrow.FixedWidthTypes.Timestamp_us), `{"type":"timestamp"}`},
		{"list", nf("x", arrow.ListOf(arrow.PrimitiveTypes.Int32)),
			`{"type":"list","fields":[{"name":"item","type":{"type":"int32"},"nullable":true}]}`},
		{"list non-null element", nf("x", arrow.ListOfField(arrow.Field{Name: "el", Type: arrow.BinaryTypes.String, Metadata: md})),
			`{"type":"list","fields":[{"name":"el","type":{"type":"utf8"},"nullable":false,"metadata":{"k":"v"}}]}`},
		{"large_list", nf("x", arrow.LargeListOf(arrow.FixedWidthTypes.Boolean)), ""},
		{"fixed_size_list", nf("x", arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Float32)),
			`{"type":"fixed_size_list","fields":[{"name":"item","type":{"type":"float32"},"nullable":true}],"length":3}`},
		{"struct", nf("x", arrow.StructOf(reqf("a", arrow.PrimitiveTypes.Int64), nf("b", arrow.ListOf(arrow.BinaryTypes.String)))),
			`{"type":"struct","fields":[{"name":"a","type":{"type":"int64"},"nullable":false},` +
				`{"name":"b","type":{"type":"list","fields":[{"name":"item","type":{"type":"utf8"},"nullable":true}]},"nullable":true}]}`},
		{"empty struct", nf("x", arrow.StructOf()), `{"type":"struct"}`},
		{"deep", nf("x", arrow.ListOf(arrow.StructOf(nf("v", arrow.FixedSizeListOf(2, arrow.LargeListOf(arrow.PrimitiveTypes.Uint16)))))), ""},
		{"field metadata", arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true, Metadata: md}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			smd := arrow.NewMetadata([]string{"schema-key"}, []string{"schema-value"})
			in := arrow.NewSchema([]arrow.Field{tc.field, nf("after", arrow.PrimitiveTypes.Int64)}, &smd)
			js, err := FromArrow(in)
			if err != nil {
				t.Fatalf("FromArrow: %v", err)
			}
			if tc.wantJSON != "" {
				got, _ := json.Marshal(js.Fields[0].Type)
				if string(got) != tc.wantJSON {
					t.Errorf("type JSON:\n got %s\nwant %s", got, tc.wantJSON)
				}
			}
			raw, err := json.Marshal(js)
			if err != nil {
				t.Fatal(err)
			}
			var back Schema
			if err := json.Unmarshal(raw, &back); err != nil {
				t.Fatal(err)
			}
			out, err := back.ToArrow()
			if err != nil {
				t.Fatalf("ToArrow(%s): %v", raw, err)
			}
			if !out.Equal(in) {
				t.Errorf("round trip mismatch:\n got %s\nwant %s\njson %s", out, in, raw)
			}
			if !out.Metadata().Equal(in.Metadata()) {
				t.Errorf("schema metadata: got %v want %v", out.Metadata(), in.Metadata())
			}
		})
	}
}

func TestSchemaJSONShape(t *testing.T) {
	js, err := FromArrow(arrow.NewSchema(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(js)
	if string(raw) != `{"fields":[]}` {
		t.Errorf("empty schema JSON = %s", raw)
	}
	js, _ = FromArrow(sch(reqf("id", arrow.PrimitiveTypes.Int64)))
	raw, _ = json.Marshal(js)
	if want := `{"fields":[{"name":"id","type":{"type":"int64"},"nullable":false}]}`; string(raw) != want {
		t.Errorf("got %s want %s", raw, want)
	}
}

func TestFromArrowTimestampAnyUnit(t *testing.T) {
	for _, dt := range []arrow.DataType{
		arrow.FixedWidthTypes.Timestamp_ns,
		&arrow.TimestampType{Unit: arrow.Millisecond},
		&arrow.TimestampType{Unit: arrow.Second, TimeZone: "Europe/Paris"},
	} {
		js, err := FromArrow(sch(nf("ts", dt)))
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		if js.Fields[0].Type.Type != TypeTimestamp {
			t.Errorf("%s -> %q", dt, js.Fields[0].Type.Type)
		}
	}
}

func TestFromArrowUnsupported(t *testing.T) {
	tests := []struct {
		name   string
		schema *arrow.Schema
		want   string
	}{
		{"decimal", sch(nf("price", &arrow.Decimal128Type{Precision: 10, Scale: 2})), `field "price"`},
		{"map", sch(nf("m", arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64))), `field "m"`},
		{"time32", sch(nf("t", arrow.FixedWidthTypes.Time32ms)), `field "t"`},
		{"duration", sch(nf("d", arrow.FixedWidthTypes.Duration_us)), `field "d"`},
		{"dictionary", sch(nf("dict", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String})), `field "dict"`},
		{"string_view", sch(nf("sv", arrow.BinaryTypes.StringView)), `field "sv"`},
		{"nested in struct", sch(nf("s", arrow.StructOf(nf("ok", arrow.PrimitiveTypes.Int8), nf("bad", arrow.FixedWidthTypes.Time64us)))), `field "s.bad"`},
		{"nested in list", sch(nf("l", arrow.ListOf(arrow.FixedWidthTypes.MonthInterval))), `field "l.item"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromArrow(tc.schema)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want error containing %s", err, tc.want)
			}
		})
	}
	if _, err := FromArrow(nil); err == nil {
		t.Error("FromArrow(nil): no error")
	}
}

func TestToArrowAliases(t *testing.T) {
	var js Schema
	if err := json.Unmarshal([]byte(`{"fields":[
		{"name":"a","type":{"type":"Boolean"},"nullable":true},
		{"name":"b","type":{"type":"INT64"},"nullable":false},
		{"name":"c","type":{"type":"list","fields":[{"name":"","type":{"type":"utf8"},"nullable":true}]},"nullable":true}]}`), &js); err != nil {
		t.Fatal(err)
	}
	s, err := js.ToArrow()
	if err != nil {
		t.Fatal(err)
	}
	want := sch(nf("a", arrow.FixedWidthTypes.Boolean), reqf("b", arrow.PrimitiveTypes.Int64),
		nf("c", arrow.ListOfField(arrow.Field{Name: "", Type: arrow.BinaryTypes.String, Nullable: true})))
	if !s.Equal(want) {
		t.Errorf("got %s want %s", s, want)
	}
	if s.Field(0).Type.ID() != arrow.BOOL {
		t.Error("boolean alias")
	}
}

func TestToArrowErrors(t *testing.T) {
	tests := []struct {
		name string
		json string
		want []string
	}{
		{"unknown type", `{"fields":[{"name":"a","type":{"type":"decimal"},"nullable":true}]}`,
			[]string{`field "a"`, `unsupported type "decimal"`}},
		{"missing type", `{"fields":[{"name":"a","type":{},"nullable":true}]}`,
			[]string{`field "a"`, "missing type"}},
		{"list without child", `{"fields":[{"name":"l","type":{"type":"list"},"nullable":true}]}`,
			[]string{`field "l"`, "exactly one element field", "got 0"}},
		{"list with two children", `{"fields":[{"name":"l","type":{"type":"large_list","fields":[
			{"name":"a","type":{"type":"int8"},"nullable":true},{"name":"b","type":{"type":"int8"},"nullable":true}]},"nullable":true}]}`,
			[]string{`field "l"`, "got 2"}},
		{"fixed_size_list without length", `{"fields":[{"name":"v","type":{"type":"fixed_size_list","fields":[
			{"name":"item","type":{"type":"float32"},"nullable":true}]},"nullable":true}]}`,
			[]string{`field "v"`, `needs "length"`}},
		{"fixed_size_list zero length", `{"fields":[{"name":"v","type":{"type":"fixed_size_list","length":0,"fields":[
			{"name":"item","type":{"type":"float32"},"nullable":true}]},"nullable":true}]}`,
			[]string{`field "v"`, "invalid length 0"}},
		{"fixed_size_binary negative", `{"fields":[{"name":"h","type":{"type":"fixed_size_binary","length":-4},"nullable":true}]}`,
			[]string{`field "h"`, "invalid length -4"}},
		{"fixed_size_binary huge", `{"fields":[{"name":"h","type":{"type":"fixed_size_binary","length":4294967296},"nullable":true}]}`,
			[]string{`field "h"`, "invalid length"}},
		{"bad list element", `{"fields":[{"name":"l","type":{"type":"list","fields":[{"name":"item","type":{"type":"uuid"},"nullable":true}]},"nullable":true}]}`,
			[]string{`field "l.item"`, `"uuid"`}},
		{"bad struct child", `{"fields":[{"name":"s","type":{"type":"struct","fields":[
			{"name":"ok","type":{"type":"utf8"},"nullable":true},
			{"name":"inner","type":{"type":"struct","fields":[{"name":"x","type":{"type":"time64"},"nullable":true}]},"nullable":true}]},"nullable":true}]}`,
			[]string{`field "s.inner.x"`, `"time64"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var js Schema
			if err := json.Unmarshal([]byte(tc.json), &js); err != nil {
				t.Fatal(err)
			}
			_, err := js.ToArrow()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
