package file

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
)

// LanceDB writes an Arrow dictionary column of a 2.0 dataset as pages of
// Dictionary (indices as stored, the page's items); the reader returns the
// same values as LanceDB, across several pages.
func TestRead20ArrowDictionary(t *testing.T) {
	o := oracle.Need(t)
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	sc := arrow.NewSchema([]arrow.Field{{Name: "d", Type: dt, Nullable: true}, {Name: "i", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	for i := 0; i < 3000; i++ {
		if i%7 == 3 {
			b.Field(0).AppendNull()
		} else {
			b.Field(0).(*array.BinaryDictionaryBuilder).AppendString(fmt.Sprintf("v%d", i%13))
		}
		b.Field(1).(*array.Int32Builder).Append(int32(i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	b.Release()
	dir := filepath.Join(t.TempDir(), "d.lance")
	t.Setenv("LANCE_FILE_WRITER_MAX_PAGE_BYTES", "1024")
	o.Write(t, dir, rec, "2.0", "create")
	r := openFile20(t, dataFiles20(t, dir)[0])
	if n := len(r.Container().Columns[0].Pages); n < 2 {
		t.Fatalf("%d page(s), want several", n)
	}
	if enc, err := newSource20(r.Container()).pageEncoding(0, 0); err != nil || enc.GetDictionary() == nil {
		t.Fatalf("first page %v (%v), want a dictionary", enc, err)
	}
	want := readOracle20(t, o, dir)
	defer want.Release()
	got, err := r.Read(context.Background(), nil, 0, r.NumRows())
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	assertSameRecords(t, got, want)
	part, err := r.Read(context.Background(), nil, 1001, 2222)
	if err != nil {
		t.Fatal(err)
	}
	defer part.Release()
	slice := want.NewSlice(1001, 2222)
	defer slice.Release()
	assertSameRecords(t, part, slice)
}
