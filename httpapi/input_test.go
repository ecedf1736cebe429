package httpapi_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/httpapi"
)

// TestBodyOverLimitIs413: whatever the content type, a body over the
// limit is a 413, on the routes that take records and on JSON routes.
func TestBodyOverLimitIs413(t *testing.T) {
	t.Parallel()
	const limit = 4096
	c := setup(t, httpapi.Config{MaxBodyBytes: limit})
	if st, out := c.do("POST", "/v1/table/t/create", "application/json", []byte(`[{"id":1}]`)); st != 200 {
		t.Fatalf("create: %d %s", st, out)
	}
	big := bytes.Repeat([]byte("x"), limit+1)
	rows := []byte(`[` + strings.Repeat(`{"id":1},`, limit/9) + `{"id":1}]`)
	for _, tc := range []struct{ path, ctype string }{
		{"/v1/table/u/create", "application/json"},
		{"/v1/table/u/create", "application/vnd.apache.arrow.stream"},
		{"/v1/table/u/create", "application/vnd.apache.arrow.file"},
		{"/v1/table/u/create", ""},
		{"/v1/table/u/create", "text/csv"},
		{"/v1/table/t/insert", "application/json"},
		{"/v1/table/t/insert", "application/vnd.apache.arrow.stream"},
		{"/v1/table/t/insert", "image/png"},
		{"/v1/table/t/query", "application/json"},
		{"/v1/namespace/n/create", "text/plain"},
	} {
		body := big
		if tc.ctype == "application/json" && strings.HasSuffix(tc.path, "/insert") {
			body = rows
		}
		st, out := c.do("POST", tc.path, tc.ctype, body)
		if st != 413 {
			t.Errorf("%s %q: %d %s", tc.path, tc.ctype, st, out)
			continue
		}
		var m map[string]any
		_ = json.Unmarshal(out, &m)
		if d, _ := m["detail"].(string); !strings.Contains(d, "larger than 4096 bytes") {
			t.Errorf("%s %q: detail %q", tc.path, tc.ctype, d)
		}
	}
}

// TestArrowFileBody: the IPC file format is accepted like the stream.
func TestArrowFileBody(t *testing.T) {
	t.Parallel()
	c := setup(t, httpapi.Config{})
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if st, out := c.do("POST", "/v1/table/f/create", "application/vnd.apache.arrow.file", buf.Bytes()); st != 200 {
		t.Fatalf("create from a file body: %d %s", st, out)
	}
	if st, out := c.do("POST", "/v1/table/f/count_rows", "application/json", nil); st != 200 || string(out) != "3" {
		t.Fatalf("count_rows: %d %s", st, out)
	}
}

// TestStrictJSONOverHTTP: unknown fields and duplicate keys are 400s that
// name them; the spec's identity and context are accepted anywhere.
func TestStrictJSONOverHTTP(t *testing.T) {
	t.Parallel()
	c := setup(t, httpapi.Config{})
	if st, out := c.do("POST", "/v1/table/t/create", "application/json", []byte(`[{"id":1},{"id":2}]`)); st != 200 {
		t.Fatalf("create: %d %s", st, out)
	}
	for _, tc := range []struct {
		path, body string
		status     int
		detail     string
	}{
		{"/v1/table/t/query", `{"fliter": "id = 1"}`, 400, `unknown field "fliter"`},
		{"/v1/table/t/query", `{"columns": {"column_name": ["id"]}}`, 400, `unknown field "column_name"`},
		{"/v1/table/t/delete", `{"predicate": "id = 1", "predicate": "id > 0"}`, 400, `duplicate key "predicate"`},
		{"/v1/namespace/a/create", `{"properties": {"k": "1", "k": "2"}}`, 400, `duplicate key "k" in properties`},
		{"/v1/namespace/a/create", `{"identity": {"api_key": "x"}, "context": {"trace": "1"}, "properties": {"k": "v"}}`, 200, ""},
		{"/v1/table/t/count_rows", `{"identity": {"auth_token": "x"}, "predicate": "id > 1"}`, 200, ""},
		{"/v1/table/t/describe", `{"identity": {"password": "x"}}`, 400, `identity: unknown field "password"`},
		{"/v1/table/t/describe", `{"context": {"n": 1}}`, 400, "context"},
	} {
		st, m := c.post(tc.path, tc.body)
		c.want(st, m, tc.status, tc.detail)
	}
}

// TestNamesOverHTTP: names too long for the warehouse, format and control
// characters are 400s; NFC and NFD spellings are one name.
func TestNamesOverHTTP(t *testing.T) {
	t.Parallel()
	c := setup(t, httpapi.Config{})
	rows := []byte(`[{"id":1}]`)
	long := strings.Repeat("n", 249)
	if st, out := c.do("POST", "/v1/table/"+long+"/create", "application/json", rows); st != 200 {
		t.Fatalf("249-byte name: %d %s", st, out)
	}
	for _, name := range []string{strings.Repeat("n", 250), strings.Repeat("n", 255), "evil\u202Etxt.exe", "zero\u200Bwidth", "tab%09name"} {
		st, out := c.do("POST", "/v1/table/"+name+"/create", "application/json", rows)
		if st != 400 {
			t.Errorf("name %q: %d %s", name, st, out)
		}
	}
	if st, out := c.do("POST", "/v1/table/caf\u00e9/create", "application/json", rows); st != 200 {
		t.Fatalf("NFC name: %d %s", st, out)
	}
	if st, out := c.do("POST", "/v1/table/cafe\u0301/create", "application/json", rows); st != 409 {
		t.Fatalf("NFD twin of an existing name: %d %s, want 409", st, out)
	}
	if st, out := c.do("POST", "/v1/table/cafe\u0301/count_rows", "application/json", nil); st != 200 || string(out) != "1" {
		t.Fatalf("NFD spelling reads the NFC table: %d %s", st, out)
	}
	st, m := c.post("/v1/table/caf\u00e9/describe", map[string]any{"id": []string{"cafe\u0301"}})
	c.want(st, m, 200, "")
}

// TestErrorsHideWarehousePaths: a store error that reaches the user names
// warehouse-relative keys, never the server's directories.
func TestErrorsHideWarehousePaths(t *testing.T) {
	t.Parallel()
	c := setup(t, httpapi.Config{})
	if st, out := c.do("POST", "/v1/table/t/create", "application/json", []byte(`[{"id":1}]`)); st != 200 {
		t.Fatalf("create: %d %s", st, out)
	}
	data, err := filepath.Glob(filepath.Join(c.dir, "t.lance", "data", "*.*"))
	if err != nil || len(data) == 0 {
		t.Fatalf("no data file: %v", err)
	}
	for _, f := range data {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	st, out := c.do("POST", "/v1/table/t/query", "application/json", []byte(`{}`), "Accept", "application/json")
	if st < 400 {
		t.Fatalf("query over a missing file: %d %s", st, out)
	}
	if strings.Contains(string(out), c.dir) {
		t.Fatalf("error body shows the warehouse path %s: %s", c.dir, out)
	}
	if !strings.Contains(string(out), "t.lance/data/") {
		t.Fatalf("error body does not name the file: %s", out)
	}
}
