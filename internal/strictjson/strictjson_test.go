package strictjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{`{"a":1,"b":[1,{"c":null}],"d":{"e":{}}}`, ""},
		{`"x"`, ""},
		{`{"a":1,"a":2}`, `duplicate key "a"`},
		{`{"a":{"b":1,"b":1}}`, `duplicate key "b" in a`},
		{`{"x":[{"q":1},{"q":1,"q":2}]}`, `duplicate key "q" in x[1]`},
		{`{"a\u0062":1,"ab":2}`, `duplicate key "ab"`},
		{`{"a":{},"b":{"a":1}}`, ""},
		{`[[[[1]]]]`, `[0][0][0]: nesting deeper than 3`},
		{`{} {}`, "data after the JSON value"},
		{`{"a":}`, "invalid character"},
		{`{"a":1`, "EOF"},
	} {
		err := Check([]byte(tc.in), 3)
		if tc.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.in, err, tc.err)
		}
	}
}

// FuzzCheckJSON: Check never panics, accepts only valid JSON, and refuses
// valid JSON only with an *Error (duplicate key, depth).
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[1,{"c":null}]}`, `{"a":1,"a":2}`, `[[[]]]`, `"x"`, `{"a":{"b":{}}} x`, `{"":1,"\u0000":2}`, `{"a\u0062":1,"ab":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := Check(data, 16)
		valid := json.Valid(data)
		if err == nil && !valid {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		var se *Error
		if err != nil && valid && (!errors.As(err, &se) || strings.HasPrefix(se.Msg, "data after")) {
			t.Fatalf("refused valid JSON %q: %v", data, err)
		}
	})
}
