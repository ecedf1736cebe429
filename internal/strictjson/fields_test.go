package strictjson

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCheckFields(t *testing.T) {
	type inner struct {
		Names []string `json:"column_names"`
	}
	type req struct {
		Filter  string            `json:"filter"`
		Cols    *inner            `json:"columns"`
		Aliases map[string]string `json:"aliases"`
		Raw     json.RawMessage   `json:"raw"`
		List    []inner           `json:"list"`
		Skipped string            `json:"-"`
	}
	for _, tc := range []struct{ in, err string }{
		{`{"filter":"x","columns":{"column_names":["a"]},"aliases":{"A":"a","a":"b"},"raw":{"Filter":1},"unknown":{"Filter":1}}`, ""},
		{`{"filter":"x","FILTER":"y"}`, `FILTER: field names are case-sensitive: send "filter"`},
		{`{"Filter":"y"}`, `Filter`},
		{`{"columns":{"Column_Names":["a"]}}`, `columns.Column_Names`},
		{`{"list":[{},{"COLUMN_NAMES":[]}]}`, `list[1].COLUMN_NAMES`},
		{`{"filter\u212a":"y"}`, ""}, // not a field at all (the decode refuses it as unknown)
		{`[1,2]`, ""},
		// A typo of a known name is answered with that name.
		{`{"fliter":"x"}`, `unknown field "fliter" (did you mean "filter"?)`},
		{`{"columns":{"colum_names":["a"]}}`, `columns: unknown field "colum_names" (did you mean "column_names"?)`},
		{`{"list":[{"column_name":[]}]}`, `list[0]: unknown field "column_name" (did you mean "column_names"?)`},
		{`{"lisst":[]}`, `(did you mean "list"?)`},
		{`{"somethingelse":1}`, ""},        // nothing near: the decode refuses it as unknown
		{`{"aliases":{"fliter":"x"}}`, ""}, // map keys are data, not field names
	} {
		err := CheckFields([]byte(tc.in), &req{})
		if tc.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.in, err)
			}
			continue
		}
		if _, ok := err.(*Error); !ok || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.in, err, tc.err)
		}
	}
	// encoding/json's own folding (the Kelvin sign folds to k) is the
	// folding refused.
	type k struct {
		K string `json:"k"`
	}
	if err := CheckFields([]byte(`{"\u212a":"x"}`), &k{}); err == nil {
		t.Error("Kelvin sign for k accepted")
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b  string
		limit int
		want  int
	}{
		{"fliter", "filter", 9, 1},
		{"kitten", "sitting", 9, 3},
		{"", "abc", 9, 3},
		{"abc", "abc", 9, 0},
		{"ca", "abc", 9, 3},
		{"kitten", "sitting", 2, 2}, // capped at the limit
		{"a", "abcdef", 3, 3},
		// Longer than the rows kept on the stack.
		{strings.Repeat("field_", 9), strings.Repeat("field_", 8) + "fiedl_", 9, 1},
	} {
		if got := editDistance(tc.a, tc.b, tc.limit); got != tc.want {
			t.Errorf("editDistance(%q, %q, %d) = %d, want %d", tc.a, tc.b, tc.limit, got, tc.want)
		}
		if got := editDistance(tc.b, tc.a, tc.limit); got != tc.want {
			t.Errorf("editDistance(%q, %q, %d) = %d, want %d", tc.b, tc.a, tc.limit, got, tc.want)
		}
	}
}
