package httpapi_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/table"
)

type client struct {
	t   *testing.T
	url string
	dir string
}

func setup(t *testing.T, cfg httpapi.Config) *client {
	t.Helper()
	dir := t.TempDir()
	wh, err := table.OpenWarehouse(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	db, err := duck.Open(duck.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	cat := table.NewCatalog(wh, db, table.Options{MaxRowsPerFragment: 4, Indexes: index.Maintenance()})
	srv := httptest.NewServer(httpapi.New(cfg, cat, nil).Handler())
	t.Cleanup(func() { srv.Close(); db.Close(); wh.Close() })
	return &client{t: t, url: srv.URL, dir: dir}
}

// do sends a request and returns status and body.
func (c *client) do(method, path, ctype string, body []byte, hdr ...string) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 500 {
		c.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if resp.StatusCode >= 400 && resp.Header.Get("Content-Type") != "application/json" {
		c.t.Fatalf("%s %s: error without problem body: %s", method, path, resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, b
}

func (c *client) post(path string, body any, hdr ...string) (int, map[string]any) {
	c.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case string:
		raw = []byte(b)
	default:
		raw, _ = json.Marshal(b)
	}
	st, out := c.do(http.MethodPost, path, "application/json", raw, hdr...)
	var m map[string]any
	_ = json.Unmarshal(out, &m)
	return st, m
}

func (c *client) want(st int, m map[string]any, wantStatus int, wantInDetail string) {
	c.t.Helper()
	if st != wantStatus {
		c.t.Fatalf("status %d, want %d: %v", st, wantStatus, m)
	}
	if wantInDetail != "" {
		d, _ := m["detail"].(string)
		if !strings.Contains(d, wantInDetail) {
			c.t.Fatalf("detail %q does not mention %q", d, wantInDetail)
		}
		if m["type"] == nil || m["code"] == nil || m["title"] == nil || m["instance"] == nil {
			c.t.Fatalf("problem body incomplete: %v", m)
		}
	}
}

func arrowBody(t *testing.T, ids []int64, names []string) []byte {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
	b.Field(1).(*array.StringBuilder).AppendValues(names, nil)
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

func TestTableLifecycleOverHTTP(t *testing.T) {
	t.Parallel()
	c := setup(t, httpapi.Config{})
	st, m := c.post("/v1/namespace/docs/create", map[string]any{"properties": map[string]string{"team": "search"}})
	c.want(st, m, 200, "")
	st, m = c.post("/v1/namespace/docs/create", map[string]any{})
	c.want(st, m, 409, "already exists")
	st, m = c.post("/v1/namespace/docs/create", map[string]any{"id": []string{"other"}})
	c.want(st, m, 400, "id")

	// Create from Arrow IPC, insert JSON rows.
	st, body := c.do("POST", "/v1/table/docs$articles/create", "application/vnd.apache.arrow.stream", arrowBody(t, []int64{1, 2, 3}, []string{"a", "b", "c"}))
	if st != 200 || !strings.Contains(string(body), `"version":1`) {
		t.Fatalf("create: %d %s", st, body)
	}
	st, m = c.post("/v1/table/docs$articles/insert", `[{"id": 4, "name": "d"}, {"id": 5}]`)
	c.want(st, m, 200, "")
	if m["version"] != 2.0 || m["num_inserted_rows"] != 2.0 {
		t.Fatalf("insert: %v", m)
	}
	st, m = c.post("/v1/table/docs$articles/insert", `[{"id": 6}, {"id": "seven"}]`)
	c.want(st, m, 400, `row 1, field "id"`)
	st, m = c.post("/v1/table/docs$articles/insert", `[{"id": 6, "extra": 1}]`)
	c.want(st, m, 400, "extra")

	st, m = c.post("/v1/table/docs$articles/describe", map[string]any{})
	c.want(st, m, 200, "")
	if m["version"] != 2.0 {
		t.Fatalf("describe: %v", m)
	}
	if md, ok := m["metadata"].(map[string]any); !ok || len(md) != 0 {
		t.Fatalf("describe: metadata must be an empty object, got %#v", m["metadata"])
	}
	if u, _ := m["properties"].(map[string]any)["mvq.uuid"].(string); len(u) != 36 {
		t.Fatalf("describe: no table identity in properties: %v", m["properties"])
	}
	fields := m["schema"].(map[string]any)["fields"].([]any)
	if f := fields[0].(map[string]any); f["name"] != "id" || f["type"].(map[string]any)["type"] != "int64" {
		t.Fatalf("schema field 0: %v", f)
	}

	st, raw := c.do("POST", "/v1/table/docs$articles/count_rows", "application/json", []byte(`{"predicate": "id > 2"}`))
	if st != 200 || string(raw) != "3" {
		t.Fatalf("count_rows: %d %s", st, raw)
	}

	// Query: JSON with Accept, Arrow IPC file by default.
	st, raw = c.do("POST", "/v1/table/docs$articles/query", "application/json", []byte(`{"filter": "id >= 2", "k": 2, "columns": {"column_names": ["name", "id"]}}`), "Accept", "application/json")
	if st != 200 || string(raw) != `[{"name":"b","id":2},{"name":"c","id":3}]` {
		t.Fatalf("query json: %d %s", st, raw)
	}
	st, raw = c.do("POST", "/v1/table/docs$articles/query", "application/json", []byte(`{"k": 10}`))
	if st != 200 {
		t.Fatalf("query arrow: %d", st)
	}
	fr, err := ipc.NewFileReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for i := 0; i < fr.NumRecords(); i++ {
		r, _ := fr.Record(i)
		n += r.NumRows()
	}
	if n != 5 {
		t.Fatalf("arrow query rows = %d", n)
	}

	// Update, delete, restore.
	st, m = c.post("/v1/table/docs$articles/update", map[string]any{"predicate": "id = 5", "updates": [][]string{{"name", "'five'"}}})
	c.want(st, m, 200, "")
	if m["updated_rows"] != 1.0 || m["version"] != 3.0 {
		t.Fatalf("update: %v", m)
	}
	st, m = c.post("/v1/table/docs$articles/update", map[string]any{"predicate": "id = 99", "updates": [][]string{{"name", "'x'"}}})
	if st != 200 || m["updated_rows"] != 0.0 || m["version"] != 3.0 {
		t.Fatalf("no-op update: %d %v", st, m)
	}
	st, m = c.post("/v1/table/docs$articles/update", map[string]any{"updates": [][]string{{"nope", "1"}}})
	c.want(st, m, 404, "nope")
	if m["code"] != 12.0 {
		t.Fatalf("unknown column code: %v", m["code"])
	}
	st, m = c.post("/v1/table/docs$articles/update", map[string]any{"updates": [][]string{{"id", "'abc'"}}})
	c.want(st, m, 400, "")
	st, m = c.post("/v1/table/docs$articles/delete", map[string]any{"predicate": "id <= 2"})
	c.want(st, m, 200, "")
	st, m = c.post("/v1/table/docs$articles/delete", map[string]any{"predicate": "id > 0) UNION SELECT * FROM read_csv('/etc/passwd') --"})
	c.want(st, m, 400, "predicate")
	st, raw = c.do("POST", "/v1/table/docs$articles/count_rows", "application/json", nil)
	if st != 200 || string(raw) != "3" {
		t.Fatalf("count after delete: %d %s", st, raw)
	}

	// Versions: list, describe, create from a staged manifest.
	st, m = c.post("/v1/table/docs$articles/version/list?descending=true&limit=2", map[string]any{})
	c.want(st, m, 200, "")
	vs := m["versions"].([]any)
	if len(vs) != 2 || vs[0].(map[string]any)["version"] != 4.0 || m["page_token"] != "3" {
		t.Fatalf("version list: %v", m)
	}
	st, m = c.post("/v1/table/docs$articles/version/list?descending=true&limit=2&page_token=3", map[string]any{})
	if vs := m["versions"].([]any); st != 200 || len(vs) != 2 || vs[0].(map[string]any)["version"] != 2.0 {
		t.Fatalf("version list page 2: %v", m)
	}
	st, m = c.post("/v1/table/docs$articles/restore", map[string]any{"version": 1})
	c.want(st, m, 200, "")
	st, raw = c.do("POST", "/v1/table/docs$articles/count_rows", "application/json", nil)
	if string(raw) != "3" {
		t.Fatalf("restored count %s", raw)
	}

	st, m = c.post("/v1/table/docs$articles/stats", map[string]any{})
	c.want(st, m, 200, "")
	if m["num_rows"] != 3.0 {
		t.Fatalf("stats: %v", m)
	}
	st, m = c.post("/v1/table/docs$articles/drop", map[string]any{})
	c.want(st, m, 200, "")
	st, m = c.post("/v1/table/docs$articles/describe", map[string]any{})
	c.want(st, m, 404, "not found")
}

func TestVersionCreate(t *testing.T) {
	t.Parallel()
	c := setup(t, httpapi.Config{})
	st, _ := c.do("POST", "/v1/table/t/create", "application/json", []byte(`[{"id": 1}]`))
	if st != 200 {
		t.Fatalf("create %d", st)
	}
	// Stage version 2 the way a client would: a copy of v1's manifest
	// carrying version 2, written inside the table folder.
	st, m := c.post("/v1/table/t/version/describe", map[string]any{"version": 1})
	c.want(st, m, 200, "")
	v1path := m["version"].(map[string]any)["manifest_path"].(string)
	man := manifestJSON(t, manifestFile(c.dir+"/t.lance", v1path))
	man["version"] = 2
	staged, _ := json.Marshal(man)
	writeFile(t, c.dir+"/t.lance/staging/v2.manifest", staged)
	man["version"] = 4
	gap, _ := json.Marshal(man)
	writeFile(t, c.dir+"/t.lance/staging/v4.manifest", gap)

	// The client's expectations of the staged file are checked, not
	// ignored: a wrong size is a 400, a stale ETag a 409, nothing created.
	st, m = c.post("/v1/table/t/version/create", map[string]any{"version": 2, "manifest_path": "staging/v2.manifest", "manifest_size": len(staged) + 1})
	c.want(st, m, 400, "manifest_size")
	st, m = c.post("/v1/table/t/version/create", map[string]any{"version": 2, "manifest_path": "staging/v2.manifest", "e_tag": `"0123456789abcdef0123456789abcdef"`})
	c.want(st, m, 409, "e_tag")
	sum := md5.Sum(staged)
	st, m = c.post("/v1/table/t/version/create", map[string]any{"version": 2, "manifest_path": "staging/v2.manifest", "naming_scheme": "V1", "metadata": map[string]string{"by": "test"},
		"manifest_size": len(staged), "e_tag": `"` + hex.EncodeToString(sum[:]) + `"`})
	c.want(st, m, 200, "")
	v := m["version"].(map[string]any)
	if v["version"] != 2.0 || !strings.HasSuffix(v["manifest_path"].(string), "t.lance/_versions/2.manifest") || v["e_tag"] == "" || v["manifest_size"].(float64) <= 0 {
		t.Fatalf("version create: %v", m)
	}
	st, m = c.post("/v1/table/t/version/create", map[string]any{"version": 2, "manifest_path": "staging/v2.manifest"})
	c.want(st, m, 409, "already exists")
	// An existing version is a 409 even when the staged manifest is gone
	// or the request lacks it (a retried commit learns it landed).
	st, m = c.post("/v1/table/t/version/create", map[string]any{"version": 2, "manifest_path": "staging/cleaned-up.manifest"})
	c.want(st, m, 409, "already exists")
	st, m = c.post("/v1/table/t/version/create", map[string]any{"version": 1})
	c.want(st, m, 409, "already exists")
	st, m = c.post("/v1/table/t/version/create", map[string]any{"version": 4, "manifest_path": "staging/v4.manifest"})
	c.want(st, m, 400, "gap")
	st, m = c.post("/v1/table/t/version/create", map[string]any{"version": 3, "manifest_path": "../../etc/passwd"})
	c.want(st, m, 400, "manifest_path")
	// The V1-named version is read like any other, and the next commit
	// (V2 naming) follows it.
	st, m = c.post("/v1/table/t/insert", `[{"id": 2}]`)
	if st != 200 || m["version"] != 3.0 {
		t.Fatalf("insert after V1 version: %d %v", st, m)
	}
	// Files are checked for the fragments the latest version does not
	// have as they are: one of its fragments pointed at another (missing)
	// file, or a new fragment whose file is missing, is a 400.
	st, m = c.post("/v1/table/t/version/describe", map[string]any{"version": 3})
	c.want(st, m, 200, "")
	for i, edit := range []func(man map[string]any){
		func(man map[string]any) { man["fragments"].([]any)[0].(map[string]any)["path"] = "data/moved.lance" },
		func(man map[string]any) {
			man["fragments"] = append(man["fragments"].([]any), map[string]any{"id": 99, "path": "data/gone.lance", "rows": 1, "bytes": 100})
			man["next_fragment_id"] = 100
		},
	} {
		man := manifestJSON(t, manifestFile(c.dir+"/t.lance", m["version"].(map[string]any)["manifest_path"].(string)))
		man["version"] = 4
		edit(man)
		b, _ := json.Marshal(man)
		writeFile(t, fmt.Sprintf("%s/t.lance/staging/bad%d.manifest", c.dir, i), b)
		st, res := c.post("/v1/table/t/version/create", map[string]any{"version": 4, "manifest_path": fmt.Sprintf("staging/bad%d.manifest", i)})
		c.want(st, res, 400, "does not exist")
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	c := setup(t, httpapi.Config{MaxBodyBytes: 1024})
	c.do("POST", "/v1/table/t/create", "application/json", []byte(`[{"id": 1, "name": "x"}]`))
	for _, tc := range []struct {
		path, body string
		status     int
		detail     string
	}{
		{"/v1/namespace/a/create", `{`, 400, "malformed JSON"},
		{"/v1/namespace/a/create", `{"mode": 3}`, 400, "mode"},
		{"/v1/namespace/a/create", `[]`, 400, ""},
		{"/v1/namespace/a$$b/create", `{}`, 400, "identifier"},
		{"/v1/table/t/query", `{"k": -1}`, 400, "k"},
		{"/v1/table/t/query", `{"offset": 99999999999999999999}`, 400, "offset"},
		{"/v1/table/t/query", `{"filter": "id >"}`, 400, "filter"},
		{"/v1/table/t/query", `{"columns": {"column_names": ["nope"]}}`, 404, "nope"},
		{"/v1/table/t/count_rows", `{"version": 99}`, 404, "version"},
		{"/v1/table/t/count_rows", `{"predicate": "id IN (SELECT * FROM read_csv('/etc/passwd'))"}`, 400, "predicate"},
		{"/v1/table/t/update", `{"updates": [["id"]]}`, 400, "updates[0]"},
		{"/v1/table/t/update", `{"updates": "x"}`, 400, "updates"},
		{"/v1/table/t/delete", `{}`, 400, "predicate"},
		{"/v1/table/t/restore", `{"version": -1}`, 400, "version"},
		{"/v1/table/t/insert", `[{"id": 1.5}]`, 400, "id"},
		{"/v1/table/t/insert", `{"id": 1}`, 400, ""},
		{"/v1/table/nope/describe", `{}`, 404, "not found"},
		{"/v1/table/t/version/list?limit=-3", `{}`, 400, "limit"},
		{"/v1/namespace/t/create", `{"properties": {"x": "` + strings.Repeat("y", 2000) + `"}}`, 413, "larger"},
	} {
		st, m := c.post(tc.path, tc.body)
		if st != tc.status {
			t.Errorf("%s %s: status %d, want %d: %v", tc.path, tc.body[:min(len(tc.body), 40)], st, tc.status, m)
			continue
		}
		if d, _ := m["detail"].(string); !strings.Contains(d, tc.detail) {
			t.Errorf("%s %s: detail %q lacks %q", tc.path, tc.body[:min(len(tc.body), 40)], d, tc.detail)
		}
	}
	st, _ := c.do("POST", "/v1/table/t/insert", "application/vnd.apache.arrow.stream", []byte("not arrow at all"))
	if st != 400 {
		t.Errorf("garbage arrow: %d", st)
	}
	st, _ = c.do("GET", "/healthz", "", nil)
	if st != 200 {
		t.Errorf("healthz %d", st)
	}
}
