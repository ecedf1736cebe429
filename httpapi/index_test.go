package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/httpapi"
)

// vecBody is an Arrow IPC stream of n rows (id int64, body utf8, emb
// fixed_size_list<float32>[dim]); row i's body is words of i.
func vecBody(t *testing.T, from, n, dim int) []byte {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "body", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "emb", Type: arrow.FixedSizeListOf(int32(dim), arrow.PrimitiveTypes.Float32), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	words := []string{"red", "green", "blue", "cyan", "magenta", "yellow", "black"}
	fb := b.Field(2).(*array.FixedSizeListBuilder)
	vb := fb.ValueBuilder().(*array.Float32Builder)
	for i := from; i < from+n; i++ {
		r := rand.New(rand.NewPCG(1, uint64(i)))
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(words[i%7] + " " + words[(i/7)%7] + " " + words[i%3])
		fb.Append(true)
		for range dim {
			vb.Append(r.Float32())
		}
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

// queryRows runs a query with JSON rows out.
func queryRows(t *testing.T, c interface {
	do(string, string, string, []byte, ...string) (int, []byte)
}, id string, body string) (int, []map[string]any, string) {
	t.Helper()
	st, out := c.do("POST", "/v1/table/"+id+"/query", "application/json", []byte(body), "Accept", "application/json")
	var rows []map[string]any
	_ = json.Unmarshal(out, &rows)
	return st, rows, string(out)
}

// specIndexes drives the index operations for the conformance test
// (every request and response validated against the spec).
func specIndexes(t *testing.T, sc *specClient) {
	const arrowStream = "application/vnd.apache.arrow.stream"
	st, out := sc.send("POST", "/v1/table/docs$vec/create", arrowStream, vecBody(t, 0, 40, 4), checkBoth)
	sc.expect("vector table create", st, string(out), 200)

	st, m := sc.j("/v1/table/docs$vec/create_scalar_index", map[string]any{"column": "id", "index_type": "BTREE"})
	sc.expect("create_scalar_index BTREE", st, m, 200)
	st, m = sc.j("/v1/table/docs$vec/create_scalar_index", map[string]any{"column": "body", "index_type": "INVERTED", "name": "body_fts", "lower_case": true})
	sc.expect("create_scalar_index INVERTED", st, m, 200)
	st, m = sc.j("/v1/table/docs$vec/create_scalar_index", map[string]any{"column": "nope", "index_type": "BTREE"})
	sc.expect("create_scalar_index missing column", st, m, 404)
	st, m = sc.j("/v1/table/docs$vec/create_scalar_index", map[string]any{"column": "emb", "index_type": "IVF_FLAT"})
	sc.expect("create_scalar_index of a vector type", st, m, 400)
	st, m = sc.j("/v1/table/docs$nope/create_scalar_index", map[string]any{"column": "id", "index_type": "BTREE"})
	sc.expect("create_scalar_index missing table", st, m, 404)
	st, m = sc.j("/v1/table/docs$vec/create_index", map[string]any{"column": "emb", "index_type": "IVF_FLAT", "distance_type": "l2", "num_partitions": 4})
	sc.expect("create_index IVF_FLAT", st, m, 200)
	st, m = sc.j("/v1/table/docs$vec/create_index", map[string]any{"column": "emb", "index_type": "IVF_PQ", "num_sub_vectors": 3})
	sc.expect("create_index IVF_PQ num_sub_vectors not dividing the dimension", st, m, 400)
	st, m = sc.j("/v1/table/docs$vec/create_index", map[string]any{"column": "emb", "index_type": "IVF_HNSW_SQ"})
	sc.expect("create_index IVF_HNSW_SQ", st, m, 400)
	st, m = sc.j("/v1/table/docs$vec/create_index", map[string]any{"column": "id", "index_type": "BITMAP", "name": "../x"})
	sc.expect("create_index bad name", st, m, 400)
	st, m = sc.j("/v1/table/docs$nope/create_index", map[string]any{"column": "emb", "index_type": "IVF_FLAT"})
	sc.expect("create_index missing table", st, m, 404)

	st, m = sc.j("/v1/table/docs$vec/index/list", map[string]any{"limit": 2})
	if st != 200 || len(m["indexes"].([]any)) != 2 || m["page_token"] != "emb_idx" {
		t.Fatalf("index list: %d %v", st, m)
	}
	st, m = sc.j("/v1/table/docs$vec/index/list", map[string]any{"page_token": "emb_idx"})
	if st != 200 || len(m["indexes"].([]any)) != 1 || m["indexes"].([]any)[0].(map[string]any)["index_name"] != "id_idx" {
		t.Fatalf("index list page 2: %d %v", st, m)
	}
	st, m = sc.j("/v1/table/docs$nope/index/list", map[string]any{})
	sc.expect("index list missing table", st, m, 404)
	st, m = sc.j("/v1/table/docs$vec/index/list", map[string]any{"version": 99})
	sc.expect("index list missing version", st, m, 404)
	st, m = sc.j("/v1/table/docs$vec/index/emb_idx/stats", map[string]any{})
	if st != 200 || m["num_indexed_rows"] != 40.0 || m["num_unindexed_rows"] != 0.0 || m["distance_type"] != "l2" || m["index_type"] != "IVF_FLAT" {
		t.Fatalf("index stats: %d %v", st, m)
	}
	st, m = sc.j("/v1/table/docs$vec/index/nope/stats", map[string]any{})
	sc.expect("index stats missing index", st, m, 404)

	// The query uses them: a filter on id, a vector search with nprobes
	// and refine_factor, a full-text query.
	st, out = sc.send("POST", "/v1/table/docs$vec/query", "application/json", []byte(`{"k": 5, "vector": {}, "filter": "id IN (3, 4, 30)"}`), checkBoth)
	sc.expect("filtered query", st, string(out), 200)
	st, out = sc.send("POST", "/v1/table/docs$vec/query", "application/json", []byte(`{"k": 3, "vector": {"single_vector": [0.1, 0.2, 0.3, 0.4]}, "nprobes": 2, "refine_factor": 2}`), checkBoth)
	sc.expect("vector query with nprobes", st, string(out), 200)
	st, out = sc.send("POST", "/v1/table/docs$vec/query", "application/json", []byte(`{"k": 3, "vector": {"single_vector": [0.1, 0.2, 0.3, 0.4]}, "nprobes": -1}`), checkResponse)
	sc.expect("vector query bad nprobes", st, string(out), 400)
	st, out = sc.send("POST", "/v1/table/docs$vec/query", "application/json", []byte(`{"k": 3, "vector": {}, "full_text_query": {"string_query": {"query": "red blue"}}}`), checkBoth)
	sc.expect("full-text query", st, string(out), 200)
	st, out = sc.send("POST", "/v1/table/docs$vec/query", "application/json", []byte(`{"k": 3, "vector": {}, "full_text_query": {"structured_query": {"query": {"phrase": {"terms": "red blue"}}}}}`), checkBoth)
	sc.expect("full-text phrase query", st, string(out), 200)
	st, out = sc.send("POST", "/v1/table/docs$vec/query", "application/json", []byte(`{"k": 3, "vector": {}, "full_text_query": {"structured_query": {"query": {"boolean": {"must": [{"match": {"terms": "red"}}], "should": [{"phrase": {"terms": "red blue", "slop": 1}}], "must_not": [{"boost": {"positive": {"match": {"terms": "x"}}, "negative": {"multi_match": {"match_queries": [{"terms": "y"}]}}}}]}}}}}`), checkBoth)
	sc.expect("full-text boolean query", st, string(out), 200)
	st, out = sc.send("POST", "/v1/table/docs$vec/query", "application/json", []byte(`{"k": 3, "vector": {}, "full_text_query": {"structured_query": {"query": {"phrase": {"terms": "red", "slop": -1}}}}}`), checkResponse)
	sc.expect("full-text phrase negative slop", st, string(out), 400)

	st, out = sc.send("POST", "/v1/table/docs$vec/index/body_fts/drop", "", nil, checkBoth)
	sc.expect("index drop", st, string(out), 200)
	st, out = sc.send("POST", "/v1/table/docs$vec/index/body_fts/drop", "", nil, checkBoth)
	sc.expect("index drop again", st, string(out), 404)
	st, out = sc.send("POST", "/v1/table/docs$nope/index/x/drop", "", nil, checkBoth)
	sc.expect("index drop missing table", st, string(out), 404)
}

// TestIndexesOverHTTP: the index operations' semantics through the API:
// create replaces, list/stats follow appends (the insert's commit extends
// the index), filtered queries answer the same with the index as without,
// vector search finds the exact nearest with enough probes, bypass and
// postfilter, full-text results rank by BM25, and bad requests are 4xx
// naming the field.
func TestIndexesOverHTTP(t *testing.T) {
	t.Parallel()
	c := setup(t, httpapi.Config{})
	st, m := c.post("/v1/namespace/docs/create", map[string]any{})
	c.want(st, m, 200, "")
	const arrowStream = "application/vnd.apache.arrow.stream"
	if st, out := c.do("POST", "/v1/table/docs$v/create", arrowStream, vecBody(t, 0, 60, 8)); st != 200 {
		t.Fatalf("create: %d %s", st, out)
	}
	filter := `{"filter": "id >= 10 AND id < 14 OR body = 'red red red'", "k": 100, "vector": {}}`
	_, before, _ := queryRows(t, c, "docs$v", filter)
	for _, body := range []string{
		`{"column": "id", "index_type": "BTREE"}`,
		`{"column": "body", "index_type": "BITMAP"}`,
		`{"column": "body", "index_type": "FTS", "name": "fts"}`,
		`{"column": "emb", "index_type": "IVF_FLAT", "num_partitions": 3, "distance_type": "cosine"}`,
	} {
		st, m := c.post("/v1/table/docs$v/create_index", body)
		c.want(st, m, 200, "")
	}
	_, after, _ := queryRows(t, c, "docs$v", filter)
	if fmt.Sprint(before) != fmt.Sprint(after) || len(after) != 5 {
		t.Fatalf("filtered query: %d rows before the indexes, %d after", len(before), len(after))
	}
	// Appends are covered by the insert's commit.
	if st, out := c.do("POST", "/v1/table/docs$v/insert", arrowStream, vecBody(t, 60, 20, 8)); st != 200 {
		t.Fatalf("insert: %d %s", st, out)
	}
	st, m = c.post("/v1/table/docs$v/index/id_idx/stats", map[string]any{})
	if st != 200 || m["num_indexed_rows"] != 80.0 || m["num_unindexed_rows"] != 0.0 || m["num_indices"] != 1.0 {
		t.Fatalf("stats after insert: %d %v", st, m)
	}
	st, m = c.post("/v1/table/docs$v/index/id_idx/stats", map[string]any{"version": 1})
	if st != 200 || m["num_indexed_rows"] != 60.0 {
		t.Fatalf("stats of version 1: %d %v", st, m)
	}
	// Replace: same name, new uuid.
	st, m = c.post("/v1/table/docs$v/index/list", map[string]any{})
	c.want(st, m, 200, "")
	uuidOf := func(m map[string]any, name string) string {
		for _, x := range m["indexes"].([]any) {
			if x.(map[string]any)["index_name"] == name {
				return x.(map[string]any)["index_uuid"].(string)
			}
		}
		return ""
	}
	first := uuidOf(m, "id_idx")
	st, m = c.post("/v1/table/docs$v/create_scalar_index", map[string]any{"column": "id", "index_type": "BITMAP"})
	c.want(st, m, 200, "")
	_, m = c.post("/v1/table/docs$v/index/list", map[string]any{})
	if u := uuidOf(m, "id_idx"); u == "" || u == first || len(m["indexes"].([]any)) != 4 {
		t.Fatalf("after replace: %v", m)
	}

	// Vector search: with every partition probed the answer is exact;
	// bypass gives the exact answer too.
	q := `{"k": 5, "vector": [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], "distance_type": "cosine", "columns": {"column_names": ["id"]}`
	_, exact, _ := queryRows(t, c, "docs$v", q+`, "bypass_vector_index": true}`)
	_, all, _ := queryRows(t, c, "docs$v", q+`, "nprobes": 3}`)
	if len(exact) != 5 || fmt.Sprint(exact) != fmt.Sprint(all) {
		t.Fatalf("nprobes = partitions: %v, exact %v", all, exact)
	}
	st, one, raw := queryRows(t, c, "docs$v", q+`, "nprobes": 1, "refine_factor": 3}`)
	if st != 200 || len(one) == 0 {
		t.Fatalf("nprobes 1: %d %s", st, raw)
	}
	_, post, _ := queryRows(t, c, "docs$v", q+`, "filter": "id % 2 = 0", "prefilter": false}`)
	var want []map[string]any
	_, ten, _ := queryRows(t, c, "docs$v", q+`}`)
	for _, r := range ten {
		if int(r["id"].(float64))%2 == 0 {
			want = append(want, r)
		}
	}
	if fmt.Sprint(post) != fmt.Sprint(want) {
		t.Fatalf("postfilter: %v, want the even rows of %v", post, ten)
	}

	// Full text: "magenta" is in rows i%7 == 4 or (i/7)%7 == 4.
	st, rows, raw := queryRows(t, c, "docs$v", `{"k": 100, "vector": {}, "full_text_query": {"string_query": {"query": "Magenta", "columns": ["body"]}}, "columns": {"column_names": ["id", "body"]}}`)
	if st != 200 || len(rows) == 0 {
		t.Fatalf("fts: %d %s", st, raw)
	}
	last := 1e9
	for _, r := range rows {
		if !strings.Contains(r["body"].(string), "magenta") || r["_score"].(float64) > last {
			t.Fatalf("fts rows out of order or not matching: %s", raw)
		}
		last = r["_score"].(float64)
	}
	st, rows, raw = queryRows(t, c, "docs$v", `{"k": 100, "vector": {}, "full_text_query": {"structured_query": {"query": {"match": {"terms": "magenta red", "column": "body", "operator": "And"}}}}}`)
	if st != 200 || len(rows) == 0 {
		t.Fatalf("fts and: %d %s", st, raw)
	}
	for _, r := range rows {
		if b := r["body"].(string); !strings.Contains(b, "magenta") || !strings.Contains(b, "red") {
			t.Fatalf("AND match answered %q", b)
		}
	}

	for _, bad := range []struct {
		path, body string
		status     int
		field      string
	}{
		{"create_index", `{"column": "id"}`, 400, "index_type"},
		{"create_index", `{"column": "id", "index_type": "BTREE", "num_partitions": 4}`, 400, "num_partitions"},
		{"create_index", `{"column": "emb", "index_type": "IVF_FLAT", "num_partitions": 0}`, 400, "num_partitions"},
		{"create_index", `{"column": "emb", "index_type": "IVF_FLAT", "distance_type": "hamming"}`, 400, "distance_type"},
		{"create_index", `{"column": "emb", "index_type": "IVF_PQ", "num_bits": 9}`, 400, "num_bits"},
		{"create_index", `{"column": "emb", "index_type": "IVF_FLAT", "num_sub_vectors": 2}`, 400, "num_sub_vectors"},
		{"create_index", `{"column": "body", "index_type": "INVERTED", "stem": true}`, 400, "stem"},
		{"create_index", `{"column": "id", "index_type": "BTREE", "stem": false}`, 400, "stem"},
		{"create_index", `{"column": "id", "index_type": "BTREE", "colour": 1}`, 400, "colour"},
		{"create_index", `{"column": "emb", "index_type": "BTREE"}`, 400, "column"},
		{"create_index", `{"column": "id", "index_type": "BTREE", "branch": "dev"}`, 404, "branch"},
		{"create_index", `{"column": "id", "index_type": "BTREE", "branch": "a/b"}`, 400, "branch"},
		{"index/list", `{"limit": -1}`, 400, "limit"},
		{"index/id_idx/stats", `{"index_name": "other"}`, 400, "index_name"},
		{"query", `{"vector": {}, "full_text_query": {"string_query": {"query": "x", "columns": ["id"]}}}`, 400, "id"},
		{"query", `{"vector": {}, "full_text_query": {"structured_query": {"query": {"match": {"terms": "x"}, "phrase": {"terms": "x"}}}}}`, 400, "exactly one"},
		{"query", `{"vector": {}, "full_text_query": {"structured_query": {"query": {"regex": {"terms": "x"}}}}}`, 400, "regex"},
		{"query", `{"vector": {}, "full_text_query": {"structured_query": {"query": {"boolean": {"must": []}}}}}`, 400, "should"},
		{"query", `{"vector": {}, "full_text_query": {"structured_query": {"query": {"boost": {"positive": {"match": {"terms": "x"}}}}}}}`, 400, "negative"},
		{"query", `{"vector": {}, "full_text_query": {"structured_query": {"query": {"multi_match": {"match_queries": []}}}}}`, 400, "match_queries"},
		{"query", `{"vector": {}, "full_text_query": {"structured_query": {"query": {"phrase": {"terms": "x", "column": "nope"}}}}}`, 404, "nope"},
		{"query", `{"vector": {}, "full_text_query": {"string_query": {}}}`, 400, "query"},
		{"query", `{"vector": [1,1,1,1,1,1,1,1], "full_text_query": {"string_query": {"query": "x"}}}`, 400, "hybrid"},
		{"query", `{"vector": {}, "full_text_query": {"structured_query": {"query": {"match": {"terms": "x", "fuzziness": 2}}}}}`, 400, "fuzzy"},
		{"query", `{"vector": [1,1,1,1,1,1,1,1], "refine_factor": -2}`, 400, "refine_factor"},
	} {
		st, m := c.post("/v1/table/docs$v/"+bad.path, bad.body)
		c.want(st, m, bad.status, bad.field)
	}
	st, m = c.post("/v1/table/docs$v/index/id_idx/drop", map[string]any{})
	c.want(st, m, 200, "")
	st, m = c.post("/v1/table/docs$v/index/id_idx/stats", map[string]any{})
	c.want(st, m, 404, "id_idx")
	_, afterDrop, _ := queryRows(t, c, "docs$v", filter)
	if fmt.Sprint(afterDrop) != fmt.Sprint(before) {
		t.Fatalf("after drop: %v", afterDrop)
	}
}
