package index

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/mvq-dev/mvq/table"
)

// pred is the part of a filter a scalar index can answer: a tree of AND,
// OR and leaves (a range or a list of values on one indexed column).
// Anything else in the filter is unconstrained (nil): the filter itself
// still runs over the rows read, so leaving a condition out only reads
// more.
type pred struct {
	and, or bool
	kids    []*pred
	meta    *Meta
	ranges  [][2]bound // leaf: the union of these ranges
}

// Select is the table.RowSelector of scalar indexes: it answers which
// rows of each fragment of m may satisfy filter, from the BTREE and
// BITMAP indexes on the columns the filter compares with constants
// (=, <, <=, >, >=, BETWEEN, IN, under AND and OR). Fragments the index
// does not cover (appended since the build, or rewritten) are read whole.
// nil when no index applies.
func Select(ctx context.Context, t *table.Table, m *table.Manifest, schema *arrow.Schema, filter string) (table.Selection, error) {
	metas, err := List(ctx, t)
	if err != nil || len(metas) == 0 {
		return nil, err
	}
	byCol := map[string]*Meta{}
	for _, im := range metas {
		if im.Type != BTree && im.Type != Bitmap || !im.sameField(m, schema) {
			continue
		}
		if cur := byCol[im.Column]; cur == nil || cur.Type == Bitmap && im.Type == BTree {
			byCol[im.Column] = im
		}
	}
	if len(byCol) == 0 {
		return nil, nil
	}
	db := t.Catalog().SQL()
	if db == nil {
		return nil, nil
	}
	st, err := db.CheckSelect(ctx, "SELECT * FROM t WHERE ("+filter+")")
	if err != nil {
		return nil, nil // the query path reports the filter's errors
	}
	c := compiler{schema: schema, byCol: byCol}
	p := c.compile(st.Node["where_clause"])
	if p == nil {
		return nil, nil
	}
	sel := table.Selection{}
	narrowed := false
	for _, f := range m.Fragments {
		rows, constrained, err := p.eval(ctx, t, f)
		if err != nil {
			return nil, err
		}
		switch {
		case !constrained:
			sel[f.ID] = nil
		case len(rows) == 0:
			narrowed = true // no row of f can match: not read
		case int64(len(rows))*2 > f.Rows:
			sel[f.ID] = nil // most rows: reading the fragment whole is cheaper
			narrowed = true
		default:
			sel[f.ID] = rows
			narrowed = true
		}
	}
	if !narrowed {
		return nil, nil
	}
	return sel, nil
}

type compiler struct {
	schema *arrow.Schema
	byCol  map[string]*Meta
}

func (c *compiler) compile(v any) *pred {
	n, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	typ, _ := n["type"].(string)
	switch typ {
	case "CONJUNCTION_AND", "CONJUNCTION_OR":
		kids, _ := n["children"].([]any)
		p := &pred{and: typ == "CONJUNCTION_AND", or: typ == "CONJUNCTION_OR"}
		for _, k := range kids {
			kp := c.compile(k)
			if kp == nil {
				if p.or {
					return nil
				}
				continue
			}
			p.kids = append(p.kids, kp)
		}
		if len(p.kids) == 0 {
			return nil
		}
		return p
	case "COMPARE_EQUAL", "COMPARE_LESSTHAN", "COMPARE_LESSTHANOREQUALTO", "COMPARE_GREATERTHAN", "COMPARE_GREATERTHANOREQUALTO":
		col, lit, flipped := n["left"], n["right"], false
		if _, isCol := columnName(col); !isCol {
			col, lit, flipped = n["right"], n["left"], true
		}
		im, kind := c.column(col)
		if im == nil {
			return nil
		}
		val, ok := literal(lit, kind)
		if !ok {
			return nil
		}
		if flipped {
			typ = map[string]string{"COMPARE_EQUAL": "COMPARE_EQUAL",
				"COMPARE_LESSTHAN": "COMPARE_GREATERTHAN", "COMPARE_LESSTHANOREQUALTO": "COMPARE_GREATERTHANOREQUALTO",
				"COMPARE_GREATERTHAN": "COMPARE_LESSTHAN", "COMPARE_GREATERTHANOREQUALTO": "COMPARE_LESSTHANOREQUALTO"}[typ]
		}
		b := bound{set: true, val: val, inclusive: true}
		var r [2]bound
		switch typ {
		case "COMPARE_EQUAL":
			r = [2]bound{b, b}
		case "COMPARE_LESSTHAN", "COMPARE_LESSTHANOREQUALTO":
			b.inclusive = typ == "COMPARE_LESSTHANOREQUALTO"
			r = [2]bound{{}, b}
		default:
			b.inclusive = typ == "COMPARE_GREATERTHANOREQUALTO"
			r = [2]bound{b, {}}
		}
		if im.Type == Bitmap && typ != "COMPARE_EQUAL" {
			return nil // BITMAP answers equality and IN
		}
		return &pred{meta: im, ranges: [][2]bound{r}}
	case "COMPARE_IN":
		kids, _ := n["children"].([]any)
		if len(kids) < 2 {
			return nil
		}
		im, kind := c.column(kids[0])
		if im == nil {
			return nil
		}
		p := &pred{meta: im}
		for _, k := range kids[1:] {
			val, ok := literal(k, kind)
			if !ok {
				return nil
			}
			b := bound{set: true, val: val, inclusive: true}
			p.ranges = append(p.ranges, [2]bound{b, b})
		}
		return p
	case "COMPARE_BETWEEN":
		im, kind := c.column(n["input"])
		if im == nil || im.Type != BTree {
			return nil
		}
		lo, ok1 := literal(n["lower"], kind)
		hi, ok2 := literal(n["upper"], kind)
		if !ok1 || !ok2 {
			return nil
		}
		return &pred{meta: im, ranges: [][2]bound{{{set: true, val: lo, inclusive: true}, {set: true, val: hi, inclusive: true}}}}
	}
	return nil
}

// columnName answers the name of a one-part column reference.
func columnName(v any) (string, bool) {
	n, ok := v.(map[string]any)
	if !ok || n["class"] != "COLUMN_REF" {
		return "", false
	}
	names, _ := n["column_names"].([]any)
	if len(names) != 1 {
		return "", false
	}
	s, ok := names[0].(string)
	return s, ok
}

// column resolves a column reference the way DuckDB binds it (exact
// name, else the one name equal ignoring case) to its index and key kind.
func (c *compiler) column(v any) (*Meta, byte) {
	name, ok := columnName(v)
	if !ok {
		return nil, 0
	}
	idx := c.schema.FieldIndices(name)
	if len(idx) == 0 {
		for i, f := range c.schema.Fields() {
			if strings.EqualFold(f.Name, name) {
				if len(idx) > 0 {
					return nil, 0
				}
				idx = []int{i}
			}
		}
	}
	if len(idx) != 1 {
		return nil, 0
	}
	f := c.schema.Field(idx[0])
	im := c.byCol[f.Name]
	if im == nil {
		return nil, 0
	}
	kind, err := keyKind(f.Name, f.Type)
	if err != nil {
		return nil, 0
	}
	return im, kind
}

// literal converts a constant to the key kind when the comparison DuckDB
// makes is the key order's: integer constants against integer columns,
// numeric constants against float64 columns, strings against strings.
// Anything else (casts, NULL, strings compared with numbers) is no
// constraint.
func literal(v any, kind byte) (any, bool) {
	n, ok := v.(map[string]any)
	if !ok || n["class"] != "CONSTANT" {
		return nil, false
	}
	val, _ := n["value"].(map[string]any)
	if val == nil || val["is_null"] != false {
		return nil, false
	}
	typ, _ := val["type"].(map[string]any)
	id, _ := typ["id"].(string)
	raw := val["value"]
	num := func() (string, bool) {
		switch x := raw.(type) {
		case json.Number:
			return string(x), true
		case float64:
			return strconv.FormatFloat(x, 'g', -1, 64), true
		}
		return "", false
	}
	switch kind {
	case kindString:
		s, ok := raw.(string)
		return s, ok && id == "VARCHAR"
	case kindInt:
		switch id {
		case "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "HUGEINT", "UBIGINT":
			s, ok := num()
			if !ok {
				return nil, false
			}
			i, err := strconv.ParseInt(s, 10, 64)
			return i, err == nil
		}
	case kindFloat:
		s, ok := num()
		if !ok {
			return nil, false
		}
		switch id {
		case "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER":
			i, err := strconv.ParseInt(s, 10, 64)
			if err != nil || i > 1<<53 || i < -(1<<53) {
				return nil, false
			}
			return float64(i), true
		case "DOUBLE":
			f, err := strconv.ParseFloat(s, 64)
			return f, err == nil && !math.IsNaN(f)
		case "DECIMAL":
			info, _ := typ["type_info"].(map[string]any)
			scale, err := strconv.Atoi(jsonString(info["scale"]))
			if err != nil || scale < 0 || scale > 15 {
				return nil, false
			}
			i, err := strconv.ParseInt(s, 10, 64)
			if err != nil || i > 1<<53 || i < -(1<<53) {
				return nil, false
			}
			return float64(i) / math.Pow10(scale), true
		}
	}
	return nil, false
}

func jsonString(v any) string {
	switch x := v.(type) {
	case json.Number:
		return string(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case string:
		return x
	}
	return ""
}

// eval answers the sorted rows of fragment f that may satisfy p, or
// constrained=false when the index cannot say (f not covered).
func (p *pred) eval(ctx context.Context, t *table.Table, f table.Fragment) ([]uint32, bool, error) {
	if p.meta != nil {
		if _, ok := p.meta.covers(f); !ok {
			return nil, false, nil
		}
		sf, found, err := readFile[scalarFile](ctx, t, p.meta.fragmentFile(t, f))
		if err != nil || !found {
			return nil, false, err
		}
		var out []uint32
		for i, r := range p.ranges {
			rows := sf.lookup(r[0], r[1])
			if i == 0 {
				out = rows
			} else {
				out = union(out, rows)
			}
		}
		return out, true, nil
	}
	var out []uint32
	constrained := false
	for _, k := range p.kids {
		rows, ok, err := k.eval(ctx, t, f)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			if p.or {
				return nil, false, nil
			}
			continue
		}
		switch {
		case !constrained:
			out, constrained = rows, true
		case p.and:
			out = intersect(out, rows)
		default:
			out = union(out, rows)
		}
	}
	return out, constrained, nil
}

func union(a, b []uint32) []uint32 {
	out := make([]uint32, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i] < b[j]:
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

func intersect(a, b []uint32) []uint32 {
	var out []uint32
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case b[j] < a[i]:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}
