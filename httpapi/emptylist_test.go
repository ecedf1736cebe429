package httpapi_test

import (
	"testing"

	"github.com/mvq-dev/mvq/httpapi"
)

// TestEmptyListsAreArrays: on an empty warehouse and in an empty namespace
// the list endpoints answer [] (the spec's arrays; LanceDB refuses null).
func TestEmptyListsAreArrays(t *testing.T) {
	c := setup(t, httpapi.Config{})
	for _, tc := range []struct{ method, path, body, want string }{
		{"GET", "/v1/namespace/$/list", "", `{"namespaces":[]}`},
		{"POST", "/v1/namespace/$/list", "{}", `{"namespaces":[]}`},
		{"GET", "/v1/namespace/$/table/list", "", `{"tables":[]}`},
		{"GET", "/v1/table", "", `{"tables":[]}`},
	} {
		st, b := c.do(tc.method, tc.path, "application/json", []byte(tc.body))
		if st != 200 || string(b) != tc.want {
			t.Errorf("%s %s: %d %s, want 200 %s", tc.method, tc.path, st, b, tc.want)
		}
	}
	if st, _ := c.do("POST", "/v1/namespace/empty/create", "application/json", []byte(`{}`)); st != 200 {
		t.Fatalf("create namespace: %d", st)
	}
	for _, path := range []string{"/v1/namespace/empty/list", "/v1/namespace/empty/table/list"} {
		st, b := c.do("GET", path, "", nil)
		if st != 200 || (string(b) != `{"namespaces":[]}` && string(b) != `{"tables":[]}`) {
			t.Errorf("GET %s: %d %s, want an empty array", path, st, b)
		}
	}
}
