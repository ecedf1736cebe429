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

// compressedStrings20 builds n rows of strings whose fields ask a 2.0 writer
// for zstd, lz4 and FSST compression (LanceDB then writes Binary with
// compressed bytes and Fsst pages), with nulls.
func compressedStrings20(n int) arrow.RecordBatch {
	md := func(v string) arrow.Metadata {
		return arrow.NewMetadata([]string{"lance-encoding:compression"}, []string{v})
	}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "zstd", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: md("zstd")},
		{Name: "fsst", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: md("fsst")},
		{Name: "lz4", Type: arrow.BinaryTypes.LargeString, Nullable: true, Metadata: md("lz4")},
		{Name: "zbin", Type: arrow.BinaryTypes.Binary, Nullable: true, Metadata: md("zstd")},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := 0; i < n; i++ {
		if i%9 == 4 {
			for j := range sc.Fields() {
				b.Field(j).AppendNull()
			}
			continue
		}
		s := fmt.Sprintf("value number %d of the test, repeated text repeated text", i)
		if i%10 == 0 {
			s = ""
		}
		b.Field(0).(*array.StringBuilder).Append(s)
		b.Field(1).(*array.StringBuilder).Append(s)
		b.Field(2).(*array.LargeStringBuilder).Append(s)
		b.Field(3).(*array.BinaryBuilder).Append([]byte(s))
	}
	return b.NewRecordBatch()
}

func TestRead20CompressedStrings(t *testing.T) {
	o := oracle.Need(t)
	rec := compressedStrings20(3000)
	defer rec.Release()
	dir := filepath.Join(t.TempDir(), "c.lance")
	o.Write(t, dir, rec, "2.0", "create")
	r := openFile20(t, dataFiles20(t, dir)[0])
	// The encodings LanceDB chose are the ones this test is about.
	s := newSource20(r.Container())
	for c, want := range []string{"zstd", "fsst", "lz4", "zstd"} {
		enc, err := s.pageEncoding(c, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := "fsst"
		if enc.GetFsst() == nil {
			got = innerFlat(enc.GetBinary().GetBytes()).GetCompression().GetScheme()
		}
		if got != want {
			t.Errorf("column %d is %s, want %s: %v", c, got, want, enc)
		}
	}
	want := readOracle20(t, o, dir)
	defer want.Release()
	got, err := r.Read(context.Background(), nil, 0, r.NumRows())
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	assertSameRecords(t, got, want)
	part, err := r.Read(context.Background(), nil, 1000, 1400)
	if err != nil {
		t.Fatal(err)
	}
	defer part.Release()
	slice := want.NewSlice(1000, 1400)
	defer slice.Release()
	assertSameRecords(t, part, slice)
}
