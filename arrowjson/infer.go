package arrowjson

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// InferRows reads a JSON array of row objects, infers a schema from it and
// returns the data as one record batch with that schema (the record's
// Schema()). The body is parsed once; the decoded rows are held in memory
// until the record is built.
//
// Inference rules: fields appear in order of first appearance (across
// rows, and within nested objects); every inferred field is nullable.
// true/false gives bool; a number written without fraction or exponent
// that fits int64 gives int64, and a column that also holds any other
// number (1.5, 1e3, 2.0) gives float64 (an integer beyond int64 is an
// error, not a float64 that would change its value); a
// string gives utf8; an array gives a list whose element type is inferred
// from all elements of all rows ("item", nullable); an object gives a
// struct. A column (or list element, or struct child) with only nulls, or
// only empty arrays' elements, gives utf8. Values of different kinds in one
// column (a string and a number, an array and an object, ...) give a
// *RowError naming the row and path of the first value that conflicts.
// Other errors are those of [DecodeRows].
//
// mem may be nil (memory.DefaultAllocator). The caller releases the record.
func InferRows(r io.Reader, mem memory.Allocator) (arrow.RecordBatch, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	root := &inferType{kind: kindStruct, index: map[string]int{}}
	var rows []*object
	err := readRows(r, func(row int, obj *object) error {
		if verr := root.merge(obj); verr != nil {
			return verr.rowError(row)
		}
		rows = append(rows, obj)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s := arrow.NewSchema(root.arrowFields(), nil)
	rb := array.NewRecordBuilder(mem, s)
	defer rb.Release()
	fs, err := compileFields(s.Fields(), rb.Fields(), "")
	if err != nil {
		return nil, err
	}
	for i, obj := range rows {
		if verr := fs.add(obj); verr != nil {
			return nil, verr.rowError(i)
		}
		rows[i] = nil // let the decoded row go
	}
	return finish(s, rb, len(rows)), nil
}

type kind int

const (
	kindNull kind = iota
	kindBool
	kindInt
	kindFloat
	kindString
	kindList
	kindStruct
)

func (k kind) String() string {
	switch k {
	case kindBool:
		return "bool"
	case kindInt, kindFloat:
		return "number"
	case kindString:
		return "string"
	case kindList:
		return "array"
	case kindStruct:
		return "object"
	}
	return "null"
}

type inferType struct {
	kind   kind
	elem   *inferType // kindList
	fields []inferField
	index  map[string]int // kindStruct: name -> position in fields
}

type inferField struct {
	name string
	t    *inferType
}

// numberKind is kindFloat for a number with a fraction or exponent and
// kindInt for an integer; an integer outside int64 is an error rather than
// a float64 that would silently change its value.
func numberKind(n json.Number) (kind, *valueError) {
	s := string(n)
	if strings.ContainsAny(s, ".eE") {
		return kindFloat, nil
	}
	if _, err := strconv.ParseInt(s, 10, 64); err != nil {
		return kindInt, &valueError{msg: "integer " + truncate(s) + " does not fit int64; send it with an exponent (such as 1.8e19) to store a float64, or create the table with a schema"}
	}
	return kindInt, nil
}

func (t *inferType) conflict(v any) *valueError {
	return &valueError{msg: "conflicting types in column: earlier values are " + t.kind.String() + ", got " + describe(v)}
}

func (t *inferType) scalar(k kind, v any) *valueError {
	switch t.kind {
	case kindNull:
		t.kind = k
		return nil
	case k:
		return nil
	}
	return t.conflict(v)
}

func (t *inferType) merge(v any) *valueError {
	switch x := v.(type) {
	case nil:
		return nil
	case bool:
		return t.scalar(kindBool, v)
	case string:
		return t.scalar(kindString, v)
	case json.Number:
		k, e := numberKind(x)
		if e != nil {
			return e
		}
		switch {
		case t.kind == kindInt && k == kindFloat:
			t.kind = kindFloat
			return nil
		case t.kind == kindFloat && k == kindInt:
			return nil
		}
		return t.scalar(k, v)
	case []any:
		switch t.kind {
		case kindNull:
			t.kind, t.elem = kindList, &inferType{}
		case kindList:
		default:
			return t.conflict(v)
		}
		for i, e := range x {
			if err := t.elem.merge(e); err != nil {
				return err.in(idxSeg(i))
			}
		}
		return nil
	case *object:
		switch t.kind {
		case kindNull:
			t.kind, t.index = kindStruct, map[string]int{}
		case kindStruct:
		default:
			return t.conflict(v)
		}
		for i, key := range x.keys {
			pos, ok := t.index[key]
			if !ok {
				pos = len(t.fields)
				t.index[key] = pos
				t.fields = append(t.fields, inferField{name: key, t: &inferType{}})
			}
			if err := t.fields[pos].t.merge(x.vals[i]); err != nil {
				return err.in(keySeg(key))
			}
		}
		return nil
	}
	return &valueError{msg: "unexpected value " + describe(v)}
}

func (t *inferType) arrowFields() []arrow.Field {
	out := make([]arrow.Field, len(t.fields))
	for i, f := range t.fields {
		out[i] = arrow.Field{Name: f.name, Type: f.t.arrowType(), Nullable: true}
	}
	return out
}

func (t *inferType) arrowType() arrow.DataType {
	switch t.kind {
	case kindBool:
		return arrow.FixedWidthTypes.Boolean
	case kindInt:
		return arrow.PrimitiveTypes.Int64
	case kindFloat:
		return arrow.PrimitiveTypes.Float64
	case kindList:
		return arrow.ListOfField(arrow.Field{Name: "item", Type: t.elem.arrowType(), Nullable: true})
	case kindStruct:
		return arrow.StructOf(t.arrowFields()...)
	}
	return arrow.BinaryTypes.String // string, and all-null
}
