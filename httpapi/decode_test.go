package httpapi

import (
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/errs"
)

func TestDecodeStrict(t *testing.T) {
	type inner struct {
		ColumnNames []string `json:"column_names"`
	}
	type req struct {
		ID      []string `json:"id"`
		Filter  string   `json:"filter"`
		Columns *inner   `json:"columns"`
		K       *int64   `json:"k"`
	}
	for _, tc := range []struct {
		name, body, err string
	}{
		{"empty", ``, ""},
		{"plain", `{"filter":"a > 1","k":3,"columns":{"column_names":["a"]}}`, ""},
		{"identity and context", `{"filter":"x","identity":{"api_key":"k","auth_token":"t"},"context":{"a":"b"}}`, ""},
		{"null identity", `{"identity":null,"context":null}`, ""},
		{"unknown field", `{"fliter":"a > 1"}`, `unknown field "fliter"`},
		{"unknown nested field", `{"columns":{"colum_names":["a"]}}`, `unknown field "colum_names"`},
		{"duplicate key", `{"filter":"a","filter":"b"}`, `duplicate key "filter"`},
		{"duplicate nested key", `{"columns":{"column_names":["a"],"column_names":[]}}`, `duplicate key "column_names" in columns`},
		{"duplicate key in an array element", `{"id":["a"],"x":[{"q":1},{"q":1,"q":2}]}`, `duplicate key "q" in x[1]`},
		{"duplicate identity", `{"identity":{},"identity":{}}`, `duplicate key "identity"`},
		{"identity not an object", `{"identity":"secret"}`, "identity: expected an object"},
		{"identity with an unknown member", `{"identity":{"api_key":"k","user":"x"}}`, `identity: unknown field "user"`},
		{"identity with a wrong type", `{"identity":{"api_key":5}}`, "identity: api_key: expected a string"},
		{"context not strings", `{"context":{"a":1}}`, "context: expected an object of string values"},
		{"trailing data", `{} {}`, "data after the JSON value"},
		{"malformed", `{"filter":}`, "malformed JSON"},
		{"too deep", `{"x":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`, "nesting deeper than 64"},
		{"not an object", `[1]`, "expected a JSON object"},
		{"integer too large", `{"k":99999999999999999999}`, "k: expected an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r req
			err := decodeStrict([]byte(tc.body), &r)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
			if errs.CodeOf(err) != errs.CodeInvalidInput {
				t.Fatalf("code %d, want invalid input", errs.CodeOf(err))
			}
		})
	}
}

// TestDecodeStrictDeclaredIdentity: a request type that declares identity
// receives it.
func TestDecodeStrictDeclaredIdentity(t *testing.T) {
	var r struct {
		Identity *identity `json:"identity"`
	}
	if err := decodeStrict([]byte(`{"identity":{"api_key":"k"}}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.Identity == nil || r.Identity.APIKey == nil || *r.Identity.APIKey != "k" {
		t.Fatalf("identity not decoded: %+v", r.Identity)
	}
}
