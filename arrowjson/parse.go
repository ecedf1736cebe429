package arrowjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxDepth is how deeply objects and arrays may nest inside one row,
// counting the row object itself as level 1. Deeper input is rejected with
// a *RowError.
const MaxDepth = 32

// RowError reports a JSON value that does not fit. Row is the 0-based index
// of the row in the top-level JSON array, or -1 when the problem is not
// inside a row (the body is not a JSON array, or there is data after it).
// Field is the path of the offending value, such as "age", "meta.tags[2]",
// or "" when the row itself is at fault (for example, it is not an object).
type RowError struct {
	Row     int
	Field   string
	Message string
}

func (e *RowError) Error() string {
	var b strings.Builder
	if e.Row >= 0 {
		b.WriteString("row ")
		b.WriteString(strconv.Itoa(e.Row))
	}
	if e.Field != "" {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString("field ")
		b.WriteString(strconv.Quote(e.Field))
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// object is a decoded JSON object that keeps its keys in input order.
type object struct {
	keys []string
	vals []any
}

// valueError is a problem found below the row level. segs holds the path
// segments (".name" or "[3]") innermost first; they are added while the
// error travels back up, so the success path never builds paths.
type valueError struct {
	segs []string
	msg  string
}

func (e *valueError) in(seg string) *valueError {
	e.segs = append(e.segs, seg)
	return e
}

func (e *valueError) path() string {
	var b strings.Builder
	for i := len(e.segs) - 1; i >= 0; i-- {
		b.WriteString(e.segs[i])
	}
	return strings.TrimPrefix(b.String(), ".")
}

func (e *valueError) rowError(row int) *RowError {
	return &RowError{Row: row, Field: e.path(), Message: e.msg}
}

func keySeg(k string) string { return "." + k }
func idxSeg(i int) string    { return "[" + strconv.Itoa(i) + "]" }

// describe names a decoded JSON value for error messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool " + strconv.FormatBool(x)
	case json.Number:
		return "number " + truncate(string(x))
	case string:
		return "string " + strconv.Quote(truncate(x))
	case []any:
		return "array"
	case *object:
		return "object"
	case json.Delim:
		switch x {
		case '[':
			return "array"
		case '{':
			return "object"
		}
		return "'" + x.String() + "'"
	default:
		return fmt.Sprintf("%T", v)
	}
}

func truncate(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func jsonErrMsg(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "invalid JSON: unexpected end of input"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte offset %d: %s", se.Offset, se.Error())
	}
	return "invalid JSON: " + err.Error()
}

// parser builds generic values (nil, bool, json.Number, string, []any,
// *object) from one row's bytes, enforcing MaxDepth and rejecting duplicate
// keys. The bytes have already been checked to be valid JSON by
// json.Decoder, so the parser only has to split them; it still checks every
// index so that it cannot panic.
type parser struct {
	data []byte
	pos  int
}

var errBadJSON = &valueError{msg: "invalid JSON"}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (p *parser) peek() byte {
	p.skipSpace()
	if p.pos < len(p.data) {
		return p.data[p.pos]
	}
	return 0
}

// value decodes the next value. depth is the number of containers (within
// the row) that enclose it.
func (p *parser) value(depth int) (any, *valueError) {
	switch c := p.peek(); c {
	case '{', '[':
		if depth+1 > MaxDepth {
			return nil, &valueError{msg: fmt.Sprintf("nesting deeper than %d levels", MaxDepth)}
		}
		p.pos++
		if c == '{' {
			return p.object(depth + 1)
		}
		return p.array(depth + 1)
	case '"':
		s, ok := p.str()
		if !ok {
			return nil, errBadJSON
		}
		return s, nil
	case 't':
		return true, p.literal("true")
	case 'f':
		return false, p.literal("false")
	case 'n':
		return nil, p.literal("null")
	default:
		start := p.pos
		for p.pos < len(p.data) {
			switch p.data[p.pos] {
			case '-', '+', '.', 'e', 'E', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
				p.pos++
				continue
			}
			break
		}
		if p.pos == start {
			return nil, errBadJSON
		}
		return json.Number(p.data[start:p.pos]), nil
	}
}

func (p *parser) literal(lit string) *valueError {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(lit)) {
		return errBadJSON
	}
	p.pos += len(lit)
	return nil
}

// str decodes the string starting at p.pos (a '"').
func (p *parser) str() (string, bool) {
	start := p.pos
	escaped := false
	for i := start + 1; i < len(p.data); i++ {
		switch p.data[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			p.pos = i + 1
			seg := p.data[start+1 : i]
			if !escaped && utf8.Valid(seg) {
				return string(seg), true
			}
			// Escapes or invalid UTF-8: let encoding/json do it exactly.
			var s string
			if err := json.Unmarshal(p.data[start:i+1], &s); err != nil {
				return "", false
			}
			return s, true
		}
	}
	return "", false
}

func (p *parser) object(depth int) (any, *valueError) {
	obj := &object{}
	var index map[string]struct{}
	if p.peek() == '}' {
		p.pos++
		return obj, nil
	}
	for {
		if p.peek() != '"' {
			return nil, errBadJSON
		}
		key, ok := p.str()
		if !ok {
			return nil, errBadJSON
		}
		// Duplicate keys: linear scan for small objects, a set for big ones.
		dup := false
		if index != nil {
			_, dup = index[key]
			index[key] = struct{}{}
		} else {
			for _, k := range obj.keys {
				if k == key {
					dup = true
					break
				}
			}
			if len(obj.keys) >= 16 {
				index = make(map[string]struct{}, 2*len(obj.keys))
				for _, k := range obj.keys {
					index[k] = struct{}{}
				}
				index[key] = struct{}{}
			}
		}
		if dup {
			return nil, (&valueError{msg: "duplicate key"}).in(keySeg(key))
		}
		if p.peek() != ':' {
			return nil, errBadJSON
		}
		p.pos++
		v, verr := p.value(depth)
		if verr != nil {
			return nil, verr.in(keySeg(key))
		}
		obj.keys = append(obj.keys, key)
		obj.vals = append(obj.vals, v)
		switch p.peek() {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return obj, nil
		default:
			return nil, errBadJSON
		}
	}
}

func (p *parser) array(depth int) (any, *valueError) {
	arr := []any{}
	if p.peek() == ']' {
		p.pos++
		return arr, nil
	}
	for {
		v, verr := p.value(depth)
		if verr != nil {
			return nil, verr.in(idxSeg(len(arr)))
		}
		arr = append(arr, v)
		switch p.peek() {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return arr, nil
		default:
			return nil, errBadJSON
		}
	}
}

// readRows reads a JSON array of row objects from r one row at a time and
// calls fn for each. Errors are *RowError, or whatever fn returns.
func readRows(r io.Reader, fn func(row int, obj *object) error) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()

	tok, err := dec.Token()
	if err == io.EOF {
		return &RowError{Row: -1, Message: "empty body: expected a JSON array of row objects"}
	}
	if err != nil {
		return &RowError{Row: -1, Message: jsonErrMsg(err)}
	}
	if tok != json.Delim('[') {
		return &RowError{Row: -1, Message: "expected a JSON array of row objects, got " + describe(tok)}
	}
	var raw json.RawMessage // reused: Decode appends into it
	row := 0
	for dec.More() {
		raw = raw[:0]
		if err := dec.Decode(&raw); err != nil {
			return &RowError{Row: row, Message: jsonErrMsg(err)}
		}
		p := parser{data: raw}
		if p.peek() != '{' {
			what := "array"
			if p.peek() != '[' {
				v, _ := p.value(0)
				what = describe(v)
			}
			return &RowError{Row: row, Message: "expected a JSON object, got " + what}
		}
		v, verr := p.value(0)
		if verr != nil {
			return verr.rowError(row)
		}
		if err := fn(row, v.(*object)); err != nil {
			return err
		}
		row++
	}
	if _, err := dec.Token(); err != nil { // ']'
		return &RowError{Row: row, Message: jsonErrMsg(err)}
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err != nil {
			return &RowError{Row: -1, Message: "after the JSON array: " + jsonErrMsg(err)}
		}
		return &RowError{Row: -1, Message: "unexpected data after the JSON array: " + describe(tok)}
	}
	return nil
}
