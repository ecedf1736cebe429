package chunker

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"
)

func mustNew(t testing.TB, s Spec) Chunker {
	t.Helper()
	if s.InputColumn == "" {
		s.InputColumn = "body"
	}
	if s.OutputColumn == "" {
		s.OutputColumn = "chunk"
	}
	c, err := New(s)
	if err != nil {
		t.Fatalf("New(%+v): %v", s, err)
	}
	return c
}

func chunk(t testing.TB, s Spec, text string) []string {
	t.Helper()
	return mustNew(t, s).Chunk(text, nil)
}

func eq(t *testing.T, name string, got, want []string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %q\n want %q", name, got, want)
	}
}

func TestFixed(t *testing.T) {
	tests := []struct {
		name          string
		unit          string
		size, overlap int
		text          string
		want          []string
	}{
		{"chars overlap", "chars", 4, 1, "abcdefghij", []string{"abcd", "defg", "ghij"}},
		{"chars no overlap", "chars", 4, 0, "abcdefghij", []string{"abcd", "efgh", "ij"}},
		{"chars default unit", "", 4, 0, "abcdefghij", []string{"abcd", "efgh", "ij"}},
		{"chars overlap last partial", "chars", 4, 2, "abcdefg", []string{"abcd", "cdef", "efg"}},
		{"chars unicode code points", "chars", 5, 0, "héllo wörld", []string{"héllo", " wörl", "d"}},
		{"chars cjk overlap", "chars", 3, 1, "日本語テキスト", []string{"日本語", "語テキ", "キスト"}},
		{"chars overlap above half, unicode", "chars", 4, 3, "äbcdéf", []string{"äbcd", "bcdé", "cdéf"}},
		{"chars long mixed", "chars", 10, 2, "abcdefghijklmnopé0123456789", []string{"abcdefghij", "ijklmnopé0", "é012345678", "789"}},
		{"chars emoji", "chars", 2, 0, "a😀b😀", []string{"a😀", "b😀"}},
		{"chars shorter than size", "chars", 10, 3, "abc", []string{"abc"}},
		{"chars exactly size", "chars", 4, 2, "abcd", []string{"abcd"}},
		{"chars exactly size unicode", "chars", 4, 0, "äöüß", []string{"äöüß"}},
		{"chars size one", "chars", 1, 0, "aé", []string{"a", "é"}},
		{"chars empty", "chars", 4, 1, "", nil},
		{"chars whitespace kept", "chars", 2, 0, "   ", []string{"  ", " "}},
		{"chars invalid utf8 byte is one unit", "chars", 2, 0, "a\xffb\xfe", []string{"a\xff", "b\xfe"}},
		{"chars truncated rune", "chars", 2, 1, "é\xc3", []string{"é\xc3"}},
		{"words overlap", "words", 2, 1, "the quick  brown\tfox jumps", []string{"the quick", "quick brown", "brown fox", "fox jumps"}},
		{"words no overlap", "words", 3, 0, "the quick  brown\tfox jumps", []string{"the quick brown", "fox jumps"}},
		{"words newlines collapse", "words", 10, 0, "\n one\n\ntwo \r\n", []string{"one two"}},
		{"words exactly size", "words", 3, 2, "a b c", []string{"a b c"}},
		{"words shorter than size", "words", 5, 0, "hello", []string{"hello"}},
		{"words unicode spaces", "words", 2, 0, "a\u00a0b\u3000c", []string{"a b", "c"}},
		{"words unicode", "words", 1, 0, "héllo wörld", []string{"héllo", "wörld"}},
		{"words empty", "words", 3, 0, "", nil},
		{"words whitespace only", "words", 3, 0, "  \n\t \u00a0", nil},
		{"words invalid utf8 is a word char", "words", 1, 0, "\xff \xfe\xfd", []string{"\xff", "\xfe\xfd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := chunk(t, Spec{Chunker: "fixed", ChunkSize: tt.size, ChunkOverlap: tt.overlap, Unit: tt.unit}, tt.text)
			if tt.want == nil && len(got) != 0 {
				t.Fatalf("got %q, want no chunks", got)
			}
			eq(t, tt.name, got, tt.want)
		})
	}
}

func TestChunkAppendsToDst(t *testing.T) {
	for _, kind := range []string{"fixed", "recursive", "sentence"} {
		c := mustNew(t, Spec{Chunker: kind, ChunkSize: 4})
		dst := c.Chunk("abcdefgh", []string{"keep"})
		if len(dst) < 2 || dst[0] != "keep" {
			t.Errorf("%s: Chunk dropped existing dst elements: %q", kind, dst)
		}
		if got := c.Chunk("", []string{"keep"}); !reflect.DeepEqual(got, []string{"keep"}) {
			t.Errorf("%s: empty text changed dst: %q", kind, got)
		}
	}
}

func TestFixedNoAllocsWithReusedDst(t *testing.T) {
	doc := benchDoc()
	for _, unit := range []string{"chars", "words"} {
		c := mustNew(t, Spec{Chunker: "fixed", ChunkSize: 50, ChunkOverlap: 5, Unit: unit})
		text := doc
		if unit == "words" {
			text = strings.Join(strings.Fields(doc), " ") // already single-spaced: substrings are reused
		}
		dst := c.Chunk(text, nil)
		allocs := testing.AllocsPerRun(100, func() { dst = c.Chunk(text, dst[:0]) })
		if allocs != 0 {
			t.Errorf("%s: %v allocs per Chunk with a reused dst, want 0", unit, allocs)
		}
	}
}

func TestParse(t *testing.T) {
	s, err := Parse([]byte(`{"chunker":"recursive","input_column":"body","output_column":"chunk",
		"chunk_size":200,"chunk_overlap":20,"keep_input":true,"separators":["\n\n","|"]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Spec{Chunker: "recursive", InputColumn: "body", OutputColumn: "chunk", ChunkSize: 200,
		ChunkOverlap: 20, Unit: "chars", KeepInput: true, Separators: []string{"\n\n", "|"}}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("Parse:\n got  %+v\n want %+v", s, want)
	}
	s, err = Parse([]byte(` {"chunker":"fixed","input_column":"a","output_column":"b","chunk_size":5,"unit":"words"} `))
	if err != nil || s.Unit != "words" || s.ChunkOverlap != 0 || s.KeepInput {
		t.Fatalf("Parse words: %+v, %v", s, err)
	}
}

func TestValidationErrors(t *testing.T) {
	const base = `"chunker":"fixed","input_column":"body","output_column":"chunk","chunk_size":200`
	tests := []struct {
		name, json, field, msgPart string
	}{
		{"size zero", `{"chunker":"fixed","input_column":"a","output_column":"b","chunk_size":0}`, "chunk_size", "> 0"},
		{"size negative", `{"chunker":"fixed","input_column":"a","output_column":"b","chunk_size":-3}`, "chunk_size", "got -3"},
		{"size missing", `{"chunker":"fixed","input_column":"a","output_column":"b"}`, "chunk_size", "got 0"},
		{"size too big", `{"chunker":"fixed","input_column":"a","output_column":"b","chunk_size":1048577}`, "chunk_size", "1048576"},
		{"size not int", `{"chunker":"fixed","input_column":"a","output_column":"b","chunk_size":2.5}`, "chunk_size", "integer"},
		{"size string", `{"chunker":"fixed","input_column":"a","output_column":"b","chunk_size":"200"}`, "chunk_size", "integer"},
		{"overlap negative", `{` + base + `,"chunk_overlap":-1}`, "chunk_overlap", "got -1"},
		{"overlap equals size", `{` + base + `,"chunk_overlap":200}`, "chunk_overlap", "must be >= 0 and < chunk_size (got 200, chunk_size 200)"},
		{"overlap above size", `{` + base + `,"chunk_overlap":300}`, "chunk_overlap", "got 300"},
		{"unknown chunker", `{"chunker":"semantic","input_column":"a","output_column":"b","chunk_size":5}`, "chunker", "semantic"},
		{"missing chunker", `{"input_column":"a","output_column":"b","chunk_size":5}`, "chunker", "required"},
		{"unknown unit", `{` + base + `,"unit":"tokens"}`, "unit", "tokens"},
		{"missing input", `{"chunker":"fixed","output_column":"b","chunk_size":5}`, "input_column", "required"},
		{"blank input", `{"chunker":"fixed","input_column":"  ","output_column":"b","chunk_size":5}`, "input_column", "required"},
		{"missing output", `{"chunker":"fixed","input_column":"a","chunk_size":5}`, "output_column", "required"},
		{"output equals input", `{"chunker":"fixed","input_column":"body","output_column":"body","chunk_size":5}`, "output_column", "differ"},
		{"output equals input case", `{"chunker":"fixed","input_column":"body","output_column":"Body","chunk_size":5}`, "output_column", "differ"},
		{"output reserved", `{"chunker":"fixed","input_column":"a","output_column":"__chunk","chunk_size":5}`, "output_column", "__"},
		{"unknown field", `{` + base + `,"chunk_sise":5}`, "chunk_sise", "unknown field"},
		{"field case differs", `{` + base + `,"Chunk_Overlap":5}`, "Chunk_Overlap", "unknown field"},
		{"separators on fixed", `{` + base + `,"separators":["x"]}`, "separators", "recursive"},
		{"empty separator", `{"chunker":"recursive","input_column":"a","output_column":"b","chunk_size":5,"separators":["x",""]}`, "separators", "separator 1"},
		{"separators not strings", `{"chunker":"recursive","input_column":"a","output_column":"b","chunk_size":5,"separators":[1]}`, "separators", "array of strings"},
		{"keep_input not bool", `{` + base + `,"keep_input":"yes"}`, "keep_input", "boolean"},
		{"malformed", `{"chunker":"fixed",`, "udtf", "invalid JSON"},
		{"malformed syntax", `{"chunker" "fixed"}`, "udtf", "invalid JSON"},
		{"trailing data", `{` + base + `} {}`, "udtf", "after the object"},
		{"empty", ``, "udtf", "empty"},
		{"not object", `["fixed"]`, "udtf", "object"},
		{"null", `null`, "udtf", "object"},
		{"duplicate key", `{` + base + `,"chunk_size":5}`, "udtf", `duplicate key "chunk_size"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.json))
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse(%s) = %v (%T), want *FieldError", tt.json, err, err)
			}
			if fe.Field != tt.field {
				t.Errorf("Field = %q, want %q (error %q)", fe.Field, tt.field, err)
			}
			if !strings.Contains(err.Error(), tt.msgPart) || !strings.HasPrefix(err.Error(), tt.field+": ") {
				t.Errorf("error %q: want prefix %q and to contain %q", err, tt.field+": ", tt.msgPart)
			}
		})
	}
}

func TestFieldErrorMessage(t *testing.T) {
	err := Spec{Chunker: "fixed", InputColumn: "a", OutputColumn: "b", ChunkSize: 200, ChunkOverlap: 200}.Validate()
	if got, want := err.Error(), "chunk_overlap: must be >= 0 and < chunk_size (got 200, chunk_size 200)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestNewValidates(t *testing.T) {
	_, err := New(Spec{Chunker: "fixed", InputColumn: "a", OutputColumn: "b", ChunkSize: 0})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "chunk_size" {
		t.Fatalf("New with size 0: %v, want chunk_size FieldError", err)
	}
	if _, err := New(Spec{Chunker: "fixed", InputColumn: "a", OutputColumn: "b", ChunkSize: 3}); err != nil {
		t.Fatalf("New with empty unit: %v", err)
	}
}

// TestRecursiveNoAllocsWithReusedDst: cutting a text gathers its pieces in
// a pooled list, so a reused dst makes Chunk allocate nothing.
func TestRecursiveNoAllocsWithReusedDst(t *testing.T) {
	doc := benchDoc()
	for _, unit := range []string{"chars", "words"} {
		c := mustNew(t, Spec{Chunker: "recursive", ChunkSize: 60, ChunkOverlap: 10, Unit: unit})
		dst := c.Chunk(doc, nil)
		if len(dst) < 2 {
			t.Fatalf("%s: %d chunks, want a text that splits", unit, len(dst))
		}
		allocs := testing.AllocsPerRun(100, func() { dst = c.Chunk(doc, dst[:0]) })
		if allocs != 0 {
			t.Errorf("%s: %v allocs per Chunk with a reused dst, want 0", unit, allocs)
		}
	}
}

func TestRecursive(t *testing.T) {
	tests := []struct {
		name          string
		size, overlap int
		unit          string
		seps          []string
		text          string
		want          []string
	}{
		{"fits whole", 100, 0, "", nil, "  Para one.\n\nPara two.\n", []string{"Para one.\n\nPara two."}},
		{"paragraphs kept together", 30, 0, "", nil,
			"Short one.\n\nShort two.\n\nA much longer third paragraph.",
			[]string{"Short one.\n\nShort two.", "A much longer third paragraph."}},
		{"one paragraph per chunk", 30, 0, "", nil,
			"First paragraph here.\n\nSecond paragraph here.\n\nThird one.",
			[]string{"First paragraph here.", "Second paragraph here.", "Third one."}},
		{"long paragraph split at sentences", 40, 0, "", nil,
			"Intro.\n\nThis is sentence one. This is sentence two. This is sentence three.",
			[]string{"Intro.", "This is sentence one.", "This is sentence two.", "This is sentence three."}},
		{"pieces around a nested split", 40, 0, "", nil,
			"Intro.\n\nThis is sentence one. This is sentence two.\n\nOutro one.\n\nOutro two.",
			[]string{"Intro.", "This is sentence one.", "This is sentence two.", "Outro one.\n\nOutro two."}},
		{"split at words", 12, 0, "", nil, "alpha beta gamma delta", []string{"alpha beta", "gamma delta"}},
		{"word overlap", 12, 6, "", nil, "alpha beta gamma delta", []string{"alpha beta", "beta gamma", "gamma delta"}},
		{"hard cut", 4, 0, "", nil, "abcdefghij", []string{"abcd", "efgh", "ij"}},
		{"hard cut with overlap", 4, 1, "", nil, "abcdefghij", []string{"abcd", "defg", "ghij"}},
		{"hard cut unicode", 2, 0, "", nil, "äöü x", []string{"äö", "ü", "x"}},
		{"custom separators kept", 5, 0, "", []string{"|"}, "aa|bb|cc", []string{"aa|", "bb|cc"}},
		{"words unit", 3, 0, "words", nil,
			"one two three four five six seven.\n\nEight nine.",
			[]string{"one two three", "four five six", "seven.", "Eight nine."}},
		{"words unit paragraphs", 4, 0, "words", nil,
			"a b.\n\nc d.\n\ne f g h i", []string{"a b.\n\nc d.", "e f g h", "i"}},
		{"whitespace only", 3, 0, "", nil, " \n\n \n ", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := chunk(t, Spec{Chunker: "recursive", ChunkSize: tt.size, ChunkOverlap: tt.overlap, Unit: tt.unit, Separators: tt.seps}, tt.text)
			if tt.want == nil && len(got) != 0 {
				t.Fatalf("got %q, want no chunks", got)
			}
			eq(t, tt.name, got, tt.want)
		})
	}
}

func TestSentence(t *testing.T) {
	tests := []struct {
		name          string
		size, overlap int
		unit          string
		text          string
		want          []string
	}{
		{"packing", 30, 0, "", "One two. Three four! Five six? Seven.",
			[]string{"One two. Three four! Five six?", "Seven."}},
		{"overlap carries whole sentences", 20, 10, "", "Aa bb. Cc dd. Ee ff. Gg hh.",
			[]string{"Aa bb. Cc dd. Ee ff.", "Ee ff. Gg hh."}},
		{"overlap too small for a sentence", 20, 5, "", "Aa bb. Cc dd. Ee ff. Gg hh.",
			[]string{"Aa bb. Cc dd. Ee ff.", "Gg hh."}},
		{"overlap two sentences", 20, 13, "", "Aa bb. Cc dd. Ee ff. Gg hh.",
			[]string{"Aa bb. Cc dd. Ee ff.", "Cc dd. Ee ff. Gg hh."}},
		{"long sentence cut", 10, 0, "", "Heading\n\nBody text here. More.",
			[]string{"Heading", "Body text", "here.", "More."}},
		{"blank line keeps text between", 30, 0, "", "Heading\n\nBody text here.",
			[]string{"Heading\n\nBody text here."}},
		{"no terminal punctuation", 100, 0, "", "  just some words  ", []string{"just some words"}},
		{"decimal is not a stop", 14, 0, "", "Pi is 3.14 ok. Yes.", []string{"Pi is 3.14 ok.", "Yes."}},
		{"words unit", 4, 0, "words", "One two. Three four! Five six? Seven.",
			[]string{"One two. Three four!", "Five six? Seven."}},
		{"words unit overlap", 4, 2, "words", "One two. Three four! Five six? Seven.",
			[]string{"One two. Three four!", "Three four! Five six?", "Five six? Seven."}},
		{"words long sentence", 2, 0, "words", "a b c d e. f.", []string{"a b", "c d", "e.", "f."}},
		{"whitespace only", 5, 0, "", "  \n\n  ", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := chunk(t, Spec{Chunker: "sentence", ChunkSize: tt.size, ChunkOverlap: tt.overlap, Unit: tt.unit}, tt.text)
			if tt.want == nil && len(got) != 0 {
				t.Fatalf("got %q, want no chunks", got)
			}
			eq(t, tt.name, got, tt.want)
		})
	}
}

func TestSplitSentences(t *testing.T) {
	text := "Heading\nstill heading\n \t\nBody.  Next!\tQ?! \"Quoted.\" end...\r\n\r\nLast"
	var got []string
	for _, s := range splitSentences(text, unitChars) {
		got = append(got, text[s.a:s.b])
		if n := utf8.RuneCountInString(text[s.a:s.b]); n != s.ub-s.ua {
			t.Errorf("sentence %q: unit span %d, want %d", text[s.a:s.b], s.ub-s.ua, n)
		}
	}
	eq(t, "sentences", got, []string{"Heading\nstill heading", "Body.", "Next!", "Q?!", "\"Quoted.\" end...", "Last"})
}

// randomText builds text with paragraphs, lines, sentences, runs of white
// space, unicode and the occasional very long word.
func randomText(r *rand.Rand) string {
	words := []string{"a", "be", "cat", "délà", "日本語", "x.y", "end.", "why?", "wow!", "supercalifragilistic", "😀😀"}
	seps := []string{" ", " ", " ", "  ", "\t", "\n", "\n\n", ". ", "\n \n", "\u00a0"}
	var b strings.Builder
	n := r.Intn(200)
	for i := 0; i < n; i++ {
		if r.Intn(40) == 0 {
			b.WriteString(strings.Repeat("z", r.Intn(60)))
		} else {
			b.WriteString(words[r.Intn(len(words))])
		}
		b.WriteString(seps[r.Intn(len(seps))])
	}
	return b.String()
}

func stripSpace(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

// TestChunkInvariants checks the package guarantees on random text for every
// strategy and unit: chunks are within size, non-empty, substrings of the
// input in order, trimmed (recursive, sentence), and with overlap 0 they
// cover all non-space content exactly once.
func TestChunkInvariants(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for iter := 0; iter < 3000; iter++ {
		text := randomText(r)
		kind := []string{"fixed", "recursive", "sentence"}[iter%3]
		unit := []string{"chars", "words"}[r.Intn(2)]
		size := 1 + r.Intn(40)
		overlap := 0
		if r.Intn(2) == 0 {
			overlap = r.Intn(size)
		}
		s := Spec{Chunker: kind, ChunkSize: size, ChunkOverlap: overlap, Unit: unit}
		got := chunk(t, s, text)
		name := fmt.Sprintf("%s/%s size %d overlap %d text %q", kind, unit, size, overlap, text)
		u := unitChars
		if unit == "words" {
			u = unitWords
		}
		pos := 0
		for _, c := range got {
			if c == "" {
				t.Fatalf("%s: empty chunk in %q", name, got)
			}
			if n := countUnits(c, u); n > size {
				t.Fatalf("%s: chunk %q has %d units > %d", name, c, n, size)
			}
			if kind == "fixed" && unit == "words" {
				continue
			}
			if kind != "fixed" && strings.TrimSpace(c) != c {
				t.Fatalf("%s: chunk %q not trimmed", name, c)
			}
			// Chunks are substrings of the text; with overlap each may start
			// before the previous one ends, but never before its start.
			i := strings.Index(text[pos:], c)
			if i < 0 {
				t.Fatalf("%s: chunk %q not found in order in text (chunks %q)", name, c, got)
			}
			if overlap == 0 {
				pos += i + len(c)
			} else {
				pos += i
			}
		}
		if overlap == 0 {
			joined := strings.Join(got, "")
			if kind == "fixed" && unit == "words" {
				joined = strings.Join(got, " ")
				if want := strings.Join(strings.Fields(text), " "); joined != want {
					t.Fatalf("%s: words joined %q, want %q", name, joined, want)
				}
			} else if stripSpace(joined) != stripSpace(text) {
				t.Fatalf("%s: chunks %q do not cover the text's non-space content", name, got)
			}
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	doc := benchDoc()
	for _, kind := range []string{"fixed", "recursive", "sentence"} {
		c := mustNew(t, Spec{Chunker: kind, ChunkSize: 64, ChunkOverlap: 8})
		want := c.Chunk(doc, nil)
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					if got := c.Chunk(doc, nil); !reflect.DeepEqual(got, want) {
						t.Errorf("%s: concurrent result differs", kind)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
}

// refFixedChars is the fixed rule written plainly: the byte offset of every
// code point (an invalid byte is one), then cuts at start = k*(size-overlap).
func refFixedChars(text string, size, overlap int) []string {
	var offs []int
	for i := 0; i < len(text); {
		offs = append(offs, i)
		_, w := utf8.DecodeRuneInString(text[i:])
		i += w
	}
	n := len(offs)
	offs = append(offs, len(text))
	var out []string
	for start := 0; n > 0; start += size - overlap {
		out = append(out, text[offs[start]:offs[min(start+size, n)]])
		if start+size >= n {
			break
		}
	}
	return out
}

func TestFixedCharsMatchesReference(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for iter := 0; iter < 2000; iter++ {
		text := randomText(r)
		if r.Intn(4) == 0 {
			text += "\xff\xe6\x97" + text // invalid and truncated sequences
		}
		size := 1 + r.Intn(50)
		overlap := r.Intn(size)
		got := chunk(t, Spec{Chunker: "fixed", ChunkSize: size, ChunkOverlap: overlap}, text)
		if want := refFixedChars(text, size, overlap); !reflect.DeepEqual(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("size %d overlap %d text %q:\n got  %q\n want %q", size, overlap, text, got, want)
		}
	}
}

func FuzzFixed(f *testing.F) {
	f.Add("abcdefghij", uint16(4), uint16(1))
	f.Add("héllo wörld", uint16(5), uint16(0))
	f.Add("a\xffb\xc3", uint16(2), uint16(1))
	f.Add("", uint16(3), uint16(0))
	f.Add("  spaced   out\twords\n", uint16(2), uint16(1))
	f.Fuzz(func(t *testing.T, text string, size16, overlap16 uint16) {
		size := 1 + int(size16)%300
		overlap := int(overlap16) % size
		for _, ov := range []int{overlap, 0} {
			c := mustNew(t, Spec{Chunker: "fixed", ChunkSize: size, ChunkOverlap: ov})
			got := c.Chunk(text, nil)
			if want := refFixedChars(text, size, ov); !reflect.DeepEqual(got, want) && len(got)+len(want) > 0 {
				t.Fatalf("size %d overlap %d: got %q, want %q", size, ov, got, want)
			}
			n := utf8.RuneCountInString(text)
			if want := numCuts(n, size, size-ov); len(got) != want {
				t.Fatalf("size %d overlap %d: %d chunks, want %d", size, ov, len(got), want)
			}
			if text == "" {
				continue
			}
			if !strings.HasPrefix(text, got[0]) {
				t.Fatalf("first chunk %q is not a prefix of %q", got[0], text)
			}
			for i, ch := range got {
				k := utf8.RuneCountInString(ch)
				if k == 0 || k > size {
					t.Fatalf("chunk %d %q has %d code points (size %d)", i, ch, k, size)
				}
				if i < len(got)-1 && k != size {
					t.Fatalf("chunk %d %q is short but not last", i, ch)
				}
			}
			if ov == 0 && strings.Join(got, "") != text {
				t.Fatalf("overlap 0: chunks %q do not concatenate to %q", got, text)
			}
		}
		w := mustNew(t, Spec{Chunker: "fixed", ChunkSize: size, ChunkOverlap: 0, Unit: "words"})
		if got, want := strings.Join(w.Chunk(text, nil), " "), strings.Join(strings.Fields(text), " "); got != want {
			t.Fatalf("words overlap 0: joined %q, want %q", got, want)
		}
		for _, kind := range []string{"recursive", "sentence"} {
			c := mustNew(t, Spec{Chunker: kind, ChunkSize: size, ChunkOverlap: overlap})
			for _, ch := range c.Chunk(text, nil) {
				if utf8.RuneCountInString(ch) > size || ch == "" {
					t.Fatalf("%s: bad chunk %q (size %d)", kind, ch, size)
				}
			}
		}
	})
}

// benchDoc is about 2 KB of mostly ASCII prose with some multi-byte text.
func benchDoc() string {
	para := "Materialized views keep query results fresh so that readers do not pay for the computation. " +
		"Each refresh re-reads the source rows, cuts their text into chunks, and writes one row per chunk. " +
		"Größere Dokumente enthalten Umlaute, and some carry 日本語のテキスト or emoji 😀 as well.\n\n"
	var b strings.Builder
	for b.Len() < 2048 {
		b.WriteString(para)
	}
	doc := b.String()[:2048]
	for !utf8.ValidString(doc) { // do not end inside a multi-byte character
		doc = doc[:len(doc)-1]
	}
	return doc
}

func BenchmarkFixedChars2KB(b *testing.B) {
	doc := benchDoc()
	c := mustNew(b, Spec{Chunker: "fixed", ChunkSize: 200, ChunkOverlap: 20})
	b.Run("reuse-dst", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		var dst []string
		for b.Loop() {
			dst = c.Chunk(doc, dst[:0])
		}
	})
	b.Run("fresh-dst", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			_ = c.Chunk(doc, nil)
		}
	})
}

// TestRuneCountMatchesStdlib: the chunker's counting of code points is
// utf8.RuneCountInString's, invalid and truncated sequences included,
// at every offset of the eight-byte steps.
func TestRuneCountMatchesStdlib(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	pieces := []string{"a", "abcdefgh", " ", "\n\n", "é", "日本", "😀", "\xff", "\xe6\x97", "\x80", "\xf0\x9f", "\x00"}
	for iter := 0; iter < 5000; iter++ {
		var b strings.Builder
		for k := r.Intn(40); k > 0; k-- {
			b.WriteString(pieces[r.Intn(len(pieces))])
		}
		s := b.String()
		for i := 0; i <= len(s) && i < 9; i++ {
			if got, want := runeCount(s[i:]), utf8.RuneCountInString(s[i:]); got != want {
				t.Fatalf("runeCount(%q) = %d, want %d", s[i:], got, want)
			}
		}
	}
}

func FuzzRuneCount(f *testing.F) {
	f.Add("plain ascii text of some length")
	f.Add("héllo wörld \xff\xe6\x97 日本語 😀")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := runeCount(s), utf8.RuneCountInString(s); got != want {
			t.Fatalf("runeCount(%q) = %d, want %d", s, got, want)
		}
	})
}

// BenchmarkRecursive2KB: the recursive chunker (the benchmarks' and the
// examples' chunker) on a 2 KB document, chunk_size 512, overlap 64.
func BenchmarkRecursive2KB(b *testing.B) {
	doc := benchDoc()
	c := mustNew(b, Spec{Chunker: "recursive", ChunkSize: 512, ChunkOverlap: 64})
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	var dst []string
	for b.Loop() {
		dst = c.Chunk(doc, dst[:0])
	}
}
