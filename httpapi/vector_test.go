package httpapi_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/httpapi"
)

// vectorBody is an Arrow stream of rows (id, emb fixed_size_list<float32>[3])
// with emb = (id, 0, 0); id 2 has a null vector.
func vectorBody(t *testing.T, n int) []byte {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "emb", Type: arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Float32), Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	fb := b.Field(1).(*array.FixedSizeListBuilder)
	vb := fb.ValueBuilder().(*array.Float32Builder)
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i == 2 {
			fb.AppendNull()
			continue
		}
		fb.Append(true)
		vb.AppendValues([]float32{float32(i), 0, 0}, nil)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return buf.Bytes()
}

func TestVectorQuery(t *testing.T) {
	c := setup(t, httpapi.Config{})
	c.do("POST", "/v1/namespace/docs/create", "application/json", []byte(`{}`))
	if st, b := c.do("POST", "/v1/table/docs$vec/create", "application/vnd.apache.arrow.stream", vectorBody(t, 20)); st != 200 {
		t.Fatalf("create %d %s", st, b)
	}
	st, raw := c.do("POST", "/v1/table/docs$vec/query", "application/json",
		[]byte(`{"vector": {"single_vector": [7.2, 0, 0]}, "k": 3, "columns": {"column_names": ["id"]}}`), "Accept", "application/json")
	if st != 200 {
		t.Fatalf("%d %s", st, raw)
	}
	var rows []map[string]any
	if err := json.Unmarshal(raw, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0]["id"] != 7.0 || rows[1]["id"] != 8.0 || rows[2]["id"] != 6.0 {
		t.Fatalf("nearest to 7.2: %s", raw)
	}
	// A filter, dot distance, offset.
	st, raw = c.do("POST", "/v1/table/docs$vec/query", "application/json",
		[]byte(`{"vector": [1, 0, 0], "k": 2, "offset": 1, "distance_type": "dot", "filter": "id < 10", "vector_column": "emb"}`), "Accept", "application/json")
	if st != 200 || !strings.Contains(string(raw), `"id":8`) || strings.Contains(string(raw), `"id":9`) {
		t.Fatalf("filtered %d %s", st, raw)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"vector": [1, 2]}`, "dimensions"},
		{`{"vector": [1, 2, 3], "vector_column": "id"}`, "not a vector column"},
		{`{"vector": [1, 2, 3], "distance_type": "manhattan"}`, "distance_type"},
		{`{"vector": ["a", 2, 3]}`, "vector"},
		{`{"vector": {"multi_vector": [[1, 2, 3]]}}`, "multi_vector"},
		{`{"distance_type": "l2"}`, "only with a vector"},
	} {
		st, b := c.do("POST", "/v1/table/docs$vec/query", "application/json", []byte(tc.body))
		if st != 400 || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %d %s", tc.body, st, b)
		}
	}
}
