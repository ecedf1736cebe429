package datafile

import (
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Schema answers the Arrow schema of a Parquet data file's columns in the
// table's types, as Read returns them (the file's own, not a version's: a fragment with a
// column map holds columns its version dropped). A Lance file answers an
// error: its schema is its version's.
func (r *Reader) Schema() (*arrow.Schema, error) {
	if r.pf == nil {
		return nil, r.fail("schema", errNotParquet)
	}
	fr, err := pqarrow.NewFileReader(r.pf, pqarrow.ArrowReadProperties{}, r.o.Mem)
	if err != nil {
		return nil, r.decodeFail(err)
	}
	s, err := fr.Schema()
	if err != nil {
		return nil, r.decodeFail(err)
	}
	// The table's types, as FromStorage gives the records.
	fields := append([]arrow.Field(nil), s.Fields()...)
	for i, f := range fields {
		v, ok := f.Metadata.GetValue(fixedSizeKey)
		lt, isList := f.Type.(*arrow.ListType)
		n, err := strconv.Atoi(v)
		if !ok || !isList || err != nil || n <= 0 {
			continue
		}
		var keys, vals []string
		for k, key := range f.Metadata.Keys() {
			if key != fixedSizeKey {
				keys, vals = append(keys, key), append(vals, f.Metadata.Values()[k])
			}
		}
		fields[i] = arrow.Field{Name: f.Name, Type: arrow.FixedSizeListOfField(int32(n), lt.ElemField()), Nullable: true}
		if len(keys) > 0 {
			fields[i].Metadata = arrow.NewMetadata(keys, vals)
		}
	}
	return arrow.NewSchema(fields, nil), nil
}

type notParquet struct{}

func (notParquet) Error() string { return "not a Parquet file" }

var errNotParquet error = notParquet{}
