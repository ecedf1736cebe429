package index_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/table"
)

var mergeSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "code", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "v", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// mergeRows builds rows for ids (-1: a null key) with code "c<id>"
// (null for a null id) and v.
func mergeRows(ids []int64, v int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, mergeSchema)
	defer b.Release()
	for _, id := range ids {
		if id < 0 {
			b.Field(0).AppendNull()
			b.Field(1).AppendNull()
		} else {
			b.Field(0).(*array.Int64Builder).Append(id)
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("c%d", id))
		}
		b.Field(2).(*array.Int64Builder).Append(v + id)
	}
	return b.NewRecordBatch()
}

// TestMergeInsertUseIndex: merge_insert with use_index matches through a
// BTREE or BITMAP index on the key (covered fragments are not read) and
// answers exactly what the scan answers: the same counts and the same
// table afterwards, also with duplicate target keys, null keys, an update
// filter and fragments the index does not cover.
func TestMergeInsertUseIndex(t *testing.T) {
	ctx := context.Background()
	cat := newCatalog(t, table.Options{MaxRowsPerFragment: 400})
	var base []int64
	for i := int64(0); i < 3000; i++ {
		base = append(base, i)
	}
	base = append(base, 5, 17, 2999, -1, -1) // duplicate target keys, null keys
	mk := func(name, key, typ string, cover bool) *table.Table {
		rec := mergeRows(base, 0)
		tb, _, err := cat.CreateTable(ctx, []string{"ns", name}, mergeSchema, reader(rec), "", nil)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if typ != "" {
			if _, err := index.Create(ctx, tb, index.Spec{Column: key, Type: typ}); err != nil {
				t.Fatal(err)
			}
		}
		if !cover { // appended rows the index does not cover
			tb.Catalog().UseIndexes(unmaintained)
			defer tb.Catalog().UseIndexes(index.Maintenance())
		}
		more := mergeRows([]int64{3000, 3001, 3002, 40}, 0)
		defer more.Release()
		if _, _, err := tb.Insert(ctx, reader(more), ""); err != nil {
			t.Fatal(err)
		}
		return tb
	}
	var in []int64
	for i := int64(0); i < 3000; i += 37 {
		in = append(in, i)
	}
	in = append(in, 17, 3001, 9000, 9001, -1) // a duplicated target key, an uncovered one, new keys, a null key
	in = dedupKeys(in)
	for _, c := range []struct {
		key, typ string
		cover    bool
		o        table.MergeOptions
	}{
		{"id", "BTREE", true, table.MergeOptions{WhenMatchedUpdateAll: true, WhenNotMatchedInsertAll: true}},
		{"id", "BITMAP", false, table.MergeOptions{WhenMatchedUpdateAll: true, WhenNotMatchedInsertAll: true}},
		{"code", "BTREE", false, table.MergeOptions{WhenMatchedUpdateAll: true, WhenMatchedUpdateAllFilt: "target.v % 2 = 0"}},
		{"code", "BITMAP", true, table.MergeOptions{WhenNotMatchedInsertAll: true}},
		{"id", "", true, table.MergeOptions{WhenMatchedUpdateAll: true, WhenNotMatchedInsertAll: true}},
	} {
		name := fmt.Sprintf("%s_%s_%v", c.key, strings.ToLower(c.typ), c.cover)
		with, without := mk(name+"_with", c.key, c.typ, c.cover), mk(name+"_without", c.key, c.typ, c.cover)
		o := c.o
		o.On = []string{c.key}
		run := func(tb *table.Table, use bool) table.MergeResult {
			rec := mergeRows(in, 100000)
			defer rec.Release()
			o.UseIndex = use
			_, r, err := tb.MergeInsert(ctx, reader(rec), o)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return r
		}
		rw, rs := run(with, true), run(without, false)
		if rw.Updated != rs.Updated || rw.Inserted != rs.Inserted || rw.FragmentsRewritten != rs.FragmentsRewritten {
			t.Fatalf("%s: with the index %+v, by a scan %+v", name, rw, rs)
		}
		if rs.FragmentsIndexed != 0 {
			t.Fatalf("%s: use_index false matched %d fragments through the index", name, rs.FragmentsIndexed)
		}
		m, _ := with.Load(ctx, 0)
		switch {
		case c.typ == "" && rw.FragmentsIndexed != 0:
			t.Fatalf("%s: no index, yet %d fragments matched through one", name, rw.FragmentsIndexed)
		case c.typ != "" && c.cover && rw.FragmentsIndexed != 9: // every fragment before the merge
			t.Fatalf("%s: %d fragments matched through the index, want 9", name, rw.FragmentsIndexed)
		case c.typ != "" && !c.cover && rw.FragmentsIndexed != 8: // the appended one scanned
			t.Fatalf("%s: %d fragments matched through the index, want 8 (%d fragments)", name, rw.FragmentsIndexed, len(m.Fragments))
		}
		if rw.Updated == 0 && o.WhenMatchedUpdateAll || rw.Inserted == 0 && o.WhenNotMatchedInsertAll {
			t.Fatalf("%s: the merge did nothing: %+v", name, rw)
		}
		a, b := rowsOf(t, with, "", 0), rowsOf(t, without, "", 0)
		if strings.Join(a, "\n") != strings.Join(b, "\n") {
			t.Fatalf("%s: tables differ after the merge (%d rows vs %d)", name, len(a), len(b))
		}
	}
}

func dedupKeys(ids []int64) []int64 {
	seen := map[int64]bool{}
	var out []int64
	for _, id := range ids {
		if id >= 0 && seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, id)
	}
	return out
}
