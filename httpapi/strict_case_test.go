package httpapi_test

import (
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/httpapi"
)

// TestCaseVariantKeys: field names are case-exact: a member that names a
// field in another case, alone or beside the exact one, is a 400 naming
// it (encoding/json took "FILTER" for "filter", the last one winning).
func TestCaseVariantKeys(t *testing.T) {
	t.Parallel()
	c := setup(t, httpapi.Config{})
	if st, out := c.do("POST", "/v1/table/t/create", "application/json", []byte(`[{"id":1}]`)); st != 200 {
		t.Fatalf("create: %d %s", st, out)
	}
	for _, tc := range []struct{ body, name string }{
		{`{"filter":"id > 0","FILTER":"id < 0"}`, `FILTER`},
		{`{"Filter":"id < 0"}`, `Filter`},
		{`{"columns":{"Column_Names":["id"]}}`, `columns.Column_Names`},
		{`{"IDENTITY":{"api_key":"x"}}`, `IDENTITY`},
		{`{"identity":{"API_KEY":"x"}}`, `identity.API_KEY`},
	} {
		st, m := c.post("/v1/table/t/query", tc.body)
		c.want(st, m, 400, tc.name)
		if d, _ := m["detail"].(string); !strings.Contains(d, "case-sensitive") {
			t.Errorf("%s: detail %q", tc.body, d)
		}
	}
	// Map keys are data: case variants are distinct keys.
	if st, m := c.post("/v1/table/t/query", `{"filter":"id > 0","columns":{"column_aliases":{"A":"id","a":"id"}}}`); st >= 500 {
		t.Fatalf("aliases: %d %v", st, m)
	}
}
