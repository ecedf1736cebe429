package udf

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"unicode"
)

// The hashing embedder: feature hashing of words and character trigrams
// into a fixed number of dimensions, L2-normalised. It is not a learned
// model: texts that share words (or parts of words) get close vectors,
// synonyms do not. It needs no network and no files, and the same text
// always gives the same vector, which makes it good for trying the
// embeddings pipeline (a virtual column, a backfill, a vector search)
// before pointing a runtime at a real model.

// HashEmbedField is the key the hashing embedder answers each row's vector
// under (the struct_field of its output).
const HashEmbedField = "embedding"

// HashEmbed is the hashing embedder's vector of text: dims float32s,
// L2-normalised (all zero for a text without letters or digits).
func HashEmbed(text string, dims int) []float32 {
	v := make([]float32, dims)
	if dims <= 0 {
		return v
	}
	add := func(feature string, w float32) {
		h := fnv.New64a()
		_, _ = h.Write([]byte(feature))
		x := h.Sum64()
		// The top bit picks the sign, so unrelated features cancel out on
		// average instead of piling up.
		if x>>63 == 1 {
			w = -w
		}
		v[x%uint64(dims)] += w
	}
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for _, w := range words {
		add("w:"+w, 1)
		r := []rune(" " + w + " ")
		for i := 0; i+3 <= len(r); i++ {
			add("c:"+string(r[i:i+3]), 0.5)
		}
	}
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum > 0 {
		n := float32(1 / math.Sqrt(sum))
		for i := range v {
			v[i] *= n
		}
	}
	return v
}

// MaxHashEmbedDims bounds the hashing embedder's dimensions.
const MaxHashEmbedDims = 1 << 16

// ServeHashEmbed answers the ndjson protocol of an exec runtime on in and
// out with the hashing embedder: each input row's text is its input
// columns' string values (in column-name order, joined by newlines; other
// values as their JSON), and its answer {"__row": n, "embedding": [...]};
// a row whose inputs are all null gets a null embedding. It returns at the
// end of in.
func ServeHashEmbed(in io.Reader, out io.Writer, dims int) error {
	if dims <= 0 || dims > MaxHashEmbedDims {
		return fmt.Errorf("dims: must be 1 to %d", MaxHashEmbedDims)
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<16), maxLineBytes)
	w := bufio.NewWriter(out)
	for sc.Scan() {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		if isEnd(line) {
			if _, err := w.Write(append(endLine, '\n')); err != nil {
				return err
			}
			if err := w.Flush(); err != nil {
				return err
			}
			continue
		}
		var row map[string]json.RawMessage
		if err := json.Unmarshal(line, &row); err != nil || row == nil {
			return fmt.Errorf("input line is not a JSON object: %s", clip(line))
		}
		ans := map[string]any{"__row": row["__row"], HashEmbedField: nil}
		if text, ok := rowText(row); ok {
			ans[HashEmbedField] = HashEmbed(text, dims)
		}
		b, err := json.Marshal(ans)
		if err != nil {
			return err
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return w.Flush()
}

// rowText joins a row's input values; ok is false when all are null.
func rowText(row map[string]json.RawMessage) (string, bool) {
	var keys []string
	for k := range row {
		if !strings.HasPrefix(k, "__") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		raw := row[k]
		if string(raw) == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			s = string(raw)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "\n"), len(parts) > 0
}

// LocalEmbedRuntime is the exec runtime that runs the hashing embedder in
// the program at exe (`exe udf hash-embed --dims N`): what mvq dev
// declares as "local-embed" unless the runtimes file declares that name.
func LocalEmbedRuntime(name, exe string, dims int) Runtime {
	return Runtime{
		Name:       name,
		Kind:       KindExec,
		Command:    []string{exe, "udf", "hash-embed", "--dims", fmt.Sprint(dims)},
		Dir:        os.TempDir(),
		Protocol:   ProtocolNDJSON,
		Model:      "mvq-hash-embed",
		Dimensions: dims,
	}
}

// With is g with r added under r.Name (checked as a runtimes file's
// entry is); a name g declares already is an error.
func (g *Registry) With(r Runtime) (*Registry, error) {
	if r.Name == "" || strings.ContainsAny(r.Name, " \t\n/\\\"") {
		return nil, fmt.Errorf("runtime name %q: no spaces, slashes or quotes", r.Name)
	}
	if _, ok := g.Lookup(r.Name); ok {
		return nil, fmt.Errorf("runtime %s: declared already", r.Name)
	}
	if err := r.check(); err != nil {
		return nil, fmt.Errorf("runtime %s: %v", r.Name, err)
	}
	out := &Registry{runtimes: map[string]Runtime{}}
	if g != nil {
		for n, rt := range g.runtimes {
			out.runtimes[n] = rt
		}
	}
	out.runtimes[r.Name] = r.withDefaults()
	return out, nil
}
