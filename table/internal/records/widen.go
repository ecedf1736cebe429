package records

import "github.com/apache/arrow-go/v18/arrow"

// SameLayout reports whether a file written with schema w reads by
// position as schema s: as many columns, each the same type or one s's
// type widens.
func SameLayout(w, s *arrow.Schema) bool {
	if w.NumFields() != s.NumFields() {
		return false
	}
	for i, f := range s.Fields() {
		if !arrow.TypeEqual(w.Field(i).Type, f.Type) && !Widens(w.Field(i).Type, f.Type) {
			return false
		}
	}
	return true
}

// Widens reports whether values of type from always fit type to, so a
// column can be retyped without rewriting its data: integers to wider
// integers (unsigned to a wider signed one too), float32 to float64,
// utf8 and binary to their large forms.
func Widens(from, to arrow.DataType) bool {
	rank := func(t arrow.DataType) (signed bool, bits int, ok bool) {
		switch t.ID() {
		case arrow.INT8:
			return true, 8, true
		case arrow.INT16:
			return true, 16, true
		case arrow.INT32:
			return true, 32, true
		case arrow.INT64:
			return true, 64, true
		case arrow.UINT8:
			return false, 8, true
		case arrow.UINT16:
			return false, 16, true
		case arrow.UINT32:
			return false, 32, true
		case arrow.UINT64:
			return false, 64, true
		}
		return false, 0, false
	}
	fs, fb, fok := rank(from)
	ts, tb, tok := rank(to)
	if fok && tok {
		switch {
		case fs == ts:
			return tb > fb
		case !fs && ts:
			return tb > fb
		}
		return false
	}
	switch {
	case from.ID() == arrow.FLOAT32 && to.ID() == arrow.FLOAT64,
		from.ID() == arrow.STRING && to.ID() == arrow.LARGE_STRING,
		from.ID() == arrow.BINARY && to.ID() == arrow.LARGE_BINARY:
		return true
	}
	return false
}
