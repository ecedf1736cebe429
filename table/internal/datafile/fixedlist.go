package datafile

import (
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The Parquet writer cannot write a fixed_size_list column with null
// entries (an embedding column not filled yet). Data files therefore hold
// such columns as list<elem> with empty null entries, the field marked
// with fixedSizeKey = the list size; readers turn them back (FromStorage).
// Files written before hold fixed_size_list columns as they are.

const fixedSizeKey = "mvq.fixed_size"

// storageSchema is schema as data files hold it.
func storageSchema(schema *arrow.Schema) (*arrow.Schema, bool) {
	changed := false
	fields := make([]arrow.Field, schema.NumFields())
	for i, f := range schema.Fields() {
		if fl, ok := f.Type.(*arrow.FixedSizeListType); ok {
			keys := append(f.Metadata.Keys(), fixedSizeKey)
			vals := append(f.Metadata.Values(), strconv.Itoa(int(fl.Len())))
			f = arrow.Field{Name: f.Name, Type: arrow.ListOfField(fl.ElemField()), Nullable: true, Metadata: arrow.NewMetadata(keys, vals)}
			changed = true
		}
		fields[i] = f
	}
	if !changed {
		return schema, false
	}
	md := schema.Metadata()
	return arrow.NewSchema(fields, &md), true
}

// toStorage converts rec (of the table schema) to storage schema s.
func toStorage(rec arrow.RecordBatch, s *arrow.Schema, mem memory.Allocator) arrow.RecordBatch {
	cols := make([]arrow.Array, rec.NumCols())
	for i, c := range rec.Columns() {
		if fl, ok := c.(*array.FixedSizeList); ok {
			cols[i] = fixedToList(fl, mem)
		} else {
			c.Retain()
			cols[i] = c
		}
	}
	out := array.NewRecordBatch(s, cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out
}

func fixedToList(fl *array.FixedSizeList, mem memory.Allocator) arrow.Array {
	t := fl.DataType().(*arrow.FixedSizeListType)
	b := array.NewListBuilderWithField(mem, t.ElemField())
	defer b.Release()
	n := int(t.Len())
	vals := fl.ListValues()
	base := fl.Data().Offset() * n
	for i := 0; i < fl.Len(); i++ {
		if fl.IsNull(i) {
			b.AppendNull()
			continue
		}
		b.Append(true)
		s := array.NewSlice(vals, int64(base+i*n), int64(base+(i+1)*n))
		appendAll(b.ValueBuilder(), s)
		s.Release()
	}
	return b.NewArray()
}

// appendAll appends the values of a to b.
func appendAll(b array.Builder, a arrow.Array) {
	if fb, ok := b.(*array.Float32Builder); ok {
		if fa, ok := a.(*array.Float32); ok && fa.NullN() == 0 {
			fb.AppendValues(fa.Float32Values(), nil)
			return
		}
	}
	for i := 0; i < a.Len(); i++ {
		if err := b.AppendValueFromString(a.ValueStr(i)); err != nil || a.IsNull(i) {
			if a.IsNull(i) {
				b.AppendNull()
			}
		}
	}
}

// FromStorage turns the list columns of rec that data files use for
// fixed_size_list columns back into fixed_size_list. It answers rec
// (retained) when there are none; rec stays the caller's.
func FromStorage(rec arrow.RecordBatch, mem memory.Allocator) arrow.RecordBatch {
	var fields []arrow.Field
	var cols []arrow.Array
	for i, f := range rec.Schema().Fields() {
		v, ok := f.Metadata.GetValue(fixedSizeKey)
		l, isList := rec.Column(i).(*array.List)
		if !ok || !isList {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			continue
		}
		if fields == nil {
			fields = append([]arrow.Field(nil), rec.Schema().Fields()...)
			cols = append([]arrow.Array(nil), rec.Columns()...)
		}
		elem := l.DataType().(*arrow.ListType).ElemField()
		var keys, vals []string
		for k, key := range f.Metadata.Keys() {
			if key != fixedSizeKey {
				keys, vals = append(keys, key), append(vals, f.Metadata.Values()[k])
			}
		}
		fields[i] = arrow.Field{Name: f.Name, Type: arrow.FixedSizeListOfField(int32(n), elem), Nullable: true}
		if len(keys) > 0 {
			fields[i].Metadata = arrow.NewMetadata(keys, vals)
		}
		cols[i] = listToFixed(l, n, elem, mem)
		defer cols[i].Release()
	}
	if fields == nil {
		rec.Retain()
		return rec
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
}

func listToFixed(l *array.List, n int, elem arrow.Field, mem memory.Allocator) arrow.Array {
	b := array.NewFixedSizeListBuilderWithField(mem, int32(n), elem)
	defer b.Release()
	vb := b.ValueBuilder()
	for i := 0; i < l.Len(); i++ {
		lo, hi := l.ValueOffsets(i)
		if l.IsNull(i) || int(hi-lo) != n {
			b.AppendNull()
			continue
		}
		b.Append(true)
		s := array.NewSlice(l.ListValues(), lo, hi)
		appendAll(vb, s)
		s.Release()
	}
	return b.NewArray()
}

// fromStorageAll applies FromStorage to recs, releasing them.
func fromStorageAll(recs []arrow.RecordBatch, mem memory.Allocator) []arrow.RecordBatch {
	for i, r := range recs {
		recs[i] = FromStorage(r, mem)
		r.Release()
	}
	return recs
}
