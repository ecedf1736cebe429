package table

import (
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/mvq-dev/mvq/errs"
)

func TestParseID(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, delim string
		want      []string
		bad       bool
	}{
		{in: "$", want: []string{}},
		{in: "docs", want: []string{"docs"}},
		{in: "docs$articles", want: []string{"docs", "articles"}},
		{in: "a.b.c", delim: ".", want: []string{"a", "b", "c"}},
		{in: ".", delim: ".", want: []string{}},
		{in: "a$$b", bad: true},
		{in: "", bad: true},
		{in: "$a", bad: true},
		{in: "a/b", bad: true},
		{in: "..", delim: "$", bad: true},
		{in: "_versions", bad: true},
		{in: "t.lance", bad: true},
		{in: "a\x00b", bad: true},
		{in: strings.Repeat("x", 256), bad: true},
		{in: strings.Repeat("x", 250), bad: true},
		{in: strings.Repeat("x", 249), want: []string{strings.Repeat("x", 249)}},
		{in: strings.Repeat(strings.Repeat("x", 200)+"$", 3) + strings.Repeat("x", 200), bad: true},
		{in: strings.Repeat(strings.Repeat("x", 200)+"$", 2) + strings.Repeat("x", 200), want: []string{strings.Repeat("x", 200), strings.Repeat("x", 200), strings.Repeat("x", 200)}},
		{in: "abc\u202Egpj.exe", bad: true},
		{in: "zero\u200Bwidth", bad: true},
		{in: "line\u2028break", bad: true},
		{in: "bom\uFEFF", bad: true},
		{in: "cafe\u0301$t", want: []string{"caf\u00e9", "t"}},
		{in: "caf\u00e9", want: []string{"caf\u00e9"}},
		{in: "\u03A9\u0300", want: []string{"\u1FFA"}},
		{in: "\xff", bad: true},
		// Whitespace at either end, spaces that look like U+0020 (or like
		// nothing), a combining mark first: names that pass for another.
		{in: "docs$t ", bad: true},
		{in: " docs$t", bad: true},
		{in: "docs $t", bad: true},
		{in: "docs$\tt", bad: true},
		{in: "docs$t\u00A0", bad: true},
		{in: "do\u00A0cs", bad: true},
		{in: "do\u3000cs", bad: true},
		{in: "\u2003docs", bad: true},
		{in: "\u0301docs", bad: true},
		{in: "my docs$t", want: []string{"my docs", "t"}},
	}
	for _, c := range cases {
		got, err := ParseID(c.in, c.delim)
		if c.bad {
			if err == nil || errs.CodeOf(err) != errs.CodeInvalidInput {
				t.Errorf("ParseID(%q) = %v, %v; want invalid input", c.in, got, err)
			}
			continue
		}
		if err != nil || strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
			t.Errorf("ParseID(%q, %q) = %q, %v; want %q", c.in, c.delim, got, err, c.want)
		}
	}
}

func TestValidatePartWantsNFC(t *testing.T) {
	t.Parallel()
	if err := ValidatePart("cafe\u0301"); err == nil || !strings.Contains(err.Error(), "NFC") {
		t.Errorf("NFD part: %v", err)
	}
	if err := ValidatePart("caf\u00e9"); err != nil {
		t.Errorf("NFC part: %v", err)
	}
}

func FuzzParseID(f *testing.F) {
	for _, s := range []string{"$", "a$b", "a..b", "x.lance", "_x", "a/b", "\xff"} {
		f.Add(s, "$")
		f.Add(s, ".")
	}
	f.Fuzz(func(t *testing.T, s, delim string) {
		id, err := ParseID(s, delim)
		if err != nil {
			return
		}
		for _, p := range id {
			if p == "" || strings.ContainsAny(p, "/\\") || !utf8.ValidString(p) || p[0] == '.' || p[0] == '_' || !norm.NFC.IsNormalString(p) || len(p) > MaxNamePart {
				t.Fatalf("ParseID(%q, %q) accepted unsafe part %q", s, delim, p)
			}
			if len(id) > 0 {
				_ = tableKey(id) // must not panic
			}
		}
	})
}
