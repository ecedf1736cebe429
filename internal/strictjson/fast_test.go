package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

// fastSeeds are inputs on which the scanner and the token walk must agree.
var fastSeeds = []string{
	`{}`, `[]`, `"x"`, `1`, ` {"a" : 1 , "b":[1, {"c":null}], "d":{"e":{}}} `,
	`{"a":1,"a":2}`, `{"a":{"b":1,"b":1}}`, `{"x":[{"q":1},{"q":1,"q":2}]}`,
	`{"a\u0062":1,"ab":2}`, `{"a":{},"b":{"a":1}}`, `[[[[1]]]]`, `[[[1]]]`, `{"a":[{"a":[{"a":1}]}]}`,
	`{"":1,"\u0000":2}`, `{"é":1,"\u00e9":2}`, `{"a\"b":1,"a\\"b":2}`, `{"k":"}]\"{[","k2":"\\"}`,
	`{"filter":"x","columns":{"column_names":["a"]},"aliases":{"A":"a","a":"b"},"raw":{"Filter":1},"unknown":{"Filter":1}}`,
	`{"filter":"x","FILTER":"y"}`, `{"Filter":"y"}`, `{"columns":{"Column_Names":["a"]}}`, `{"list":[{},{"COLUMN_NAMES":[]}]}`,
	`{"filter\u212a":"y"}`, `[1,2]`, `{"fliter":"x"}`, `{"columns":{"colum_names":["a"]}}`, `{"list":[{"column_name":[]}]}`,
	`{"lisst":[]}`, `{"somethingelse":1}`, `{"aliases":{"fliter":"x"}}`, `{"\u212a":"x"}`, `{"list":{"a":1},"columns":[1]}`,
	`{"max_rows_per_fragment":1234,"context":{"a":"b"},"identity":{"api_key":"k"}}`, `{"filter":true,"list":[[],{}],"raw":[{"x":1,"x":2}]}`,
}

type fastReq struct {
	Filter  string            `json:"filter"`
	Cols    *fastInner        `json:"columns"`
	Aliases map[string]string `json:"aliases"`
	Raw     json.RawMessage   `json:"raw"`
	List    []fastInner       `json:"list"`
	K       string            `json:"k"`
	Skipped string            `json:"-"`
}

type fastInner struct {
	Names []string `json:"column_names"`
}

// agree checks that the scanner passes valid data only when the token
// walks do (it decides, the walks make errors), and, on data with no
// escape and no byte above ASCII, whenever they do (such keys are the
// only ones it leaves to the walks).
func agree(t *testing.T, data []byte) {
	t.Helper()
	if !json.Valid(data) {
		return
	}
	plain := !bytes.ContainsAny(data, "\\") && !slices.ContainsFunc(data, func(c byte) bool { return c >= 0x80 })
	judge := func(what string, quick, slow bool) {
		if quick && !slow || plain && quick != slow {
			t.Fatalf("%q %s: scanner passes %v, token walk %v", data, what, quick, slow)
		}
	}
	for _, depth := range []int{2, 3, 64} {
		judge(fmt.Sprintf("depth %d", depth), quickCheck(data, depth), checkTokens(data, depth) == nil)
	}
	judge("fields", quickFields(data, reflect.TypeOf(&fastReq{})), checkFieldsTokens(data, &fastReq{}) == nil)
}

func TestScannerAgrees(t *testing.T) {
	for _, s := range fastSeeds {
		agree(t, []byte(s))
	}
}

// FuzzScannerAgrees: on valid JSON the scanner passes what the token walks
// pass, and only that.
func FuzzScannerAgrees(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { agree(t, data) })
}

// BenchmarkCheckBody: Check and CheckFields of a refresh request body as
// the API makes them, on the scanner next to the token walks (the
// baseline, in the same run).
func BenchmarkCheckBody(b *testing.B) {
	body := []byte(`{"max_rows_per_fragment":1234,"concurrency":3,"context":{"team":"a"}}`)
	type req struct {
		MaxRows     *int64            `json:"max_rows_per_fragment"`
		Concurrency *int64            `json:"concurrency"`
		Context     map[string]string `json:"context"`
	}
	run := func(b *testing.B, check func() error) float64 {
		start := time.Now()
		for b.Loop() {
			if err := check(); err != nil {
				b.Fatal(err)
			}
		}
		return float64(time.Since(start).Nanoseconds()) / float64(b.N)
	}
	var tokens, scanner float64
	b.Run("tokens", func(b *testing.B) {
		b.ReportAllocs()
		tokens = run(b, func() error {
			if err := checkTokens(body, 64); err != nil {
				return err
			}
			return checkFieldsTokens(body, &req{})
		})
	})
	b.Run("scanner", func(b *testing.B) {
		b.ReportAllocs()
		scanner = run(b, func() error {
			if err := Check(body, 64); err != nil {
				return err
			}
			return CheckFields(body, &req{})
		})
	})
	b.Logf("scanner %.0f ns, token walks %.0f ns: %.2fx", scanner, tokens, scanner/tokens)
}

// TestObjectKeys: the top-level member names of an object, decoded, in
// order; nothing of nested objects; not an object is false.
func TestObjectKeys(t *testing.T) {
	for _, tc := range []struct {
		in     string
		obj    bool
		keys   []string
		plains []bool
	}{
		{`{"a":1,"b":{"c":[{"d":2}]},"e\u0066":"}","g":[]}`, true, []string{"a", "b", "ef", "g"}, []bool{true, true, false, true}},
		{` { } `, true, nil, nil},
		{`{"é":null}`, true, []string{"é"}, []bool{false}},
		{`[{"a":1}]`, false, nil, nil},
		{`"a"`, false, nil, nil},
	} {
		var keys []string
		var plains []bool
		obj := ObjectKeys([]byte(tc.in), func(k []byte, plain bool) bool {
			keys, plains = append(keys, string(k)), append(plains, plain)
			return true
		})
		if obj != tc.obj || !slices.Equal(keys, tc.keys) || !slices.Equal(plains, tc.plains) {
			t.Errorf("%s: %v %q %v, want %v %q %v", tc.in, obj, keys, plains, tc.obj, tc.keys, tc.plains)
		}
	}
	n := 0
	ObjectKeys([]byte(`{"a":1,"b":2,"c":3}`), func([]byte, bool) bool { n++; return n < 2 })
	if n != 2 {
		t.Errorf("fn returned false at the second key, called %d times", n)
	}
}
