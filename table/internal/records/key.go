package records

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// KeyCols answers the columns keys of rec.
func KeyCols(rec arrow.RecordBatch, keys []int) []arrow.Array {
	cols := make([]arrow.Array, len(keys))
	for i, k := range keys {
		cols[i] = rec.Column(k)
	}
	return cols
}

// KeyType reports whether values of t can be compared as keys.
func KeyType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.LIST, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST, arrow.STRUCT, arrow.MAP, arrow.DENSE_UNION, arrow.SPARSE_UNION, arrow.NULL:
		return false
	}
	return true
}

// AppendKey appends the encoding of row i's key to buf; false when a key
// value is null (such a row matches nothing). Both sides of a match have
// the same types, so the encoding only has to be unambiguous per type.
func AppendKey(buf []byte, cols []arrow.Array, i int) ([]byte, bool) {
	for _, c := range cols {
		if c.IsNull(i) {
			return buf, false
		}
		switch a := c.(type) {
		case *array.Int64:
			buf = binary.LittleEndian.AppendUint64(buf, uint64(a.Value(i)))
		case *array.Int32:
			buf = binary.LittleEndian.AppendUint32(buf, uint32(a.Value(i)))
		case *array.Uint64:
			buf = binary.LittleEndian.AppendUint64(buf, a.Value(i))
		case *array.Uint32:
			buf = binary.LittleEndian.AppendUint32(buf, a.Value(i))
		case *array.Int16:
			buf = binary.LittleEndian.AppendUint16(buf, uint16(a.Value(i)))
		case *array.Int8:
			buf = append(buf, byte(a.Value(i)))
		case *array.String:
			s := a.Value(i)
			buf = binary.AppendUvarint(buf, uint64(len(s)))
			buf = append(buf, s...)
		case *array.LargeString:
			s := a.Value(i)
			buf = binary.AppendUvarint(buf, uint64(len(s)))
			buf = append(buf, s...)
		case *array.Binary:
			s := a.Value(i)
			buf = binary.AppendUvarint(buf, uint64(len(s)))
			buf = append(buf, s...)
		case *array.Float64:
			v := a.Value(i)
			if math.IsNaN(v) {
				return buf, false // NaN equals nothing
			}
			if v == 0 {
				v = 0 // -0 matches 0
			}
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
		case *array.Float32:
			v := a.Value(i)
			if v != v {
				return buf, false
			}
			if v == 0 {
				v = 0
			}
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		default:
			s := c.ValueStr(i)
			buf = binary.AppendUvarint(buf, uint64(len(s)))
			buf = append(buf, s...)
		}
	}
	return buf, true
}

// KeyString renders row i's key for an error message.
func KeyString(schema *arrow.Schema, keys []int, cols []arrow.Array, i int) string {
	parts := make([]string, len(keys))
	for j, k := range keys {
		v := cols[j].ValueStr(i)
		if len(v) > 64 {
			v = v[:64] + "…"
		}
		parts[j] = fmt.Sprintf("%s=%s", schema.Field(k).Name, v)
	}
	return strings.Join(parts, ", ")
}
