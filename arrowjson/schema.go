package arrowjson

import (
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Schema is the spec's JsonArrowSchema.
type Schema struct {
	Fields   []Field           `json:"fields"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Field is the spec's JsonArrowField.
type Field struct {
	Name     string            `json:"name"`
	Type     DataType          `json:"type"`
	Nullable bool              `json:"nullable"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// DataType is the spec's JsonArrowDataType. Fields holds the children of
// "struct" and the single element field of "list", "large_list" and
// "fixed_size_list"; Length is set for "fixed_size_list" and
// "fixed_size_binary".
type DataType struct {
	Type   string  `json:"type"`
	Fields []Field `json:"fields,omitempty"`
	Length *int64  `json:"length,omitempty"`
}

// Type names used in [DataType.Type].
const (
	TypeNull            = "null"
	TypeBool            = "bool"
	TypeInt8            = "int8"
	TypeInt16           = "int16"
	TypeInt32           = "int32"
	TypeInt64           = "int64"
	TypeUint8           = "uint8"
	TypeUint16          = "uint16"
	TypeUint32          = "uint32"
	TypeUint64          = "uint64"
	TypeFloat16         = "float16"
	TypeFloat32         = "float32"
	TypeFloat64         = "float64"
	TypeUtf8            = "utf8"
	TypeLargeUtf8       = "large_utf8"
	TypeBinary          = "binary"
	TypeLargeBinary     = "large_binary"
	TypeFixedSizeBinary = "fixed_size_binary"
	TypeDate32          = "date32"
	TypeDate64          = "date64"
	TypeTimestamp       = "timestamp"
	TypeList            = "list"
	TypeLargeList       = "large_list"
	TypeFixedSizeList   = "fixed_size_list"
	TypeStruct          = "struct"
)

// simpleTypes maps the parameterless type names to Arrow types.
var simpleTypes = map[string]arrow.DataType{
	TypeNull:        arrow.Null,
	TypeBool:        arrow.FixedWidthTypes.Boolean,
	TypeInt8:        arrow.PrimitiveTypes.Int8,
	TypeInt16:       arrow.PrimitiveTypes.Int16,
	TypeInt32:       arrow.PrimitiveTypes.Int32,
	TypeInt64:       arrow.PrimitiveTypes.Int64,
	TypeUint8:       arrow.PrimitiveTypes.Uint8,
	TypeUint16:      arrow.PrimitiveTypes.Uint16,
	TypeUint32:      arrow.PrimitiveTypes.Uint32,
	TypeUint64:      arrow.PrimitiveTypes.Uint64,
	TypeFloat16:     arrow.FixedWidthTypes.Float16,
	TypeFloat32:     arrow.PrimitiveTypes.Float32,
	TypeFloat64:     arrow.PrimitiveTypes.Float64,
	TypeUtf8:        arrow.BinaryTypes.String,
	TypeLargeUtf8:   arrow.BinaryTypes.LargeString,
	TypeBinary:      arrow.BinaryTypes.Binary,
	TypeLargeBinary: arrow.BinaryTypes.LargeBinary,
	TypeDate32:      arrow.FixedWidthTypes.Date32,
	TypeDate64:      arrow.FixedWidthTypes.Date64,
	TypeTimestamp:   arrow.FixedWidthTypes.Timestamp_us, // microseconds, "UTC"
}

// FromArrow converts an Arrow schema to its JSON form.
//
// Every timestamp type, whatever its unit and time zone, becomes
// "timestamp" (as Lance does); only microsecond/UTC timestamps survive a
// round trip through [Schema.ToArrow] unchanged. Types that have no JSON
// name (decimal, time, duration, map, union, dictionary, view types, ...)
// give an error naming the field path.
func FromArrow(s *arrow.Schema) (Schema, error) {
	if s == nil {
		return Schema{}, fmt.Errorf("arrowjson: nil schema")
	}
	out := Schema{Fields: make([]Field, 0, s.NumFields())}
	for _, f := range s.Fields() {
		jf, err := fieldFromArrow(f, f.Name)
		if err != nil {
			return Schema{}, err
		}
		out.Fields = append(out.Fields, jf)
	}
	out.Metadata = metadataToMap(s.Metadata())
	return out, nil
}

func metadataToMap(md arrow.Metadata) map[string]string {
	if md.Len() == 0 {
		return nil
	}
	return md.ToMap()
}

func mapToMetadata(m map[string]string) arrow.Metadata {
	if len(m) == 0 {
		return arrow.Metadata{}
	}
	return arrow.MetadataFrom(m)
}

func fieldFromArrow(f arrow.Field, path string) (Field, error) {
	dt, err := typeFromArrow(f.Type, path)
	if err != nil {
		return Field{}, err
	}
	return Field{Name: f.Name, Type: dt, Nullable: f.Nullable, Metadata: metadataToMap(f.Metadata)}, nil
}

func typeFromArrow(dt arrow.DataType, path string) (DataType, error) {
	length := func(n int32) *int64 { v := int64(n); return &v }
	switch t := dt.(type) {
	case *arrow.NullType:
		return DataType{Type: TypeNull}, nil
	case *arrow.BooleanType:
		return DataType{Type: TypeBool}, nil
	case *arrow.Int8Type:
		return DataType{Type: TypeInt8}, nil
	case *arrow.Int16Type:
		return DataType{Type: TypeInt16}, nil
	case *arrow.Int32Type:
		return DataType{Type: TypeInt32}, nil
	case *arrow.Int64Type:
		return DataType{Type: TypeInt64}, nil
	case *arrow.Uint8Type:
		return DataType{Type: TypeUint8}, nil
	case *arrow.Uint16Type:
		return DataType{Type: TypeUint16}, nil
	case *arrow.Uint32Type:
		return DataType{Type: TypeUint32}, nil
	case *arrow.Uint64Type:
		return DataType{Type: TypeUint64}, nil
	case *arrow.Float16Type:
		return DataType{Type: TypeFloat16}, nil
	case *arrow.Float32Type:
		return DataType{Type: TypeFloat32}, nil
	case *arrow.Float64Type:
		return DataType{Type: TypeFloat64}, nil
	case *arrow.StringType:
		return DataType{Type: TypeUtf8}, nil
	case *arrow.LargeStringType:
		return DataType{Type: TypeLargeUtf8}, nil
	case *arrow.BinaryType:
		return DataType{Type: TypeBinary}, nil
	case *arrow.LargeBinaryType:
		return DataType{Type: TypeLargeBinary}, nil
	case *arrow.FixedSizeBinaryType:
		return DataType{Type: TypeFixedSizeBinary, Length: length(int32(t.ByteWidth))}, nil
	case *arrow.Date32Type:
		return DataType{Type: TypeDate32}, nil
	case *arrow.Date64Type:
		return DataType{Type: TypeDate64}, nil
	case *arrow.TimestampType:
		return DataType{Type: TypeTimestamp}, nil
	case *arrow.ListType:
		child, err := fieldFromArrow(t.ElemField(), path+"."+t.ElemField().Name)
		if err != nil {
			return DataType{}, err
		}
		return DataType{Type: TypeList, Fields: []Field{child}}, nil
	case *arrow.LargeListType:
		child, err := fieldFromArrow(t.ElemField(), path+"."+t.ElemField().Name)
		if err != nil {
			return DataType{}, err
		}
		return DataType{Type: TypeLargeList, Fields: []Field{child}}, nil
	case *arrow.FixedSizeListType:
		child, err := fieldFromArrow(t.ElemField(), path+"."+t.ElemField().Name)
		if err != nil {
			return DataType{}, err
		}
		return DataType{Type: TypeFixedSizeList, Fields: []Field{child}, Length: length(t.Len())}, nil
	case *arrow.StructType:
		children := make([]Field, 0, t.NumFields())
		for _, f := range t.Fields() {
			child, err := fieldFromArrow(f, path+"."+f.Name)
			if err != nil {
				return DataType{}, err
			}
			children = append(children, child)
		}
		return DataType{Type: TypeStruct, Fields: children}, nil
	default:
		return DataType{}, fmt.Errorf("arrowjson: field %q: Arrow type %s has no JSON schema representation", path, dt)
	}
}

// ToArrow converts the JSON schema to an Arrow schema. Type names are
// matched case-insensitively and "boolean" is accepted for "bool". Errors
// name the field path (children of nested types joined with ".") and the
// offending type.
func (s Schema) ToArrow() (*arrow.Schema, error) {
	fields := make([]arrow.Field, 0, len(s.Fields))
	for i, f := range s.Fields {
		path := f.Name
		if path == "" {
			path = fmt.Sprintf("#%d", i)
		}
		af, err := f.toArrow(path)
		if err != nil {
			return nil, err
		}
		fields = append(fields, af)
	}
	md := mapToMetadata(s.Metadata)
	return arrow.NewSchema(fields, &md), nil
}

func (f Field) toArrow(path string) (arrow.Field, error) {
	dt, err := f.Type.toArrow(path)
	if err != nil {
		return arrow.Field{}, err
	}
	return arrow.Field{Name: f.Name, Type: dt, Nullable: f.Nullable, Metadata: mapToMetadata(f.Metadata)}, nil
}

func (d DataType) toArrow(path string) (arrow.DataType, error) {
	name := strings.ToLower(strings.TrimSpace(d.Type))
	if name == "boolean" {
		name = TypeBool
	}
	if dt, ok := simpleTypes[name]; ok {
		return dt, nil
	}
	switch name {
	case TypeFixedSizeBinary:
		n, err := d.length(path)
		if err != nil {
			return nil, err
		}
		return &arrow.FixedSizeBinaryType{ByteWidth: int(n)}, nil
	case TypeList, TypeLargeList, TypeFixedSizeList:
		if len(d.Fields) != 1 {
			return nil, fmt.Errorf("arrowjson: field %q: type %q needs exactly one element field in \"fields\", got %d", path, d.Type, len(d.Fields))
		}
		elemName := d.Fields[0].Name
		if elemName == "" {
			elemName = "item"
		}
		elem, err := d.Fields[0].toArrow(path + "." + elemName)
		if err != nil {
			return nil, err
		}
		switch name {
		case TypeList:
			return arrow.ListOfField(elem), nil
		case TypeLargeList:
			return arrow.LargeListOfField(elem), nil
		default:
			n, err := d.length(path)
			if err != nil {
				return nil, err
			}
			return arrow.FixedSizeListOfField(n, elem), nil
		}
	case TypeStruct:
		children := make([]arrow.Field, 0, len(d.Fields))
		for i, c := range d.Fields {
			cp := path + "." + c.Name
			if c.Name == "" {
				cp = fmt.Sprintf("%s.#%d", path, i)
			}
			af, err := c.toArrow(cp)
			if err != nil {
				return nil, err
			}
			children = append(children, af)
		}
		return arrow.StructOf(children...), nil
	case "":
		return nil, fmt.Errorf("arrowjson: field %q: missing type name", path)
	default:
		return nil, fmt.Errorf("arrowjson: field %q: unsupported type %q", path, d.Type)
	}
}

func (d DataType) length(path string) (int32, error) {
	if d.Length == nil {
		return 0, fmt.Errorf("arrowjson: field %q: type %q needs \"length\"", path, d.Type)
	}
	n := *d.Length
	if n < 1 || n > math.MaxInt32 {
		return 0, fmt.Errorf("arrowjson: field %q: type %q has invalid length %d (want 1..%d)", path, d.Type, n, math.MaxInt32)
	}
	return int32(n), nil
}
