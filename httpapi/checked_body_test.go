package httpapi

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/errs"
)

// afterPeek is a gin context whose body the authentication middleware has
// read (peekBody, as with authentication off).
func afterPeek(t *testing.T, body string) (*gin.Context, error) {
	t.Helper()
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest("POST", "/x", strings.NewReader(body))
	_, err := peekBody(c, -1, false)
	return c, err
}

// TestBindJSONAfterPeek: a body the middleware checked is decoded once
// more only (identity removed, context taken off as before), and one a
// handler put in its place is checked in full again.
func TestBindJSONAfterPeek(t *testing.T) {
	type req struct {
		A int `json:"a"`
	}
	for _, tc := range []struct{ body, err string }{
		{`{"a":1}`, ""},
		{`{"a":1,"identity":{"api_key":"k"}}`, ""},
		{`{"a":1,"context":{"k":"v"}}`, ""},
		{`{"a":1,"b":2}`, "unknown field"},
		{`{"a":"x"}`, "a"},
	} {
		c, err := afterPeek(t, tc.body)
		if err != nil {
			t.Fatalf("%s: peek: %v", tc.body, err)
		}
		if _, ok := c.Get(checkedBodyKey); !ok {
			t.Fatalf("%s: not noted as checked", tc.body)
		}
		var r req
		err = bindJSON(c, &r)
		switch {
		case tc.err == "" && (err != nil || r.A != 1):
			t.Errorf("%s: %+v %v", tc.body, r, err)
		case tc.err != "" && (errs.CodeOf(err) != errs.CodeInvalidInput || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: got %v, want a 400 naming %q", tc.body, err, tc.err)
		}
	}
	// The strict checks are made once, in the middleware.
	// Field names are case-exact: "Identity" is not the identity member.
	for _, body := range []string{`{"a":1,"a":2}`, `{"context":{"k":1}}`, `{"identity":{"x":1}}`, `{"a":1} {}`, `{"a":1,"Identity":{"api_key":"k"}}`} {
		if _, err := afterPeek(t, body); errs.CodeOf(err) != errs.CodeInvalidInput {
			t.Errorf("%s: peek answered %v, want a 400", body, err)
		}
	}
	// A body replaced after the peek is not the checked one.
	c, err := afterPeek(t, `{"a":1}`)
	if err != nil {
		t.Fatal(err)
	}
	c.Request.Body = io.NopCloser(strings.NewReader(`{"a":1,"a":2}`))
	var r req
	if err := bindJSON(c, &r); err == nil || !strings.Contains(err.Error(), `"a"`) {
		t.Fatalf("replaced body with a duplicate key: %v", err)
	}
}

// TestPlainObject: a body skips the member decode only when no member
// name could be one the middleware reads or removes (encoding/json
// matches names without case; an escaped or non-ASCII name is decoded).
func TestPlainObject(t *testing.T) {
	for _, tc := range []struct {
		in    string
		plain bool
	}{
		{`{"max_rows_per_fragment":1,"concurrency":3,"filter":{"identity":1}}`, true},
		{`{}`, true},
		{`{"a":1,"identity":{"api_key":"k"}}`, false},
		{`{"IDENTITY":null}`, false},
		{`{"Context":{}}`, false},
		{`{"job_Id":"x"}`, false},
		{`{"view":"a"}`, false},
		{`{"namespace":"a"}`, false},
		{`{"source_query":"a"}`, false},
		{`{"\u0069dentity":{}}`, false},
		{`{"é":1}`, false},
		{`[1]`, false},
		{`"x"`, false},
	} {
		if got := plainObject([]byte(tc.in)); got != tc.plain {
			t.Errorf("%s: plain %v, want %v", tc.in, got, tc.plain)
		}
	}
}
