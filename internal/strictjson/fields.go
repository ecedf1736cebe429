package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Fold is the key encoding/json compares field names by when it matches
// a member to a field: two names with the same Fold are the same field to
// it ("Filter", "FILTER" and "filter" all set the field tagged "filter").
func Fold(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			b.WriteRune(r)
			continue
		}
		b.WriteRune(unicode.ToUpper(unicode.ToLower(r)))
	}
	return b.String()
}

// CheckFields makes encoding/json's field matching case-exact: it walks
// data (valid JSON: Check it first) along the type of v and refuses an
// object member whose name matches one of the struct's fields only when
// case is ignored ("Filter" for "filter"), which encoding/json would
// otherwise decode into that field, after or instead of the exact one.
// The *Error names the member and where it is. Map keys are data and are
// not compared; values whose type decodes itself (json.Unmarshaler,
// json.RawMessage, interfaces) are not walked.
func CheckFields(data []byte, v any) error {
	if json.Valid(data) && quickFields(data, reflect.TypeOf(v)) {
		return nil // fast.go
	}
	return checkFieldsTokens(data, v)
}

// checkFieldsTokens is CheckFields by encoding/json's tokens; it makes
// every error.
func checkFieldsTokens(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return walk(dec, reflect.TypeOf(v), "")
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decodesItself reports whether values of t bypass the field matching.
// The answer is kept per type (Implements searches the method set, on
// every value of every body).
func decodesItself(t reflect.Type) bool {
	if d, ok := decodesCache.Load(t); ok {
		return d.(bool)
	}
	d := t.Kind() == reflect.Interface
	if !d {
		pt := t
		if t.Kind() != reflect.Pointer {
			pt = reflect.PointerTo(t)
		}
		d = pt.Implements(unmarshalerType) || pt.Implements(textUnmarshalerType)
	}
	decodesCache.Store(t, d)
	return d
}

var decodesCache sync.Map // reflect.Type → bool

func walk(dec *json.Decoder, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer && !decodesItself(t) {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, isDelim := tok.(json.Delim)
	if !isDelim {
		return nil
	}
	if t == nil || decodesItself(t) {
		return skip(dec, d)
	}
	switch {
	case d == '{' && t.Kind() == reflect.Struct:
		fields := fieldsOf(t)
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			ft, exact := fields.exact[key]
			if !exact {
				if want, folded := fields.folded[Fold(key)]; folded {
					return &Error{Msg: fmt.Sprintf("%s: field names are case-sensitive: send %q", join(path, key), want)}
				}
				if near := fields.nearest(key); near != "" {
					at := ""
					if path != "" {
						at = path + ": "
					}
					return &Error{Msg: fmt.Sprintf("%sunknown field %q (did you mean %q?)", at, key, near)}
				}
			}
			if err := walk(dec, ft, join(path, key)); err != nil { // unknown: ft is nil, the value is skipped
				return err
			}
		}
	case d == '{' && t.Kind() == reflect.Map:
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			if err := walk(dec, t.Elem(), join(path, key)); err != nil {
				return err
			}
		}
	case d == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i := 0; dec.More(); i++ {
			if err := walk(dec, t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	default:
		return skip(dec, d) // a type mismatch: the decode reports it
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// skip consumes the rest of the object or array that open began.
func skip(dec *json.Decoder, open json.Delim) error {
	_ = open
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// structFields are a struct's JSON field names: exact name to type, and
// folded name to exact name.
type structFields struct {
	exact  map[string]reflect.Type
	folded map[string]string
}

var fieldCache sync.Map // reflect.Type → *structFields

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{exact: map[string]reflect.Type{}, folded: map[string]string{}}
	addFields(f, t, 0)
	fieldCache.Store(t, f)
	return f
}

// addFields adds the fields encoding/json decodes into, with those of
// untagged embedded structs promoted (shallower ones win).
func addFields(f *structFields, t reflect.Type, depth int) {
	if depth > 8 {
		return
	}
	var embedded []reflect.Type
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			et := sf.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				embedded = append(embedded, et)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if _, dup := f.exact[name]; dup {
			continue
		}
		f.exact[name] = sf.Type
		if _, dup := f.folded[Fold(name)]; !dup {
			f.folded[Fold(name)] = name
		}
	}
	for _, et := range embedded {
		addFields(f, et, depth+1)
	}
}

// nearest is the known field name closest to an unknown key, when one is
// close enough to be a typo: at most one edit (an insertion, deletion,
// substitution or swap of neighbours) per four characters of the key, at
// least one; ties go to the first name in order, so the answer is stable.
// "" when none is.
func (f *structFields) nearest(key string) string {
	limit := max(1, len(key)/4)
	best, bestD := "", limit+1
	for name := range f.exact {
		d := editDistance(key, name, limit+1)
		if d < bestD || (d == bestD && d <= limit && name < best) {
			best, bestD = name, d
		}
	}
	if bestD > limit {
		return ""
	}
	return best
}

// editDistance is the optimal-string-alignment distance of a and b (in
// bytes: Levenshtein plus swaps of neighbours), exact below limit and
// limit otherwise.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	// Three rows; keys and field names are short, so on the stack (this
	// runs for every unknown key of every request body against each
	// field name).
	var stack [3 * 40]int
	var cells []int
	if n := 3 * (len(b) + 1); n <= len(stack) {
		cells = stack[:n]
	} else {
		cells = make([]int, n)
	}
	w := len(b) + 1
	rows := [3][]int{cells[:w:w], cells[w : 2*w : 2*w], cells[2*w:]}
	for j := range rows[0] {
		rows[0][j] = j // row i lives in rows[i%3]
	}
	for i := 1; i <= len(a); i++ {
		prev2, prev, cur := rows[(i+1)%3], rows[(i+2)%3], rows[i%3]
		cur[0] = i
		rowMin := i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= limit {
			return limit
		}
	}
	return min(rows[len(a)%3][len(b)], limit)
}
