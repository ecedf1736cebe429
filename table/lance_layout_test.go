package table

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/duck"
	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
	"github.com/mvq-dev/mvq/lance/dataset"
	"github.com/mvq-dev/mvq/lance/pb/tablepb"
	lschema "github.com/mvq-dev/mvq/lance/schema"
)

// rowsByID renders each row of recs as "name=value|…" by its id column.
func rowsByID(t *testing.T, sc *arrow.Schema, recs []arrow.RecordBatch) map[int64]string {
	t.Helper()
	idc := sc.FieldIndices("id")
	if len(idc) != 1 {
		t.Fatalf("no id column in %s", sc)
	}
	out := map[int64]string{}
	for _, r := range recs {
		for i := 0; i < int(r.NumRows()); i++ {
			var sb strings.Builder
			for c, f := range sc.Fields() {
				fmt.Fprintf(&sb, "%s=%s|", f.Name, r.Column(c).ValueStr(i))
			}
			id := r.Column(idc[0]).(*array.Int64).Value(i)
			if _, dup := out[id]; dup {
				t.Fatalf("id %d twice", id)
			}
			out[id] = sb.String()
		}
	}
	return out
}

// sameAsLanceDB checks that mvq's query of the latest version of tb and
// LanceDB's read of dir have the same columns and the same rows.
func sameAsLanceDB(t *testing.T, o *oracle.Oracle, tb *Table, dir string, wantRows int) {
	t.Helper()
	rdr, err := tb.Query(context.Background(), QueryOptions{})
	if err != nil {
		t.Fatalf("mvq query: %v", err)
	}
	sc := rdr.Schema()
	recs, err := duck.Collect(rdr)
	if err != nil {
		t.Fatalf("mvq query: %v", err)
	}
	got := rowsByID(t, sc, recs)
	for _, r := range recs {
		r.Release()
	}
	lt := o.Read(t, dir, oracle.ReadOpts{})
	defer lt.Release()
	tr := array.NewTableReader(lt, -1)
	defer tr.Release()
	var lrecs []arrow.RecordBatch
	for tr.Next() {
		r := tr.RecordBatch()
		r.Retain()
		lrecs = append(lrecs, r)
	}
	if !sameNames(sc, lt.Schema()) {
		t.Fatalf("mvq reads columns %s, LanceDB %s", sc, lt.Schema())
	}
	want := rowsByID(t, lt.Schema(), lrecs)
	for _, r := range lrecs {
		r.Release()
	}
	if len(got) != wantRows || len(want) != wantRows {
		t.Fatalf("mvq reads %d rows, LanceDB %d, want %d", len(got), len(want), wantRows)
	}
	for id, w := range want {
		if got[id] != w {
			t.Fatalf("row %d: mvq reads %s, LanceDB %s", id, got[id], w)
		}
	}
}

func sameNames(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.Fields() {
		if a.Field(i).Name != b.Field(i).Name || !arrow.TypeEqual(a.Field(i).Type, b.Field(i).Type) {
			return false
		}
	}
	return true
}

// fragmentKeys reads the latest version of table id through a catalog of
// its own (no cache shared with the test's) and answers its fragments'
// keys, sorted.
func fragmentKeys(t *testing.T, root string, id []string) []string {
	t.Helper()
	ctx := context.Background()
	wh, err := OpenWarehouse(ctx, "file://"+root)
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	c := NewCatalog(wh, testDB(t), Options{Format: FormatLance})
	tb, err := c.OpenTable(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	m, err := tb.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range m.Fragments {
		out = append(out, f.Key())
	}
	slices.Sort(out)
	return out
}

// filesPerFragment counts the data files of each fragment of the latest version.
func filesPerFragment(t *testing.T, dir string) []int {
	t.Helper()
	d, err := dataset.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, fr := range d.ManifestFile.Manifest.GetFragments() {
		out = append(out, len(fr.GetFiles()))
	}
	return out
}

// TestLanceFragmentsOfSeveralFiles: LanceDB's add_columns (a new data file
// per fragment), alter_columns with a new type (the cast column in a new
// file, the old one left unread) and drop_columns on a mvq table; mvq
// reads every version as LanceDB does, and its own commits on top (a
// delete with deletion files, an update, an insert, its own drop_columns,
// compaction, orphan cleanup) keep LanceDB reading the same rows.
func TestLanceFragmentsOfSeveralFiles(t *testing.T) {
	o := oracle.Need(t)
	t.Parallel()
	ctx := context.Background()
	root, c := lanceCatalog(t)
	tb, _, err := c.CreateTable(ctx, []string{"docs", "t"}, lanceTestSchema, lanceRows(t, 0, 200), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Insert(ctx, lanceRows(t, 200, 300), ""); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "docs", "t.lance")

	o.AddColumns(t, dir, map[string]string{"w": "id * 2", "label": "concat('n', CAST(id AS STRING))"})
	twoEach := func(got []int) bool {
		return len(got) >= 2 && !slices.ContainsFunc(got, func(n int) bool { return n != 2 })
	}
	if got := filesPerFragment(t, dir); !twoEach(got) {
		t.Fatalf("LanceDB's add_columns left fragments of %v data files, want two each (the test needs a Merge)", got)
	}
	sameAsLanceDB(t, o, tb, dir, 300)
	if n, err := tb.CountRows(ctx, 0, "w >= 590"); err != nil || n != 5 {
		t.Fatalf("mvq counts %d rows with w >= 590 (%v), want 5", n, err)
	}

	// mvq's commits over fragments of two files.
	if _, n, err := tb.Delete(ctx, "id = 5 OR id = 250"); err != nil || n != 2 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	if got := filesPerFragment(t, dir); !twoEach(got) {
		t.Fatalf("after mvq's delete the fragments have %v data files, want the same two each", got)
	}
	sameAsLanceDB(t, o, tb, dir, 298)
	if _, _, err := tb.Update(ctx, "id = 7", [][2]string{{"w", "w + 1000"}, {"label", "'edited'"}}); err != nil {
		t.Fatalf("update: %v", err)
	}
	sameAsLanceDB(t, o, tb, dir, 298)

	// A new type: LanceDB writes the cast column anew and leaves the old
	// one unread in the first files.
	o.AlterColumns(t, dir, map[string]string{"score": "float32"})
	sameAsLanceDB(t, o, tb, dir, 298)
	keysBefore := fragmentKeys(t, root, []string{"docs", "t"})
	o.DropColumns(t, dir, "text")
	sameAsLanceDB(t, o, tb, dir, 298)
	// A dropped column changes no fragment's content: the same keys (an
	// index or a view keyed on them keeps its work).
	if after := fragmentKeys(t, root, []string{"docs", "t"}); !slices.Equal(after, keysBefore) {
		t.Fatalf("fragment keys after LanceDB's drop_columns %v, before %v", after, keysBefore)
	}
	o.AddNullColumn(t, dir, "note", "utf8")
	sameAsLanceDB(t, o, tb, dir, 298)
	if n, err := tb.CountRows(ctx, 0, "note IS NULL"); err != nil || n != 298 {
		t.Fatalf("mvq counts %d rows with a null note (%v), want 298", n, err)
	}

	// mvq appends rows of the new schema, drops a column LanceDB added.
	rdr, err := tb.Query(ctx, QueryOptions{Filter: "id < 3"})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := duck.Collect(rdr)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		ib := array.NewInt64Builder(memory.DefaultAllocator)
		for i := 0; i < int(r.NumRows()); i++ {
			ib.Append(int64(1000 + i))
		}
		cols := slices.Clone(r.Columns())
		cols[0] = ib.NewArray()
		nr := array.NewRecordBatch(r.Schema(), cols, r.NumRows())
		rr, _ := array.NewRecordReader(r.Schema(), []arrow.RecordBatch{nr})
		if _, _, err := tb.Insert(ctx, rr, ""); err != nil {
			t.Fatalf("insert under LanceDB's schema: %v", err)
		}
	}
	sameAsLanceDB(t, o, tb, dir, 301)
	dm, err := tb.DropColumns(ctx, []string{"label"})
	if err != nil {
		t.Fatal(err)
	}
	sameAsLanceDB(t, o, tb, dir, 301)
	var committed []string
	for _, f := range dm.Fragments {
		committed = append(committed, f.Key())
	}
	slices.Sort(committed)
	if read := fragmentKeys(t, root, []string{"docs", "t"}); !slices.Equal(read, committed) {
		t.Fatalf("fragment keys of mvq's drop_columns as committed %v, read back %v", committed, read)
	}

	// Cleanup keeps the files the fragments' other data files are; an
	// old version still reads.
	before := o.Count(t, dir, "")
	if _, err := tb.CleanupOrphans(ctx, 0); err != nil {
		t.Fatal(err)
	}
	sameAsLanceDB(t, o, tb, dir, 301)
	if before != 301 {
		t.Fatalf("LanceDB counts %d", before)
	}
	if _, err := tb.Compact(ctx, CompactOptions{MinFragments: 2}); err != nil {
		t.Fatalf("compact: %v", err)
	}
	sameAsLanceDB(t, o, tb, dir, 301)
}

// TestLanceLayoutRefusesHostileFiles: a manifest (a staged version/create,
// say) whose fragment names a second data file outside the table's data/
// folder, or under another spelling of a name in it ("./b.lance", "x//b.lance":
// cleanup lists the clean name and would not see it used), or not a Lance
// file, or whose first file is not Lance while its
// columns are out of order, is refused when read, before any file is
// opened; the same fragment with a plain second file is taken.
func TestLanceLayoutRefusesHostileFiles(t *testing.T) {
	fields, err := lschema.FromArrow(arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "w", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil))
	if err != nil {
		t.Fatal(err)
	}
	decode := func(files ...*tablepb.DataFile) error {
		pm := &tablepb.Manifest{Fields: fields, Version: 2,
			DataFormat: &tablepb.Manifest_DataStorageFormat{FileFormat: "lance", Version: "2.1"},
			Fragments:  []*tablepb.DataFragment{{Id: 0, Files: files, PhysicalRows: 3}}}
		b, err := dataset.EncodeManifest(&dataset.ManifestFile{Manifest: pm, Major: dataset.ManifestMajor, Minor: dataset.ManifestMinor})
		if err != nil {
			t.Fatal(err)
		}
		_, err = decodeLance(b)
		return err
	}
	file := func(path string, id int32) *tablepb.DataFile {
		return &tablepb.DataFile{Path: path, Fields: []int32{id}, ColumnIndices: []int32{0}, FileMajorVersion: 2, FileMinorVersion: 1, FileSizeBytes: 100}
	}
	ids := []int32{fields[0].GetId(), fields[1].GetId()}
	if err := decode(file("a.lance", ids[0]), file("b.lance", ids[1])); err != nil {
		t.Fatalf("two plain data files: %v", err)
	}
	for _, second := range []string{"../../other/t.lance/data/b.lance", "/etc/b.lance", "sub/../../b.lance", "b.parquet", "b.lance.json", "./b.lance", "x//b.lance", "x/./b.lance"} {
		if err := decode(file("a.lance", ids[0]), file(second, ids[1])); err == nil {
			t.Errorf("second data file %q was taken", second)
		}
	}
	// Columns out of order in one Parquet file: no layout for it.
	out := &tablepb.DataFile{Path: "a.parquet", Fields: []int32{ids[1], ids[0]}, ColumnIndices: []int32{0, 1}}
	if err := decode(out); err == nil {
		t.Error("a Parquet file with its columns out of order was taken")
	}
}
