package schema

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/mvq-dev/mvq/lance/pb/filepb"
)

func TestRoundTrip(t *testing.T) {
	md := arrow.NewMetadata([]string{"k"}, []string{"v"})
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "text", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "vec", Type: arrow.FixedSizeListOf(768, arrow.PrimitiveTypes.Float32), Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "ts_local", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}},
		{Name: "price", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "s", Type: arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "b", Type: arrow.ListOf(arrow.StructOf(arrow.Field{Name: "c", Type: arrow.FixedWidthTypes.Boolean}))},
		), Nullable: true},
		{Name: "d", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32, Metadata: md},
	}, &md)
	fields, err := FromArrow(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name, lt   string
		id, parent int32
	}{
		{"id", "int64", 0, -1}, {"text", "large_string", 1, -1}, {"vec", "fixed_size_list:float:768", 2, -1},
		{"ts", "timestamp:us:UTC", 3, -1}, {"ts_local", "timestamp:ns:-", 4, -1}, {"price", "decimal:128:12:2", 5, -1},
		{"tags", "list", 6, -1}, {"item", "string", 7, 6}, {"s", "struct", 8, -1}, {"a", "int32", 9, 8},
		{"b", "list.struct", 10, 8}, {"item", "struct", 11, 10}, {"c", "bool", 12, 11},
		{"d", "dict:string:int16:false", 13, -1}, {"day", "date32:day", 14, -1},
	}
	if len(fields) != len(want) {
		t.Fatalf("got %d fields, want %d", len(fields), len(want))
	}
	for i, w := range want {
		f := fields[i]
		if f.Name != w.name || f.LogicalType != w.lt || f.Id != w.id || f.ParentId != w.parent {
			t.Errorf("field %d = %s %s id %d parent %d, want %+v", i, f.Name, f.LogicalType, f.Id, f.ParentId, w)
		}
	}
	if fields[2].Encoding != filepb.Encoding_PLAIN || fields[1].Encoding != filepb.Encoding_VAR_BINARY || fields[8].Encoding != filepb.Encoding_NONE {
		t.Errorf("legacy encodings %v %v %v", fields[2].Encoding, fields[1].Encoding, fields[8].Encoding)
	}
	back, err := ToArrow(fields, map[string][]byte{"k": []byte("v")})
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(s) {
		t.Fatalf("round trip:\n%s\nwant\n%s", back, s)
	}
	if got := len(Leaves(fields)); got != 11 {
		t.Errorf("leaves = %d, want 11", got)
	}
	if MaxID(fields) != 14 {
		t.Errorf("MaxID = %d", MaxID(fields))
	}
}

func TestHostileFields(t *testing.T) {
	bad := [][]*filepb.Field{
		{{Name: "x", Id: 1, ParentId: 7, LogicalType: "int64"}},                                                         // unknown parent
		{{Name: "x", Id: 1, ParentId: -1, LogicalType: "int64"}, {Name: "y", Id: 1, ParentId: -1, LogicalType: "int8"}}, // dup id
		{{Name: "l", Id: 0, ParentId: -1, LogicalType: "list"}},                                                         // list without item
		{{Name: "x", Id: 0, ParentId: -1, LogicalType: "decimal:128:99:2"}},
		{{Name: "x", Id: 0, ParentId: -1, LogicalType: "fixed_size_list:float:-3"}},
		{{Name: "x", Id: 0, ParentId: -1, LogicalType: "timestamp:fortnight:-"}},
		{{Name: "x", Id: 0, ParentId: -1, LogicalType: "dict:string:float:false"}},
		{nil},
	}
	for i, fs := range bad {
		if _, err := ToArrow(fs, nil); err == nil {
			t.Errorf("case %d: want an error", i)
		}
	}
	// Nesting deeper than maxDepth is refused, not recursed without bound.
	var deep []*filepb.Field
	for i := int32(0); i < 200; i++ {
		deep = append(deep, &filepb.Field{Name: "s", Id: i, ParentId: i - 1, LogicalType: "struct"})
	}
	if _, err := ToArrow(deep, nil); err == nil {
		t.Error("deep nesting: want an error")
	}
}

func TestTimestampZoneWithColon(t *testing.T) {
	dt, err := ParseLogicalType("timestamp:ms:+05:30")
	if err != nil {
		t.Fatal(err)
	}
	if ts := dt.(*arrow.TimestampType); ts.TimeZone != "+05:30" || ts.Unit != arrow.Millisecond {
		t.Fatalf("got %v", dt)
	}
}
