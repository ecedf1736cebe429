package udf

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func cosine(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func TestHashEmbed(t *testing.T) {
	a := HashEmbed("The quick brown fox jumps", 64)
	if len(a) != 64 {
		t.Fatalf("dims %d", len(a))
	}
	var norm float64
	for _, x := range a {
		norm += float64(x) * float64(x)
	}
	if math.Abs(norm-1) > 1e-5 {
		t.Fatalf("norm² %v, want 1", norm)
	}
	if b := HashEmbed("the QUICK brown fox, jumps!", 64); cosine(a, b) < 0.9999 {
		t.Fatalf("case and punctuation changed the vector: cos %v", cosine(a, b))
	}
	near := cosine(a, HashEmbed("a quick brown dog", 64))
	far := cosine(a, HashEmbed("tax returns are due in april", 64))
	if near <= far {
		t.Fatalf("shared words are not closer: %v <= %v", near, far)
	}
	for _, x := range HashEmbed("  ,;  ", 8) {
		if x != 0 {
			t.Fatalf("a text without words is not the zero vector")
		}
	}
}

func TestServeHashEmbed(t *testing.T) {
	in := strings.Join([]string{
		`{"__row":0,"chunk":"red apples"}`,
		`{"__row":1,"chunk":null}`,
		`{"__row":2,"chunk":"red apples"}`,
		`{"__end":true}`,
		`{"__row":3,"chunk":"pears"}`,
		`{"__end": true}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	if err := ServeHashEmbed(strings.NewReader(in), &out, 16); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 6 || lines[3] != `{"__end":true}` || lines[5] != `{"__end":true}` {
		t.Fatalf("answer:\n%s", out.String())
	}
	var rows [4]struct {
		Row       int       `json:"__row"`
		Embedding []float32 `json:"embedding"`
	}
	for i, l := range []string{lines[0], lines[1], lines[2], lines[4]} {
		if err := json.Unmarshal([]byte(l), &rows[i]); err != nil {
			t.Fatal(err)
		}
		if rows[i].Row != []int{0, 1, 2, 3}[i] {
			t.Fatalf("line %d answers row %d", i, rows[i].Row)
		}
	}
	if len(rows[0].Embedding) != 16 || rows[1].Embedding != nil || cosine(rows[0].Embedding, rows[2].Embedding) < 0.9999 {
		t.Fatalf("rows: %+v", rows)
	}
	if err := ServeHashEmbed(strings.NewReader(""), &out, 0); err == nil {
		t.Fatal("dims 0 accepted")
	}
}

func TestRegistryWith(t *testing.T) {
	reg, err := (*Registry)(nil).With(LocalEmbedRuntime("local-embed", "/bin/mvq", 64))
	if err != nil {
		t.Fatal(err)
	}
	r, ok := reg.Lookup("local-embed")
	if !ok || r.Dimensions != 64 || r.MaxBatchRows != DefaultMaxBatchRows || r.Command[0] != "/bin/mvq" {
		t.Fatalf("runtime %+v", r)
	}
	if _, err := reg.With(LocalEmbedRuntime("local-embed", "/bin/mvq", 8)); err == nil {
		t.Fatal("a second local-embed accepted")
	}
	if _, err := reg.With(Runtime{Name: "bad", Kind: KindExec, Protocol: ProtocolNDJSON}); err == nil {
		t.Fatal("an exec runtime without a command accepted")
	}
}

// TestExampleRuntimes: the runtimes files in examples/ load.
func TestExampleRuntimes(t *testing.T) {
	for file, names := range map[string][]string{
		"../examples/runtimes-openai.yaml": {"ollama", "openai", "vllm"},
		"../examples/runtimes-local.yaml":  {"hash-embed", "minilm"},
	} {
		reg, err := Load(file)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(reg.Names(), ","); got != strings.Join(names, ",") {
			t.Fatalf("%s: runtimes %s", file, got)
		}
		for _, n := range names {
			if r, _ := reg.Lookup(n); r.Dimensions <= 0 {
				t.Fatalf("%s: runtime %s declares no dimensions", file, n)
			}
		}
	}
}
