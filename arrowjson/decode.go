package arrowjson

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// DecodeRows reads a JSON array of row objects from r and builds one Arrow
// record batch with schema s. The body is read row by row with a
// json.Decoder, so only one decoded row is held besides the Arrow builders.
//
// Accepted JSON per Arrow type:
//
//   - bool: true/false only.
//   - int8..int64, uint8..uint64: numbers with an integral value in range
//     (1e3 is 1000; 1.5 is an error).
//   - float16/32/64: any number that fits (1e400 does not fit float64).
//   - utf8, large_utf8: strings only.
//   - binary, large_binary, fixed_size_binary: base64 (standard alphabet)
//     strings; fixed_size_binary must decode to exactly its width.
//   - timestamp: an RFC 3339 string, or an integer in the column's unit
//     (microseconds for this package's "timestamp").
//   - date32, date64: "YYYY-MM-DD" strings, or an integer (days for
//     date32, milliseconds for date64).
//   - list, large_list: arrays; fixed_size_list: arrays of exactly its length.
//   - struct: objects (the same key rules as rows, recursively).
//   - null: null only.
//
// null, or a missing key, gives a null; for a non-nullable field that is a
// *RowError. Keys that are not in the schema, duplicate keys, nesting deeper
// than MaxDepth, invalid JSON, a body that is not an array and an element
// that is not an object are *RowError too. An empty array gives a zero-row
// record. A schema with a type that has no JSON input form (decimal, map,
// ...) is a plain error, returned before r is read.
//
// mem may be nil (memory.DefaultAllocator). The caller releases the record.
func DecodeRows(r io.Reader, s *arrow.Schema, mem memory.Allocator) (arrow.RecordBatch, error) {
	if s == nil {
		return nil, errors.New("arrowjson: nil schema")
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	rb := array.NewRecordBuilder(mem, s)
	defer rb.Release()
	fs, err := compileFields(s.Fields(), rb.Fields(), "")
	if err != nil {
		return nil, err
	}
	n := 0
	err = readRows(r, func(row int, obj *object) error {
		if verr := fs.add(obj); verr != nil {
			return verr.rowError(row)
		}
		n++
		return nil
	})
	if err != nil {
		return nil, err
	}
	return finish(s, rb, n), nil
}

// finish turns the builders into a record of n rows. It does not use
// RecordBuilder.NewRecordBatch so that a schema without fields still gets
// the right row count.
func finish(s *arrow.Schema, rb *array.RecordBuilder, n int) arrow.RecordBatch {
	cols := make([]arrow.Array, len(rb.Fields()))
	for i, b := range rb.Fields() {
		cols[i] = b.NewArray()
	}
	rec := array.NewRecordBatch(s, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// node appends JSON values of one field to its builder.
type node struct {
	nullable bool
	b        array.Builder
	fn       func(v any) *valueError // v is never nil
}

func (n *node) add(v any) *valueError {
	if v == nil {
		if !n.nullable {
			return &valueError{msg: "null is not allowed: field is not nullable"}
		}
		n.b.AppendNull()
		return nil
	}
	return n.fn(v)
}

func (n *node) missing() *valueError {
	if !n.nullable {
		return &valueError{msg: "missing value: field is not nullable"}
	}
	n.b.AppendNull()
	return nil
}

// fieldSet appends JSON objects to a set of field builders (a row, or the
// children of a struct).
type fieldSet struct {
	names []string
	index map[string]int
	nodes []*node
	seen  []bool
}

func compileFields(fields []arrow.Field, builders []array.Builder, path string) (*fieldSet, error) {
	fs := &fieldSet{
		names: make([]string, len(fields)),
		index: make(map[string]int, len(fields)),
		nodes: make([]*node, len(fields)),
		seen:  make([]bool, len(fields)),
	}
	for i, f := range fields {
		p := f.Name
		if path != "" {
			p = path + "." + f.Name
		}
		if _, dup := fs.index[f.Name]; dup {
			return nil, fmt.Errorf("arrowjson: field %q: duplicate field name in schema", p)
		}
		fs.index[f.Name] = i
		fs.names[i] = f.Name
		n, err := compile(f, builders[i], p)
		if err != nil {
			return nil, err
		}
		fs.nodes[i] = n
	}
	return fs, nil
}

func (fs *fieldSet) add(obj *object) *valueError {
	clear(fs.seen)
	for k, key := range obj.keys {
		i, ok := fs.index[key]
		if !ok {
			return (&valueError{msg: "field is not in the schema"}).in(keySeg(key))
		}
		fs.seen[i] = true // the parser rejects duplicate keys
		if err := fs.nodes[i].add(obj.vals[k]); err != nil {
			return err.in(keySeg(key))
		}
	}
	for i, seen := range fs.seen {
		if !seen {
			if err := fs.nodes[i].missing(); err != nil {
				return err.in(keySeg(fs.names[i]))
			}
		}
	}
	return nil
}

func mismatch(want string, v any) *valueError {
	return &valueError{msg: "expected " + want + ", got " + describe(v)}
}

func builderAs[T array.Builder](b array.Builder, f arrow.Field, path string) (T, error) {
	t, ok := b.(T)
	if !ok {
		return t, fmt.Errorf("arrowjson: field %q: unexpected builder %T for Arrow type %s", path, b, f.Type)
	}
	return t, nil
}

func unitName(u arrow.TimeUnit) string {
	switch u {
	case arrow.Second:
		return "seconds"
	case arrow.Millisecond:
		return "milliseconds"
	case arrow.Microsecond:
		return "microseconds"
	default:
		return "nanoseconds"
	}
}

// compile builds the node for field f (path is its dotted name).
func compile(f arrow.Field, b array.Builder, path string) (*node, error) {
	n := &node{nullable: f.Nullable, b: b}
	var err error
	switch dt := f.Type.(type) {
	case *arrow.NullType:
		n.nullable = true
		n.fn = func(v any) *valueError { return mismatch("null", v) }
	case *arrow.BooleanType:
		var bb *array.BooleanBuilder
		if bb, err = builderAs[*array.BooleanBuilder](b, f, path); err == nil {
			n.fn = func(v any) *valueError {
				x, ok := v.(bool)
				if !ok {
					return mismatch("bool", v)
				}
				bb.Append(x)
				return nil
			}
		}
	case *arrow.Int8Type:
		var ib *array.Int8Builder
		if ib, err = builderAs[*array.Int8Builder](b, f, path); err == nil {
			n.fn = signedFn(ib.Append, 8, TypeInt8)
		}
	case *arrow.Int16Type:
		var ib *array.Int16Builder
		if ib, err = builderAs[*array.Int16Builder](b, f, path); err == nil {
			n.fn = signedFn(ib.Append, 16, TypeInt16)
		}
	case *arrow.Int32Type:
		var ib *array.Int32Builder
		if ib, err = builderAs[*array.Int32Builder](b, f, path); err == nil {
			n.fn = signedFn(ib.Append, 32, TypeInt32)
		}
	case *arrow.Int64Type:
		var ib *array.Int64Builder
		if ib, err = builderAs[*array.Int64Builder](b, f, path); err == nil {
			n.fn = signedFn(ib.Append, 64, TypeInt64)
		}
	case *arrow.Uint8Type:
		var ub *array.Uint8Builder
		if ub, err = builderAs[*array.Uint8Builder](b, f, path); err == nil {
			n.fn = unsignedFn(ub.Append, 8, TypeUint8)
		}
	case *arrow.Uint16Type:
		var ub *array.Uint16Builder
		if ub, err = builderAs[*array.Uint16Builder](b, f, path); err == nil {
			n.fn = unsignedFn(ub.Append, 16, TypeUint16)
		}
	case *arrow.Uint32Type:
		var ub *array.Uint32Builder
		if ub, err = builderAs[*array.Uint32Builder](b, f, path); err == nil {
			n.fn = unsignedFn(ub.Append, 32, TypeUint32)
		}
	case *arrow.Uint64Type:
		var ub *array.Uint64Builder
		if ub, err = builderAs[*array.Uint64Builder](b, f, path); err == nil {
			n.fn = unsignedFn(ub.Append, 64, TypeUint64)
		}
	case *arrow.Float16Type:
		var fb *array.Float16Builder
		if fb, err = builderAs[*array.Float16Builder](b, f, path); err == nil {
			n.fn = func(v any) *valueError {
				x, e := toFloat(v, 32, TypeFloat16)
				if e == nil && math.Abs(x) > 65504 {
					e = &valueError{msg: "expected float16, got " + describe(v) + " (out of range)"}
				}
				if e == nil {
					fb.Append(float16.New(float32(x)))
				}
				return e
			}
		}
	case *arrow.Float32Type:
		var fb *array.Float32Builder
		if fb, err = builderAs[*array.Float32Builder](b, f, path); err == nil {
			n.fn = func(v any) *valueError {
				x, e := toFloat(v, 32, TypeFloat32)
				if e == nil {
					fb.Append(float32(x))
				}
				return e
			}
		}
	case *arrow.Float64Type:
		var fb *array.Float64Builder
		if fb, err = builderAs[*array.Float64Builder](b, f, path); err == nil {
			n.fn = func(v any) *valueError {
				x, e := toFloat(v, 64, TypeFloat64)
				if e == nil {
					fb.Append(x)
				}
				return e
			}
		}
	case *arrow.StringType:
		var sb *array.StringBuilder
		if sb, err = builderAs[*array.StringBuilder](b, f, path); err == nil {
			n.fn = func(v any) *valueError {
				x, ok := v.(string)
				if !ok {
					return mismatch(TypeUtf8, v)
				}
				sb.Append(x)
				return nil
			}
		}
	case *arrow.LargeStringType:
		var sb *array.LargeStringBuilder
		if sb, err = builderAs[*array.LargeStringBuilder](b, f, path); err == nil {
			n.fn = func(v any) *valueError {
				x, ok := v.(string)
				if !ok {
					return mismatch(TypeLargeUtf8, v)
				}
				sb.Append(x)
				return nil
			}
		}
	case *arrow.BinaryType, *arrow.LargeBinaryType:
		want := TypeBinary
		if _, large := dt.(*arrow.LargeBinaryType); large {
			want = TypeLargeBinary
		}
		want += " (base64 string)"
		var bb *array.BinaryBuilder
		if bb, err = builderAs[*array.BinaryBuilder](b, f, path); err == nil {
			n.fn = func(v any) *valueError {
				raw, e := toBytes(v, want)
				if e == nil {
					bb.Append(raw)
				}
				return e
			}
		}
	case *arrow.FixedSizeBinaryType:
		width := dt.ByteWidth
		want := fmt.Sprintf("fixed_size_binary of %d bytes (base64 string)", width)
		var bb *array.FixedSizeBinaryBuilder
		if bb, err = builderAs[*array.FixedSizeBinaryBuilder](b, f, path); err == nil {
			n.fn = func(v any) *valueError {
				raw, e := toBytes(v, want)
				if e != nil {
					return e
				}
				if len(raw) != width {
					return &valueError{msg: fmt.Sprintf("expected %s, got %d bytes", want, len(raw))}
				}
				bb.Append(raw)
				return nil
			}
		}
	case *arrow.TimestampType:
		unit := dt.Unit
		want := "timestamp (RFC 3339 string or integer " + unitName(unit) + ")"
		var tb *array.TimestampBuilder
		if tb, err = builderAs[*array.TimestampBuilder](b, f, path); err == nil {
			n.fn = func(v any) *valueError {
				switch x := v.(type) {
				case string:
					t, perr := time.Parse(time.RFC3339Nano, x)
					if perr != nil {
						return mismatch(want, v)
					}
					ts, terr := arrow.TimestampFromTime(t, unit)
					if terr != nil {
						return &valueError{msg: "expected " + want + ", got " + describe(v) + " (out of range)"}
					}
					tb.Append(ts)
					return nil
				case json.Number:
					i, e := toInt(v, 64, want)
					if e == nil {
						tb.Append(arrow.Timestamp(i))
					}
					return e
				}
				return mismatch(want, v)
			}
		}
	case *arrow.Date32Type:
		const want = `date32 ("YYYY-MM-DD" string or integer days)`
		var db *array.Date32Builder
		if db, err = builderAs[*array.Date32Builder](b, f, path); err == nil {
			n.fn = func(v any) *valueError {
				switch x := v.(type) {
				case string:
					t, perr := time.Parse(time.DateOnly, x)
					if perr != nil {
						return mismatch(want, v)
					}
					db.Append(arrow.Date32(t.Unix() / 86400))
					return nil
				case json.Number:
					i, e := toInt(v, 32, want)
					if e == nil {
						db.Append(arrow.Date32(i))
					}
					return e
				}
				return mismatch(want, v)
			}
		}
	case *arrow.Date64Type:
		const want = `date64 ("YYYY-MM-DD" string or integer milliseconds)`
		var db *array.Date64Builder
		if db, err = builderAs[*array.Date64Builder](b, f, path); err == nil {
			n.fn = func(v any) *valueError {
				switch x := v.(type) {
				case string:
					t, perr := time.Parse(time.DateOnly, x)
					if perr != nil {
						return mismatch(want, v)
					}
					db.Append(arrow.Date64(t.UnixMilli()))
					return nil
				case json.Number:
					i, e := toInt(v, 64, want)
					if e == nil {
						db.Append(arrow.Date64(i))
					}
					return e
				}
				return mismatch(want, v)
			}
		}
	case *arrow.ListType, *arrow.LargeListType, *arrow.FixedSizeListType:
		type listBuilder interface {
			array.Builder
			Append(bool)
			ValueBuilder() array.Builder
		}
		var lb listBuilder
		if lb, err = builderAs[listBuilder](b, f, path); err != nil {
			break
		}
		lt := dt.(arrow.ListLikeType)
		ef := lt.ElemField()
		var elem *node
		if elem, err = compile(ef, lb.ValueBuilder(), path+"[]"); err != nil {
			break
		}
		fixed := -1
		want := TypeList
		switch t := dt.(type) {
		case *arrow.LargeListType:
			want = TypeLargeList
		case *arrow.FixedSizeListType:
			fixed = int(t.Len())
			want = fmt.Sprintf("fixed_size_list of length %d", fixed)
		}
		want += " (array)"
		n.fn = func(v any) *valueError {
			arr, ok := v.([]any)
			if !ok {
				return mismatch(want, v)
			}
			if fixed >= 0 && len(arr) != fixed {
				return &valueError{msg: fmt.Sprintf("expected %s, got array of length %d", want, len(arr))}
			}
			lb.Append(true)
			for i, e := range arr {
				if verr := elem.add(e); verr != nil {
					return verr.in(idxSeg(i))
				}
			}
			return nil
		}
	case *arrow.StructType:
		var sb *array.StructBuilder
		if sb, err = builderAs[*array.StructBuilder](b, f, path); err != nil {
			break
		}
		builders := make([]array.Builder, sb.NumField())
		for i := range builders {
			builders[i] = sb.FieldBuilder(i)
		}
		var fs *fieldSet
		if fs, err = compileFields(dt.Fields(), builders, path); err != nil {
			break
		}
		n.fn = func(v any) *valueError {
			obj, ok := v.(*object)
			if !ok {
				return mismatch("struct (object)", v)
			}
			sb.Append(true)
			return fs.add(obj)
		}
	default:
		err = fmt.Errorf("arrowjson: field %q: Arrow type %s is not supported for JSON input", path, f.Type)
	}
	if err != nil {
		return nil, err
	}
	return n, nil
}

// Number parsing.

const (
	numInt = iota
	numNotInteger
	numOutOfRange
)

// integral splits a JSON number into sign and decimal digits (no leading
// zeros, "" for zero) if its value is an integer. Large exponents are
// handled without materialising the number.
func integral(s string) (neg bool, digits string, status int) {
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	mant, expStr := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expStr = s[:i], s[i+1:]
	}
	intPart, frac := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
	}
	digits = strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return neg, "", numInt // zero, whatever the exponent
	}
	exp := 0
	if expStr != "" {
		expNeg := false
		switch expStr[0] {
		case '-':
			expNeg, expStr = true, expStr[1:]
		case '+':
			expStr = expStr[1:]
		}
		expStr = strings.TrimLeft(expStr, "0")
		if len(expStr) > 6 {
			if expNeg {
				return neg, "", numNotInteger
			}
			return neg, "", numOutOfRange
		}
		if expStr != "" {
			e, err := strconv.Atoi(expStr)
			if err != nil {
				return neg, "", numNotInteger
			}
			exp = e
			if expNeg {
				exp = -e
			}
		}
	}
	exp -= len(frac)
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	digits = trimmed
	if exp < 0 {
		return neg, "", numNotInteger
	}
	if len(digits)+exp > 20 {
		return neg, "", numOutOfRange
	}
	return neg, digits + strings.Repeat("0", exp), numInt
}

// signedFn decodes a JSON number into a signed integer column of the
// given width (range checked by toInt).
func signedFn[T int8 | int16 | int32 | int64](appendFn func(T), bits int, want string) func(any) *valueError {
	return func(v any) *valueError {
		x, e := toInt(v, bits, want)
		if e == nil {
			appendFn(T(x))
		}
		return e
	}
}

// unsignedFn is signedFn for unsigned columns.
func unsignedFn[T uint8 | uint16 | uint32 | uint64](appendFn func(T), bits int, want string) func(any) *valueError {
	return func(v any) *valueError {
		x, e := toUint(v, bits, want)
		if e == nil {
			appendFn(T(x))
		}
		return e
	}
}

func toInt(v any, bits int, want string) (int64, *valueError) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, mismatch(want, v)
	}
	if i, err := strconv.ParseInt(string(num), 10, bits); err == nil {
		return i, nil
	}
	neg, digits, st := integral(string(num))
	if st == numInt {
		if digits == "" {
			return 0, nil
		}
		if neg {
			digits = "-" + digits
		}
		i, err := strconv.ParseInt(digits, 10, bits)
		if err == nil {
			return i, nil
		}
		st = numOutOfRange
	}
	return 0, numErr(want, v, st)
}

func toUint(v any, bits int, want string) (uint64, *valueError) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, mismatch(want, v)
	}
	if u, err := strconv.ParseUint(string(num), 10, bits); err == nil {
		return u, nil
	}
	neg, digits, st := integral(string(num))
	if st == numInt {
		if digits == "" {
			return 0, nil
		}
		if !neg {
			if u, err := strconv.ParseUint(digits, 10, bits); err == nil {
				return u, nil
			}
		}
		st = numOutOfRange
	}
	return 0, numErr(want, v, st)
}

func numErr(want string, v any, st int) *valueError {
	why := " (out of range)"
	if st == numNotInteger {
		why = " (not an integer)"
	}
	return &valueError{msg: "expected " + want + ", got " + describe(v) + why}
}

func toFloat(v any, bits int, want string) (float64, *valueError) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, mismatch(want, v)
	}
	f, err := strconv.ParseFloat(string(num), bits)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange && !math.IsInf(f, 0) {
			return f, nil // underflow to zero/denormal is fine
		}
		return 0, numErr(want, v, numOutOfRange)
	}
	// An integer must survive the conversion: 9007199254740993 in a
	// float64 column would silently become ...992.
	if s := string(num); !strings.ContainsAny(s, ".eE") && strconv.FormatFloat(f, 'f', -1, bits) != s {
		return 0, &valueError{msg: "expected " + want + ", got " + describe(v) + " (not exactly representable; send it with an exponent to accept rounding)"}
	}
	return f, nil
}

func toBytes(v any, want string) ([]byte, *valueError) {
	s, ok := v.(string)
	if !ok {
		return nil, mismatch(want, v)
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, &valueError{msg: "expected " + want + ", got " + describe(v) + " (" + err.Error() + ")"}
	}
	return raw, nil
}
