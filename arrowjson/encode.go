package arrowjson

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// WriteRows writes every record of rdr to w as one JSON array of row
// objects: [{"a":1,"b":"x"},...]. Output is streamed through a 64 KiB
// buffer; values are formatted straight into it (no per-row maps or
// reflection for the types below).
//
//   - null values and the null type: null
//   - bool: true/false; integers (including int64/uint64): JSON numbers
//   - float16/32/64: shortest round-trip numbers; NaN and ±Inf: null
//   - utf8, large_utf8, string_view: strings (invalid UTF-8 becomes U+FFFD)
//   - binary, large_binary, binary_view, fixed_size_binary: base64 strings
//   - timestamp: RFC 3339 strings in UTC with nanosecond precision as needed
//   - date32, date64: "YYYY-MM-DD"
//   - list, large_list, fixed_size_list: arrays; struct: objects
//   - dictionary: the dictionary value
//   - anything else (decimal, time, duration, interval, map, union, ...):
//     the value as arrow-go's own JSON marshalling renders it
//
// A record with no rows adds nothing; no records give "[]". If an error
// happens part-way (from rdr or w), what was already written stays written.
func WriteRows(w io.Writer, rdr array.RecordReader) error {
	e := newRowEncoder(w)
	for rdr.Next() {
		if err := e.record(rdr.RecordBatch()); err != nil {
			return err
		}
	}
	if err := rdr.Err(); err != nil {
		return err
	}
	return e.close()
}

// WriteRecords is WriteRows over a slice of records (which may differ in
// schema; each row uses its own record's field names).
func WriteRecords(w io.Writer, recs []arrow.RecordBatch) error {
	e := newRowEncoder(w)
	for _, rec := range recs {
		if err := e.record(rec); err != nil {
			return err
		}
	}
	return e.close()
}

const (
	encBufSize = 64 << 10
	encFlushAt = encBufSize - 4<<10
)

type rowEncoder struct {
	w     io.Writer
	buf   []byte
	first bool
}

func newRowEncoder(w io.Writer) *rowEncoder {
	buf := make([]byte, 0, encBufSize)
	return &rowEncoder{w: w, buf: append(buf, '['), first: true}
}

func (e *rowEncoder) flush() error {
	if len(e.buf) == 0 {
		return nil
	}
	_, err := e.w.Write(e.buf)
	e.buf = e.buf[:0]
	return err
}

func (e *rowEncoder) close() error {
	e.buf = append(e.buf, ']')
	return e.flush()
}

func (e *rowEncoder) record(rec arrow.RecordBatch) error {
	ncols := int(rec.NumCols())
	keys := make([][]byte, ncols)
	writers := make([]valueWriter, ncols)
	for j := 0; j < ncols; j++ {
		k := appendString(nil, rec.ColumnName(j))
		keys[j] = append(k, ':')
		writers[j] = newValueWriter(rec.Column(j))
	}
	nrows := int(rec.NumRows())
	var err error
	for i := 0; i < nrows; i++ {
		if e.first {
			e.first = false
		} else {
			e.buf = append(e.buf, ',')
		}
		e.buf = append(e.buf, '{')
		for j, wr := range writers {
			if j > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = append(e.buf, keys[j]...)
			if e.buf, err = wr(e.buf, i); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, '}')
		if len(e.buf) >= encFlushAt {
			if err := e.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// valueWriter appends the JSON form of element i of one array.
type valueWriter func(buf []byte, i int) ([]byte, error)

func appendNull(buf []byte) []byte { return append(buf, "null"...) }

// withNulls wraps w with the null check, skipped when arr has no nulls.
func withNulls(arr arrow.Array, w valueWriter) valueWriter {
	if arr.NullN() == 0 {
		return w
	}
	return func(buf []byte, i int) ([]byte, error) {
		if arr.IsNull(i) {
			return appendNull(buf), nil
		}
		return w(buf, i)
	}
}

func newValueWriter(arr arrow.Array) valueWriter {
	switch a := arr.(type) {
	case *array.Null:
		return func(buf []byte, _ int) ([]byte, error) { return appendNull(buf), nil }
	case *array.Boolean:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) {
			return strconv.AppendBool(buf, a.Value(i)), nil
		})
	case *array.Int8:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) { return strconv.AppendInt(buf, int64(a.Value(i)), 10), nil })
	case *array.Int16:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) { return strconv.AppendInt(buf, int64(a.Value(i)), 10), nil })
	case *array.Int32:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) { return strconv.AppendInt(buf, int64(a.Value(i)), 10), nil })
	case *array.Int64:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) { return strconv.AppendInt(buf, a.Value(i), 10), nil })
	case *array.Uint8:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) { return strconv.AppendUint(buf, uint64(a.Value(i)), 10), nil })
	case *array.Uint16:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) { return strconv.AppendUint(buf, uint64(a.Value(i)), 10), nil })
	case *array.Uint32:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) { return strconv.AppendUint(buf, uint64(a.Value(i)), 10), nil })
	case *array.Uint64:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) { return strconv.AppendUint(buf, a.Value(i), 10), nil })
	case *array.Float16:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) {
			return appendFloat(buf, float64(a.Value(i).Float32()), 32), nil
		})
	case *array.Float32:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) { return appendFloat(buf, float64(a.Value(i)), 32), nil })
	case *array.Float64:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) { return appendFloat(buf, a.Value(i), 64), nil })
	case *array.String:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) { return appendString(buf, a.Value(i)), nil })
	case *array.LargeString:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) { return appendString(buf, a.Value(i)), nil })
	case *array.StringView:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) { return appendString(buf, a.Value(i)), nil })
	case *array.Binary:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) { return appendBase64(buf, a.Value(i)), nil })
	case *array.LargeBinary:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) { return appendBase64(buf, a.Value(i)), nil })
	case *array.BinaryView:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) { return appendBase64(buf, a.Value(i)), nil })
	case *array.FixedSizeBinary:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) { return appendBase64(buf, a.Value(i)), nil })
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return withNulls(a, func(buf []byte, i int) ([]byte, error) {
			buf = append(buf, '"')
			buf = a.Value(i).ToTime(unit).AppendFormat(buf, time.RFC3339Nano)
			return append(buf, '"'), nil
		})
	case *array.Date32:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) {
			buf = append(buf, '"')
			buf = a.Value(i).ToTime().AppendFormat(buf, time.DateOnly)
			return append(buf, '"'), nil
		})
	case *array.Date64:
		return withNulls(a, func(buf []byte, i int) ([]byte, error) {
			buf = append(buf, '"')
			buf = a.Value(i).ToTime().AppendFormat(buf, time.DateOnly)
			return append(buf, '"'), nil
		})
	case *array.List:
		return listWriter(a, a.ListValues(), a.ValueOffsets)
	case *array.LargeList:
		return listWriter(a, a.ListValues(), a.ValueOffsets)
	case *array.FixedSizeList:
		return listWriter(a, a.ListValues(), a.ValueOffsets)
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		n := a.NumField()
		keys := make([][]byte, n)
		children := make([]valueWriter, n)
		for j := 0; j < n; j++ {
			keys[j] = append(appendString(nil, st.Field(j).Name), ':')
			children[j] = newValueWriter(a.Field(j))
		}
		return withNulls(a, func(buf []byte, i int) ([]byte, error) {
			var err error
			buf = append(buf, '{')
			for j, c := range children {
				if j > 0 {
					buf = append(buf, ',')
				}
				buf = append(buf, keys[j]...)
				if buf, err = c(buf, i); err != nil {
					return buf, err
				}
			}
			return append(buf, '}'), nil
		})
	case *array.Dictionary:
		values := newValueWriter(a.Dictionary())
		return withNulls(a, func(buf []byte, i int) ([]byte, error) {
			return values(buf, a.GetValueIndex(i))
		})
	default:
		return withNulls(arr, func(buf []byte, i int) ([]byte, error) {
			b, err := json.Marshal(arr.GetOneForMarshal(i))
			if err != nil {
				return buf, fmt.Errorf("arrowjson: writing %s value: %w", arr.DataType(), err)
			}
			return append(buf, b...), nil
		})
	}
}

func listWriter(arr arrow.Array, values arrow.Array, offsets func(int) (int64, int64)) valueWriter {
	elem := newValueWriter(values)
	return withNulls(arr, func(buf []byte, i int) ([]byte, error) {
		start, end := offsets(i)
		var err error
		buf = append(buf, '[')
		for k := start; k < end; k++ {
			if k > start {
				buf = append(buf, ',')
			}
			if buf, err = elem(buf, int(k)); err != nil {
				return buf, err
			}
		}
		return append(buf, ']'), nil
	})
}

// appendFloat formats like encoding/json (shortest representation, 'e'
// notation only for very small or large magnitudes); NaN and ±Inf are null.
func appendFloat(buf []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return appendNull(buf)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) ||
			bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	buf = strconv.AppendFloat(buf, f, format, -1, bits)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(buf)
		if n >= 4 && buf[n-4] == 'e' && buf[n-3] == '-' && buf[n-2] == '0' {
			buf[n-2] = buf[n-1]
			buf = buf[:n-1]
		}
	}
	return buf
}

func appendBase64(buf []byte, b []byte) []byte {
	buf = append(buf, '"')
	buf = base64.StdEncoding.AppendEncode(buf, b)
	return append(buf, '"')
}

const hexDigits = "0123456789abcdef"

// safe[c] is true for ASCII bytes that need no escaping in a JSON string.
var safe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendString appends s as a JSON string. Control characters, '"' and
// '\\' are escaped, as are U+2028 and U+2029; invalid UTF-8 becomes U+FFFD.
// HTML characters are not escaped.
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
