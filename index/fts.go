package index

import (
	"context"
	"math"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"

	"github.com/mvq-dev/mvq/table"
)

// INVERTED: each fragment's file holds the postings of its tokens (term →
// rows and term frequencies) and each row's length in tokens. A query
// tokenizes its text the same way and scores with BM25 over the whole
// table: document frequencies, the document count and the average length
// are summed over the fragments' files, and fragments the index does not
// cover are tokenized at query time, so they are found and counted too.
//
// The tokenizer: text is split at every rune that is not a letter or a
// digit, tokens are lower-cased, and tokens longer than MaxTokenLength
// bytes are dropped (no stemming, no stop words).

// BM25 parameters.
const (
	BM25K1 = 1.2
	BM25B  = 0.75
)

// MaxTokenLength is the longest token indexed, in bytes.
const MaxTokenLength = 40

// ScoreColumn is the column a full-text search adds.
const ScoreColumn = "_score"

// Tokenize splits text into the index's tokens.
func Tokenize(text string) []string {
	var out []string
	start := -1
	for i, r := range text {
		word := unicode.IsLetter(r) || unicode.IsDigit(r)
		if word && start < 0 {
			start = i
		}
		if !word && start >= 0 {
			out = appendToken(out, text[start:i])
			start = -1
		}
	}
	if start >= 0 {
		out = appendToken(out, text[start:])
	}
	return out
}

func appendToken(out []string, tok string) []string {
	if len(tok) > MaxTokenLength || !utf8.ValidString(tok) {
		return out
	}
	return append(out, strings.ToLower(tok))
}

type ftsFile struct {
	Docs     int64    // rows with text (non-null)
	TotalLen int64    // tokens in all rows
	Lens     []uint32 // row → tokens
	Terms    []string // sorted
	Starts   []uint32 // postings of Terms[i]: Starts[i]:Starts[i+1]
	Rows     []uint32
	TFs      []uint32
}

// invert builds a fragment's postings from its texts (nil: null).
func invert(texts []*string) *ftsFile {
	ff := &ftsFile{Lens: make([]uint32, len(texts))}
	post := map[string][][2]uint32{}
	for row, s := range texts {
		if s == nil {
			continue
		}
		ff.Docs++
		toks := Tokenize(*s)
		ff.Lens[row] = uint32(len(toks))
		ff.TotalLen += int64(len(toks))
		tf := map[string]uint32{}
		for _, tok := range toks {
			tf[tok]++
		}
		for tok, n := range tf {
			post[tok] = append(post[tok], [2]uint32{uint32(row), n})
		}
	}
	ff.Terms = make([]string, 0, len(post))
	for tok := range post {
		ff.Terms = append(ff.Terms, tok)
	}
	sort.Strings(ff.Terms)
	for _, tok := range ff.Terms {
		ff.Starts = append(ff.Starts, uint32(len(ff.Rows)))
		p := post[tok]
		sort.Slice(p, func(a, b int) bool { return p[a][0] < p[b][0] })
		for _, x := range p {
			ff.Rows = append(ff.Rows, x[0])
			ff.TFs = append(ff.TFs, x[1])
		}
	}
	ff.Starts = append(ff.Starts, uint32(len(ff.Rows)))
	return ff
}

// postings answers the rows and term frequencies of tok.
func (ff *ftsFile) postings(tok string) ([]uint32, []uint32) {
	i := sort.SearchStrings(ff.Terms, tok)
	if i == len(ff.Terms) || ff.Terms[i] != tok {
		return nil, nil
	}
	return ff.Rows[ff.Starts[i]:ff.Starts[i+1]], ff.TFs[ff.Starts[i]:ff.Starts[i+1]]
}

func fragmentTexts(ctx context.Context, t *table.Table, f table.Fragment, col int) ([]*string, error) {
	recs, err := t.ReadFragment(ctx, f, []int{col}, t.Catalog().Options().Mem)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	out := make([]*string, 0, f.Rows)
	for _, r := range recs {
		a := r.Column(0)
		for i := 0; i < a.Len(); i++ {
			if a.IsNull(i) {
				out = append(out, nil)
				continue
			}
			var s string
			switch x := a.(type) {
			case *array.String:
				s = x.Value(i)
			case *array.LargeString:
				s = x.Value(i)
			}
			s = strings.Clone(s)
			out = append(out, &s)
		}
	}
	return out, nil
}

func buildInverted(ctx context.Context, t *table.Table, f table.Fragment, col int) (*ftsFile, error) {
	texts, err := fragmentTexts(ctx, t, f, col)
	if err != nil {
		return nil, err
	}
	return invert(texts), nil
}

// FTSQuery is one full-text search.
type FTSQuery struct {
	Column  string // "": the table's only INVERTED index
	Text    string
	And     bool    // every term must match (default: any)
	Boost   float64 // scales the scores (0: 1)
	K       int
	Filter  string // prefilter
	Columns []string
	Version uint64
	RowAddr bool
}

type scored struct {
	score float64
	addr  uint64
	pos   int // the fragment's place in the manifest
}

// better orders hits: higher score, then table order.
func better(a, b scored) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	if a.pos != b.pos {
		return a.pos < b.pos
	}
	return a.addr < b.addr
}

// topHits keeps the k best hits (a heap whose root is the worst kept).
type topHits struct {
	k     int
	items []scored
}

func (h *topHits) offer(x scored) {
	it := h.items
	if len(it) < h.k {
		it = append(it, x)
		for i := len(it) - 1; i > 0; {
			p := (i - 1) / 2
			if !better(it[p], it[i]) {
				break
			}
			it[p], it[i] = it[i], it[p]
			i = p
		}
		h.items = it
		return
	}
	if !better(x, it[0]) {
		return
	}
	it[0] = x
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(it) && better(it[m], it[l]) {
			m = l
		}
		if r < len(it) && better(it[m], it[r]) {
			m = r
		}
		if m == i {
			break
		}
		it[i], it[m] = it[m], it[i]
		i = m
	}
}

// SearchText runs q over t: the K rows with the highest BM25 score
// (ties: table order), with their columns and _score, best first.
// Errors: CodeInvalidInput naming full_text_query when the column has no
// INVERTED index.
func SearchText(ctx context.Context, t *table.Table, q FTSQuery) (arrow.RecordBatch, error) {
	m, err := t.Load(ctx, q.Version)
	if err != nil {
		return nil, err
	}
	schema, err := m.ArrowSchema()
	if err != nil {
		return nil, err
	}
	metas, err := List(ctx, t)
	if err != nil {
		return nil, err
	}
	var im *Meta
	var names []string
	for _, x := range metas {
		if x.Type != Inverted {
			continue
		}
		names = append(names, x.Column)
		if q.Column == "" || x.Column == q.Column {
			if im != nil && q.Column == "" {
				return nil, table.Errorf(table.CodeInvalidInput, "full_text_query: columns: name one of the columns with an INVERTED index (%s)", strings.Join(names, ", "))
			}
			im = x
		}
	}
	if im == nil {
		if q.Column != "" && len(schema.FieldIndices(q.Column)) == 0 {
			return nil, table.Errorf(table.CodeTableColumnNotFound, "full_text_query: column %q not found", q.Column)
		}
		return nil, table.Errorf(table.CodeInvalidInput, "full_text_query: column %q has no INVERTED index; create one with create_scalar_index (index_type INVERTED)", q.Column)
	}
	col := schema.FieldIndices(im.Column)
	if len(col) == 0 {
		return nil, table.Errorf(table.CodeTableColumnNotFound, "full_text_query: column %q not found", im.Column)
	}
	if q.K <= 0 {
		q.K = 10
	}
	if q.Boost == 0 {
		q.Boost = 1
	}
	terms := dedup(Tokenize(q.Text))
	out, _, err := table.ProjectSchema(schema, q.Columns, q.RowAddr)
	if err != nil {
		return nil, err
	}
	// Every fragment's file: the index's, or built now.
	files := make([]*ftsFile, len(m.Fragments))
	var docs, total int64
	df := make([]int64, len(terms))
	for i, f := range m.Fragments {
		var ff *ftsFile
		if _, ok := im.covers(f); ok {
			got, found, err := readFile[ftsFile](ctx, t, fileKey(t, im.UUID, f.ID))
			if err != nil {
				return nil, err
			}
			ff = got
			if !found {
				ff = nil
			}
		}
		if ff == nil {
			if ff, err = buildInverted(ctx, t, f, col[0]); err != nil {
				return nil, err
			}
		}
		files[i] = ff
		docs += ff.Docs
		total += ff.TotalLen
		for j, tok := range terms {
			rows, _ := ff.postings(tok)
			df[j] += int64(len(rows))
		}
	}
	var allowed map[uint64]bool
	if strings.TrimSpace(q.Filter) != "" {
		if allowed, err = filterAddrs(ctx, t, m, q.Filter); err != nil {
			return nil, err
		}
	}
	top := &topHits{k: q.K}
	if docs > 0 && len(terms) > 0 {
		avgdl := float64(total) / float64(docs)
		idf := make([]float64, len(terms))
		for j := range terms {
			idf[j] = math.Log(1 + (float64(docs)-float64(df[j])+0.5)/(float64(df[j])+0.5))
		}
		for i, f := range m.Fragments {
			ff := files[i]
			// Dense per-row accumulators: postings are sorted by row.
			score := make([]float64, len(ff.Lens))
			matched := make([]int32, len(ff.Lens))
			var touched []uint32
			for j, tok := range terms {
				rows, tfs := ff.postings(tok)
				for p, r := range rows {
					tf := float64(tfs[p])
					dl := float64(ff.Lens[r])
					if matched[r] == 0 {
						touched = append(touched, r)
					}
					score[r] += idf[j] * tf * (BM25K1 + 1) / (tf + BM25K1*(1-BM25B+BM25B*dl/avgdl))
					matched[r]++
				}
			}
			for _, r := range touched {
				if q.And && int(matched[r]) < len(terms) {
					continue
				}
				addr := table.RowAddress(f.ID, r)
				if allowed != nil && !allowed[addr] {
					continue
				}
				top.offer(scored{score[r] * q.Boost, addr, i})
			}
		}
	}
	hits := top.items
	sort.Slice(hits, func(a, b int) bool { return better(hits[a], hits[b]) })
	return fetchRows(ctx, t, m, out, q.Columns, q.RowAddr, hits)
}

func dedup(toks []string) []string {
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

// filterAddrs answers the addresses of the rows of m that filter keeps.
func filterAddrs(ctx context.Context, t *table.Table, m *table.Manifest, filter string) (map[uint64]bool, error) {
	rdr, err := t.Query(ctx, table.QueryOptions{Version: m.Version, Columns: []string{}, Filter: filter, RowAddr: true})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	out := map[uint64]bool{}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for _, a := range rec.Column(int(rec.NumCols()) - 1).(*array.Uint64).Uint64Values() {
			out[a] = true
		}
	}
	return out, rdr.Err()
}

// fetchRows reads the hits' rows (columns, _rowaddr) and adds _score, in
// hit order.
func fetchRows(ctx context.Context, t *table.Table, m *table.Manifest, out *arrow.Schema, columns []string, rowAddr bool, hits []scored) (arrow.RecordBatch, error) {
	mem := t.Catalog().Options().Mem
	sel := table.Selection{}
	for _, h := range hits {
		fid := uint32(h.addr >> 32)
		sel[fid] = append(sel[fid], uint32(h.addr))
	}
	for fid, rows := range sel {
		sel[fid] = table.SortedOffsets(rows)
	}
	cols := columns
	if cols == nil {
		cols = []string{}
		for _, f := range out.Fields() {
			if f.Name != table.RowAddrColumn || !rowAddr {
				cols = append(cols, f.Name)
			}
		}
	}
	scan, err := t.Scan(ctx, m, table.ScanOptions{Columns: cols, Fragments: sel.Fragments(m), Rows: sel, RowAddr: true})
	if err != nil {
		return nil, err
	}
	defer scan.Release()
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	at := map[uint64]int64{}
	var n int64
	for scan.Next() {
		r := scan.RecordBatch()
		r.Retain()
		recs = append(recs, r)
		for i, a := range r.Column(int(r.NumCols()) - 1).(*array.Uint64).Uint64Values() {
			at[a] = n + int64(i)
		}
		n += r.NumRows()
	}
	if err := scan.Err(); err != nil {
		return nil, err
	}
	fields := append(append([]arrow.Field(nil), out.Fields()...), arrow.Field{Name: ScoreColumn, Type: arrow.PrimitiveTypes.Float32})
	schema := arrow.NewSchema(fields, nil)
	ib := array.NewInt64Builder(mem)
	sb := array.NewFloat32Builder(mem)
	for _, h := range hits {
		ib.Append(at[h.addr])
		sb.Append(float32(h.score))
	}
	idx := ib.NewArray()
	scores := sb.NewArray()
	ib.Release()
	sb.Release()
	defer idx.Release()
	defer scores.Release()
	var resCols []arrow.Array
	defer func() {
		for _, c := range resCols {
			c.Release()
		}
	}()
	cctx := compute.WithAllocator(ctx, mem)
	nread := len(out.Fields())
	if rowAddr {
		nread-- // _rowaddr is the scan's last column
	}
	for c := 0; c < nread+boolInt(rowAddr); c++ {
		src := c
		if rowAddr && c == nread {
			src = len(cols) // the scan's _rowaddr
		}
		var chunks []arrow.Array
		for _, r := range recs {
			chunks = append(chunks, r.Column(src))
		}
		var joined arrow.Array
		if len(chunks) == 0 {
			joined = array.MakeArrayOfNull(mem, fields[c].Type, 0)
		} else if joined, err = array.Concatenate(chunks, mem); err != nil {
			return nil, err
		}
		taken, err := compute.TakeArray(cctx, joined, idx)
		joined.Release()
		if err != nil {
			return nil, err
		}
		resCols = append(resCols, taken)
	}
	scores.Retain()
	resCols = append(resCols, scores)
	for i, c := range resCols {
		if !arrow.TypeEqual(c.DataType(), fields[i].Type) {
			fields[i].Type = c.DataType()
			schema = arrow.NewSchema(fields, nil)
		}
	}
	rec := array.NewRecordBatch(schema, resCols, int64(len(hits)))
	return rec, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
