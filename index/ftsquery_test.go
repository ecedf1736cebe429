package index_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/table"
)

// oracle evaluates full-text queries by brute force over the texts of
// every row: tokenize everything, count, and apply each query form's
// definition (index.TextQuery) directly.
type oracle struct {
	cols map[string][]*string // column → row → text (nil: null)
	toks map[string][][]string
	dfs  map[string]float64
}

func newOracle(cols map[string][]*string) *oracle {
	o := &oracle{cols: cols, toks: map[string][][]string{}, dfs: map[string]float64{}}
	for c, texts := range cols {
		ts := make([][]string, len(texts))
		for i, s := range texts {
			if s != nil {
				ts[i] = index.Tokenize(*s)
				if ts[i] == nil {
					ts[i] = []string{}
				}
			}
		}
		o.toks[c] = ts
	}
	return o
}

func firstOrder(toks []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range toks {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// bm25 scores row i of column c for terms (summed in order).
func (o *oracle) bm25(c string, i int, terms []string) float64 {
	var docs, total float64
	for _, t := range o.toks[c] {
		if t != nil {
			docs++
			total += float64(len(t))
		}
	}
	var s float64
	for _, w := range terms {
		var tf float64
		for _, x := range o.toks[c][i] {
			if x == w {
				tf++
			}
		}
		if tf == 0 {
			continue
		}
		df := o.df(c, w)
		idf := math.Log(1 + (docs-df+0.5)/(df+0.5))
		dl := float64(len(o.toks[c][i]))
		s += idf * tf * (index.BM25K1 + 1) / (tf + index.BM25K1*(1-index.BM25B+index.BM25B*dl/(total/docs)))
	}
	return s
}

// df counts the rows of column c holding w (memoized).
func (o *oracle) df(c, w string) float64 {
	key := c + "\x00" + w
	if v, ok := o.dfs[key]; ok {
		return v
	}
	var df float64
	for _, t := range o.toks[c] {
		for _, x := range t {
			if x == w {
				df++
				break
			}
		}
	}
	o.dfs[key] = df
	return df
}

// hasPhrase: positions strictly increasing holding the phrase's tokens,
// the span at most len-1+slop, by trying every combination.
func hasPhrase(toks, phrase []string, slop int) bool {
	var try func(k, prev, start int) bool
	try = func(k, prev, start int) bool {
		if k == len(phrase) {
			return prev-start-(len(phrase)-1) <= slop
		}
		for p := prev + 1; p < len(toks); p++ {
			if toks[p] != phrase[k] {
				continue
			}
			s := start
			if k == 0 {
				s = p
			}
			if try(k+1, p, s) {
				return true
			}
		}
		return false
	}
	return try(0, -1, 0)
}

func (o *oracle) columns(c string, indexed []string) []string {
	if c == "" {
		return indexed
	}
	return []string{c}
}

func (o *oracle) match(mq index.MatchQuery, indexed []string, out map[int]float64) {
	terms := firstOrder(index.Tokenize(mq.Terms))
	boost := mq.Boost
	if boost == 0 {
		boost = 1
	}
	for _, c := range o.columns(mq.Column, indexed) {
		for i, t := range o.toks[c] {
			if t == nil || len(terms) == 0 {
				continue
			}
			n := 0
			for _, w := range terms {
				for _, x := range t {
					if x == w {
						n++
						break
					}
				}
			}
			if n == 0 || mq.And && n < len(terms) {
				continue
			}
			out[i] += o.bm25(c, i, terms) * boost
		}
	}
}

func (o *oracle) eval(q *index.TextQuery, indexed []string) map[int]float64 {
	out := map[int]float64{}
	switch {
	case q.Match != nil:
		o.match(*q.Match, indexed, out)
	case q.Phrase != nil:
		phrase := index.Tokenize(q.Phrase.Terms)
		for _, c := range o.columns(q.Phrase.Column, indexed) {
			for i, t := range o.toks[c] {
				if t != nil && len(phrase) > 0 && hasPhrase(t, phrase, q.Phrase.Slop) {
					out[i] += o.bm25(c, i, firstOrder(phrase))
				}
			}
		}
	case q.BoostQ != nil:
		out = o.eval(q.BoostQ.Positive, indexed)
		neg := o.eval(q.BoostQ.Negative, indexed)
		for i := range out {
			if _, ok := neg[i]; ok {
				out[i] *= q.BoostQ.NegativeBoost
			}
		}
	case q.Multi != nil:
		for _, mq := range q.Multi {
			o.match(mq, indexed, out)
		}
	case q.Bool != nil:
		b := q.Bool
		if len(b.Must) == 0 && len(b.Should) == 0 {
			return out
		}
		var musts, shoulds []map[int]float64
		for _, k := range b.Must {
			musts = append(musts, o.eval(k, indexed))
		}
		for _, k := range b.Should {
			shoulds = append(shoulds, o.eval(k, indexed))
		}
		nots := map[int]bool{}
		for _, k := range b.MustNot {
			for i := range o.eval(k, indexed) {
				nots[i] = true
			}
		}
		rows := len(o.toks["body"])
		for i := 0; i < rows; i++ {
			if nots[i] {
				continue
			}
			var s float64
			ok, any := true, false
			for _, m := range musts {
				v, hit := m[i]
				ok = ok && hit
				s += v
			}
			for _, m := range shoulds {
				if v, hit := m[i]; hit {
					any = true
					s += v
				}
			}
			if ok && (len(musts) > 0 || any) {
				out[i] = s
			}
		}
	}
	return out
}

// TestFullTextQueryFormsMatchBruteForce: every FtsQuery form (match,
// phrase with and without slop, boost, multi_match, boolean) answers
// the rows and scores a brute-force evaluation does, searched through an
// INVERTED index with positions, one without positions, and no index at
// all (a scan), with appended fragments the index does not cover.
func TestFullTextQueryFormsMatchBruteForce(t *testing.T) {
	ctx := context.Background()
	cat := newCatalog(t, table.Options{MaxRowsPerFragment: 250})
	words := strings.Fields("apple banana cherry date elder fig grape honeydew kiwi lemon mango")
	r := rand.New(rand.NewPCG(9, 9))
	text := func(max int) *string {
		if r.IntN(30) == 0 {
			return nil
		}
		var ws []string
		for range 1 + r.IntN(max) {
			w := words[int(math.Floor(math.Pow(r.Float64(), 2)*float64(len(words))))]
			if r.IntN(6) == 0 {
				w = strings.ToUpper(w) + "."
			}
			ws = append(ws, w)
		}
		s := strings.Join(ws, " ")
		return &s
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "body", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "title", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	cols := map[string][]*string{}
	build := func(from, to int) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		for i := from; i < to; i++ {
			body, title := text(14), text(4)
			cols["body"] = append(cols["body"], body)
			cols["title"] = append(cols["title"], title)
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			for c, s := range []*string{body, title} {
				if s == nil {
					b.Field(c + 1).AppendNull()
				} else {
					b.Field(c + 1).(*array.StringBuilder).Append(*s)
				}
			}
		}
		return b.NewRecordBatch()
	}
	rec := build(0, 1200)
	tb, _, err := cat.CreateTable(ctx, []string{"ns", "fts"}, schema, reader(rec), "", nil)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	append300 := func() {
		tb.Catalog().UseIndexes(unmaintained) // stays uncovered
		defer tb.Catalog().UseIndexes(index.Maintenance())
		rec := build(len(cols["body"]), len(cols["body"])+300)
		defer rec.Release()
		if _, _, err := tb.Insert(ctx, reader(rec), ""); err != nil {
			t.Fatal(err)
		}
	}
	m := func(col, terms string) *index.TextQuery {
		return &index.TextQuery{Match: &index.MatchQuery{Column: col, Terms: terms}}
	}
	ph := func(col, terms string, slop int) *index.TextQuery {
		return &index.TextQuery{Phrase: &index.PhraseQuery{Column: col, Terms: terms, Slop: slop}}
	}
	queries := []struct {
		name   string
		q      *index.TextQuery
		filter string
		keep   func(int) bool
	}{
		{"match or", m("body", "apple banana"), "", nil},
		{"match and boost", &index.TextQuery{Match: &index.MatchQuery{Column: "body", Terms: "apple, Cherry", And: true, Boost: 2.5}}, "", nil},
		{"match default column", m("", "grape kiwi"), "", nil},
		{"match title (no index)", m("title", "banana date"), "", nil},
		{"phrase", ph("body", "apple banana", 0), "", nil},
		{"phrase repeated token", ph("body", "apple apple", 0), "", nil},
		{"phrase slop", ph("body", "apple cherry banana", 2), "", nil},
		{"phrase title", ph("title", "banana apple", 1), "", nil},
		{"phrase one token", ph("body", "Date", 0), "", nil},
		{"phrase filtered", ph("body", "banana apple", 1), "id % 3 = 0", func(i int) bool { return i%3 == 0 }},
		{"boost", &index.TextQuery{BoostQ: &index.BoostQuery{Positive: m("body", "apple"), Negative: ph("body", "apple banana", 0), NegativeBoost: 0.3}}, "", nil},
		{"multi_match", &index.TextQuery{Multi: []index.MatchQuery{{Column: "body", Terms: "cherry"}, {Column: "title", Terms: "date apple", Boost: 1.5}}}, "", nil},
		{"boolean", &index.TextQuery{Bool: &index.BoolQuery{
			Must:    []*index.TextQuery{m("body", "apple")},
			Should:  []*index.TextQuery{ph("body", "banana cherry", 0), m("title", "fig")},
			MustNot: []*index.TextQuery{m("title", "apple")},
		}}, "", nil},
		{"boolean should only", &index.TextQuery{Bool: &index.BoolQuery{
			Should:  []*index.TextQuery{m("title", "elder"), ph("body", "date date", 3)},
			MustNot: []*index.TextQuery{m("body", "banana")},
		}}, "id < 1000", func(i int) bool { return i < 1000 }},
		{"boolean must_not only", &index.TextQuery{Bool: &index.BoolQuery{MustNot: []*index.TextQuery{m("body", "apple")}}}, "", nil},
		{"no tokens", m("body", " ,. "), "", nil},
	}
	check := func(setup string, indexed []string) {
		t.Helper()
		o := newOracle(cols)
		for _, c := range queries {
			got, err := index.SearchText(ctx, tb, index.FTSQuery{Query: c.q, Filter: c.filter, K: 5000, Columns: []string{"id"}})
			if err != nil {
				t.Fatalf("%s, %s: %v", setup, c.name, err)
			}
			ids := got.Column(0).(*array.Int64).Int64Values()
			scores := got.Column(1).(*array.Float32).Float32Values()
			gotRows := map[int]float64{}
			for i, id := range ids {
				gotRows[int(id)] = float64(scores[i])
			}
			for i := 1; i < len(scores); i++ {
				if scores[i] > scores[i-1] {
					t.Fatalf("%s, %s: not best first at %d", setup, c.name, i)
				}
			}
			got.Release()
			want := o.eval(c.q, indexed)
			for i := range want {
				if c.keep != nil && !c.keep(i) {
					delete(want, i)
				}
			}
			if len(want) != len(gotRows) {
				t.Fatalf("%s, %s: %d rows, brute force %d", setup, c.name, len(gotRows), len(want))
			}
			for i, w := range want {
				g, ok := gotRows[i]
				if !ok || math.Abs(g-w) > 1e-4*math.Max(1, math.Abs(w)) {
					t.Fatalf("%s, %s: row %d scores %v (found %v), brute force %v", setup, c.name, i, g, ok, w)
				}
			}
			if len(want) == 0 && !strings.Contains(c.name, "only") && c.name != "no tokens" {
				t.Fatalf("%s, %s: the brute force finds nothing; the query tests nothing", setup, c.name)
			}
		}
	}
	// No index: the default column has nothing to search.
	if _, err := index.SearchText(ctx, tb, index.FTSQuery{Text: "apple"}); errs.CodeOf(err) != errs.CodeInvalidInput || !strings.Contains(err.Error(), "column") {
		t.Fatalf("default column without an index: %v", err)
	}
	queriesNoDefault := queries
	queries = nil
	for _, c := range queriesNoDefault {
		if c.name != "match default column" {
			queries = append(queries, c)
		}
	}
	check("no index", nil)
	queries = queriesNoDefault

	if _, err := index.Create(ctx, tb, index.Spec{Column: "body", Type: "INVERTED"}); err != nil {
		t.Fatal(err)
	}
	append300()
	check("indexed with positions", []string{"body"})

	if _, err := index.Create(ctx, tb, index.Spec{Column: "body", Type: "INVERTED", NoPositions: true}); err != nil {
		t.Fatal(err)
	}
	append300()
	check("indexed without positions", []string{"body"})

	if _, err := index.SearchText(ctx, tb, index.FTSQuery{Query: m("id", "1")}); errs.CodeOf(err) != errs.CodeInvalidInput || !strings.Contains(err.Error(), `"id"`) {
		t.Fatalf("search an integer column: %v", err)
	}
	if _, err := index.SearchText(ctx, tb, index.FTSQuery{Query: ph("nope", "x", 0)}); errs.CodeOf(err) != errs.CodeTableColumnNotFound {
		t.Fatalf("search a missing column: %v", err)
	}
}
