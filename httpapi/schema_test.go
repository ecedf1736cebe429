package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/httpapi"
)

// Schema evolution over HTTP: each operation's answer, the schema
// describe shows after it, data written before and after reading under
// the new schema, old versions under their own, and every bad request a
// 4xx naming the field or column.
func TestSchemaEvolutionRoutes(t *testing.T) {
	c := setup(t, httpapi.Config{})
	c.expect(200, "/v1/namespace/docs/create", `{}`)
	c.expect(200, "/v1/table/docs$t/create", `[{"id": 1, "score": 0.5, "body": "a"}, {"id": 2, "score": 1.5, "body": "b"}]`)
	schemaOf := func(version int) string {
		m := c.expect(200, "/v1/table/docs$t/describe", fmt.Sprintf(`{"version": %d}`, version))
		b, _ := json.Marshal(m["schema"])
		return string(b)
	}
	rows := func(body string) string {
		st, out, _ := c.postH("/v1/table/docs$t/query", body, "Accept", "application/json")
		if st != 200 {
			t.Fatalf("query %d %s", st, out)
		}
		return out
	}
	// id is int64 already (JSON rows infer int64): widen score? it is
	// float64. Create a narrow column to widen through an Arrow schema.
	m := c.expect(200, "/v1/table/docs$t/alter_columns", `{"alterations": [{"path": "id", "rename": "key"}, {"path": "body", "nullable": true}]}`)
	if m["version"] != 2.0 {
		t.Fatalf("alter: %v", m)
	}
	if s := schemaOf(2); !strings.Contains(s, `"name":"key"`) || strings.Contains(s, `"name":"id"`) {
		t.Fatalf("schema after rename: %s", s)
	}
	if s := schemaOf(1); !strings.Contains(s, `"name":"id"`) {
		t.Fatalf("version 1 schema: %s", s)
	}
	c.expect(200, "/v1/table/docs$t/insert", `[{"key": 3, "score": 2.5, "body": null}]`)
	if got := rows(`{"filter": "key >= 2"}`); !strings.Contains(got, `"key":2`) || !strings.Contains(got, `"key":3`) || strings.Contains(got, `"id"`) {
		t.Fatalf("rows after rename: %s", got)
	}
	m = c.expect(200, "/v1/table/docs$t/drop_columns", `{"columns": ["score"]}`)
	if m["version"] != 4.0 {
		t.Fatalf("drop: %v", m)
	}
	if got := rows(`{}`); strings.Contains(got, "score") || !strings.Contains(got, `"body":"a"`) {
		t.Fatalf("rows after drop: %s", got)
	}
	if got := rows(`{"version": 3}`); !strings.Contains(got, `"score":2.5`) {
		t.Fatalf("version 3 rows: %s", got)
	}
	m = c.expect(200, "/v1/table/docs$t/update_field_metadata", `{"updates": [{"path": "key", "metadata": {"unit": "n", "x": null}}]}`)
	if m["version"] != 5.0 || fmt.Sprint(m["fields"]) != "map[key:map[unit:n]]" {
		t.Fatalf("field metadata: %v", m)
	}
	st, out := c.do("POST", "/v1/table/docs$t/schema_metadata/update", "application/json", []byte(`{"owner": "team-a"}`))
	if st != 200 || string(out) != `{"owner":"team-a"}` {
		t.Fatalf("schema metadata: %d %s", st, out)
	}
	if s := schemaOf(6); !strings.Contains(s, `"owner":"team-a"`) || !strings.Contains(s, `"unit":"n"`) {
		t.Fatalf("schema with metadata: %s", s)
	}

	for _, tc := range []struct {
		path, body string
		status     int
		want       string
	}{
		{"alter_columns", `{}`, 400, "alterations: required"},
		{"alter_columns", `{"alterations": []}`, 400, "at least one"},
		{"alter_columns", `{"alterations": [{"rename": "x"}]}`, 400, "alterations[0].path: required"},
		{"alter_columns", `{"alterations": [{"path": "nope", "rename": "x"}]}`, 404, `column \"nope\" not found`},
		{"alter_columns", `{"alterations": [{"path": "key", "data_type": {"type": "int32"}}]}`, 400, `column \"key\" cannot change from int64 to int32`},
		{"alter_columns", `{"alterations": [{"path": "body", "data_type": {"type": "float64"}}]}`, 400, `column \"body\" cannot change`},
		{"alter_columns", `{"alterations": [{"path": "key", "data_type": {"type": "int65"}}]}`, 400, "alterations[0].data_type"},
		{"alter_columns", `{"alterations": [{"path": "key", "data_type": {"type": "int64", "wat": 1}}]}`, 400, "wat"},
		{"alter_columns", `{"alterations": [{"path": "body", "nullable": false}]}`, 400, "cannot be made non-nullable"},
		{"alter_columns", `{"alterations": [{"path": "body", "rename": "KEY"}]}`, 400, "SQL cannot tell apart"},
		{"alter_columns", `{"alterations": [{"path": "body", "virtual_column": {"udf": "x"}}]}`, 400, "virtual_column"},
		{"alter_columns", `{"alterations": [{"path": "body", "rename": "b2", "wat": 1}]}`, 400, "wat"},
		{"alter_columns", `{"branch": "dev", "alterations": [{"path": "body", "rename": "b2"}]}`, 404, `no branch \"dev\"`},
		{"alter_columns", `{"branch": "a/b", "alterations": [{"path": "body", "rename": "b2"}]}`, 400, "branch"},
		{"alter_columns", `{"id": ["docs", "other"], "alterations": [{"path": "body", "rename": "b2"}]}`, 400, "id"},
		{"drop_columns", `{}`, 400, "columns: required"},
		{"drop_columns", `{"columns": ["key", "body"]}`, 400, "at least one column"},
		{"drop_columns", `{"columns": ["nope"]}`, 404, `columns[0]: column \"nope\" not found`},
		{"drop_columns", `{"columns": "key"}`, 400, "columns"},
		{"update_field_metadata", `{}`, 400, "updates: required"},
		{"update_field_metadata", `{"updates": [{"path": "key"}]}`, 400, "updates[0].metadata: required"},
		{"update_field_metadata", `{"updates": [{"path": "nope", "metadata": {}}]}`, 404, `updates[0].path: column \"nope\" not found`},
		{"update_field_metadata", `{"updates": [{"path": "key", "metadata": {"ARROW:x": "1"}}]}`, 400, "reserved"},
		{"update_field_metadata", `{"updates": [{"path": "key", "metadata": {"a": 1}}]}`, 400, "metadata"},
		{"schema_metadata/update", `{"a": 1}`, 400, "string values"},
		{"schema_metadata/update", `["a"]`, 400, "JSON"},
		{"schema_metadata/update", ``, 400, "JSON"},
		{"schema_metadata/update", `{"a": "1", "a": "2"}`, 400, "a"},
		{"schema_metadata/update?branch=dev", `{"a": "1"}`, 404, "branch"},
	} {
		st, out := c.do("POST", "/v1/table/docs$t/"+tc.path, "application/json", []byte(tc.body))
		if st != tc.status || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s %s: %d %s, want %d naming %s", tc.path, tc.body, st, out, tc.status, tc.want)
		}
	}
	for _, op := range []string{"alter_columns", "drop_columns", "update_field_metadata", "schema_metadata/update"} {
		if st, out := c.do("POST", "/v1/table/docs$nope/"+op, "application/json", []byte(`{"alterations": [{"path": "a", "rename": "b"}], "columns": ["a"], "updates": []}`)); st != 404 && st != 400 {
			t.Errorf("%s on a missing table: %d %s", op, st, out)
		}
	}
	// Refusals made no version.
	if vs := c.expect(200, "/v1/table/docs$t/version/list", `{}`); len(vs["versions"].([]any)) != 6 {
		t.Fatalf("versions: %v", vs)
	}
}

// Views over an evolving source, through real refresh jobs (Redis and
// an asynq worker): a view that does not read a changed column keeps
// refreshing incrementally (its job reads only the new rows); a view
// that reads a dropped, renamed or widened column fails its next refresh
// naming the column, and its status says so.
func TestViewsOverEvolvedSource(t *testing.T) {
	sc := setupSpec(t)
	c := sc.client
	c.expect(200, "/v1/namespace/docs/create", `{}`)
	c.expect(200, "/v1/table/docs$src/create", `[{"id": 1, "body": "a b", "extra": "x", "n": 1, "tag": "p"}, {"id": 2, "body": "c d", "extra": "y", "n": 2, "tag": "q"}]`)
	view := func(name, query string) {
		c.expect(201, "/v1/materialized_view/docs$"+name+"/create", map[string]any{"kind": "query", "source_query": query, "output_schema": "", "with_no_data": true})
	}
	view("narrow", `SELECT id, upper(body) AS loud FROM "docs$src"`)
	view("reads_extra", `SELECT id, extra FROM "docs$src" WHERE extra <> ''`)
	view("reads_n", `SELECT id, n * 2 AS twice FROM "docs$src"`)
	view("reads_tag", `SELECT id FROM "docs$src" WHERE tag = 'p'`)
	refreshJob := func(v string) map[string]any {
		t.Helper()
		m := c.expect(202, "/v1/materialized_view/docs$"+v+"/refresh", `{}`)
		id := m["job_id"].(string)
		var job map[string]any
		waitFor(t, 60*time.Second, "job "+id, func() bool {
			_, job = c.getJSON("/v1/job/" + id)
			s, _ := job["state"].(string)
			return s == "DONE" || s == "FAILED" || s == "CANCELLED"
		})
		return job
	}
	for _, v := range []string{"narrow", "reads_extra", "reads_n", "reads_tag"} {
		if j := refreshJob(v); j["state"] != "DONE" {
			t.Fatalf("first refresh of %s: %v", v, j)
		}
	}
	// Evolve: drop extra, rename n, widen tag; add a row after.
	c.expect(200, "/v1/table/docs$src/drop_columns", `{"columns": ["extra"]}`)
	c.expect(200, "/v1/table/docs$src/alter_columns", `{"alterations": [{"path": "n", "rename": "count"}, {"path": "tag", "data_type": {"type": "large_utf8"}}]}`)
	c.expect(200, "/v1/table/docs$src/insert", `[{"id": 3, "body": "e f", "count": 3, "tag": "r"}]`)

	// narrow reads id and body only: incremental, one new row read.
	j := refreshJob("narrow")
	res, _ := j["result"].(map[string]any)
	prog, _ := j["progress"].(map[string]any)
	if j["state"] != "DONE" || res["mode"] != "incremental" || res["rows_added"] != 1.0 || prog["rows_read"] != 1.0 {
		t.Fatalf("narrow after evolution: %v", j)
	}
	st, out, _ := c.postH("/v1/table/docs$narrow/query", `{}`, "Accept", "application/json")
	if st != 200 || !strings.Contains(out, `"loud":"E F"`) || !strings.Contains(out, `"loud":"A B"`) {
		t.Fatalf("narrow rows: %d %s", st, out)
	}
	for _, tc := range []struct{ view, column string }{{"reads_extra", "extra"}, {"reads_n", "n"}, {"reads_tag", "tag"}} {
		j := refreshJob(tc.view)
		b, _ := json.Marshal(j["failure"])
		if j["state"] != "FAILED" || !strings.Contains(string(b), `column \"`+tc.column+`\"`) {
			t.Fatalf("%s: refresh after its column changed: %v", tc.view, j)
		}
		st, status := c.getJSON("/v1/materialized_view/docs$" + tc.view + "/status")
		p, _ := status["problem"].(string)
		if st != 200 || !strings.Contains(p, `column "`+tc.column+`"`) {
			t.Fatalf("%s status: %d %v", tc.view, st, status)
		}
	}
	if _, status := c.getJSON("/v1/materialized_view/docs$narrow/status"); status["problem"] != nil {
		t.Fatalf("narrow has a problem: %v", status)
	}
	// A view created over the evolved source reads the files written
	// before the drop, rename and widening under the new schema.
	view("fresh", `SELECT id, count, tag FROM "docs$src"`)
	if j := refreshJob("fresh"); j["state"] != "DONE" {
		t.Fatalf("fresh view: %v", j)
	}
	st, out, _ = c.postH("/v1/table/docs$fresh/query", `{}`, "Accept", "application/json")
	for _, want := range []string{`"count":1,"tag":"p"`, `"count":2,"tag":"q"`, `"count":3,"tag":"r"`} {
		if st != 200 || !strings.Contains(out, want) {
			t.Fatalf("fresh rows: %d %s, want %s", st, out, want)
		}
	}
}
