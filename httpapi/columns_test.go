package httpapi_test

import (
	"strings"
	"testing"
)

// add_columns over HTTP: a computed column is added all null; a backfill
// is a job (202, job_id), with Idempotency-Key; bad requests are 400s
// naming the field.
func TestAddColumnsAndBackfillRoutes(t *testing.T) {
	c, _ := setupViews(t, 0)
	c.source()
	m := c.expect(200, "/v1/table/docs$src/add_columns", `{"new_columns": [{"name": "n", "computed": "length(body)"}]}`)
	if m["version"].(float64) != 2 {
		t.Fatalf("add_columns %v", m)
	}
	st, body, _ := c.postH("/v1/table/docs$src/query", `{}`, "Accept", "application/json")
	if st != 200 || !strings.Contains(body, `"n":null`) {
		t.Fatalf("query %d %s", st, body)
	}
	st, first, _ := c.postH("/v1/table/docs$src/backfill_column", `{"column": "n", "where": "id > 1", "commit_granularity": 2}`, "Idempotency-Key", "k1")
	if st != 202 || !strings.Contains(first, "job_id") {
		t.Fatalf("backfill %d %s", st, first)
	}
	if st, again, _ := c.postH("/v1/table/docs$src/backfill_column", `{"column": "n", "where": "id > 1", "commit_granularity": 2}`, "Idempotency-Key", "k1"); st != 202 || again != first {
		t.Fatalf("replay %d %s, want %s", st, again, first)
	}
	job := c.expect(200, "/v1/jobs/describe", `{"job_id": "`+first[strings.Index(first, `"job_id":"`)+10:len(first)-2]+`"}`)
	if job["job_type"] != "backfill" {
		t.Fatalf("job %v", job)
	}
	for _, tc := range []struct{ path, body, want string }{
		{"add_columns", `{"new_columns": [{"name": "x", "computed": "nope + 1"}]}`, "computed"},
		{"add_columns", `{"new_columns": [{"name": "x", "virtual_column": {"input_columns": ["body"], "outputs": [{"column": "x", "struct_field": "x", "data_type": {"type": "utf8"}, "nullable": true}], "image": "", "udf": "eyJydW50aW1lIjogIm5vcGUifQ==", "udf_name": "u", "udf_version": "1"}}]}`, "nope"},
		{"add_columns", `{"new_columns": [{"name": "x", "computed": "1", "wat": 1}]}`, "wat"},
		{"add_columns", `{}`, "new_columns"},
		{"add_columns", `{"branch": "a/b", "new_columns": []}`, "branch"},
		{"backfill_column", `{}`, "column"},
		{"backfill_column", `{"column": "body"}`, "not a virtual"},
		{"backfill_column", `{"column": "n", "num_frags": 2}`, "num_frags"},
		{"backfill_column", `{"column": "n", "checkpoint_size": 0}`, "checkpoint_size"},
		{"backfill_column", `{"column": "n", "where": "id >"}`, "where"},
		{"backfill_column", `{"column": "n", "read_version": 9}`, "read_version"},
	} {
		st, b, _ := c.postH("/v1/table/docs$src/"+tc.path, tc.body)
		if st != 400 || !strings.Contains(b, tc.want) {
			t.Errorf("%s %s: %d %s (want 400 naming %s)", tc.path, tc.body, st, b, tc.want)
		}
	}
}
