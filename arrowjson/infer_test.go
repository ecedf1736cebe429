package arrowjson

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func TestInferRows(t *testing.T) {
	i64 := arrow.PrimitiveTypes.Int64
	f64 := arrow.PrimitiveTypes.Float64
	str := arrow.BinaryTypes.String
	listOf := func(dt arrow.DataType) arrow.DataType {
		return arrow.ListOfField(arrow.Field{Name: "item", Type: dt, Nullable: true})
	}
	tests := []struct {
		name   string
		in     string
		schema *arrow.Schema
		want   string // "" means same as in
	}{
		{"empty", `[]`, sch(), ""},
		{"empty rows", `[{},{}]`, sch(), ""},
		{"scalars", `[{"a":1,"b":"x","c":true,"d":1.5},{"a":2,"e":null}]`,
			sch(nf("a", i64), nf("b", str), nf("c", arrow.FixedWidthTypes.Boolean), nf("d", f64), nf("e", str)),
			`[{"a":1,"b":"x","c":true,"d":1.5,"e":null},{"a":2,"b":null,"c":null,"d":null,"e":null}]`},
		{"order of first appearance", `[{"z":1},{"a":1,"z":2},{"m":1,"a":2}]`, sch(nf("z", i64), nf("a", i64), nf("m", i64)),
			`[{"z":1,"a":null,"m":null},{"z":2,"a":1,"m":null},{"z":null,"a":2,"m":1}]`},
		{"int then float", `[{"a":1},{"a":2.5},{"a":null}]`, sch(nf("a", f64)), ""},
		{"float then int", `[{"a":2.5},{"a":1}]`, sch(nf("a", f64)), ""},
		{"exponent is float", `[{"a":1},{"a":1e3}]`, sch(nf("a", f64)), `[{"a":1},{"a":1000}]`},
		{"big integer with an exponent is float", `[{"a":1},{"a":1.8446744073709552e19}]`, sch(nf("a", f64)), `[{"a":1},{"a":18446744073709552000}]`},
		{"negative ints", `[{"a":-9223372036854775808}]`, sch(nf("a", i64)), ""},
		{"all null", `[{"a":null},{"a":null}]`, sch(nf("a", str)), ""},
		{"list", `[{"l":[1,2]},{"l":[]},{"l":null},{"l":[null,3.5]}]`, sch(nf("l", listOf(f64))), `[{"l":[1,2]},{"l":[]},{"l":null},{"l":[null,3.5]}]`},
		{"list of nulls", `[{"l":[null]},{"l":[]}]`, sch(nf("l", listOf(str))), ""},
		{"list of lists", `[{"l":[[1],[],null]},{"l":[[2,3]]}]`, sch(nf("l", listOf(listOf(i64)))), ""},
		{"struct", `[{"m":{"x":1}},{"m":{"y":"a","x":2}},{"m":null},{}]`,
			sch(nf("m", arrow.StructOf(nf("x", i64), nf("y", str)))),
			`[{"m":{"x":1,"y":null}},{"m":{"x":2,"y":"a"}},{"m":null},{"m":null}]`},
		{"empty struct", `[{"m":{}}]`, sch(nf("m", arrow.StructOf())), ""},
		{"list of structs", `[{"l":[{"k":"a"},{"v":[true]}]}]`,
			sch(nf("l", listOf(arrow.StructOf(nf("k", str), nf("v", listOf(arrow.FixedWidthTypes.Boolean)))))),
			`[{"l":[{"k":"a","v":null},{"k":null,"v":[true]}]}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedMem(t)
			rec, err := InferRows(strings.NewReader(tc.in), mem)
			if err != nil {
				t.Fatalf("InferRows: %v", err)
			}
			defer rec.Release()
			if !rec.Schema().Equal(tc.schema) {
				t.Errorf("schema:\n got %s\nwant %s", rec.Schema(), tc.schema)
			}
			want := tc.want
			if want == "" {
				want = tc.in
			}
			if got := toJSON(t, rec); got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

func TestInferRowsRowCount(t *testing.T) {
	mem := checkedMem(t)
	rec, err := InferRows(strings.NewReader(`[{},{},{}]`), mem)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if rec.NumRows() != 3 || rec.NumCols() != 0 {
		t.Errorf("got %dx%d", rec.NumRows(), rec.NumCols())
	}
}

func TestInferRowsErrors(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		row   int
		field string
		msg   string
	}{
		{"string then number", `[{"a":"x"},{"a":1}]`, 1, "a", "conflicting types in column: earlier values are string, got number 1"},
		{"number then string", `[{"a":1},{"b":2},{"a":"x"}]`, 2, "a", `earlier values are number, got string "x"`},
		{"bool then number", `[{"a":true},{"a":0}]`, 1, "a", "got number 0"},
		{"array then object", `[{"a":[1]},{"a":{"b":1}}]`, 1, "a", "earlier values are array, got object"},
		{"object then scalar", `[{"a":{}},{"a":"s"}]`, 1, "a", "earlier values are object"},
		{"in list", `[{"m":{"t":[1,"x"]}}]`, 0, "m.t[1]", `earlier values are number, got string "x"`},
		{"in struct across rows", `[{"m":{"t":1}},{"m":{"u":2}},{"m":{"t":[]}}]`, 2, "m.t", "got array"},
		{"not an array", `{"a":1}`, -1, "", "expected a JSON array of row objects"},
		{"empty body", ``, -1, "", "empty body"},
		{"element not object", `[{"a":1},"x"]`, 1, "", `expected a JSON object, got string "x"`},
		{"invalid JSON", `[{"a":1},{"a" 1}]`, 1, "", "invalid JSON"},
		{"duplicate key", `[{"a":1,"a":1}]`, 0, "a", "duplicate key"},
		{"float overflow", `[{"a":1.5},{"a":1e400}]`, 1, "a", "out of range"},
		{"integer beyond int64", `[{"a":1},{"a":18446744073709551615}]`, 1, "a", "does not fit int64"},
		{"integer beyond int64 in a float column", `[{"a":1.5},{"b":[{"c":-9223372036854775809}]}]`, 1, "b[0].c", "does not fit int64"},
		{"too deep", `[{"a":` + strings.Repeat("[", 32) + strings.Repeat("]", 32) + `}]`, 0, "a" + strings.Repeat("[0]", 31), "nesting deeper than 32"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedMem(t)
			rec, err := InferRows(strings.NewReader(tc.in), mem)
			if rec != nil {
				rec.Release()
			}
			wantRowError(t, err, tc.row, tc.field, tc.msg)
		})
	}
}

func TestInferRowsDepthLimit(t *testing.T) {
	mem := checkedMem(t)
	in := `[{"a":` + strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1) + `}]`
	rec, err := InferRows(strings.NewReader(in), mem)
	if err != nil {
		t.Fatalf("%d levels: %v", MaxDepth, err)
	}
	rec.Release()
}
