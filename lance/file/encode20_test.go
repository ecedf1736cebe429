package file

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// withoutStructNulls returns arr with the validity of every struct in it
// dropped, which is what a 2.0 file keeps of a struct.
func withoutStructNulls(arr arrow.Array) arrow.Array {
	var strip func(d arrow.ArrayData) arrow.ArrayData
	strip = func(d arrow.ArrayData) arrow.ArrayData {
		children := make([]arrow.ArrayData, len(d.Children()))
		for i, c := range d.Children() {
			children[i] = strip(c)
		}
		bufs := d.Buffers()
		nulls := d.NullN()
		if d.DataType().ID() == arrow.STRUCT {
			bufs = append([]*memory.Buffer{nil}, bufs[1:]...)
			nulls = 0
		}
		return array.NewData(d.DataType(), d.Len(), bufs, children, nulls, d.Offset())
	}
	return array.MakeFromData(strip(arr.Data()))
}

func TestWrite20RoundTrip(t *testing.T) {
	rec := allTypes20(3000, 3, 16)
	defer rec.Release()
	// Uneven batches, so that pages begin inside Arrow slices.
	var recs []arrow.RecordBatch
	for _, cut := range [][2]int64{{0, 1}, {1, 700}, {700, 701}, {701, 2999}, {2999, 3000}} {
		s := rec.NewSlice(cut[0], cut[1])
		defer s.Release()
		recs = append(recs, s)
	}
	data := writeFile20(t, recs, 4<<10)
	r, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if r.Version() != V2_0 || r.NumRows() != 3000 {
		t.Fatalf("version %v, %d rows", r.Version(), r.NumRows())
	}
	cols := make([]arrow.Array, rec.NumCols())
	for i, c := range rec.Columns() {
		cols[i] = withoutStructNulls(c)
	}
	want := array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
	releaseAll(cols)
	defer want.Release()
	for _, rg := range [][2]uint64{{0, 3000}, {0, 1}, {1234, 2222}, {2999, 3000}, {5, 5}} {
		got, err := r.Read(context.Background(), nil, rg[0], rg[1])
		if err != nil {
			t.Fatal(err)
		}
		w := want.NewSlice(int64(rg[0]), int64(rg[1]))
		assertSameRecords(t, got, w)
		got.Release()
		w.Release()
	}
}

func TestWrite20Refuses(t *testing.T) {
	for _, dt := range []arrow.DataType{
		&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String},
		arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32),
		arrow.Null,
	} {
		sc := arrow.NewSchema([]arrow.Field{{Name: "x", Type: dt, Nullable: true}}, nil)
		if _, err := newColumnWriters20(nil, sc); err == nil {
			t.Errorf("%s: no error", dt)
		}
	}
}

// countingReaderAt counts the bytes read through it (the reader reads
// columns from several goroutines).
type countingReaderAt struct {
	r *bytes.Reader
	n atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// A take of a few rows reads the bytes of those rows, not whole pages.
func TestTake20ReadsOnlyItsRows(t *testing.T) {
	rec := selectColumns20(allTypes20(20000, 768), "i32", "s", "li", "v768")
	defer rec.Release()
	data := writeFile20(t, []arrow.RecordBatch{rec}, 0)
	cr := &countingReaderAt{r: bytes.NewReader(data)}
	r, err := Open(cr, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.Container().Columns[r.ColumnIndexes(3)[0]].Pages); n < 4 {
		t.Fatalf("the vector column has %d pages; the test needs pages much larger than its rows", n)
	}
	opened := cr.n.Load()
	rows := []uint64{19999, 3, 10000, 7777, 12}
	got, err := r.Take(context.Background(), nil, rows)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	want := takeRecord(t, rec, []int{0, 1, 2, 3}, rows)
	defer want.Release()
	assertSameRecords(t, got, want)
	// Per row and column: a few small ranges (validity, offsets, values).
	read := cr.n.Load() - opened
	t.Logf("take of %d rows read %d bytes of a %d-byte file", len(rows), read, len(data))
	if read > int64(len(rows))*(768*4+64<<10) {
		t.Errorf("take of %d rows read %d bytes of a %d-byte file", len(rows), read, len(data))
	}
}

func TestWrite20Empty(t *testing.T) {
	rec := allTypes20(0, 4)
	defer rec.Release()
	data := writeFile20(t, []arrow.RecordBatch{rec}, 0)
	r, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Read(context.Background(), nil, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if got.NumRows() != 0 || got.NumCols() != rec.NumCols() {
		t.Fatalf("%d rows, %d columns", got.NumRows(), got.NumCols())
	}
	assertSameRecords(t, got, rec)
}
