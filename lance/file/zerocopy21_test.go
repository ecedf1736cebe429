package file

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestVarSinkAliasesOneArray: a page's only string array is encoded from
// its own bytes, not a copy, and a second array appended after it copies
// both without writing into the first array's buffer.
func TestVarSinkAliasesOneArray(t *testing.T) {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	b.AppendValues([]string{"aa", "bb", "cc"}, nil)
	parent := b.NewStringArray()
	b.Release()
	defer parent.Release()
	head := array.NewSlice(parent, 0, 2).(*array.String)
	defer head.Release()

	s := &varSink{offsets: []uint64{0}}
	s.appendAll(head)
	if string(s.data) != "aabb" || fmt.Sprint(s.offsets) != "[0 2 4]" || s.maxLen != 2 {
		t.Fatalf("sink %q %v max %d", s.data, s.offsets, s.maxLen)
	}
	if &s.data[0] != &parent.ValueBytes()[0] {
		t.Fatal("the sink copied the array's bytes instead of referring to them")
	}

	b = array.NewStringBuilder(memory.DefaultAllocator)
	b.AppendValues([]string{"XX"}, nil)
	more := b.NewStringArray()
	b.Release()
	defer more.Release()
	s.appendAll(more)
	if string(s.data) != "aabbXX" || fmt.Sprint(s.offsets) != "[0 2 4 6]" {
		t.Fatalf("after a second array: %q %v", s.data, s.offsets)
	}
	if parent.Value(2) != "cc" {
		t.Fatalf("appending wrote into the first array: its third value is %q", parent.Value(2))
	}

	// A slice that starts inside its parent, and a large string array.
	tail := array.NewSlice(parent, 1, 3).(*array.String)
	defer tail.Release()
	s = &varSink{offsets: []uint64{0}}
	s.appendAll(tail)
	if string(s.data) != "bbcc" || fmt.Sprint(s.offsets) != "[0 2 4]" {
		t.Fatalf("slice from row 1: %q %v", s.data, s.offsets)
	}
	lb := array.NewLargeStringBuilder(memory.DefaultAllocator)
	lb.AppendValues([]string{"", "xyz", "w"}, nil)
	large := lb.NewLargeStringArray()
	lb.Release()
	defer large.Release()
	s = &varSink{offsets: []uint64{0}, wide: true}
	s.appendAll(large)
	if string(s.data) != "xyzw" || fmt.Sprint(s.offsets) != "[0 0 3 4]" || s.maxLen != 3 {
		t.Fatalf("large strings: %q %v max %d", s.data, s.offsets, s.maxLen)
	}

	// Offsets out of order are not aliased (the copying path answers them
	// as before).
	if (&varSink{offsets: []uint64{0}}).alias([]byte("abcd"), []int32{0, 3, 2}, nil, 2) {
		t.Fatal("aliased offsets out of order")
	}
}

// TestReadLongStringsWithoutCopy: reading a column of long strings hands
// the decoded bytes to Arrow instead of copying them once more. The
// allocations of a whole read stay under twice the value bytes: the
// decoded values, the compressed page and its unzipped form (the copy
// made it about three times).
func TestReadLongStringsWithoutCopy(t *testing.T) {
	words := []string{"lance ", "format ", "column ", "page ", "value ", "refresh ", "view ", "chunk "}
	rng := rand.New(rand.NewSource(1))
	b := array.NewStringBuilder(memory.DefaultAllocator)
	var valueBytes int
	for range 4000 {
		var sb bytes.Buffer
		for sb.Len() < 2000 {
			sb.WriteString(words[rng.Intn(len(words))])
			fmt.Fprint(&sb, rng.Intn(1000))
		}
		valueBytes += sb.Len()
		b.Append(sb.String())
	}
	col := b.NewArray()
	b.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "body", Type: arrow.BinaryTypes.String}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(col.Len()))
	col.Release()
	defer rec.Release()
	var out bytes.Buffer
	writeLance(t, &out, []arrow.RecordBatch{rec})

	r, err := Open(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	got, err := r.Read(ctx, nil, 0, r.NumRows())
	runtime.ReadMemStats(&m1)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if !array.RecordEqual(got, rec) {
		t.Fatal("read values differ from the written ones")
	}
	alloc := float64(m1.TotalAlloc - m0.TotalAlloc)
	t.Logf("read of %d value bytes allocated %.2fx", valueBytes, alloc/float64(valueBytes))
	if alloc >= 2*float64(valueBytes) {
		t.Fatalf("read of %d value bytes allocated %.0f bytes (%.2fx): the values were copied again", valueBytes, alloc, alloc/float64(valueBytes))
	}
}

// TestDictionaryProbeCopiesNoValues: deciding that a page of long unique
// strings is no dictionary copies none of them (it used to copy every
// sampled value into a map key).
func TestDictionaryProbeCopiesNoValues(t *testing.T) {
	s := &varSink{offsets: []uint64{0}}
	for i := range 1000 {
		s.add([]byte(fmt.Sprintf("%04d %s", i, bytes.Repeat([]byte("x"), 500))))
	}
	var d *dictionary
	allocs := testing.AllocsPerRun(10, func() { d = tryDictionary(s, len(s.data)) })
	if d != nil {
		t.Fatal("a dictionary for unique values")
	}
	if allocs > 20 {
		t.Fatalf("%v allocations to refuse a dictionary of 1000 unique values", allocs)
	}
	// Repeated values still make one.
	r := &varSink{offsets: []uint64{0}}
	for i := range 1000 {
		r.add([]byte(fmt.Sprintf("value %d", i%7)))
	}
	if d := tryDictionary(r, len(r.data)+4*len(r.offsets)); d == nil || d.items.count() != 7 {
		t.Fatalf("dictionary of 7 repeated values: %+v", d)
	}
}
