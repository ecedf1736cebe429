package refresh

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// Column names the engine adds to view outputs, and the row address column
// it feeds row-wise queries.
const (
	SourceRowIDColumn = "__source_row_id"
	ChunkIndexColumn  = "__chunk_index"
	reservedPrefix    = "__"
)

// maxQueryBytes bounds a source query.
const maxQueryBytes = 1 << 16

type tokKind uint8

const (
	tokWord   tokKind = iota // bare identifier or keyword (may contain '$')
	tokQuoted                // "quoted identifier", text unquoted
	tokString                // 'string literal'
	tokNumber
	tokPunct // one byte: ( ) , . * ; etc.
)

type token struct {
	kind     tokKind
	text     string // unquoted for tokQuoted
	pos, end int    // byte span in the query
	depth    int    // parenthesis depth before the token
}

func (t token) is(word string) bool { return t.kind == tokWord && strings.EqualFold(t.text, word) }

func isWordStart(c byte) bool {
	return c == '_' || c >= 0x80 || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isWordByte(c byte) bool { return isWordStart(c) || c == '$' || ('0' <= c && c <= '9') }

// lexSQL splits a query into tokens, skipping white space and comments. It
// accepts only what it fully understands: quotes must close, parentheses
// balance, '$' appears only inside identifiers (no $1 parameters or
// $tag$ strings, which could hide text from this lexer), and ';' only at
// the very end.
func lexSQL(q string) ([]token, error) {
	if len(q) > maxQueryBytes {
		return nil, fmt.Errorf("longer than %d bytes", maxQueryBytes)
	}
	var out []token
	depth := 0
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			// DuckDB ends a line comment at '\n' or '\r'.
			for i < len(q) && q[i] != '\n' && q[i] != '\r' {
				i++
			}
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			j := strings.Index(q[i+2:], "*/")
			if j < 0 {
				return nil, fmt.Errorf("unterminated comment at offset %d", i)
			}
			i += j + 4
		case c == '\'' && duck.EscapeStringAt(q, i):
			return nil, fmt.Errorf("escape strings (E'…') are not supported at offset %d; use '…' with doubled quotes", i-1)
		case c == '\'' || c == '"':
			j := duck.QuoteEnd(q, i)
			if j < 0 {
				return nil, fmt.Errorf("unterminated %c quote at offset %d", c, i)
			}
			k := tokString
			if c == '"' {
				k = tokQuoted
			}
			text := strings.ReplaceAll(q[i+1:j], string([]byte{c, c}), string(c))
			out = append(out, token{kind: k, text: text, pos: i, end: j + 1, depth: depth})
			i = j + 1
		case isWordStart(c):
			j := i
			for j < len(q) && isWordByte(q[j]) {
				j++
			}
			out = append(out, token{kind: tokWord, text: q[i:j], pos: i, end: j, depth: depth})
			i = j
		case '0' <= c && c <= '9':
			j := i
			for j < len(q) && (isWordByte(q[j]) || q[j] == '.') && q[j] != '$' {
				j++
			}
			out = append(out, token{kind: tokNumber, text: q[i:j], pos: i, end: j, depth: depth})
			i = j
		case c == '$':
			return nil, fmt.Errorf("'$' at offset %d: only allowed inside identifiers such as \"ns$table\"", i)
		case c == ';':
			if strings.TrimSpace(q[i+1:]) != "" {
				return nil, fmt.Errorf("only one statement is allowed")
			}
			i = len(q)
		default:
			if c == ')' {
				depth--
				if depth < 0 {
					return nil, fmt.Errorf("unbalanced ')' at offset %d", i)
				}
			}
			out = append(out, token{kind: tokPunct, text: q[i : i+1], pos: i, end: i + 1, depth: depth})
			if c == '(' {
				depth++
			}
			i++
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced '(': %d not closed", depth)
	}
	return out, nil
}

// sourceQuery is a view's source_query, analysed.
type sourceQuery struct {
	SQL    string   // as the user wrote it (a trailing ';' removed)
	Source []string // the source table identifier
	Name   string   // the name the SQL gives the source (unquoted): the input's name
	// Rowwise is SQL with "_rowaddr AS __source_row_id, " inserted after
	// SELECT (row-wise kinds only).
	Rowwise string
	// words are the identifiers the query mentions (lower case); star says
	// it may read every column (*, COLUMNS(...)).
	words map[string]bool
	star  bool
}

// rowwiseForbidden are keywords that break the 1:1 mapping from source rows
// to view rows, with the reason given to the user.
var rowwiseForbidden = map[string]string{
	"distinct":    "DISTINCT",
	"over":        "window functions",
	"window":      "window functions",
	"qualify":     "QUALIFY",
	"unnest":      "UNNEST (it makes several rows of one)",
	"with":        "WITH (common table expressions)",
	"union":       "set operations",
	"intersect":   "set operations",
	"except":      "set operations",
	"join":        "joins",
	"group":       "GROUP BY",
	"having":      "HAVING",
	"order":       "ORDER BY",
	"limit":       "LIMIT",
	"offset":      "OFFSET",
	"sample":      "sampling",
	"tablesample": "sampling",
	"pivot":       "PIVOT",
	"unpivot":     "UNPIVOT",
}

// analyzeQuery finds the source table of a view query (the first FROM that
// belongs to a SELECT, not to a function such as EXTRACT) and, for
// row-wise kinds, checks the query is a projection/filter of one table:
// SELECT <expressions> FROM <table> [[AS] alias] [WHERE <predicate>].
// Errors are CodeInvalidInput naming source_query.
func analyzeQuery(q string, rowwise bool) (*sourceQuery, error) {
	bad := func(format string, args ...any) error {
		return errs.Errorf(errs.CodeInvalidInput, "source_query: "+format, args...)
	}
	q = strings.TrimSpace(q)
	if q == "" {
		return nil, bad("required")
	}
	toks, err := lexSQL(q)
	if err != nil {
		return nil, bad("%v", err)
	}
	if i := strings.LastIndexByte(q, ';'); i >= 0 && len(toks) > 0 && i >= toks[len(toks)-1].end {
		q = strings.TrimSpace(q[:i])
	}
	sq := &sourceQuery{SQL: q, words: map[string]bool{}}
	for i, t := range toks {
		switch t.kind {
		case tokWord, tokQuoted:
			sq.words[strings.ToLower(t.text)] = true
			if t.is("columns") || t.is("exclude") || t.is("replace") {
				sq.star = true
			}
			if strings.HasPrefix(strings.ToLower(t.text), "__mvq_") {
				return nil, bad("identifier %q is reserved", t.text)
			}
		case tokPunct:
			if t.text == "*" && i > 0 && (toks[i-1].text == "," || toks[i-1].text == "." || toks[i-1].is("select")) {
				sq.star = true
			}
		}
	}
	// selectAt[d] says whether the parenthesis group open at depth d holds
	// a SELECT: only a FROM in such a group names a table.
	selectAt := map[int]bool{}
	from := -1
	for i, t := range toks {
		if t.kind == tokPunct && t.text == "(" {
			selectAt[t.depth+1] = false
		}
		if t.is("select") {
			selectAt[t.depth] = true
		}
		if t.is("from") && selectAt[t.depth] {
			from = i
			break
		}
	}
	if from < 0 || from+1 >= len(toks) {
		return nil, bad("no FROM clause naming the source table")
	}
	nt := toks[from+1]
	if nt.kind != tokWord && nt.kind != tokQuoted {
		return nil, bad("FROM must name the source table by its identifier, e.g. FROM \"ns$table\"")
	}
	if from+2 < len(toks) && (toks[from+2].text == "." || toks[from+2].text == "(") {
		return nil, bad("FROM must name the source table by its identifier with '$' between parts, e.g. FROM \"ns$table\"")
	}
	id, err := table.ParseID(nt.text, table.DefaultDelimiter)
	if err != nil {
		return nil, bad("source table: %v", err)
	}
	sq.Source, sq.Name = id, nt.text
	if !rowwise {
		return sq, nil
	}

	if !toks[0].is("select") {
		return nil, bad("a row-wise view query must be a single SELECT ... FROM <table> [WHERE ...]")
	}
	for i, t := range toks {
		if t.kind != tokWord {
			continue
		}
		if i > 0 && t.is("select") {
			return nil, bad("subqueries are not allowed in a row-wise view; use kind udtf")
		}
		if why, ok := rowwiseForbidden[strings.ToLower(t.text)]; ok {
			return nil, bad("%s not allowed in a row-wise view (each view row must come from one source row); use kind udtf", why)
		}
	}
	if toks[from].depth != 0 {
		return nil, bad("the FROM clause must be at the top level")
	}
	// After FROM <table>: [[AS] alias] then WHERE or the end.
	j := from + 2
	if j < len(toks) && toks[j].is("as") {
		j++
		if j >= len(toks) || (toks[j].kind != tokWord && toks[j].kind != tokQuoted) {
			return nil, bad("AS must be followed by an alias")
		}
		j++
	} else if j < len(toks) && (toks[j].kind == tokQuoted || (toks[j].kind == tokWord && !toks[j].is("where"))) {
		j++
	}
	if j < len(toks) && !toks[j].is("where") {
		return nil, bad("unexpected %q after FROM %s: a row-wise view reads one table, optionally filtered by WHERE", toks[j].text, nt.text)
	}
	at := toks[0].end
	sq.Rowwise = q[:at] + " " + table.RowAddrColumn + " AS " + SourceRowIDColumn + "," + q[at:]
	return sq, nil
}

// columns returns the source columns the query may read, in schema order:
// every column when it uses a star, else the ones it names.
func (sq *sourceQuery) columns(schema *arrow.Schema) []string {
	var out []string
	for _, f := range schema.Fields() {
		if sq.star || sq.words[strings.ToLower(f.Name)] {
			out = append(out, f.Name)
		}
	}
	if len(out) == 0 && schema.NumFields() > 0 {
		// A query may name no column (SELECT 1 FROM t); a scan still
		// needs one to count rows.
		out = []string{schema.Field(0).Name}
	}
	return out
}

// checkQuery has DuckDB confirm what analyzeQuery found by lexing: the
// query is one SELECT statement calling no refused function, it reads
// no table but its source (and its own common table expressions), and a
// row-wise query is exactly SELECT <expressions> FROM <source> [WHERE ...]
// with no window, subquery or row-multiplying function. DuckDB's parse is
// the authority; the lexer only finds the source name and gives the
// friendlier messages. Errors are CodeInvalidInput naming source_query,
// or the engine's own.
func checkQuery(ctx context.Context, db *duck.DB, sq *sourceQuery, rowwise bool) error {
	bad := func(format string, args ...any) error {
		return errs.Errorf(errs.CodeInvalidInput, "source_query: "+format, args...)
	}
	st, err := db.CheckSelect(ctx, sq.SQL)
	if err != nil {
		var se *duck.SQLError
		if errors.As(err, &se) {
			return bad("%v", se.Err)
		}
		return err
	}
	tables, ctes := st.TableRefs()
	found := false
	for _, tr := range tables {
		if tr[0] != "" || tr[1] != "" {
			return bad("FROM must name the source table by its identifier with '$' between parts, e.g. FROM \"ns$table\" (found %s)", strings.Join(append(nonEmpty(tr[:2]), tr[2]), "."))
		}
		switch {
		case strings.EqualFold(tr[2], sq.Name):
			found = true
		case ctes[strings.ToLower(tr[2])]:
		default:
			return bad("reads table %q; a view reads only its source table %q", tr[2], sq.Name)
		}
	}
	if !found {
		return bad("the source table %q is not read by the query as DuckDB parses it", sq.Name)
	}
	if !rowwise {
		return nil
	}
	n := st.Node
	udtf := "; use kind udtf"
	from, _ := n["from_table"].(map[string]any)
	switch {
	case n["type"] != "SELECT_NODE":
		return bad("set operations are not allowed in a row-wise view" + udtf)
	case !emptyCTEs(n):
		return bad("WITH (common table expressions) not allowed in a row-wise view" + udtf)
	case !emptyList(n["modifiers"]):
		return bad("DISTINCT, ORDER BY, LIMIT and OFFSET are not allowed in a row-wise view" + udtf)
	case !emptyList(n["group_expressions"]) || !emptyList(n["group_sets"]) || n["having"] != nil:
		return bad("GROUP BY and HAVING are not allowed in a row-wise view" + udtf)
	case n["qualify"] != nil || n["sample"] != nil:
		return bad("QUALIFY and sampling are not allowed in a row-wise view" + udtf)
	case n["aggregate_handling"] != nil && n["aggregate_handling"] != "STANDARD_HANDLING":
		return bad("GROUP BY ALL is not allowed in a row-wise view" + udtf)
	case from == nil || from["type"] != "BASE_TABLE" || from["sample"] != nil:
		return bad("a row-wise view reads one table, optionally filtered by WHERE" + udtf)
	}
	var why string
	duck.Walk(n, func(obj map[string]any) {
		switch {
		case why != "":
		case obj["class"] == "WINDOW":
			why = "window functions"
		case obj["class"] == "SUBQUERY":
			why = "subqueries"
		case obj["function_name"] == "unnest" || obj["function_name"] == "unlist" || obj["function_name"] == "generate_subscripts":
			why = "UNNEST (it makes several rows of one)"
		}
	})
	if why != "" {
		return bad("%s not allowed in a row-wise view (each view row must come from one source row)%s", why, udtf)
	}
	return nil
}

func emptyList(v any) bool {
	l, ok := v.([]any)
	return v == nil || (ok && len(l) == 0)
}

func emptyCTEs(n map[string]any) bool {
	m, _ := n["cte_map"].(map[string]any)
	return m == nil || emptyList(m["map"])
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
