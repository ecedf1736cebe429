package index

import (
	"context"
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
	// PosStarts[p]:PosStarts[p+1] are the token positions (0-based,
	// ascending) of posting p in its row, in Pos; nil when the index was
	// built without positions (with_position false, or a file written
	// before positions were kept).
	PosStarts []uint32
	Pos       []uint32
}

// invert builds a fragment's postings from its texts (nil: null), with
// the tokens' positions when positions is set.
func invert(texts []*string, positions bool) *ftsFile {
	ff := &ftsFile{Lens: make([]uint32, len(texts))}
	type posting struct {
		row uint32
		pos []uint32
	}
	post := map[string][]posting{}
	for row, s := range texts {
		if s == nil {
			continue
		}
		ff.Docs++
		toks := Tokenize(*s)
		ff.Lens[row] = uint32(len(toks))
		ff.TotalLen += int64(len(toks))
		at := map[string][]uint32{}
		var order []string
		for i, tok := range toks {
			if _, ok := at[tok]; !ok {
				order = append(order, tok)
			}
			at[tok] = append(at[tok], uint32(i))
		}
		for _, tok := range order {
			post[tok] = append(post[tok], posting{uint32(row), at[tok]})
		}
	}
	ff.Terms = make([]string, 0, len(post))
	for tok := range post {
		ff.Terms = append(ff.Terms, tok)
	}
	sort.Strings(ff.Terms)
	if positions {
		ff.PosStarts = []uint32{0}
	}
	for _, tok := range ff.Terms {
		ff.Starts = append(ff.Starts, uint32(len(ff.Rows)))
		for _, x := range post[tok] { // rows ascending: appended in row order
			ff.Rows = append(ff.Rows, x.row)
			ff.TFs = append(ff.TFs, uint32(len(x.pos)))
			if positions {
				ff.Pos = append(ff.Pos, x.pos...)
				ff.PosStarts = append(ff.PosStarts, uint32(len(ff.Pos)))
			}
		}
	}
	ff.Starts = append(ff.Starts, uint32(len(ff.Rows)))
	return ff
}

// postings answers the rows and term frequencies of tok.
func (ff *ftsFile) postings(tok string) ([]uint32, []uint32) {
	rows, tfs, _ := ff.postingsAt(tok)
	return rows, tfs
}

// postingsAt is postings with the index of the first posting (for
// positions); -1 when tok is not in the file.
func (ff *ftsFile) postingsAt(tok string) ([]uint32, []uint32, int) {
	i := sort.SearchStrings(ff.Terms, tok)
	if i == len(ff.Terms) || ff.Terms[i] != tok {
		return nil, nil, -1
	}
	return ff.Rows[ff.Starts[i]:ff.Starts[i+1]], ff.TFs[ff.Starts[i]:ff.Starts[i+1]], int(ff.Starts[i])
}

// hasPositions reports whether phrase queries can read positions here.
func (ff *ftsFile) hasPositions() bool { return ff.PosStarts != nil || len(ff.Rows) == 0 }

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

func buildInverted(ctx context.Context, t *table.Table, f table.Fragment, col int, positions bool) (*ftsFile, error) {
	texts, err := fragmentTexts(ctx, t, f, col)
	if err != nil {
		return nil, err
	}
	return invert(texts, positions), nil
}

// FTSQuery is one full-text search: Query, or (Query nil) a match of
// Text in Column ("": every column with an INVERTED index) with And and
// Boost.
type FTSQuery struct {
	Query   *TextQuery
	Column  string
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
		if rowAddr && c == nread {
			// Hits are live addresses; users get Lance's.
			lance, err := t.LanceRowAddrArray(ctx, m, taken, mem)
			taken.Release()
			if err != nil {
				return nil, err
			}
			taken = lance
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
