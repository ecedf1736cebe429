package table

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
	"github.com/mvq-dev/mvq/lance/dataset"
	"github.com/mvq-dev/mvq/lance/pb/tablepb"
)

// Tables in the Lance format are read by LanceDB itself: every check here
// asks LanceDB 0.31 (through node) what it sees in the folder mvq wrote.

var lanceTestSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "vec", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32), Nullable: true},
	{Name: "meta", Type: arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, nil)

func lanceRows(t testing.TB, from, to int) array.RecordReader {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, lanceTestSchema)
	defer b.Release()
	for i := from; i < to; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("doc %d", i))
		vb := b.Field(2).(*array.FixedSizeListBuilder)
		vb.Append(true)
		for k := 0; k < 4; k++ {
			vb.ValueBuilder().(*array.Float32Builder).Append(float32(i*4 + k))
		}
		sb := b.Field(3).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.Int32Builder).Append(int32(i % 7))
		sb.FieldBuilder(1).(*array.StringBuilder).Append(fmt.Sprintf("m%d", i%3))
		b.Field(4).(*array.Float64Builder).Append(float64(i) / 2)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(lanceTestSchema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	return rdr
}

// lanceIDs is LanceDB's read of the id column (sorted) and of one other
// column per id, rendered as text.
func lanceIDs(t *testing.T, o *oracle.Oracle, dir, col, where string) ([]int64, map[int64]string) {
	t.Helper()
	tbl := o.Read(t, dir, oracle.ReadOpts{Where: where})
	defer tbl.Release()
	idIdx := tbl.Schema().FieldIndices("id")
	if len(idIdx) != 1 {
		t.Fatalf("LanceDB read has no id column: %s", tbl.Schema())
	}
	vals := map[int64]string{}
	var ids []int64
	colIdx := -1
	if col != "" {
		if ix := tbl.Schema().FieldIndices(col); len(ix) == 1 {
			colIdx = ix[0]
		} else {
			t.Fatalf("LanceDB read has no column %q: %s", col, tbl.Schema())
		}
	}
	tr := array.NewTableReader(tbl, 0)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		idc := rec.Column(idIdx[0]).(*array.Int64)
		for i := 0; i < idc.Len(); i++ {
			ids = append(ids, idc.Value(i))
			if colIdx >= 0 {
				vals[idc.Value(i)] = rec.Column(colIdx).ValueStr(i)
			}
		}
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	return ids, vals
}

// lanceCatalog is a Lance-format catalog on a local warehouse (LanceDB
// reads its folders; S3 mode does not apply) with a namespace docs and
// fragments of at most 100 rows.
func lanceCatalog(t *testing.T) (string, *Catalog) {
	t.Helper()
	root := t.TempDir()
	wh, err := OpenWarehouse(context.Background(), "file://"+root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	c := NewCatalog(wh, testDB(t), Options{Format: FormatLance, MaxRowsPerFragment: 100})
	if err := c.CreateNamespace(context.Background(), []string{"docs"}, "", nil); err != nil {
		t.Fatal(err)
	}
	return root, c
}

func TestLanceFormatReadByLanceDB(t *testing.T) {
	o := oracle.Need(t)
	t.Parallel()
	ctx := context.Background()
	root, c := lanceCatalog(t)
	tb, m, err := c.CreateTable(ctx, []string{"docs", "t"}, lanceTestSchema, lanceRows(t, 0, 250), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !m.IsLance() || len(m.Fragments) != 3 {
		t.Fatalf("created a %v-format version with %d fragments", m.IsLance(), len(m.Fragments))
	}
	for _, f := range m.Fragments {
		if !strings.HasSuffix(f.Path, ".lance") {
			t.Fatalf("fragment %d is %s, not a Lance data file", f.ID, f.Path)
		}
	}
	dir := filepath.Join(root, "docs", "t.lance")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("table folder: %v", err)
	}
	if n := o.Count(t, dir, ""); n != 250 {
		t.Fatalf("LanceDB counts %d rows, want 250", n)
	}
	got, texts := lanceIDs(t, o, dir, "text", "id >= 240")
	if !eq(got, seq(240, 250)) || texts[245] != "doc 245" {
		t.Fatalf("LanceDB read ids %v texts %v", got, texts)
	}
	_, vecs := lanceIDs(t, o, dir, "vec", "id = 3")
	if vecs[3] != "[12,13,14,15]" && vecs[3] != "[12 13 14 15]" {
		t.Fatalf("LanceDB read vec of id 3 = %q", vecs[3])
	}
	_, metas := lanceIDs(t, o, dir, "meta", "id = 10")
	if !strings.Contains(metas[10], "3") || !strings.Contains(metas[10], "m1") {
		t.Fatalf("LanceDB read meta of id 10 = %q", metas[10])
	}

	// Insert, delete and update: each a version LanceDB reads.
	if _, _, err := tb.Insert(ctx, lanceRows(t, 250, 300), ""); err != nil {
		t.Fatal(err)
	}
	if _, n, err := tb.Delete(ctx, "id % 10 = 0"); err != nil || n != 30 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	if _, n, err := tb.Update(ctx, "id = 7", [][2]string{{"text", "'seven'"}}); err != nil || n != 1 {
		t.Fatalf("update: %d, %v", n, err)
	}
	if n := o.Count(t, dir, ""); n != 270 {
		t.Fatalf("LanceDB counts %d rows after insert and delete, want 270", n)
	}
	if _, texts := lanceIDs(t, o, dir, "text", "id = 7"); texts[7] != "seven" {
		t.Fatalf("LanceDB read the updated text %q", texts[7])
	}
	// mvq's delete and update wrote deletion files (every fragment lost
	// rows) and the update's row as a new fragment; LanceDB reads the same
	// rows as mvq.
	md, err := tb.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	dels, err := os.ReadDir(filepath.Join(dir, "_deletions"))
	if err != nil {
		t.Fatal(err)
	}
	withDel := 0
	for _, f := range md.Fragments {
		if f.HasDeletions() {
			withDel++
			if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f.deletionPath()))); err != nil {
				t.Fatalf("fragment %d: %v", f.ID, err)
			}
		}
	}
	if last := md.Fragments[len(md.Fragments)-1]; withDel != 4 || len(dels) < withDel || last.Rows != 1 || last.HasDeletions() {
		t.Fatalf("after delete and update: %d fragments with deletion files, %d files, fragments %+v", withDel, len(dels), md.Fragments)
	}
	lanceAll, lanceTexts := lanceIDs(t, o, dir, "text", "")
	if mvqAll := sorted(ids(t, tb, QueryOptions{})); !eq(lanceAll, mvqAll) || md.NumRows() != int64(len(lanceAll)) {
		t.Fatalf("LanceDB reads %d ids, mvq %d (%d in the manifest)", len(lanceAll), len(mvqAll), md.NumRows())
	}
	if n, err := tb.CountRows(ctx, 0, "text = 'seven'"); err != nil || n != 1 || lanceTexts[7] != "seven" || lanceTexts[8] != "doc 8" {
		t.Fatalf("mvq counts %d updated rows (%v); LanceDB reads %q, %q", n, err, lanceTexts[7], lanceTexts[8])
	}
	// Older versions stay readable by LanceDB too.
	if n := o.CountAt(t, dir, "", 1); n != 250 {
		t.Fatalf("LanceDB counts %d rows at version 1, want 250", n)
	}

	// Schema evolution: a rename and a dropped struct column leave the
	// data files as they are; LanceDB still finds each leaf.
	body := "body"
	if _, err := tb.AlterColumns(ctx, []Alteration{{Field: "alterations[0]", Path: "text", Rename: &body}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.DropColumns(ctx, []string{"meta"}); err != nil {
		t.Fatal(err)
	}
	tbl := o.Read(t, dir, oracle.ReadOpts{Where: "id = 11"})
	defer tbl.Release()
	if got := tbl.Schema().String(); strings.Contains(got, "meta") || !strings.Contains(got, "body") {
		t.Fatalf("LanceDB schema after rename and drop: %s", got)
	}
	_, scores := lanceIDs(t, o, dir, "score", "id = 11")
	_, bodies := lanceIDs(t, o, dir, "body", "id = 11")
	if scores[11] != "5.5" || bodies[11] != "doc 11" {
		t.Fatalf("LanceDB read score %q body %q for id 11", scores[11], bodies[11])
	}

	// mvq reads its own Lance versions back the same.
	if got := sorted(ids(t, tb, QueryOptions{Filter: "id < 12"})); !eq(got, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 11}) {
		t.Fatalf("mvq ids = %v", got)
	}
}

// TestLanceDeletionFilesRead: a delete LanceDB makes writes deletion files
// instead of rewriting fragments; mvq reads such a table as its live rows
// (queries, counts, filters through a scalar-free scan) and keeps reading
// it after committing on top.
func TestLanceDeletionFilesRead(t *testing.T) {
	o := oracle.Need(t)
	t.Parallel()
	ctx := context.Background()
	root, c := lanceCatalog(t)
	tb, _, err := c.CreateTable(ctx, []string{"docs", "t"}, lanceTestSchema, lanceRows(t, 0, 300), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "docs", "t.lance")
	o.Delete(t, dir, "id % 10 = 0 OR id >= 290")
	m, err := tb.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	withDel := 0
	for _, f := range m.Fragments {
		if f.HasDeletions() {
			withDel++
		}
	}
	if m.Version != 2 || withDel != 3 || m.NumRows() != 261 {
		t.Fatalf("after LanceDB's delete: v%d, %d fragments with deletion files, %d rows", m.Version, withDel, m.NumRows())
	}
	var want []int64
	for i := int64(0); i < 290; i++ {
		if i%10 != 0 {
			want = append(want, i)
		}
	}
	if got := ids(t, tb, QueryOptions{}); !eq(got, want) {
		t.Fatalf("mvq reads %d ids after LanceDB's delete: %v", len(got), got)
	}
	if got := ids(t, tb, QueryOptions{Filter: "id BETWEEN 98 AND 102"}); !eq(got, []int64{98, 99, 101, 102}) {
		t.Fatalf("filtered ids = %v", got)
	}
	if n, err := tb.CountRows(ctx, 0, "text LIKE 'doc 1%'"); err != nil || n != 100 {
		t.Fatalf("count = %d, %v", n, err)
	}
	// mvq commits on top keep LanceDB's deletions; LanceDB reads them.
	if _, _, err := tb.Insert(ctx, lanceRows(t, 300, 310), ""); err != nil {
		t.Fatal(err)
	}
	if _, n, err := tb.Update(ctx, "id = 11", [][2]string{{"text", "'eleven'"}}); err != nil || n != 1 {
		t.Fatalf("update: %d, %v", n, err)
	}
	if n := o.Count(t, dir, ""); n != 271 {
		t.Fatalf("LanceDB counts %d rows after mvq's commits, want 271", n)
	}
	if got := sorted(ids(t, tb, QueryOptions{Filter: "id < 13"})); !eq(got, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12}) {
		t.Fatalf("mvq ids after its commits = %v", got)
	}
	rids, err := tb.RowIDs(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	// Fragment 2 held ids 200..299: positions 0, 10, …, 80 and 90..99 are gone.
	if r := rids[2]; r.Origin != 2 || fmt.Sprint(r.Deleted[:4]) != "[0 1 10 11]" || r.Deleted[len(r.Deleted)-2] != 90 || r.Deleted[len(r.Deleted)-1] != 100 {
		t.Fatalf("row ids of fragment 2: %+v", r)
	}
	// mvq's update merged its row into fragment 0's LanceDB-written
	// deletion file; LanceDB deletes again on top of mvq's version (whose
	// Lance Update transaction it reads) and mvq reads the result.
	o.Delete(t, dir, "id = 12 OR id = 301")
	if n := o.Count(t, dir, ""); n != 269 {
		t.Fatalf("LanceDB counts %d rows after its delete on mvq's version, want 269", n)
	}
	if got := sorted(ids(t, tb, QueryOptions{Filter: "id < 14 OR id > 299"})); !eq(got, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 300, 302, 303, 304, 305, 306, 307, 308, 309}) {
		t.Fatalf("mvq ids after LanceDB's second delete = %v", got)
	}

	// A query's _rowaddr is Lance's (the row's position in its data file),
	// as LanceDB answers it, in every fragment: with and without a deletion
	// file, whole and through a filter.
	lanceAddr := map[int64]uint64{}
	lt := o.Read(t, dir, oracle.ReadOpts{RowID: true, Columns: []string{"id"}})
	defer lt.Release()
	ltr := array.NewTableReader(lt, 0)
	defer ltr.Release()
	for ltr.Next() {
		r := ltr.RecordBatch()
		idc, ac := r.Column(0).(*array.Int64), r.Column(1).(*array.Uint64)
		for i := 0; i < idc.Len(); i++ {
			lanceAddr[idc.Value(i)] = ac.Value(i)
		}
	}
	if len(lanceAddr) != 269 {
		t.Fatalf("LanceDB read %d row ids, want 269", len(lanceAddr))
	}
	mvqAddr := func(filter string) map[int64]uint64 {
		t.Helper()
		rdr, err := tb.Query(ctx, QueryOptions{Columns: []string{"id"}, Filter: filter, RowAddr: true, LanceRowAddr: true})
		if err != nil {
			t.Fatal(err)
		}
		defer rdr.Release()
		out := map[int64]uint64{}
		for rdr.Next() {
			r := rdr.RecordBatch()
			idc, ac := r.Column(0).(*array.Int64), r.Column(1).(*array.Uint64)
			for i := 0; i < idc.Len(); i++ {
				out[idc.Value(i)] = ac.Value(i)
			}
		}
		if err := rdr.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := mvqAddr("")
	for id, a := range lanceAddr {
		if got[id] != a {
			t.Fatalf("id %d: mvq's _rowaddr %#x, LanceDB's %#x", id, got[id], a)
		}
	}
	if len(got) != len(lanceAddr) {
		t.Fatalf("mvq answers %d rows, LanceDB %d", len(got), len(lanceAddr))
	}
	// id 205 is position 5 of fragment 2 (ids 200..299), which has
	// deletions before it: its live offset is 4.
	if a := lanceAddr[205]; a != RowAddress(2, 5) {
		t.Fatalf("LanceDB's _rowaddr of id 205 = %#x", a)
	}
	if f := mvqAddr(fmt.Sprintf("_rowaddr = %d", RowAddress(2, 5))); len(f) != 1 || f[205] != RowAddress(2, 5) {
		t.Fatalf("filter on Lance's _rowaddr of id 205: %v", f)
	}
	// A read of selected rows (an index's answer: live offset 4 of
	// fragment 2) answers the same address.
	rdr, err := tb.Query(ctx, QueryOptions{Columns: []string{"id"}, Filter: "id = 205", RowAddr: true, LanceRowAddr: true, Rows: Selection{2: {4}}})
	if err != nil {
		t.Fatal(err)
	}
	sel := 0
	for rdr.Next() {
		r := rdr.RecordBatch()
		for i := 0; i < int(r.NumRows()); i++ {
			if r.Column(0).(*array.Int64).Value(i) != 205 || r.Column(1).(*array.Uint64).Value(i) != RowAddress(2, 5) {
				t.Fatalf("selected read: id %d at %#x", r.Column(0).(*array.Int64).Value(i), r.Column(1).(*array.Uint64).Value(i))
			}
			sel++
		}
	}
	rdr.Release()
	if sel != 1 {
		t.Fatalf("selected read answered %d rows", sel)
	}
	// Internal readers keep live offsets: the same row is offset 4 there,
	// and LanceRowAddrs maps it.
	live := map[int64]uint64{}
	rdr, err = tb.Query(ctx, QueryOptions{Columns: []string{"id"}, Filter: "id = 205", RowAddr: true})
	if err != nil {
		t.Fatal(err)
	}
	for rdr.Next() {
		r := rdr.RecordBatch()
		live[r.Column(0).(*array.Int64).Value(0)] = r.Column(1).(*array.Uint64).Value(0)
	}
	rdr.Release()
	lm, err := tb.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	addrs := []uint64{live[205]}
	if err := tb.LanceRowAddrs(ctx, lm, addrs); err != nil || live[205] != RowAddress(2, 4) || addrs[0] != RowAddress(2, 5) {
		t.Fatalf("live address %#x maps to %#x (%v)", live[205], addrs[0], err)
	}
	if err := tb.LanceRowAddrs(ctx, lm, []uint64{RowAddress(2, 4000)}); err == nil {
		t.Fatal("an address past the fragment's rows mapped")
	}
}

// TestLanceManifestHostile: a Lance manifest another writer (or a client
// staging for version/create) made is checked, not trusted: column indices
// shorter than the fields, or mvq.version facts whose schema disagrees
// with the Lance fields, are errors, never a panic or a wrong schema.
func TestLanceManifestHostile(t *testing.T) {
	enc, err := EncodeSchema(lanceTestSchema)
	if err != nil {
		t.Fatal(err)
	}
	good := &Manifest{Version: 2, Schema: enc, NextFragmentID: 1, lance: true,
		Fragments: []Fragment{{ID: 0, Path: "data/a.lance", Rows: 4, Bytes: 10}}}
	b, err := good.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeManifest(b); err != nil {
		t.Fatalf("the good manifest: %v", err)
	}
	tamper := func(what string, fn func(pm *tablepb.Manifest)) {
		t.Helper()
		mf, err := dataset.DecodeManifest(b)
		if err != nil {
			t.Fatal(err)
		}
		fn(mf.Manifest)
		bad, err := dataset.EncodeManifest(mf)
		if err != nil {
			t.Fatal(err)
		}
		if m, err := DecodeManifest(bad); err == nil {
			t.Fatalf("%s: accepted, schema %q", what, m.Schema)
		}
	}
	tamper("short column_indices", func(pm *tablepb.Manifest) {
		delete(pm.Config, lanceVersionKey) // read as another writer's version
		pm.Fragments[0].Files[0].ColumnIndices = pm.Fragments[0].Files[0].ColumnIndices[:1]
	})
	other, err := EncodeSchema(arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil))
	if err != nil {
		t.Fatal(err)
	}
	tamper("facts with another schema", func(pm *tablepb.Manifest) {
		pm.Config[lanceVersionKey] = fmt.Sprintf(`{"v":2,"schema":%q}`, other)
	})
	tamper("facts with a column map of the wrong length", func(pm *tablepb.Manifest) {
		pm.Config[lanceVersionKey] = fmt.Sprintf(`{"v":2,"schema":%q,"maps":{"0":{"columns":[0],"leaves":"1"}}}`, enc)
	})
}
