package httpapi_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/httpapi"
)

// Table create's properties query parameter is kept and shown by
// describe; storage_options and malformed or reserved properties are 400s
// naming the parameter, and create nothing.
func TestCreateTableQueryParams(t *testing.T) {
	c := setup(t, httpapi.Config{})
	c.expect(200, "/v1/namespace/docs/create", `{}`)
	q := url.QueryEscape(`{"team":"eng","note":"a \"b\""}`)
	st, out := c.do("POST", "/v1/table/docs$t/create?properties="+q, "application/json", []byte(`[{"id": 1}]`))
	if st != 200 || !strings.Contains(string(out), `"team":"eng"`) {
		t.Fatalf("create: %d %s", st, out)
	}
	m := c.expect(200, "/v1/table/docs$t/describe", `{}`)
	props, _ := m["properties"].(map[string]any)
	if props["team"] != "eng" || props["note"] != `a "b"` || props["mvq.uuid"] == nil {
		t.Fatalf("describe properties: %v", props)
	}
	for _, tc := range []struct{ query, want string }{
		{"storage_options=" + url.QueryEscape(`{"aws_region":"x"}`), "storage_options"},
		{"properties=" + url.QueryEscape(`{"a":1}`), "properties"},
		{"properties=" + url.QueryEscape(`[1]`), "properties"},
		{"properties=" + url.QueryEscape(`{"a":"1","a":"2"}`), "properties"},
		{"properties=" + url.QueryEscape(`{"mvq.view":"x"}`), "reserved"},
	} {
		st, out := c.do("POST", "/v1/table/docs$u/create?"+tc.query, "application/json", []byte(`[{"id": 1}]`))
		if st != 400 || !strings.Contains(string(out), tc.want) {
			t.Errorf("create ?%s: %d %s, want 400 naming %s", tc.query, st, out, tc.want)
		}
	}
	if st, _ := c.post("/v1/table/docs$u/exists", `{}`); st != 404 {
		t.Fatalf("a refused create made a table: %d", st)
	}
}
