package arrowjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var fuzzSeeds = []string{
	`[]`,
	`[{"id":1,"score":1.5,"name":"a","tags":["x","y"],"meta":{"a":1,"b":"z"}}]`,
	`[{"id":1e3,"score":-0,"name":null,"tags":[],"meta":null},{"id":-9223372036854775808}]`,
	`[{"id":"x"}]`,
	`[{"tags":[1]}]`,
	`[{"meta":{"c":1}}]`,
	`[{"id":1,"id":2}]`,
	`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
	`[{"meta":{"a":{"b":{"c":{"d":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}}}]`,
	`{"id":1}`,
	`[{"id":1},`,
	`[1e999999999, "x", null, true]`,
	`[{"score":1e400}]`,
	`[{"name":"\ud800"}]`,
	``,
}

var fuzzSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	{Name: "meta", Type: arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
	), Nullable: true},
}, nil)

// checkRoundTrip writes rec as JSON, checks it is valid, decodes it again
// with rec's schema and checks the records are equal.
func checkRoundTrip(t *testing.T, mem memory.Allocator, rec arrow.RecordBatch) {
	var buf bytes.Buffer
	if err := WriteRecords(&buf, []arrow.RecordBatch{rec}); err != nil {
		t.Fatalf("WriteRecords: %v", err)
	}
	if !json.Valid(buf.Bytes()) {
		t.Fatalf("WriteRecords produced invalid JSON: %s", buf.Bytes())
	}
	again, err := DecodeRows(&buf, rec.Schema(), mem)
	if err != nil {
		t.Fatalf("decoding our own output: %v", err)
	}
	defer again.Release()
	if !array.RecordEqual(rec, again) {
		t.Fatalf("record changed after a JSON round trip")
	}
}

func FuzzDecodeRows(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		rec, err := DecodeRows(bytes.NewReader(data), fuzzSchema, mem)
		if err != nil {
			var re *RowError
			if !errors.As(err, &re) {
				t.Fatalf("error is not a *RowError: %v", err)
			}
			if rec != nil {
				t.Fatal("record returned with an error")
			}
			return
		}
		defer rec.Release()
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		checkRoundTrip(t, mem, rec)
	})
}

func FuzzInferRows(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`[{"a":1},{"a":2.5},{"b":[{"c":null}]},{"b":[{"c":[true]}]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		rec, err := InferRows(bytes.NewReader(data), mem)
		if err != nil {
			var re *RowError
			if !errors.As(err, &re) {
				t.Fatalf("error is not a *RowError: %v", err)
			}
			if rec != nil {
				t.Fatal("record returned with an error")
			}
			return
		}
		defer rec.Release()
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		checkRoundTrip(t, mem, rec)
	})
}
