package refresh

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/mvq-dev/mvq/table"
)

// A row-wise view whose query only picks columns,
//
//	SELECT a, "B", c AS d FROM t [[AS] alias]
//
// (no expression, no WHERE) passes its input's columns through: DuckDB
// would hand back the very same values. For such a query over columns of
// types whose values DuckDB returns unchanged (integers, booleans, UTF-8
// strings) the work item skips DuckDB (a session, a parse, a plan and two
// Arrow conversions per item, most of a small refresh's SQL cost). The
// result schema is the one DuckDB gives for the query over the input
// schema (asked once per query text and input schema); any other query,
// type or a string column that is not valid UTF-8 runs in DuckDB as
// before.

// projection is a query's pick of input columns: names[i] is output
// column i+1's input column (output 0 is __source_row_id).
type projection struct{ names []string }

// passThroughWords are words DuckDB reads as values, not column names.
var passThroughWords = map[string]bool{
	"true": true, "false": true, "null": true, "default": true,
	"current_date": true, "current_time": true, "current_timestamp": true,
	"localtime": true, "localtimestamp": true, "current_role": true,
	"current_user": true, "session_user": true, "user": true,
	"current_catalog": true, "current_schema": true, "current_query": true,
	"rowid": true,
}

// parseProjection returns the columns a row-wise query picks, or nil when
// it is anything more than a list of columns (optionally renamed) of one
// table with no WHERE.
func parseProjection(sql string) *projection {
	toks, err := lexSQL(sql)
	if err != nil || len(toks) < 4 || !toks[0].is("select") {
		return nil
	}
	ident := func(t token) bool {
		if t.kind == tokQuoted {
			return t.text != ""
		}
		return t.kind == tokWord && !passThroughWords[strings.ToLower(t.text)] && !isClauseWord(t.text)
	}
	var p projection
	i := 1
	for {
		if i >= len(toks) || !ident(toks[i]) {
			return nil
		}
		p.names = append(p.names, toks[i].text)
		i++
		if i < len(toks) && toks[i].is("as") {
			if i+1 >= len(toks) || (toks[i+1].kind != tokWord && toks[i+1].kind != tokQuoted) {
				return nil
			}
			i += 2
		}
		if i < len(toks) && toks[i].kind == tokPunct && toks[i].text == "," {
			i++
			continue
		}
		break
	}
	if i >= len(toks) || !toks[i].is("from") || i+1 >= len(toks) {
		return nil
	}
	i += 2 // FROM <table>
	if i < len(toks) && toks[i].is("as") {
		i++
		if i >= len(toks) {
			return nil
		}
		i++
	} else if i < len(toks) && (toks[i].kind == tokWord || toks[i].kind == tokQuoted) && !toks[i].is("where") {
		i++
	}
	if i != len(toks) {
		return nil // WHERE, or anything else
	}
	return &p
}

func isClauseWord(w string) bool {
	switch strings.ToLower(w) {
	case "select", "from", "where", "as", "distinct", "all", "columns", "exclude", "replace":
		return true
	}
	return false
}

// passThroughType says DuckDB returns values of t unchanged.
func passThroughType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.BOOL, arrow.STRING:
		return true
	}
	return false
}

// passThrough is the plan of a projection over one input schema: out is
// DuckDB's result schema, cols[i] the input column of out's field i.
type passThrough struct {
	out  *arrow.Schema
	cols []int
}

// passThroughs caches plans (nil: run in DuckDB) by query text and input
// schema.
type passThroughs struct {
	mu     sync.Mutex
	m      map[string]*passThrough
	passed atomic.Int64 // items projected without DuckDB, for tests
}

const maxPassThroughs = 4096

// passThroughFor returns the plan of v's query over input, or nil.
func (e *Engine) passThroughFor(ctx context.Context, v *View, input *arrow.Schema) *passThrough {
	key := v.query.Name + "\x00" + v.query.Rowwise + "\x00" + input.String()
	e.passes.mu.Lock()
	pt, ok := e.passes.m[key]
	e.passes.mu.Unlock()
	if ok {
		return pt
	}
	pt, final := e.planPassThrough(ctx, v, input)
	if !final {
		return nil // DuckDB gave no answer: ask again next time
	}
	e.passes.mu.Lock()
	if e.passes.m == nil || len(e.passes.m) >= maxPassThroughs {
		e.passes.m = map[string]*passThrough{}
	}
	e.passes.m[key] = pt
	e.passes.mu.Unlock()
	return pt
}

// planPassThrough returns the plan of v's query over input (nil: run
// it in DuckDB); final says the answer may be cached.
func (e *Engine) planPassThrough(ctx context.Context, v *View, input *arrow.Schema) (*passThrough, bool) {
	p := parseProjection(v.query.SQL)
	if p == nil {
		return nil, true
	}
	addr := input.FieldIndices(table.RowAddrColumn)
	if len(addr) != 1 || !arrow.TypeEqual(input.Field(addr[0]).Type, arrow.PrimitiveTypes.Uint64) {
		return nil, true
	}
	cols := []int{addr[0]}
	for _, name := range p.names {
		at := -1
		for i, f := range input.Fields() {
			if strings.EqualFold(f.Name, name) {
				if at >= 0 {
					return nil, true // ambiguous
				}
				at = i
			}
		}
		if at < 0 || at == addr[0] {
			return nil, true
		}
		cols = append(cols, at)
	}
	out, err := e.bind(ctx, v.query.Name, input, v.query.Rowwise)
	if err != nil {
		return nil, false // busy, cancelled or refused: the item's query says which
	}
	if out.NumFields() != len(cols) {
		return nil, true
	}
	for i, f := range out.Fields() {
		in := input.Field(cols[i])
		if !arrow.TypeEqual(f.Type, in.Type) || !passThroughType(f.Type) {
			return nil, true
		}
	}
	return &passThrough{out: out, cols: cols}, true
}

// project returns the rows of in as the query would, or ok false when the
// query or these rows need DuckDB. It does not take in's references.
func (pt *passThrough) project(in []arrow.RecordBatch) (out []arrow.RecordBatch, ok bool) {
	for _, r := range in {
		for _, c := range pt.cols {
			if s, isStr := r.Column(c).(*array.String); isStr && !validUTF8(s) {
				return nil, false
			}
		}
	}
	for _, r := range in {
		cols := make([]arrow.Array, len(pt.cols))
		for i, c := range pt.cols {
			cols[i] = r.Column(c)
		}
		out = append(out, array.NewRecordBatch(pt.out, cols, r.NumRows()))
	}
	return out, true
}

// plainASCII reports whether b is ASCII without NUL bytes, 32 bytes at a
// time (four words, one branch), then eight.
func plainASCII(b []byte) bool {
	const hi, lo = 0x8080808080808080, 0x0101010101010101
	for len(b) >= 32 {
		w0, w1 := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
		w2, w3 := binary.LittleEndian.Uint64(b[16:]), binary.LittleEndian.Uint64(b[24:])
		// A byte with its high bit set, or a zero byte, in any word.
		if ((w0|w1|w2|w3)|((w0-lo)&^w0|(w1-lo)&^w1|(w2-lo)&^w2|(w3-lo)&^w3))&hi != 0 {
			return false
		}
		b = b[32:]
	}
	for len(b) >= 8 {
		w := binary.LittleEndian.Uint64(b)
		// A byte with its high bit set, or a zero byte.
		if w&hi != 0 || (w-lo)&^w&hi != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c == 0 || c >= 0x80 {
			return false
		}
	}
	return true
}

// validUTF8 checks s's values are UTF-8 without NUL bytes (DuckDB's
// VARCHAR: other values go through DuckDB, which decides). It reads the
// values' bytes as one: they are UTF-8 without NUL, and each value starts
// a character (not a continuation byte), exactly when every value is.
// Bytes under a null value count too, so such a value can only send the
// rows to DuckDB.
func validUTF8(s *array.String) bool {
	b := s.ValueBytes()
	if plainASCII(b) {
		return true // every value is ASCII without NUL (the common case)
	}
	if bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
		return false
	}
	base := s.ValueOffset(0)
	for i := 1; i < s.Len(); i++ {
		if o := s.ValueOffset(i) - base; o < len(b) && b[o]&0xc0 == 0x80 {
			return false
		}
	}
	return true
}
