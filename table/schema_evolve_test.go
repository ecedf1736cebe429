package table

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/errs"
)

var narrowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int32},
	{Name: "score", Type: arrow.PrimitiveTypes.Float32},
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "tag", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func narrowRows(t testing.TB, schema *arrow.Schema, from, to int) array.RecordReader {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := from; i < to; i++ {
		for k, f := range schema.Fields() {
			switch bb := b.Field(k).(type) {
			case *array.Int32Builder:
				bb.Append(int32(i))
			case *array.Int64Builder:
				bb.Append(int64(i))
			case *array.Float32Builder:
				bb.Append(float32(i) / 2)
			case *array.Float64Builder:
				bb.Append(float64(i) / 2)
			case *array.StringBuilder:
				bb.Append(f.Name + fmt.Sprint(i))
			default:
				t.Fatalf("builder %T", bb)
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	return rdr
}

// dump reads version v (0: latest) as "name:type" header plus rows, as
// DuckDB sees them through Query.
func dump(t testing.TB, tb *Table, v uint64, filter string) (string, []string) {
	t.Helper()
	rdr, err := tb.Query(context.Background(), QueryOptions{Version: v, Filter: filter})
	if err != nil {
		t.Fatal(err)
	}
	var head []string
	for _, f := range rdr.Schema().Fields() {
		head = append(head, f.Name+":"+f.Type.String())
	}
	recs, err := duck.Collect(rdr)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		for i := 0; i < int(r.NumRows()); i++ {
			var cells []string
			for c := 0; c < int(r.NumCols()); c++ {
				cells = append(cells, r.Column(c).ValueStr(i))
			}
			out = append(out, strings.Join(cells, ","))
		}
		r.Release()
	}
	return strings.Join(head, " "), out
}

func strp(s string) *string { return &s }
func boolp(b bool) *bool    { return &b }

// TestSchemaEvolution: rename, widening, nullability, drop and metadata
// each make a version that changes only the manifest; files written
// before and after read under every version's own schema. (In the
// Parquet format: on a Lance table a widening rewrites the files, see
// TestLanceWidenRewrites.)
func TestSchemaEvolution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{MaxRowsPerFragment: 2, Format: FormatParquet})
	if err := c.CreateNamespace(ctx, []string{"ns"}, "", nil); err != nil {
		t.Fatal(err)
	}
	tb, m1, err := c.CreateTable(ctx, []string{"ns", "t"}, narrowSchema, narrowRows(t, narrowSchema, 0, 3), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	files := func(m *Manifest) string {
		var p []string
		for _, f := range m.Fragments {
			p = append(p, f.Path)
		}
		return strings.Join(p, " ")
	}

	// Rename id → key, widen key to int64 and score to float64, make name nullable.
	m2, err := tb.AlterColumns(ctx, []Alteration{
		{Field: "a[0]", Path: "id", Rename: strp("key"), DataType: arrow.PrimitiveTypes.Int64},
		{Field: "a[1]", Path: "score", DataType: arrow.PrimitiveTypes.Float64},
		{Field: "a[2]", Path: "name", Nullable: boolp(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if m2.Version != 2 || m2.Operation != "alter_columns" || files(m2) != files(m1) {
		t.Fatalf("alter: v%d %s, files %q (before %q)", m2.Version, m2.Operation, files(m2), files(m1))
	}
	head, got := dump(t, tb, 0, "key >= 1")
	if head != "key:int64 score:float64 name:utf8 tag:utf8" || strings.Join(got, ";") != "1,0.5,name1,tag1;2,1,name2,tag2" {
		t.Fatalf("after alter: %s %v", head, got)
	}
	// New rows in the new schema sit next to the old files.
	s2, _ := m2.ArrowSchema()
	if _, _, err := tb.Insert(ctx, narrowRows(t, s2, 3, 5), ""); err != nil {
		t.Fatal(err)
	}
	// Drop tag: the data stays in the files, unread.
	m4, err := tb.DropColumns(ctx, []string{"tag"})
	if err != nil {
		t.Fatal(err)
	}
	head, got = dump(t, tb, 0, "")
	if head != "key:int64 score:float64 name:utf8" || strings.Join(got, ";") != "0,0,name0;1,0.5,name1;2,1,name2;3,1.5,name3;4,2,name4" {
		t.Fatalf("after drop: %s %v", head, got)
	}
	if !strings.Contains(string(mustEncode(t, m4)), `"columns":[0,1,2]`) {
		t.Fatalf("drop wrote no column maps: %s", mustEncode(t, m4))
	}
	// Old versions read as they were.
	head, got = dump(t, tb, 1, "")
	if head != "id:int32 score:float32 name:utf8 tag:utf8" || len(got) != 3 || got[2] != "2,1,name2,tag2" {
		t.Fatalf("v1: %s %v", head, got)
	}
	head, got = dump(t, tb, 3, "key = 4")
	if head != "key:int64 score:float64 name:utf8 tag:utf8" || strings.Join(got, ";") != "4,2,name4,tag4" {
		t.Fatalf("v3: %s %v", head, got)
	}
	// Writes after the drop: insert, update (a deletion file on the
	// old-layout file, the new rows in a new-layout one), delete, count,
	// compact.
	s4, _ := m4.ArrowSchema()
	if _, _, err := tb.Insert(ctx, narrowRows(t, s4, 5, 6), ""); err != nil {
		t.Fatal(err)
	}
	if _, n, err := tb.Update(ctx, "key <= 1", [][2]string{{"name", "'z'"}}); err != nil || n != 2 {
		t.Fatalf("update: %d %v", n, err)
	}
	if _, n, err := tb.Delete(ctx, "key = 3"); err != nil || n != 1 {
		t.Fatalf("delete: %d %v", n, err)
	}
	if n, err := tb.CountRows(ctx, 0, "score > 0.4 AND name <> 'z'"); err != nil || n != 3 {
		t.Fatalf("count: %d %v", n, err)
	}
	if _, err := tb.Compact(ctx, CompactOptions{TargetRows: 100}); err != nil {
		t.Fatal(err)
	}
	head, got = dump(t, tb, 0, "")
	sort.Strings(got) // the update moved keys 0 and 1 to the end
	if head != "key:int64 score:float64 name:utf8" || strings.Join(got, ";") != "0,0,z;1,0.5,z;2,1,name2;4,2,name4;5,2.5,name5" {
		t.Fatalf("after writes: %s %v", head, got)
	}

	// Metadata.
	m, fields, err := tb.UpdateFieldMetadata(ctx, []FieldMetadataUpdate{{Field: "u[0]", Path: "key", Metadata: map[string]*string{"unit": strp("count"), "gone": nil}}})
	if err != nil || fields["key"]["unit"] != "count" || len(fields["key"]) != 1 {
		t.Fatalf("field metadata: %v %v", fields, err)
	}
	if _, fields, err = tb.UpdateFieldMetadata(ctx, []FieldMetadataUpdate{{Field: "u[0]", Path: "key", Metadata: map[string]*string{"b": strp("2")}}}); err != nil || len(fields["key"]) != 2 {
		t.Fatalf("merge: %v %v", fields, err)
	}
	if _, fields, err = tb.UpdateFieldMetadata(ctx, []FieldMetadataUpdate{{Field: "u[0]", Path: "key", Metadata: map[string]*string{"c": strp("3")}, Replace: true}}); err != nil || fmt.Sprint(fields["key"]) != "map[c:3]" {
		t.Fatalf("replace: %v %v", fields, err)
	}
	if _, err := tb.UpdateSchemaMetadata(ctx, map[string]string{"owner": "x"}); err != nil {
		t.Fatal(err)
	}
	m, _ = tb.Load(ctx, 0)
	sch, _ := m.ArrowSchema()
	if v, _ := sch.Metadata().GetValue("owner"); v != "owner"[:0]+"x" || fmt.Sprint(sch.Field(0).Metadata.ToMap()) != "map[c:3]" {
		t.Fatalf("metadata: %v / %v", sch.Metadata(), sch.Field(0).Metadata)
	}
	// Inserts with plain (metadata-free) schemas still conform.
	plain := arrow.NewSchema([]arrow.Field{{Name: "key", Type: arrow.PrimitiveTypes.Int64}, {Name: "score", Type: arrow.PrimitiveTypes.Float64}, {Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	if _, _, err := tb.Insert(ctx, narrowRows(t, plain, 6, 7), ""); err != nil {
		t.Fatal(err)
	}
	if n, err := tb.CountRows(ctx, 0, ""); err != nil || n != 6 {
		t.Fatalf("rows: %d %v", n, err)
	}
}

func mustEncode(t testing.TB, m *Manifest) []byte {
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSchemaEvolutionErrors: every refusal is a coded error naming the
// entry and column, and makes no version.
func TestSchemaEvolutionErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	if err := c.CreateNamespace(ctx, []string{"ns"}, "", nil); err != nil {
		t.Fatal(err)
	}
	tb, _, err := c.CreateTable(ctx, []string{"ns", "t"}, narrowSchema, narrowRows(t, narrowSchema, 0, 3), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		err  error
		code errs.Code
		want string
	}{}
	add := func(name string, code errs.Code, want string, err error) {
		cases = append(cases, struct {
			name string
			err  error
			code errs.Code
			want string
		}{name, err, code, want})
	}
	alter := func(a ...Alteration) error {
		for i := range a {
			a[i].Field = fmt.Sprintf("alterations[%d]", i)
		}
		_, err := tb.AlterColumns(ctx, a)
		return err
	}
	add("narrowing", errs.CodeInvalidInput, `alterations[0].data_type: column "id" cannot change from int32 to int16`, alter(Alteration{Path: "id", DataType: arrow.PrimitiveTypes.Int16}))
	add("unrelated type", errs.CodeInvalidInput, `column "name" cannot change from utf8 to int64`, alter(Alteration{Path: "name", DataType: arrow.PrimitiveTypes.Int64}))
	add("float to int", errs.CodeInvalidInput, `column "score"`, alter(Alteration{Path: "score", DataType: arrow.PrimitiveTypes.Int64}))
	add("missing column", errs.CodeTableColumnNotFound, `alterations[0].path: column "nope" not found`, alter(Alteration{Path: "nope", Rename: strp("x")}))
	add("rename onto existing", errs.CodeInvalidInput, `"name" and "NAME"`, alter(Alteration{Path: "tag", Rename: strp("NAME")}))
	add("non-nullable", errs.CodeInvalidInput, `alterations[0].nullable: column "tag" is nullable`, alter(Alteration{Path: "tag", Nullable: boolp(false)}))
	add("nothing", errs.CodeInvalidInput, `alterations[0]: nothing to alter`, alter(Alteration{Path: "tag"}))
	add("twice", errs.CodeInvalidInput, `alterations[1].path: column "tag" is already altered`, alter(Alteration{Path: "tag", Rename: strp("a")}, Alteration{Path: "tag", Nullable: boolp(true)}))
	add("empty name", errs.CodeInvalidInput, `alterations[0].rename`, alter(Alteration{Path: "tag", Rename: strp(" ")}))
	add("reserved name", errs.CodeInvalidInput, `reserved`, alter(Alteration{Path: "tag", Rename: strp(RowAddrColumn)}))
	add("no alterations", errs.CodeInvalidInput, "alterations: at least one", alter())
	_, err = tb.DropColumns(ctx, []string{"id", "score", "name", "tag"})
	add("drop all", errs.CodeInvalidInput, "at least one column", err)
	_, err = tb.DropColumns(ctx, []string{"tag", "tag"})
	add("drop twice", errs.CodeInvalidInput, `columns[1]: column "tag" is listed twice`, err)
	_, err = tb.DropColumns(ctx, []string{"nope"})
	add("drop missing", errs.CodeTableColumnNotFound, `columns[0]: column "nope" not found`, err)
	_, err = tb.DropColumns(ctx, nil)
	add("drop none", errs.CodeInvalidInput, "columns: at least one", err)
	_, _, err = tb.UpdateFieldMetadata(ctx, []FieldMetadataUpdate{{Field: "updates[0]", Path: "id", Metadata: map[string]*string{"PARQUET:field_id": strp("1")}}})
	add("reserved key", errs.CodeInvalidInput, `updates[0].metadata: key "PARQUET:field_id" is reserved`, err)
	_, _, err = tb.UpdateFieldMetadata(ctx, []FieldMetadataUpdate{{Field: "updates[0]", Path: "nope", Metadata: map[string]*string{}}})
	add("metadata of missing", errs.CodeTableColumnNotFound, `updates[0].path: column "nope" not found`, err)
	_, err = tb.UpdateSchemaMetadata(ctx, map[string]string{"ARROW:schema": "x"})
	add("reserved schema key", errs.CodeInvalidInput, `"ARROW:schema" is reserved`, err)
	for _, cs := range cases {
		if errs.CodeOf(cs.err) != cs.code || !strings.Contains(cs.err.Error(), cs.want) {
			t.Errorf("%s: %v (code %d), want code %d and %q", cs.name, cs.err, errs.CodeOf(cs.err), cs.code, cs.want)
		}
	}
	if vs, _ := tb.Versions(ctx); len(vs) != 1 {
		t.Fatalf("refusals made versions: %d", len(vs))
	}
}

// TestAlterVsInsert: an insert that wrote its files before a concurrent
// drop_columns committed is refused with a 409 (its files have the old
// layout); one racing a rename or widening is refused too (AppendOp
// checks the schema it wrote under), and nothing is lost: every insert
// that answered success is in the table, and every alter committed.
func TestAlterVsInsert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	if err := c.CreateNamespace(ctx, []string{"ns"}, "", nil); err != nil {
		t.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "a", Type: arrow.BinaryTypes.String},
		{Name: "b", Type: arrow.BinaryTypes.String},
		{Name: "c", Type: arrow.BinaryTypes.String},
	}, nil)
	tb, _, err := c.CreateTable(ctx, []string{"ns", "t"}, schema, narrowRows(t, schema, 0, 1), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	// A writer that wrote under the old schema, then commits after a drop.
	stale, err := tb.WriteFile(ctx, schema, func() []arrow.RecordBatch {
		r := narrowRows(t, schema, 100, 101)
		defer r.Release()
		r.Next()
		rec := r.RecordBatch()
		rec.Retain()
		return []arrow.RecordBatch{rec}
	}())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.DropColumns(ctx, []string{"b"}); err != nil {
		t.Fatal(err)
	}
	_, err = tb.Commit(ctx, RewriteOp("update", []Replacement{{Old: 0, New: &stale}}))
	if !IsConflict(err) || !strings.Contains(err.Error(), "columns changed in a concurrent commit") {
		t.Fatalf("stale rewrite after drop: %v", err)
	}

	// Racing inserts and alters: no lost write.
	var mu sync.Mutex
	var inserted []int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for k := 0; k < 6; k++ {
				id := 1000 + w*100 + k
				for {
					m, _ := tb.Load(ctx, 0)
					s, _ := m.ArrowSchema()
					_, _, err := tb.Insert(ctx, narrowRows(t, s, id, id+1), "")
					if err == nil {
						mu.Lock()
						inserted = append(inserted, int64(id))
						mu.Unlock()
						break
					}
					var te *errs.Error
					if !errors.As(err, &te) || (te.Code != errs.CodeConcurrentModification && te.Code != errs.CodeSchemaValidation) {
						t.Errorf("insert %d: %v", id, err)
						return
					}
				}
			}
		}(w)
	}
	alters := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := 0; k < 6; k++ {
			var err error
			if k%2 == 0 {
				_, err = tb.AlterColumns(ctx, []Alteration{{Field: "a", Path: []string{"a", "a2"}[k/2%2], Rename: strp([]string{"a2", "a"}[k/2%2])}})
			} else {
				_, err = tb.UpdateSchemaMetadata(ctx, map[string]string{"k": fmt.Sprint(k)})
			}
			if err != nil {
				t.Errorf("alter %d: %v", k, err)
				return
			}
			alters++
		}
	}()
	wg.Wait()
	if alters != 6 {
		t.Fatalf("alters committed: %d", alters)
	}
	rdr, err := tb.Query(ctx, QueryOptions{Columns: []string{"id"}, Filter: "id >= 1000"})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := duck.Collect(rdr)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]bool{}
	for _, r := range recs {
		for _, v := range r.Column(0).(*array.Int64).Int64Values() {
			if got[v] {
				t.Fatalf("id %d twice", v)
			}
			got[v] = true
		}
		r.Release()
	}
	if len(got) != len(inserted) || len(inserted) != 24 {
		t.Fatalf("table has %d of %d inserted rows", len(got), len(inserted))
	}
	for _, id := range inserted {
		if !got[id] {
			t.Fatalf("insert of %d answered success but is not in the table", id)
		}
	}
}
