package index

import (
	"context"
	"math"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// TextQuery is one node of a full-text query (the spec's FtsQuery):
// exactly one of its fields is set. Each node answers a set of rows with
// a score; what each form matches and scores:
//
//   - Match: the rows holding any of the terms (And: all), scored by
//     BM25 summed over the distinct terms, times Boost.
//   - Phrase: the rows holding the terms in order, with at most Slop
//     extra tokens between the first and the last (Slop 0: adjacent),
//     scored as a match of the distinct terms.
//   - BoostQ: Positive's rows and scores; a row Negative also matches
//     has its score multiplied by NegativeBoost.
//   - Multi: the rows any of the match queries matches, the scores of
//     the queries matching a row summed.
//   - Bool: the rows every Must query matches (with no Must, the rows at
//     least one Should matches) and no MustNot matches; the score is the
//     sum of the scores of the Must and Should queries matching the row.
//
// BM25 statistics (document count, average length, document frequency)
// are a column's, over the whole table version. A column ("" in Match
// or Phrase: every column with an INVERTED index, the scores summed) is
// searched through its INVERTED index where that covers a fragment, and
// by tokenizing the fragment's text otherwise, or everywhere when the
// column has no index (the same answers, only slower).
type TextQuery struct {
	Match  *MatchQuery
	Phrase *PhraseQuery
	BoostQ *BoostQuery
	Multi  []MatchQuery
	Bool   *BoolQuery
}

// MatchQuery matches terms in a column.
type MatchQuery struct {
	Column string
	Terms  string
	And    bool
	Boost  float64 // 0: 1
}

// PhraseQuery matches a phrase in a column.
type PhraseQuery struct {
	Column string
	Terms  string
	Slop   int
}

// BoostQuery demotes the rows of Positive that Negative matches.
type BoostQuery struct {
	Positive, Negative *TextQuery
	NegativeBoost      float64
}

// BoolQuery combines queries.
type BoolQuery struct {
	Must, Should, MustNot []*TextQuery
}

// ftsColumn is a column's postings over a table version: one file per
// fragment (the index's, or built from the text) and the BM25 statistics.
type ftsColumn struct {
	col    int
	im     *Meta // nil: no INVERTED index
	files  []*ftsFile
	posed  []*ftsFile // files with positions, built on demand
	docs   int64
	avgdl  float64
	dfs    map[string]int64
	loaded bool
}

type ftsEval struct {
	t       *table.Table
	m       *table.Manifest
	schema  *arrow.Schema
	indexed []string // the columns with an INVERTED index, sorted
	cols    map[string]*ftsColumn
}

// hits are a node's rows: address → score.
type hits map[uint64]float64

// SearchText runs q over t: the K rows with the highest score (ties:
// table order), with their columns and _score, best first. Errors:
// CodeInvalidInput naming full_text_query for a column that is not a
// string column, or no column when the table has no INVERTED index.
func SearchText(ctx context.Context, t *table.Table, q FTSQuery) (arrow.RecordBatch, error) {
	m, schema, err := t.LoadSchema(ctx, q.Version)
	if err != nil {
		return nil, err
	}
	metas, err := List(ctx, t)
	if err != nil {
		return nil, err
	}
	e := &ftsEval{t: t, m: m, schema: schema, cols: map[string]*ftsColumn{}}
	for _, x := range metas {
		if x.Type != Inverted || len(schema.FieldIndices(x.Column)) == 0 || !x.sameField(m, schema) {
			continue
		}
		if _, dup := e.cols[x.Column]; dup {
			continue
		}
		e.cols[x.Column] = &ftsColumn{im: x, col: schema.FieldIndices(x.Column)[0]}
		e.indexed = append(e.indexed, x.Column)
	}
	sort.Strings(e.indexed)
	query := q.Query
	if query == nil {
		query = &TextQuery{Match: &MatchQuery{Column: q.Column, Terms: q.Text, And: q.And, Boost: q.Boost}}
	}
	if err := e.check(query); err != nil {
		return nil, err
	}
	if q.K <= 0 {
		q.K = 10
	}
	out, _, err := table.ProjectSchema(schema, q.Columns, q.RowAddr)
	if err != nil {
		return nil, err
	}
	found, err := e.eval(ctx, query)
	if err != nil {
		return nil, err
	}
	var allowed map[uint64]bool
	if strings.TrimSpace(q.Filter) != "" && len(found) > 0 {
		if allowed, err = filterAddrs(ctx, t, m, q.Filter); err != nil {
			return nil, err
		}
	}
	pos := make(map[uint32]int, len(m.Fragments))
	for i, f := range m.Fragments {
		pos[f.ID] = i
	}
	top := &topHits{k: q.K}
	for addr, score := range found {
		if allowed != nil && !allowed[addr] {
			continue
		}
		top.offer(scored{score, addr, pos[uint32(addr>>32)]})
	}
	res := top.items
	sort.Slice(res, func(a, b int) bool { return better(res[a], res[b]) })
	return fetchRows(ctx, t, m, out, q.Columns, q.RowAddr, res)
}

// check resolves and checks the columns of every node before any work;
// errors name the field.
func (e *ftsEval) check(q *TextQuery) error {
	if q == nil {
		return errs.Errorf(errs.CodeInvalidInput, "full_text_query: empty query")
	}
	checkCol := func(c string) error {
		if c == "" {
			if len(e.indexed) == 0 {
				return errs.Errorf(errs.CodeInvalidInput, "full_text_query: column: required (the table has no INVERTED index to search by default)")
			}
			return nil
		}
		idx := e.schema.FieldIndices(c)
		if len(idx) == 0 {
			return errs.Errorf(errs.CodeTableColumnNotFound, "full_text_query: column %q not found", c)
		}
		f := e.schema.Field(idx[0])
		if f.Type.ID() != arrow.STRING && f.Type.ID() != arrow.LARGE_STRING {
			return errs.Errorf(errs.CodeInvalidInput, "full_text_query: column %q is %s, not a string column", c, f.Type)
		}
		if e.cols[c] == nil {
			e.cols[c] = &ftsColumn{col: idx[0]}
		}
		return nil
	}
	switch {
	case q.Match != nil:
		return checkCol(q.Match.Column)
	case q.Phrase != nil:
		if q.Phrase.Slop < 0 {
			return errs.Errorf(errs.CodeInvalidInput, "full_text_query: phrase.slop: must be at least 0")
		}
		return checkCol(q.Phrase.Column)
	case q.BoostQ != nil:
		if err := e.check(q.BoostQ.Positive); err != nil {
			return err
		}
		return e.check(q.BoostQ.Negative)
	case q.Multi != nil:
		for _, mq := range q.Multi {
			if err := checkCol(mq.Column); err != nil {
				return err
			}
		}
		return nil
	case q.Bool != nil:
		for _, l := range [][]*TextQuery{q.Bool.Must, q.Bool.Should, q.Bool.MustNot} {
			for _, k := range l {
				if err := e.check(k); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return errs.Errorf(errs.CodeInvalidInput, "full_text_query: empty query")
}

// columns answers the columns a node's column field names.
func (e *ftsEval) columns(c string) []string {
	if c == "" {
		return e.indexed
	}
	return []string{c}
}

func (e *ftsEval) eval(ctx context.Context, q *TextQuery) (hits, error) {
	switch {
	case q.Match != nil:
		out := hits{}
		for _, c := range e.columns(q.Match.Column) {
			if err := e.match(ctx, c, q.Match, out); err != nil {
				return nil, err
			}
		}
		return out, nil
	case q.Phrase != nil:
		out := hits{}
		for _, c := range e.columns(q.Phrase.Column) {
			if err := e.phrase(ctx, c, q.Phrase, out); err != nil {
				return nil, err
			}
		}
		return out, nil
	case q.BoostQ != nil:
		pos, err := e.eval(ctx, q.BoostQ.Positive)
		if err != nil {
			return nil, err
		}
		neg, err := e.eval(ctx, q.BoostQ.Negative)
		if err != nil {
			return nil, err
		}
		for a := range pos {
			if _, ok := neg[a]; ok {
				pos[a] *= q.BoostQ.NegativeBoost
			}
		}
		return pos, nil
	case q.Multi != nil:
		out := hits{}
		for _, mq := range q.Multi {
			for _, c := range e.columns(mq.Column) {
				if err := e.match(ctx, c, &mq, out); err != nil {
					return nil, err
				}
			}
		}
		return out, nil
	case q.Bool != nil:
		return e.boolean(ctx, q.Bool)
	}
	return hits{}, nil
}

func (e *ftsEval) boolean(ctx context.Context, b *BoolQuery) (hits, error) {
	var out hits
	for i, k := range b.Must {
		h, err := e.eval(ctx, k)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			out = h
			continue
		}
		for a, s := range out {
			if hs, ok := h[a]; ok {
				out[a] = s + hs
			} else {
				delete(out, a)
			}
		}
	}
	for _, k := range b.Should {
		h, err := e.eval(ctx, k)
		if err != nil {
			return nil, err
		}
		if len(b.Must) > 0 {
			for a, s := range out {
				if hs, ok := h[a]; ok {
					out[a] = s + hs
				}
			}
			continue
		}
		if out == nil {
			out = hits{}
		}
		for a, hs := range h {
			out[a] += hs
		}
	}
	if out == nil {
		return hits{}, nil // only must_not: nothing to match
	}
	for _, k := range b.MustNot {
		h, err := e.eval(ctx, k)
		if err != nil {
			return nil, err
		}
		for a := range h {
			delete(out, a)
		}
	}
	return out, nil
}

// load reads (or builds) column c's files and statistics once.
func (e *ftsEval) load(ctx context.Context, c string) (*ftsColumn, error) {
	fc := e.cols[c]
	if fc.loaded {
		return fc, nil
	}
	fc.files = make([]*ftsFile, len(e.m.Fragments))
	fc.posed = make([]*ftsFile, len(e.m.Fragments))
	fc.dfs = map[string]int64{}
	var total int64
	for i, f := range e.m.Fragments {
		var ff *ftsFile
		if fc.im != nil {
			if _, ok := fc.im.covers(f); ok {
				got, found, err := readFile[ftsFile](ctx, e.t, fc.im.fragmentFile(e.t, f))
				if err != nil {
					return nil, err
				}
				if found {
					ff = got
				}
			}
		}
		if ff == nil {
			var err error
			if ff, err = buildInverted(ctx, e.t, f, fc.col, true); err != nil {
				return nil, err
			}
		}
		fc.files[i] = ff
		fc.docs += ff.Docs
		total += ff.TotalLen
	}
	if fc.docs > 0 {
		fc.avgdl = float64(total) / float64(fc.docs)
	}
	fc.loaded = true
	return fc, nil
}

// idf is the BM25 inverse document frequency of tok in the column.
func (fc *ftsColumn) idf(tok string) float64 {
	df, ok := fc.dfs[tok]
	if !ok {
		for _, ff := range fc.files {
			rows, _ := ff.postings(tok)
			df += int64(len(rows))
		}
		fc.dfs[tok] = df
	}
	return math.Log(1 + (float64(fc.docs)-float64(df)+0.5)/(float64(df)+0.5))
}

func (fc *ftsColumn) bm25(idf float64, tf, dl uint32) float64 {
	f := float64(tf)
	return idf * f * (BM25K1 + 1) / (f + BM25K1*(1-BM25B+BM25B*float64(dl)/fc.avgdl))
}

// match adds the rows of column c that mq matches to out (scores summed
// with what out holds).
func (e *ftsEval) match(ctx context.Context, c string, mq *MatchQuery, out hits) error {
	terms := dedup(Tokenize(mq.Terms))
	if len(terms) == 0 {
		return nil
	}
	fc, err := e.load(ctx, c)
	if err != nil || fc.docs == 0 {
		return err
	}
	boost := mq.Boost
	if boost == 0 {
		boost = 1
	}
	idf := make([]float64, len(terms))
	for j, tok := range terms {
		idf[j] = fc.idf(tok)
	}
	for i, f := range e.m.Fragments {
		ff := fc.files[i]
		score := make([]float64, len(ff.Lens))
		matched := make([]int32, len(ff.Lens))
		var touched []uint32
		for j, tok := range terms {
			rows, tfs := ff.postings(tok)
			for p, r := range rows {
				if matched[r] == 0 {
					touched = append(touched, r)
				}
				score[r] += fc.bm25(idf[j], tfs[p], ff.Lens[r])
				matched[r]++
			}
		}
		for _, r := range touched {
			if mq.And && int(matched[r]) < len(terms) {
				continue
			}
			out[table.RowAddress(f.ID, r)] += score[r] * boost
		}
	}
	return nil
}

// phrase adds the rows of column c holding pq's phrase to out.
func (e *ftsEval) phrase(ctx context.Context, c string, pq *PhraseQuery, out hits) error {
	toks := Tokenize(pq.Terms)
	if len(toks) == 0 {
		return nil
	}
	terms := dedup(toks)
	fc, err := e.load(ctx, c)
	if err != nil || fc.docs == 0 {
		return err
	}
	idf := make([]float64, len(terms))
	for j, tok := range terms {
		idf[j] = fc.idf(tok)
	}
	slot := make([]int, len(toks)) // phrase token → its distinct term
	for k, tok := range toks {
		for j, term := range terms {
			if term == tok {
				slot[k] = j
			}
		}
	}
	for i, f := range e.m.Fragments {
		ff := fc.files[i]
		if !ff.hasPositions() {
			if fc.posed[i] == nil {
				if fc.posed[i], err = buildInverted(ctx, e.t, f, fc.col, true); err != nil {
					return err
				}
			}
			ff = fc.posed[i]
		}
		type post struct {
			rows, tfs []uint32
			at        int
		}
		posts := make([]post, len(terms))
		for j, tok := range terms {
			rows, tfs, at := ff.postingsAt(tok)
			if at < 0 {
				posts = nil
				break
			}
			posts[j] = post{rows, tfs, at}
		}
		if posts == nil {
			continue // a term the fragment lacks
		}
		// Candidates: the rows of the rarest term; each other term's
		// posting is found by binary search.
		rare := 0
		for j := range posts {
			if len(posts[j].rows) < len(posts[rare].rows) {
				rare = j
			}
		}
		lists := make([][]uint32, len(terms))
		tfs := make([]uint32, len(terms))
	rows:
		for _, r := range posts[rare].rows {
			for j, p := range posts {
				k := sort.Search(len(p.rows), func(n int) bool { return p.rows[n] >= r })
				if k == len(p.rows) || p.rows[k] != r {
					continue rows
				}
				at := p.at + k
				lists[j] = ff.Pos[ff.PosStarts[at]:ff.PosStarts[at+1]]
				tfs[j] = p.tfs[k]
			}
			if !phraseAt(lists, slot, pq.Slop) {
				continue
			}
			var s float64
			for j := range terms {
				s += fc.bm25(idf[j], tfs[j], ff.Lens[r])
			}
			out[table.RowAddress(f.ID, r)] += s
		}
	}
	return nil
}

// phraseAt reports whether positions p_0 < p_1 < … exist with p_k among
// lists[slot[k]] and p_last - p_0 - (len(slot)-1) <= slop. For each start
// the earliest next position at each step gives the shortest span.
func phraseAt(lists [][]uint32, slot []int, slop int) bool {
	n := len(slot)
	for _, start := range lists[slot[0]] {
		prev := start
		for k := 1; k < n; k++ {
			l := lists[slot[k]]
			i := sort.Search(len(l), func(x int) bool { return l[x] > prev })
			if i == len(l) {
				return false // no later start can do better
			}
			prev = l[i]
		}
		if int(prev-start)-(n-1) <= slop {
			return true
		}
	}
	return false
}
