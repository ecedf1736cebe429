package strictjson

import (
	"bytes"
	"encoding/json"
	"reflect"
	"unicode/utf8"
)

// Check and CheckFields are on the path of every JSON request body, where
// encoding/json's Decoder.Token (an allocation per token, a buffer per
// decoder) cost more than the rest of the body's handling. Valid JSON
// (json.Valid, which allocates nothing) is walked here instead with a
// scanner that trusts its syntax; the walk only decides whether the data
// passes. Anything it cannot pass (malformed JSON, a duplicate key, too
// deep, a field-name problem) goes to the token walk, which makes every
// error message, so the answers are the same.

// scanner reads the tokens of valid JSON.
type scanner struct {
	data []byte
	pos  int
}

// Token kinds next returns; a literal is a number, true, false or null.
const (
	tokEnd = iota
	tokObject
	tokObjectEnd
	tokArray
	tokArrayEnd
	tokString
	tokLiteral
)

// next returns the next token, skipping whitespace, commas and colons; a
// string is its quoted bytes.
func (s *scanner) next() (int, []byte) {
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch c {
		case ' ', '\t', '\r', '\n', ',', ':':
			s.pos++
			continue
		case '{':
			s.pos++
			return tokObject, nil
		case '}':
			s.pos++
			return tokObjectEnd, nil
		case '[':
			s.pos++
			return tokArray, nil
		case ']':
			s.pos++
			return tokArrayEnd, nil
		case '"':
			start := s.pos
			s.pos++
			for s.pos < len(s.data) {
				switch s.data[s.pos] {
				case '\\':
					s.pos += 2
					continue
				case '"':
					s.pos++
					return tokString, s.data[start:s.pos]
				}
				s.pos++
			}
			return tokEnd, nil
		default:
			start := s.pos
			for s.pos < len(s.data) {
				switch s.data[s.pos] {
				case ' ', '\t', '\r', '\n', ',', ':', '}', ']':
					return tokLiteral, s.data[start:s.pos]
				}
				s.pos++
			}
			return tokLiteral, s.data[start:s.pos]
		}
	}
	return tokEnd, nil
}

// skipValue skips the rest of a value whose first token was kind.
func (s *scanner) skipValue(kind int) {
	if kind != tokObject && kind != tokArray {
		return
	}
	for depth := 1; depth > 0; {
		switch k, _ := s.next(); k {
		case tokObject, tokArray:
			depth++
		case tokObjectEnd, tokArrayEnd:
			depth--
		case tokEnd:
			return
		}
	}
}

// unquote is a quoted string's value as encoding/json decodes it; plain
// is true when it is the bytes between the quotes (no escape, ASCII),
// which it then is without a copy.
func unquote(q []byte) ([]byte, bool) {
	inner := q[1 : len(q)-1]
	for _, c := range inner {
		if c == '\\' || c >= utf8.RuneSelf {
			var s string
			if json.Unmarshal(q, &s) != nil {
				return nil, false
			}
			return []byte(s), false
		}
	}
	return inner, true
}

// quickCheck reports whether valid JSON data has no duplicate key and
// nests at most maxDepth deep.
func quickCheck(data []byte, maxDepth int) bool {
	s := scanner{data: data}
	// keys holds the keys of the open objects, each object's from its
	// mark on; objects are small, so a linear search beats a map.
	var keysBuf [32][]byte
	var marksBuf [16]int
	var objBuf [16]bool
	keys, marks, isObj := keysBuf[:0], marksBuf[:0], objBuf[:0]
	expectKey := false
	for {
		kind, tok := s.next()
		switch kind {
		case tokEnd:
			return len(marks) == 0
		case tokObject, tokArray:
			if len(marks) >= maxDepth {
				return false
			}
			marks = append(marks, len(keys))
			isObj = append(isObj, kind == tokObject)
			expectKey = kind == tokObject
			continue
		case tokObjectEnd, tokArrayEnd:
			keys = keys[:marks[len(marks)-1]]
			marks, isObj = marks[:len(marks)-1], isObj[:len(isObj)-1]
		case tokString:
			if expectKey {
				key, _ := unquote(tok)
				for _, k := range keys[marks[len(marks)-1]:] {
					if bytes.Equal(k, key) {
						return false
					}
				}
				keys = append(keys, key)
				expectKey = false
				continue
			}
		}
		// A value ended: the next token of an object is a key.
		expectKey = len(isObj) > 0 && isObj[len(isObj)-1]
	}
}

// quickFields reports whether CheckFields would pass valid JSON data
// walked along type t.
func quickFields(data []byte, t reflect.Type) bool {
	s := scanner{data: data}
	kind, _ := s.next()
	return s.fields(kind, t)
}

// fields is walk on the scanner: the value that began with token kind,
// along type t.
func (s *scanner) fields(kind int, t reflect.Type) bool {
	for t != nil && t.Kind() == reflect.Pointer && !decodesItself(t) {
		t = t.Elem()
	}
	if kind != tokObject && kind != tokArray {
		return true
	}
	if t == nil || decodesItself(t) {
		s.skipValue(kind)
		return true
	}
	switch {
	case kind == tokObject && t.Kind() == reflect.Struct:
		f := fieldsOf(t)
		for {
			k, tok := s.next()
			if k != tokString {
				return k == tokObjectEnd
			}
			key, plain := unquote(tok)
			ft, exact := f.exact[string(key)]
			if !exact {
				if !plain {
					return false // Fold of a non-ASCII key: the token walk judges it
				}
				if _, folded := f.folded[Fold(string(key))]; folded || f.nearest(string(key)) != "" {
					return false
				}
			}
			vk, _ := s.next()
			if !s.fields(vk, ft) {
				return false
			}
		}
	case kind == tokObject && t.Kind() == reflect.Map:
		for {
			k, _ := s.next()
			if k != tokString {
				return k == tokObjectEnd
			}
			vk, _ := s.next()
			if !s.fields(vk, t.Elem()) {
				return false
			}
		}
	case kind == tokArray && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for {
			k, _ := s.next()
			if k == tokArrayEnd || k == tokEnd {
				return k == tokArrayEnd
			}
			if !s.fields(k, t.Elem()) {
				return false
			}
		}
	default:
		s.skipValue(kind)
		return true
	}
}

// ObjectKeys calls fn with the name of each top-level member of data,
// which must be valid JSON (Check it first), in order, until fn returns
// false; plain is true when the name is the bytes between its quotes (no
// escape, ASCII), else key is its decoded value. It reports whether data
// is an object.
func ObjectKeys(data []byte, fn func(key []byte, plain bool) bool) bool {
	s := scanner{data: data}
	if k, _ := s.next(); k != tokObject {
		return false
	}
	for {
		k, tok := s.next()
		if k != tokString {
			return true
		}
		key, plain := unquote(tok)
		if !fn(key, plain) {
			return true
		}
		vk, _ := s.next()
		s.skipValue(vk)
	}
}
