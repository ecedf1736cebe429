package table

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/errs"
	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
	"github.com/mvq-dev/mvq/lance/dataset"
)

// withoutMeta is rows from..to of lanceTestSchema without its meta column
// (the schema after drop_columns meta), as one record.
func withoutMeta(t *testing.T, from, to int) arrow.RecordBatch {
	t.Helper()
	rdr := lanceRows(t, from, to)
	defer rdr.Release()
	if !rdr.Next() {
		t.Fatal("no rows")
	}
	r := rdr.RecordBatch()
	keep := []int{0, 1, 2, 4}
	fields := make([]arrow.Field, len(keep))
	cols := make([]arrow.Array, len(keep))
	for i, k := range keep {
		fields[i], cols[i] = r.Schema().Field(k), r.Column(k)
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, r.NumRows())
}

// lanceFieldIDs reads the field ids of the latest version of the dataset
// in dir, by name (top-level fields).
func lanceFieldIDs(t *testing.T, dir string) map[string]int32 {
	t.Helper()
	d, err := dataset.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, f := range d.ManifestFile.Manifest.GetFields() {
		if f.GetParentId() == -1 {
			out[f.GetName()] = f.GetId()
		}
	}
	return out
}

// TestLanceCarriesIndexesAndFieldIDs: indexes LanceDB built on a mvq table
// survive mvq's commits (an insert, a drop_columns of a middle struct
// column), naming the same columns by the same field ids; LanceDB appends
// after mvq's drop_columns line up with mvq's fragments, and mvq reads
// and commits on top of that version.
func TestLanceCarriesIndexesAndFieldIDs(t *testing.T) {
	o := oracle.Need(t)
	t.Parallel()
	ctx := context.Background()
	root, c := lanceCatalog(t)
	tb, _, err := c.CreateTable(ctx, []string{"docs", "t"}, lanceTestSchema, lanceRows(t, 0, 250), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "docs", "t.lance")
	o.CreateIndex(t, dir, "id", "btree")
	o.CreateIndex(t, dir, "score", "btree")
	before := lanceFieldIDs(t, dir)

	if _, _, err := tb.Insert(ctx, lanceRows(t, 250, 300), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.DropColumns(ctx, []string{"meta"}); err != nil {
		t.Fatal(err)
	}
	after := lanceFieldIDs(t, dir)
	if _, ok := after["meta"]; ok || after["id"] != before["id"] || after["score"] != before["score"] || after["vec"] != before["vec"] {
		t.Fatalf("field ids before mvq's commits %v, after %v: kept fields must keep their ids", before, after)
	}
	ix := o.Indices(t, dir)
	var cols []string
	for _, x := range ix {
		cols = append(cols, x.Columns...)
		if x.Stats.NumIndexedRows != 250 || x.Stats.NumUnindexedRows != 50 {
			t.Fatalf("LanceDB index %s after mvq's commits: %d rows indexed, %d not (want 250, 50)", x.Name, x.Stats.NumIndexedRows, x.Stats.NumUnindexedRows)
		}
	}
	slices.Sort(cols)
	if !slices.Equal(cols, []string{"id", "score"}) {
		t.Fatalf("LanceDB lists indexes on %v after mvq's commits, want id and score: %+v", cols, ix)
	}

	// LanceDB appends after mvq's drop_columns.
	rec := withoutMeta(t, 300, 320)
	defer rec.Release()
	o.Write(t, dir, rec, "", "append")
	if got := ids(t, tb, QueryOptions{}); !eq(got, seq(0, 320)) {
		t.Fatalf("mvq reads %d ids after LanceDB's append: %v", len(got), got)
	}
	if n, err := tb.CountRows(ctx, 0, "score >= 155"); err != nil || n != 10 {
		t.Fatalf("mvq counts %d rows with score >= 155 (%v), want 10", n, err)
	}
	// mvq commits on top of LanceDB's version; LanceDB reads it, its
	// scalar index still answering.
	if _, n, err := tb.Delete(ctx, "id = 5 OR id = 310"); err != nil || n != 2 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	if n := o.Count(t, dir, ""); n != 318 {
		t.Fatalf("LanceDB counts %d rows, want 318", n)
	}
	got, scores := lanceIDs(t, o, dir, "score", "score >= 152.5")
	if !eq(got, []int64{305, 306, 307, 308, 309, 311, 312, 313, 314, 315, 316, 317, 318, 319}) || scores[319] != "159.5" {
		t.Fatalf("LanceDB's score query after mvq's delete: ids %v scores %v", got, scores)
	}
	if len(o.Indices(t, dir)) != 2 {
		t.Fatal("LanceDB's indexes went with mvq's delete")
	}
}

// TestLanceStorage20Stays: a dataset LanceDB created with data storage
// version 2.0 stays 2.0 through mvq's commits: mvq writes its data files in
// format 2.0 and keeps the version of LanceDB's files, and LanceDB reads
// every row.
func TestLanceStorage20Stays(t *testing.T) {
	o := oracle.Need(t)
	t.Parallel()
	ctx := context.Background()
	root, c := lanceCatalog(t)
	dir := filepath.Join(root, "docs", "old.lance")
	rec := withoutMeta(t, 0, 100)
	defer rec.Release()
	o.Write(t, dir, rec, "2.0", "create")
	tb, err := c.OpenTable(ctx, []string{"docs", "old"})
	if err != nil {
		t.Fatal(err)
	}
	more := withoutMeta(t, 100, 150)
	defer more.Release()
	rdr, err := array.NewRecordReader(more.Schema(), []arrow.RecordBatch{more})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Insert(ctx, rdr, ""); err != nil {
		t.Fatal(err)
	}
	if _, n, err := tb.Update(ctx, "id = 3", [][2]string{{"text", "'three'"}}); err != nil || n != 1 {
		t.Fatalf("update: %d, %v", n, err)
	}
	d, err := dataset.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if v := d.ManifestFile.Manifest.GetDataFormat().GetVersion(); v != "2.0" {
		t.Fatalf("the dataset's storage version is %q after mvq's commits, want 2.0", v)
	}
	for _, fr := range d.ManifestFile.Manifest.GetFragments() {
		for _, df := range fr.GetFiles() {
			if df.GetFileMajorVersion() != 2 || df.GetFileMinorVersion() != 0 {
				t.Fatalf("fragment %d: %s is format %d.%d, want 2.0", fr.GetId(), df.GetPath(), df.GetFileMajorVersion(), df.GetFileMinorVersion())
			}
		}
	}
	if n := o.Count(t, dir, ""); n != 150 {
		t.Fatalf("LanceDB counts %d rows, want 150", n)
	}
	if _, texts := lanceIDs(t, o, dir, "text", "id = 3 OR id = 120"); texts[3] != "three" || texts[120] != "doc 120" {
		t.Fatalf("LanceDB reads %v", texts)
	}
	if got := ids(t, tb, QueryOptions{Filter: "id >= 145"}); !eq(got, seq(145, 150)) {
		t.Fatalf("mvq reads %v", got)
	}
}

// TestLanceStableRowIDsReadOnly: a dataset LanceDB made with stable row
// ids reads through mvq (rows, filters, the row ids views use), but mvq
// refuses to write it, before writing anything: its commits would drop
// the row id sequences (they did, silently, before the guard). LanceDB
// keeps writing it and mvq reads what it wrote.
func TestLanceStableRowIDsReadOnly(t *testing.T) {
	o := oracle.Need(t)
	t.Parallel()
	ctx := context.Background()
	root, c := lanceCatalog(t)
	dir := filepath.Join(root, "docs", "s.lance")
	rec := withoutMeta(t, 0, 100)
	defer rec.Release()
	o.WriteWith(t, dir, rec, oracle.WriteOpts{Options: map[string]string{"new_table_enable_stable_row_ids": "true"}})
	o.Delete(t, dir, "id < 3")
	tb, err := c.OpenTable(ctx, []string{"docs", "s"})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, tb, QueryOptions{Filter: "id < 6"}); !eq(got, []int64{3, 4, 5}) {
		t.Fatalf("mvq reads %v", got)
	}
	m, err := tb.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !m.StableRowIDs() {
		t.Fatal("the dataset's stable row ids are not seen")
	}
	if _, err := tb.RowIDs(ctx, m); err != nil {
		t.Fatalf("row ids for views: %v", err)
	}
	more := withoutMeta(t, 100, 110)
	defer more.Release()
	rdr, err := array.NewRecordReader(more.Schema(), []arrow.RecordBatch{more})
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if errs.CodeOf(err) != errs.CodeUnsupported || !strings.Contains(err.Error(), "stable row ids") {
			t.Fatalf("%s on a table with stable row ids: %v", what, err)
		}
	}
	_, _, err = tb.Insert(ctx, rdr, "")
	refused("insert", err)
	_, _, err = tb.Update(ctx, "id = 5", [][2]string{{"text", "'five'"}})
	refused("update", err)
	_, _, err = tb.Delete(ctx, "id = 5")
	refused("delete", err)
	_, err = tb.Restore(ctx, 1)
	refused("restore", err)
	if res, err := tb.Compact(ctx, CompactOptions{}); err != nil || res.FragmentsAfter != res.FragmentsBefore {
		t.Fatalf("compaction: %+v %v", res, err)
	}
	d, err := dataset.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	pm := d.ManifestFile.Manifest
	if pm.GetVersion() != 2 || pm.GetReaderFeatureFlags()&dataset.FlagStableRowIDs == 0 || pm.GetFragments()[0].GetRowIdSequence() == nil {
		t.Fatalf("after the refused writes: version %d, flags %d", pm.GetVersion(), pm.GetReaderFeatureFlags())
	}
	// No data file was left behind by a refused write.
	files, err := os.ReadDir(filepath.Join(dir, "data"))
	if err != nil || len(files) != 1 {
		t.Fatalf("data files after the refused writes: %d %v", len(files), err)
	}
	o.Write(t, dir, more, "", "append")
	if got := ids(t, tb, QueryOptions{Filter: "id >= 105"}); !eq(got, seq(105, 110)) {
		t.Fatalf("mvq reads LanceDB's append: %v", got)
	}
}

// TestLanceWidenRewrites: widening a column of a Lance table (int32 to
// int64) rewrites its fragments in the new type, live rows only: LanceDB
// reads a column in its data file's type, and before the rewrite it
// panicked decoding mvq's widened column ("the offset of the new Buffer
// cannot exceed the existing length"). LanceDB and mvq read the same
// values after it, and LanceDB appends int64 values on top.
func TestLanceWidenRewrites(t *testing.T) {
	o := oracle.Need(t)
	t.Parallel()
	ctx := context.Background()
	root, c := lanceCatalog(t)
	narrow := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "n", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}, nil)
	rows := func(s *arrow.Schema, from, to int) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, s)
		defer b.Release()
		for i := from; i < to; i++ {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			switch nb := b.Field(1).(type) {
			case *array.Int32Builder:
				nb.Append(int32(i * 3))
			case *array.Int64Builder:
				nb.Append(int64(i) << 33)
			}
		}
		return b.NewRecordBatch()
	}
	first := rows(narrow, 0, 60)
	defer first.Release()
	rdr, err := array.NewRecordReader(narrow, []arrow.RecordBatch{first})
	if err != nil {
		t.Fatal(err)
	}
	tb, _, err := c.CreateTable(ctx, []string{"docs", "w"}, narrow, rdr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "docs", "w.lance")
	o.Delete(t, dir, "id < 5")
	if _, err := tb.AlterColumns(ctx, []Alteration{{Field: "alterations[0]", Path: "n", DataType: arrow.PrimitiveTypes.Int64}}); err != nil {
		t.Fatal(err)
	}
	m, err := tb.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Fragments) != 1 || m.Fragments[0].ID == 0 || m.Fragments[0].HasDeletions() || m.NumRows() != 55 {
		t.Fatalf("after the widening: %+v", m.Fragments)
	}
	// The rows keep their identities (views over the table keep theirs):
	// the new fragment's rows are fragment 0's live rows.
	rowIDs := func() FragmentRowIDs {
		t.Helper()
		m, err := tb.Load(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		rids, err := tb.RowIDs(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		return rids[m.Fragments[0].ID]
	}
	if r := rowIDs(); r.Origin != 0 || fmt.Sprint(r.Deleted) != "[0 5]" {
		t.Fatalf("row ids after the rewrite: %+v", r)
	}
	// A delete on the rewritten fragment adds to them (id 10 is its row 5,
	// position 10 of the origin).
	if _, n, err := tb.Delete(ctx, "id = 10"); err != nil || n != 1 {
		t.Fatalf("delete: %d %v", n, err)
	}
	if r := rowIDs(); r.Origin != 0 || fmt.Sprint(r.Deleted) != "[0 5 10 11]" {
		t.Fatalf("row ids after a delete on the rewritten fragment: %+v", r)
	}
	wide := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	more := rows(wide, 60, 70)
	defer more.Release()
	o.Write(t, dir, more, "", "append")
	_, vals := lanceIDs(t, o, dir, "n", "id IN (4, 5, 59, 61)")
	if len(vals) != 3 || vals[5] != "15" || vals[59] != "177" || vals[61] != fmt.Sprint(int64(61)<<33) {
		t.Fatalf("LanceDB reads %v", vals)
	}
	if n := o.Count(t, dir, ""); n != 64 {
		t.Fatalf("LanceDB counts %d rows, want 64", n)
	}
	if got := ids(t, tb, QueryOptions{Filter: "n = 177 OR n > 100000"}); !eq(sorted(got), append([]int64{59}, seq(60, 70)...)) {
		t.Fatalf("mvq reads %v", got)
	}
}
