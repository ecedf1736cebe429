package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/mvq-dev/mvq/httpapi"
)

// Problems are titled by what happened, per error code, not per status.
func TestProblemTitlesSayWhatHappened(t *testing.T) {
	c := setup(t, httpapi.Config{})
	if st, _ := c.do("POST", "/v1/namespace/ns/create", "application/json", []byte(`{}`)); st != 200 {
		t.Fatalf("create namespace: %d", st)
	}
	for _, tc := range []struct {
		method, path, body string
		status, code       int
		title              string
	}{
		{"POST", "/v1/table/ns$missing/describe", `{}`, 404, 4, "Table not found"},
		{"POST", "/v1/namespace/nowhere/describe", `{}`, 404, 1, "Namespace not found"},
		{"POST", "/v1/namespace/ns/create", `{}`, 409, 2, "Namespace already exists"},
		{"POST", "/v1/namespace/ns/list", `{"nope": 1}`, 400, 13, "Invalid input"},
		{"GET", "/v1/nothing", "", 404, 0, "No such route"},
	} {
		st, b := c.do(tc.method, tc.path, "application/json", []byte(tc.body))
		var p httpapi.Problem
		if err := json.Unmarshal(b, &p); err != nil || st != tc.status || p.Title != tc.title || (tc.code != 0 && p.Code != tc.code) {
			t.Errorf("%s %s: %d %s, want %d titled %q (code %d)", tc.method, tc.path, st, b, tc.status, tc.title, tc.code)
		}
	}
}
