// Package schema converts between Arrow schemas and the flat list of
// Lance fields that manifests and data files store.
//
// Lance stores a schema as its fields in pre-order (a field, then its
// children), each with an id, the id of its parent (-1 at the top) and a
// logical type string such as "int64", "large_string",
// "fixed_size_list:float:768", "timestamp:us:UTC" or "decimal:128:38:2".
// Struct fields have the logical type "struct" and their members as
// children; a list has one child, its item. Fixed-size lists carry their
// item type inside the logical type and have no children.
package schema

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/mvq-dev/mvq/lance/pb/filepb"
)

// Field metadata keys Lance gives meaning to.
const (
	// ExtensionNameKey is Arrow's extension-name metadata key; Lance keeps
	// it in Field.extension_name.
	ExtensionNameKey = "ARROW:extension:name"
	// PrimaryKeyKey marks a field as the unenforced primary key.
	PrimaryKeyKey = "lance-schema:unenforced-primary-key"
)

// FromArrow converts an Arrow schema to Lance fields in pre-order, with ids
// assigned from 0 in that order and parent id -1 at the top level.
func FromArrow(s *arrow.Schema) ([]*filepb.Field, error) {
	return FromArrowFrom(s, 0)
}

// FromArrowFrom is FromArrow with ids starting at first (for fields added
// to a schema whose largest id is first-1).
func FromArrowFrom(s *arrow.Schema, first int32) ([]*filepb.Field, error) {
	var out []*filepb.Field
	next := first
	for _, f := range s.Fields() {
		var err error
		out, err = appendField(out, f, -1, &next)
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func appendField(out []*filepb.Field, f arrow.Field, parent int32, next *int32) ([]*filepb.Field, error) {
	lt, err := LogicalType(f.Type)
	if err != nil {
		return nil, fmt.Errorf("field %q: %w", f.Name, err)
	}
	pf := &filepb.Field{
		Type:        filepb.Field_PARENT,
		Name:        f.Name,
		Id:          *next,
		ParentId:    parent,
		LogicalType: lt,
		Nullable:    f.Nullable,
		Encoding:    legacyEncoding(f.Type),
	}
	*next++
	if f.HasMetadata() {
		pf.Metadata = map[string][]byte{}
		for i, k := range f.Metadata.Keys() {
			v := f.Metadata.Values()[i]
			if k == ExtensionNameKey {
				pf.ExtensionName = v
				continue
			}
			if k == PrimaryKeyKey {
				switch strings.ToLower(v) {
				case "true", "1", "yes":
					pf.UnenforcedPrimaryKey = true
				}
			}
			pf.Metadata[k] = []byte(v)
		}
	}
	out = append(out, pf)
	switch t := f.Type.(type) {
	case *arrow.StructType:
		for _, c := range t.Fields() {
			if out, err = appendField(out, c, pf.Id, next); err != nil {
				return nil, err
			}
		}
	case *arrow.ListType:
		if out, err = appendField(out, t.ElemField(), pf.Id, next); err != nil {
			return nil, err
		}
	case *arrow.LargeListType:
		if out, err = appendField(out, t.ElemField(), pf.Id, next); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// legacyEncoding is the deprecated per-field encoding Lance still fills in.
func legacyEncoding(dt arrow.DataType) filepb.Encoding {
	switch dt.(type) {
	case *arrow.StructType, *arrow.NullType:
		return filepb.Encoding_NONE
	case *arrow.DictionaryType:
		return filepb.Encoding_DICTIONARY
	case *arrow.ListType, *arrow.LargeListType:
		return filepb.Encoding_PLAIN
	case *arrow.StringType, *arrow.LargeStringType, *arrow.BinaryType, *arrow.LargeBinaryType:
		return filepb.Encoding_VAR_BINARY
	case *arrow.FixedSizeListType:
		if fixedStride(dt) {
			return filepb.Encoding_PLAIN
		}
		return filepb.Encoding_NONE
	}
	if fixedStride(dt) {
		return filepb.Encoding_PLAIN
	}
	return filepb.Encoding_NONE
}

func fixedStride(dt arrow.DataType) bool {
	switch t := dt.(type) {
	case *arrow.BooleanType, arrow.FixedWidthDataType:
		return true
	case *arrow.FixedSizeListType:
		return fixedStride(t.Elem())
	}
	return false
}

var timeUnits = map[arrow.TimeUnit]string{arrow.Second: "s", arrow.Millisecond: "ms", arrow.Microsecond: "us", arrow.Nanosecond: "ns"}

func parseUnit(s string) (arrow.TimeUnit, error) {
	for u, n := range timeUnits {
		if n == s {
			return u, nil
		}
	}
	return 0, fmt.Errorf("unknown time unit %q", s)
}

// LogicalType is Lance's logical type string for an Arrow type.
func LogicalType(dt arrow.DataType) (string, error) {
	switch t := dt.(type) {
	case *arrow.NullType:
		return "null", nil
	case *arrow.BooleanType:
		return "bool", nil
	case *arrow.Int8Type:
		return "int8", nil
	case *arrow.Uint8Type:
		return "uint8", nil
	case *arrow.Int16Type:
		return "int16", nil
	case *arrow.Uint16Type:
		return "uint16", nil
	case *arrow.Int32Type:
		return "int32", nil
	case *arrow.Uint32Type:
		return "uint32", nil
	case *arrow.Int64Type:
		return "int64", nil
	case *arrow.Uint64Type:
		return "uint64", nil
	case *arrow.Float16Type:
		return "halffloat", nil
	case *arrow.Float32Type:
		return "float", nil
	case *arrow.Float64Type:
		return "double", nil
	case *arrow.Decimal128Type:
		return fmt.Sprintf("decimal:128:%d:%d", t.Precision, t.Scale), nil
	case *arrow.Decimal256Type:
		return fmt.Sprintf("decimal:256:%d:%d", t.Precision, t.Scale), nil
	case *arrow.StringType:
		return "string", nil
	case *arrow.LargeStringType:
		return "large_string", nil
	case *arrow.BinaryType:
		return "binary", nil
	case *arrow.LargeBinaryType:
		return "large_binary", nil
	case *arrow.Date32Type:
		return "date32:day", nil
	case *arrow.Date64Type:
		return "date64:ms", nil
	case *arrow.Time32Type:
		return "time32:" + timeUnits[t.Unit], nil
	case *arrow.Time64Type:
		return "time64:" + timeUnits[t.Unit], nil
	case *arrow.TimestampType:
		tz := t.TimeZone
		if tz == "" {
			tz = "-"
		}
		return "timestamp:" + timeUnits[t.Unit] + ":" + tz, nil
	case *arrow.DurationType:
		return "duration:" + timeUnits[t.Unit], nil
	case *arrow.StructType:
		return "struct", nil
	case *arrow.DictionaryType:
		v, err := LogicalType(t.ValueType)
		if err != nil {
			return "", err
		}
		k, err := LogicalType(t.IndexType)
		if err != nil {
			return "", err
		}
		return "dict:" + v + ":" + k + ":false", nil
	case *arrow.ListType:
		if _, ok := t.Elem().(*arrow.StructType); ok {
			return "list.struct", nil
		}
		return "list", nil
	case *arrow.LargeListType:
		if _, ok := t.Elem().(*arrow.StructType); ok {
			return "large_list.struct", nil
		}
		return "large_list", nil
	case *arrow.FixedSizeListType:
		inner, err := LogicalType(t.Elem())
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("fixed_size_list:%s:%d", inner, t.Len()), nil
	case *arrow.FixedSizeBinaryType:
		return fmt.Sprintf("fixed_size_binary:%d", t.ByteWidth), nil
	}
	return "", fmt.Errorf("Lance has no logical type for Arrow type %s", dt)
}

var simple = map[string]arrow.DataType{
	"null": arrow.Null, "bool": arrow.FixedWidthTypes.Boolean,
	"int8": arrow.PrimitiveTypes.Int8, "uint8": arrow.PrimitiveTypes.Uint8,
	"int16": arrow.PrimitiveTypes.Int16, "uint16": arrow.PrimitiveTypes.Uint16,
	"int32": arrow.PrimitiveTypes.Int32, "uint32": arrow.PrimitiveTypes.Uint32,
	"int64": arrow.PrimitiveTypes.Int64, "uint64": arrow.PrimitiveTypes.Uint64,
	"halffloat": arrow.FixedWidthTypes.Float16, "float": arrow.PrimitiveTypes.Float32,
	"double": arrow.PrimitiveTypes.Float64,
	"string": arrow.BinaryTypes.String, "large_string": arrow.BinaryTypes.LargeString,
	"binary": arrow.BinaryTypes.Binary, "large_binary": arrow.BinaryTypes.LargeBinary,
	"json":       arrow.BinaryTypes.LargeBinary,
	"date32:day": arrow.FixedWidthTypes.Date32, "date64:ms": arrow.FixedWidthTypes.Date64,
}

// ParseLogicalType is the Arrow type of a leaf logical type (struct and
// list types need their children: see ToArrow).
func ParseLogicalType(s string) (arrow.DataType, error) {
	if dt, ok := simple[s]; ok {
		return dt, nil
	}
	parts := strings.Split(s, ":")
	bad := func() (arrow.DataType, error) { return nil, fmt.Errorf("unsupported Lance logical type %q", s) }
	switch parts[0] {
	case "time32", "time64", "duration":
		if len(parts) != 2 {
			return bad()
		}
		u, err := parseUnit(parts[1])
		if err != nil {
			return bad()
		}
		switch parts[0] {
		case "time32":
			if u != arrow.Second && u != arrow.Millisecond {
				return bad()
			}
			return &arrow.Time32Type{Unit: u}, nil
		case "time64":
			if u != arrow.Microsecond && u != arrow.Nanosecond {
				return bad()
			}
			return &arrow.Time64Type{Unit: u}, nil
		}
		return &arrow.DurationType{Unit: u}, nil
	case "timestamp":
		if len(parts) < 3 {
			return bad()
		}
		u, err := parseUnit(parts[1])
		if err != nil {
			return bad()
		}
		tz := strings.Join(parts[2:], ":") // zone names such as "+05:30" hold colons
		if tz == "-" {
			tz = ""
		}
		return &arrow.TimestampType{Unit: u, TimeZone: tz}, nil
	case "decimal":
		if len(parts) != 4 {
			return bad()
		}
		p, err1 := strconv.ParseInt(parts[2], 10, 32)
		sc, err2 := strconv.ParseInt(parts[3], 10, 32)
		if err1 != nil || err2 != nil || p < 1 || sc < -128 || sc > 127 {
			return bad()
		}
		switch parts[1] {
		case "128":
			if p > 38 {
				return bad()
			}
			return &arrow.Decimal128Type{Precision: int32(p), Scale: int32(sc)}, nil
		case "256":
			if p > 76 {
				return bad()
			}
			return &arrow.Decimal256Type{Precision: int32(p), Scale: int32(sc)}, nil
		}
		return bad()
	case "fixed_size_list":
		if len(parts) < 3 {
			return bad()
		}
		n, err := strconv.ParseInt(parts[len(parts)-1], 10, 32)
		if err != nil || n < 0 {
			return bad()
		}
		inner := strings.Join(parts[1:len(parts)-1], ":")
		if inner == "lance.bfloat16" {
			return nil, fmt.Errorf("Lance logical type %q (bfloat16 vectors) is not supported", s)
		}
		it, err := ParseLogicalType(inner)
		if err != nil {
			return nil, err
		}
		return arrow.FixedSizeListOf(int32(n), it), nil
	case "fixed_size_binary":
		if len(parts) != 2 {
			return bad()
		}
		n, err := strconv.ParseInt(parts[1], 10, 32)
		if err != nil || n < 0 {
			return bad()
		}
		return &arrow.FixedSizeBinaryType{ByteWidth: int(n)}, nil
	case "dict":
		if len(parts) != 4 {
			return bad()
		}
		v, err := ParseLogicalType(parts[1])
		if err != nil {
			return nil, err
		}
		k, err := ParseLogicalType(parts[2])
		if err != nil {
			return nil, err
		}
		if !arrow.IsInteger(k.ID()) {
			return bad()
		}
		return &arrow.DictionaryType{IndexType: k, ValueType: v}, nil
	}
	return bad()
}

// ToArrow builds the Arrow schema of Lance fields linked by parent ids
// (each parent listed before its children, as Lance writes them).
// Schema-level metadata is passed in md.
func ToArrow(fields []*filepb.Field, md map[string][]byte) (*arrow.Schema, error) {
	byID := make(map[int32]*node, len(fields))
	var top []*node
	for i, f := range fields {
		if f == nil {
			return nil, fmt.Errorf("field %d is empty", i)
		}
		if _, dup := byID[f.Id]; dup {
			return nil, fmt.Errorf("field id %d appears twice", f.Id)
		}
		n := &node{f: f}
		byID[f.Id] = n
		if f.ParentId == -1 {
			top = append(top, n)
			continue
		}
		p, ok := byID[f.ParentId]
		if !ok {
			return nil, fmt.Errorf("field %q (id %d) names parent %d, which is not listed before it", f.Name, f.Id, f.ParentId)
		}
		p.children = append(p.children, n)
	}
	out := make([]arrow.Field, 0, len(top))
	for _, n := range top {
		af, err := n.arrow(0)
		if err != nil {
			return nil, err
		}
		out = append(out, af)
	}
	var meta *arrow.Metadata
	if len(md) > 0 {
		keys := make([]string, 0, len(md))
		for k := range md {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		vals := make([]string, len(keys))
		for i, k := range keys {
			vals[i] = string(md[k])
		}
		m := arrow.NewMetadata(keys, vals)
		meta = &m
	}
	return arrow.NewSchema(out, meta), nil
}

type node struct {
	f        *filepb.Field
	children []*node
}

// maxDepth bounds nesting so a hostile schema cannot exhaust the stack.
const maxDepth = 64

func (n *node) arrow(depth int) (arrow.Field, error) {
	if depth > maxDepth {
		return arrow.Field{}, fmt.Errorf("field %q is nested deeper than %d levels", n.f.Name, maxDepth)
	}
	lt := n.f.LogicalType
	var dt arrow.DataType
	switch lt {
	case "struct":
		cs := make([]arrow.Field, len(n.children))
		for i, c := range n.children {
			af, err := c.arrow(depth + 1)
			if err != nil {
				return arrow.Field{}, err
			}
			cs[i] = af
		}
		dt = arrow.StructOf(cs...)
	case "list", "list.struct", "large_list", "large_list.struct":
		if len(n.children) != 1 {
			return arrow.Field{}, fmt.Errorf("list field %q has %d children, want 1", n.f.Name, len(n.children))
		}
		item, err := n.children[0].arrow(depth + 1)
		if err != nil {
			return arrow.Field{}, err
		}
		if strings.HasPrefix(lt, "large_") {
			dt = arrow.LargeListOfField(item)
		} else {
			dt = arrow.ListOfField(item)
		}
	default:
		if len(n.children) != 0 {
			return arrow.Field{}, fmt.Errorf("field %q of type %q has children", n.f.Name, lt)
		}
		var err error
		if dt, err = ParseLogicalType(lt); err != nil {
			return arrow.Field{}, fmt.Errorf("field %q: %w", n.f.Name, err)
		}
	}
	af := arrow.Field{Name: n.f.Name, Type: dt, Nullable: n.f.Nullable}
	if len(n.f.Metadata) > 0 || n.f.ExtensionName != "" {
		keys := make([]string, 0, len(n.f.Metadata)+1)
		for k := range n.f.Metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		vals := make([]string, 0, len(keys)+1)
		for _, k := range keys {
			vals = append(vals, string(n.f.Metadata[k]))
		}
		if n.f.ExtensionName != "" {
			keys = append(keys, ExtensionNameKey)
			vals = append(vals, n.f.ExtensionName)
		}
		af.Metadata = arrow.NewMetadata(keys, vals)
	}
	return af, nil
}

// Walk calls fn for every field in pre-order (the order Lance lists them).
func Walk(fields []*filepb.Field, fn func(f *filepb.Field)) {
	for _, f := range fields {
		fn(f)
	}
}

// Leaves are the fields without children (primitive, string, binary and
// fixed-size-list fields) in pre-order: one column each in a 2.1 file.
func Leaves(fields []*filepb.Field) []*filepb.Field {
	parents := map[int32]bool{}
	for _, f := range fields {
		if f.ParentId != -1 {
			parents[f.ParentId] = true
		}
	}
	var out []*filepb.Field
	for _, f := range fields {
		if !parents[f.Id] && f.LogicalType != "struct" {
			out = append(out, f)
		}
	}
	return out
}

// MaxID is the largest field id, or -1 without fields.
func MaxID(fields []*filepb.Field) int32 {
	m := int32(-1)
	for _, f := range fields {
		if f.Id > m {
			m = f.Id
		}
	}
	return m
}
