package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestNamesWithEdgeWhitespaceAreRefused: a namespace, table or view name
// with whitespace at either end (or a space that only looks like one) is
// a 400 naming the field, wherever the name comes from.
func TestNamesWithEdgeWhitespaceAreRefused(t *testing.T) {
	s := startAuthServer(t, nil)
	mustStatus(t, s.do("POST", "/v1/namespace/docs/create", `{}`), 200)
	mustStatus(t, s.do("POST", "/v1/table/docs$t/create", `[{"id": 1}]`), 200)
	for _, c := range []struct {
		path, body, field string
	}{
		{"/v1/namespace/docs%20/create", `{}`, "id"},
		{"/v1/namespace/%20docs/create", `{}`, "id"},
		{"/v1/namespace/do%C2%A0cs/create", `{}`, "id"}, // a no-break space
		{"/v1/table/docs$t%20/create", `[{"id": 1}]`, "id"},
		{"/v1/table/docs$t%09/create", `[{"id": 1}]`, "id"},
		{"/v1/table/docs$t%E3%80%80/create", `[{"id": 1}]`, "id"}, // an ideographic space
		{"/v1/table/docs%20$t/count_rows", `{}`, "id"},
		{"/v1/materialized_view/docs$v%20/create", `{"kind": "query", "source_query": "SELECT id FROM \"docs$t\"", "output_schema": ""}`, "id"},
		{"/v1/table/docs$t/rename", `{"new_table_name": "t2 "}`, "new_table_name"},
		{"/v1/table/docs$t/rename", `{"new_table_name": "t2", "new_namespace_id": [" docs"]}`, "new_namespace_id[0]"},
		{"/v1/table/batch-commit", `{"operations": [{"deregister_table": {"id": ["docs", "t "]}}]}`, "operations[0].deregister_table.id[1]"},
		{"/v1/jobs/list", `{"view": "docs$v "}`, "view"},
	} {
		r := s.do("POST", c.path, c.body)
		detail := fmt.Sprint(r.json["detail"])
		if r.status != 400 || !strings.HasPrefix(detail, c.field+":") {
			t.Errorf("POST %s %s: %d %s, want 400 naming %s", c.path, c.body, r.status, r.body, c.field)
		}
	}
	r := s.do("POST", "/v1/namespace/docs/table/list", `{}`)
	mustStatus(t, r, 200)
	if tables := fmt.Sprint(r.json["tables"]); tables != "[t]" {
		t.Fatalf("tables after the refused names: %s", tables)
	}
}
