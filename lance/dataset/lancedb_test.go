package dataset

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
	"github.com/mvq-dev/mvq/lance/pb/filepb"
	"github.com/mvq-dev/mvq/lance/pb/tablepb"
)

// batch is n rows: id = start.., s = "s{id}", v = [id, id+.25, id+.5, id+.75].
func batch(t testing.TB, start, n int) arrow.RecordBatch {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "v", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	vb := b.Field(2).(*array.FixedSizeListBuilder)
	fb := vb.ValueBuilder().(*array.Float32Builder)
	for i := start; i < start+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("s%d", i))
		vb.Append(true)
		for k := 0; k < 4; k++ {
			fb.Append(float32(i) + float32(k)/4)
		}
	}
	return b.NewRecordBatch()
}

// int64s returns the named int64 column of tbl.
func int64s(t testing.TB, tbl arrow.Table, name string) []int64 {
	t.Helper()
	idx := tbl.Schema().FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("no column %s in %v", name, tbl.Schema())
	}
	var out []int64
	for _, c := range tbl.Column(idx[0]).Data().Chunks() {
		switch a := c.(type) {
		case *array.Int64:
			out = append(out, a.Int64Values()...)
		case *array.Uint64:
			for _, v := range a.Uint64Values() {
				out = append(out, int64(v))
			}
		default:
			t.Fatalf("column %s is %T", name, c)
		}
	}
	return out
}

func newDir(t testing.TB) string { return filepath.Join(t.TempDir(), "t.lance") }

func write(t testing.TB, o *oracle.Oracle, dir string, start, n int, version, mode string) {
	t.Helper()
	rec := batch(t, start, n)
	defer rec.Release()
	o.Write(t, dir, rec, version, mode)
}

// liveRowAddresses is what the Go side says the live rows of version v are:
// fragment id << 32 | offset for every offset not deleted.
func liveRowAddresses(t testing.TB, d *Dataset) []int64 {
	t.Helper()
	var out []int64
	for _, fr := range d.Fragments() {
		del, err := d.DeletedRows(fr)
		if err != nil {
			t.Fatal(err)
		}
		for off := uint64(0); off < fr.GetPhysicalRows(); off++ {
			if !del.Contains(uint32(off)) {
				out = append(out, int64(fr.GetId()<<32|off))
			}
		}
	}
	return out
}

func sorted(x []int64) []int64 {
	x = slices.Clone(x)
	slices.Sort(x)
	return x
}

// checkAgainstLanceDB compares every version of dir as the Go side reads it
// with LanceDB's view: version list, live row count and the exact live row
// addresses (LanceDB's _rowid is the row address without stable row ids).
func checkAgainstLanceDB(t *testing.T, o *oracle.Oracle, dir string) []*Dataset {
	t.Helper()
	vs, err := ListVersions(dir)
	if err != nil {
		t.Fatal(err)
	}
	ovs := o.Versions(t, dir)
	if len(vs) != len(ovs) {
		t.Fatalf("Go lists %d versions, LanceDB %d", len(vs), len(ovs))
	}
	var out []*Dataset
	for i, vf := range vs {
		if vf.Version != ovs[i].Version {
			t.Fatalf("version %d: Go %d, LanceDB %d", i, vf.Version, ovs[i].Version)
		}
		d, err := OpenVersion(dir, vf.Version)
		if err != nil {
			t.Fatal(err)
		}
		n, err := d.CountRows()
		if err != nil {
			t.Fatal(err)
		}
		if want := o.CountAt(t, dir, "", vf.Version); int64(n) != want {
			t.Errorf("version %d: Go counts %d rows, LanceDB %d", vf.Version, n, want)
		}
		if md := ovs[i].Metadata; md["total_rows"] != fmt.Sprint(n) {
			t.Errorf("version %d: LanceDB metadata total_rows %s, Go %d", vf.Version, md["total_rows"], n)
		}
		tbl := o.Read(t, dir, oracle.ReadOpts{At: vf.Version, RowID: true})
		got, want := sorted(liveRowAddresses(t, d)), sorted(int64s(t, tbl, "_rowid"))
		sc, err := d.Schema()
		if err != nil {
			t.Fatal(err)
		}
		lf := tbl.Schema().Fields()
		lf = lf[:len(lf)-1] // _rowid
		if len(lf) != sc.NumFields() {
			t.Errorf("version %d: Go schema %v, LanceDB %v", vf.Version, sc, tbl.Schema())
		} else {
			for k, f := range lf {
				g := sc.Field(k)
				if f.Name != g.Name || !arrow.TypeEqual(f.Type, g.Type) || f.Nullable != g.Nullable {
					t.Errorf("version %d: Go field %v, LanceDB %v", vf.Version, g, f)
				}
			}
		}
		tbl.Release()
		if !slices.Equal(got, want) {
			t.Errorf("version %d: live row addresses differ:\n Go      %v\n LanceDB %v", vf.Version, got, want)
		}
		out = append(out, d)
	}
	return out
}

func opName(t *testing.T, d *Dataset) string {
	t.Helper()
	txn, err := d.Transaction()
	if err != nil {
		t.Fatal(err)
	}
	if txn == nil {
		return ""
	}
	// The inline section and the _transactions file hold the same message.
	if name := d.Manifest().GetTransactionFile(); name != "" {
		f, err := ReadTransactionFile(d.Dir, name)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(f, txn) {
			t.Errorf("version %d: transaction file and inline section differ", d.Version())
		}
		if name != TransactionFileName(txn) {
			t.Errorf("version %d: transaction file %s, want %s", d.Version(), name, TransactionFileName(txn))
		}
	}
	return OperationName(txn)
}

// TestReadLanceDBHistory has LanceDB write, append, delete (an Arrow and a
// bitmap deletion file), update, add and drop columns; the Go side must list
// the same versions and read each manifest, its fragments, deletion vectors
// and transaction as LanceDB's own state says.
func TestReadLanceDBHistory(t *testing.T) {
	o := oracle.Need(t)
	for _, sv := range []string{"2.0", "2.1"} {
		t.Run(sv, func(t *testing.T) {
			dir := newDir(t)
			write(t, o, dir, 0, 100, sv, "create")                         // v1
			write(t, o, dir, 100, 6000, sv, "append")                      // v2
			o.Delete(t, dir, "id % 10 = 3")                                // v3: arrow files
			o.Delete(t, dir, "id >= 200 AND id < 5900")                    // v4: a bitmap for fragment 1
			o.Update(t, dir, "id = 50", map[string]string{"s": "'fifty'"}) // v5
			o.AddColumns(t, dir, map[string]string{"w": "id * 2"})         // v6
			o.DropColumns(t, dir, "s")                                     // v7

			ds := checkAgainstLanceDB(t, o, dir)
			if len(ds) != 7 {
				t.Fatalf("%d versions", len(ds))
			}
			var ops []string
			for _, d := range ds {
				ops = append(ops, opName(t, d))
			}
			want := []string{"overwrite", "append", "delete", "delete", "update", "merge", "project"}
			if !slices.Equal(ops, want) {
				t.Errorf("operations %v, want %v", ops, want)
			}
			if ds[0].File.Scheme != SchemeV2 {
				t.Errorf("scheme %v", ds[0].File.Scheme)
			}
			if got := ds[0].StorageVersion(); got != sv {
				t.Errorf("storage version %q, want %q", got, sv)
			}
			// Deletion file kinds: v3 all Arrow, v4 fragment 1 a bitmap.
			kinds := func(d *Dataset) map[uint64]tablepb.DeletionFile_DeletionFileType {
				out := map[uint64]tablepb.DeletionFile_DeletionFileType{}
				for _, fr := range d.Fragments() {
					if del := fr.GetDeletionFile(); del != nil {
						out[fr.GetId()] = del.GetFileType()
					}
				}
				return out
			}
			if k := kinds(ds[2]); len(k) != 2 || k[0] != tablepb.DeletionFile_ARROW_ARRAY || k[1] != tablepb.DeletionFile_ARROW_ARRAY {
				t.Errorf("v3 deletion files %v", k)
			}
			if k := kinds(ds[3]); k[1] != tablepb.DeletionFile_BITMAP {
				t.Errorf("v4 deletion files %v", k)
			}
			for _, d := range ds[2:] {
				if d.Manifest().GetReaderFeatureFlags()&FlagDeletionFiles == 0 {
					t.Errorf("version %d lacks the deletion files flag", d.Version())
				}
			}
			// v6: every fragment has a second data file holding w.
			fields := map[string]int32{}
			for _, f := range ds[5].Manifest().GetFields() {
				fields[f.GetName()] = f.GetId()
			}
			for _, fr := range ds[5].Fragments() {
				if len(fr.GetFiles()) != 2 || !slices.Equal(fr.GetFiles()[1].GetFields(), []int32{fields["w"]}) {
					t.Errorf("v6 fragment %d files %v", fr.GetId(), fr.GetFiles())
				}
				for _, df := range fr.GetFiles() {
					p, err := ds[5].DataFilePath(df)
					if err != nil {
						t.Fatal(err)
					}
					if st, err := os.Stat(p); err != nil || uint64(st.Size()) != df.GetFileSizeBytes() && df.GetFileSizeBytes() != 0 {
						t.Errorf("data file %s: %v (size %d)", p, err, df.GetFileSizeBytes())
					}
				}
			}
			// v7: s is gone from the schema.
			for _, f := range ds[6].Manifest().GetFields() {
				if f.GetName() == "s" {
					t.Errorf("v7 still has s")
				}
			}
			t.Logf("LanceDB %s: %d fragments at v7, flags r%d w%d, writer %v", sv, len(ds[6].Fragments()),
				ds[6].Manifest().GetReaderFeatureFlags(), ds[6].Manifest().GetWriterFeatureFlags(), ds[6].Manifest().GetWriterVersion())
		})
	}
}

// goDelete deletes, through the Go side only, the rows of the latest version
// whose offsets pick selects, per fragment.
func goDelete(t *testing.T, dir string, pick func(fragID, off uint64) bool) *Dataset {
	t.Helper()
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[uint64]*roaring.Bitmap{}
	for _, fr := range d.Fragments() {
		for off := uint64(0); off < fr.GetPhysicalRows(); off++ {
			if pick(fr.GetId(), off) {
				if rows[fr.GetId()] == nil {
					rows[fr.GetId()] = roaring.New()
				}
				rows[fr.GetId()].Add(uint32(off))
			}
		}
	}
	nd, err := d.DeleteRows(rows, "go delete", CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nd == d {
		t.Fatal("nothing deleted")
	}
	return nd
}

// TestGoDeleteLanceDBReads: the Go side deletes rows of a LanceDB dataset
// (an Arrow deletion file and a bitmap one); LanceDB counts and reads the
// result, then appends, deletes and updates on top of the Go version.
func TestGoDeleteLanceDBReads(t *testing.T) {
	o := oracle.Need(t)
	dir := newDir(t)
	write(t, o, dir, 0, 100, "", "create")
	write(t, o, dir, 100, 6000, "", "append")
	// Rows were written in id order: fragment 0 offset k is id k, fragment
	// 1 offset k is id 100+k.
	d := goDelete(t, dir, func(frag, off uint64) bool {
		if frag == 0 {
			return off%3 == 0
		}
		return off < 5500
	})
	if d.Version() != 3 {
		t.Fatalf("Go committed version %d", d.Version())
	}
	kinds := []tablepb.DeletionFile_DeletionFileType{}
	for _, fr := range d.Fragments() {
		kinds = append(kinds, fr.GetDeletionFile().GetFileType())
	}
	if !slices.Equal(kinds, []tablepb.DeletionFile_DeletionFileType{tablepb.DeletionFile_ARROW_ARRAY, tablepb.DeletionFile_BITMAP}) {
		t.Errorf("deletion kinds %v", kinds)
	}
	want := int64(100 - 34 + 500)
	if n := o.Count(t, dir, ""); n != want {
		t.Fatalf("LanceDB counts %d rows after the Go delete, want %d", n, want)
	}
	if n := o.Count(t, dir, "id % 3 = 0 AND id < 100"); n != 0 {
		t.Errorf("LanceDB still sees %d deleted rows", n)
	}
	tbl := o.Read(t, dir, oracle.ReadOpts{Columns: []string{"id"}})
	ids := sorted(int64s(t, tbl, "id"))
	tbl.Release()
	if int64(len(ids)) != want || ids[0] != 1 || ids[len(ids)-1] != 6099 || slices.Contains(ids, 5599) || !slices.Contains(ids, 5600) {
		t.Errorf("LanceDB reads %d ids, first %d last %d", len(ids), ids[0], ids[len(ids)-1])
	}
	// LanceDB builds on the Go version: append, delete (merging its
	// deletions with the Go deletion files), update.
	write(t, o, dir, 10000, 10, "", "append")
	o.Delete(t, dir, "id = 1 OR id = 5600")
	o.Update(t, dir, "id = 2", map[string]string{"s": "'two'"})
	want += 10 - 2
	if n := o.Count(t, dir, ""); n != want {
		t.Errorf("LanceDB counts %d after its own changes on the Go version, want %d", n, want)
	}
	checkAgainstLanceDB(t, o, dir)
	// And the Go side deletes again on top of LanceDB's versions.
	goDelete(t, dir, func(frag, off uint64) bool { return frag == 0 && off == 4 })
	if n := o.Count(t, dir, ""); n != want-1 {
		t.Errorf("LanceDB counts %d after the second Go delete, want %d", n, want-1)
	}
	if n := o.Count(t, dir, "id = 4"); n != 0 {
		t.Errorf("id 4 still there")
	}
}

// copyFile copies a data file LanceDB wrote into another dataset.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGoAppendAndCreate: the Go side appends to a LanceDB dataset a
// fragment whose data file LanceDB wrote for another dataset, and creates a
// new dataset from such files; LanceDB opens both, counts, filters, reads
// and appends on top.
func TestGoAppendAndCreate(t *testing.T) {
	o := oracle.Need(t)
	for _, sv := range []string{"2.0", "2.1"} {
		t.Run(sv, func(t *testing.T) {
			src, dst := newDir(t), newDir(t)
			write(t, o, src, 1000, 50, sv, "create")
			write(t, o, dst, 0, 20, sv, "create")
			s, err := Open(src)
			if err != nil {
				t.Fatal(err)
			}
			var frags []*tablepb.DataFragment
			for _, fr := range s.Fragments() {
				fr = proto.Clone(fr).(*tablepb.DataFragment)
				for _, df := range fr.GetFiles() {
					p, err := s.DataFilePath(df)
					if err != nil {
						t.Fatal(err)
					}
					copyFile(t, p, filepath.Join(dst, DataDir, df.GetPath()))
				}
				frags = append(frags, fr)
			}
			d, err := Open(dst)
			if err != nil {
				t.Fatal(err)
			}
			nd, err := Commit(dst, d, Append(d.Version(), frags), CommitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if nd.Version() != 2 || nd.Fragments()[1].GetId() != 1 || nd.Manifest().GetMaxFragmentId() != 1 {
				t.Errorf("Go append: version %d, fragments %v", nd.Version(), nd.Fragments())
			}
			if n := o.Count(t, dst, ""); n != 70 {
				t.Errorf("LanceDB counts %d after the Go append, want 70", n)
			}
			if n := o.Count(t, dst, "id >= 1000"); n != 50 {
				t.Errorf("LanceDB filters %d appended rows, want 50", n)
			}
			res := o.Search(t, dst, oracle.SearchOpts{Column: "v", Vector: []float32{1010, 1010.25, 1010.5, 1010.75}, K: 1, Columns: []string{"id"}})
			if ids := int64s(t, res, "id"); len(ids) != 1 || ids[0] != 1010 {
				t.Errorf("LanceDB search finds %v, want [1010]", ids)
			}
			res.Release()
			write(t, o, dst, 5000, 5, "", "append")
			if n := o.Count(t, dst, ""); n != 75 {
				t.Errorf("LanceDB counts %d after appending on the Go version, want 75", n)
			}

			// A new dataset made by the Go side alone from src's files.
			nw := newDir(t)
			for _, fr := range frags {
				for _, df := range fr.GetFiles() {
					copyFile(t, filepath.Join(src, DataDir, df.GetPath()), filepath.Join(nw, DataDir, df.GetPath()))
				}
			}
			cd, err := Commit(nw, nil, Overwrite(0, s.Manifest().GetFields(), s.Manifest().GetSchemaMetadata(), frags, nil), CommitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if cd.Version() != 1 || cd.StorageVersion() != sv {
				t.Errorf("Go create: version %d, storage %s", cd.Version(), cd.StorageVersion())
			}
			want := o.Read(t, src, oracle.ReadOpts{})
			got := o.Read(t, nw, oracle.ReadOpts{})
			if !array.TableEqual(want, got) {
				t.Errorf("LanceDB reads the Go-made dataset differently:\n%v\n%v", got, want)
			}
			want.Release()
			got.Release()
			write(t, o, nw, 7000, 3, "", "append")
			o.Delete(t, nw, "id = 1001")
			if n := o.Count(t, nw, ""); n != 52 {
				t.Errorf("LanceDB counts %d on the Go-made dataset after its changes, want 52", n)
			}
			checkAgainstLanceDB(t, o, nw)
		})
	}
}

// TestRebase: LanceDB opens version N for an append, the Go side commits
// N+1 meanwhile, and LanceDB's append must rebase on it (reading the Go
// transaction); then the reverse, the Go side losing the race to LanceDB.
func TestRebase(t *testing.T) {
	o := oracle.Need(t)
	dir := newDir(t)
	write(t, o, dir, 0, 30, "", "create")
	rec := batch(t, 100, 10)
	defer rec.Release()
	h := o.StartAppend(t, dir, rec)
	if h.Version != 1 {
		t.Fatalf("LanceDB opened version %d", h.Version)
	}
	goDelete(t, dir, func(frag, off uint64) bool { return off < 5 }) // v2
	if err := h.Finish(); err != nil {
		t.Fatal(err)
	}
	if n := o.Count(t, dir, ""); n != 35 {
		t.Errorf("after the rebase LanceDB counts %d, want 35", n)
	}
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	txn, err := d.Transaction()
	if err != nil {
		t.Fatal(err)
	}
	if d.Version() != 3 || txn.GetReadVersion() != 1 || OperationName(txn) != "append" {
		t.Errorf("LanceDB's append: version %d, read version %d, %s", d.Version(), txn.GetReadVersion(), OperationName(txn))
	}
	if d.Fragments()[0].GetDeletionFile() == nil {
		t.Errorf("the Go deletion file was lost in the rebase")
	}

	// The Go side appends against v3 after LanceDB has made v4.
	base := d
	write(t, o, dir, 200, 4, "", "append") // v4
	other := newDir(t)
	write(t, o, other, 300, 6, "", "create")
	od, err := Open(other)
	if err != nil {
		t.Fatal(err)
	}
	fr := od.Fragments()[0]
	copyFile(t, filepath.Join(other, DataDir, fr.GetFiles()[0].GetPath()), filepath.Join(dir, DataDir, fr.GetFiles()[0].GetPath()))
	nd, err := Commit(dir, base, Append(base.Version(), []*tablepb.DataFragment{fr}), CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nd.Version() != 5 {
		t.Errorf("the Go append landed as version %d, want 5", nd.Version())
	}
	if n := o.Count(t, dir, ""); n != 45 {
		t.Errorf("LanceDB counts %d, want 45", n)
	}
	// A Go delete of fragment 0 made against v3 is rebuilt on v5: the
	// appends in between did not touch it.
	rd, err := Commit(dir, base, Delete(base.Version(), nil, []uint64{0}, ""), CommitOptions{})
	if err != nil {
		t.Fatalf("delete across two appends: %v", err)
	}
	if rd.Version() != 6 {
		t.Errorf("the rebuilt delete landed as version %d, want 6", rd.Version())
	}
	if n := o.Count(t, dir, ""); n != 45-25 {
		t.Errorf("LanceDB counts %d after the rebuilt delete, want 20", n)
	}
	checkAgainstLanceDB(t, o, dir)
}

// TestGoProjectAndMerge: the Go side drops a column (Project) and adds one
// from a data file LanceDB wrote in another dataset (Merge, a fragment with
// two data files, one column of the second absent); LanceDB reads both.
func TestGoProjectAndMerge(t *testing.T) {
	o := oracle.Need(t)
	dir := newDir(t)
	write(t, o, dir, 0, 40, "", "create")
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Project: drop s.
	var keep = d.Manifest().GetFields()[:0:0]
	for _, f := range d.Manifest().GetFields() {
		if f.GetName() != "s" {
			keep = append(keep, f)
		}
	}
	pd, err := Commit(dir, d, Project(d.Version(), keep), CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tbl := o.Read(t, dir, oracle.ReadOpts{})
	names := []string{}
	for _, f := range tbl.Schema().Fields() {
		names = append(names, f.Name)
	}
	tbl.Release()
	if !slices.Equal(names, []string{"id", "v"}) {
		t.Errorf("LanceDB columns after the Go project: %v", names)
	}

	// Merge: the other dataset has the same 40 rows in order with columns
	// (id, s); its file joins each fragment with id absent and s as a new
	// field "s2".
	other := newDir(t)
	write(t, o, other, 0, 40, "", "create")
	od, err := Open(other)
	if err != nil {
		t.Fatal(err)
	}
	ofr := od.Fragments()[0]
	if len(od.Fragments()) != 1 || len(pd.Fragments()) != 1 {
		t.Fatalf("fragments: %d and %d", len(od.Fragments()), len(pd.Fragments()))
	}
	odf := ofr.GetFiles()[0]
	copyFile(t, filepath.Join(other, DataDir, odf.GetPath()), filepath.Join(dir, DataDir, odf.GetPath()))
	var sID int32 = -1
	var maxID int32
	var s2 *filepb.Field
	for _, f := range od.Manifest().GetFields() {
		if f.GetName() == "s" {
			sID = f.GetId()
			s2 = proto.Clone(f).(*filepb.Field)
		}
	}
	for _, f := range pd.Manifest().GetFields() {
		maxID = max(maxID, f.GetId())
	}
	s2.Name, s2.Id = "s2", maxID+1
	odf = proto.Clone(odf).(*tablepb.DataFile)
	for i, f := range odf.Fields {
		if f == sID {
			odf.Fields[i] = s2.Id
		} else {
			odf.Fields[i] = FieldAbsent
		}
	}
	mfr := proto.Clone(pd.Fragments()[0]).(*tablepb.DataFragment)
	mfr.Files = append(mfr.Files, odf)
	schema := append(slices.Clone(pd.Manifest().GetFields()), s2)
	md, err := Commit(dir, pd, Merge(pd.Version(), schema, nil, []*tablepb.DataFragment{mfr}), CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if md.Version() != 3 || len(md.Fragments()[0].GetFiles()) != 2 {
		t.Errorf("Go merge: version %d, files %v", md.Version(), md.Fragments()[0].GetFiles())
	}
	tbl = o.Read(t, dir, oracle.ReadOpts{Columns: []string{"id", "s2"}, Where: "id = 7"})
	defer tbl.Release()
	if tbl.NumRows() != 1 || tbl.Column(1).Data().Chunk(0).(*array.String).Value(0) != "s7" {
		t.Errorf("LanceDB reads the merged column: %v", tbl)
	}
	if n := o.Count(t, dir, "s2 = 's39'"); n != 1 {
		t.Errorf("LanceDB filters the merged column: %d", n)
	}
	checkAgainstLanceDB(t, o, dir)
}

// TestV1Names: a dataset LanceDB writes with V1 manifest names
// (`{v}.manifest`) reads the same, and Go commits keep V1 names.
func TestV1Names(t *testing.T) {
	o := oracle.Need(t)
	dir := newDir(t)
	rec := batch(t, 0, 30)
	defer rec.Release()
	o.WriteWith(t, dir, rec, oracle.WriteOpts{Options: map[string]string{"new_table_enable_v2_manifest_paths": "false"}})
	write(t, o, dir, 30, 10, "", "append")
	d := goDelete(t, dir, func(frag, off uint64) bool { return frag == 1 && off%2 == 0 })
	if d.File.Scheme != SchemeV1 || filepath.Base(d.File.Path) != "3.manifest" {
		t.Errorf("Go commit on a V1 dataset: %s (%v)", d.File.Path, d.File.Scheme)
	}
	o.Delete(t, dir, "id = 0")
	if n := o.Count(t, dir, ""); n != 34 {
		t.Errorf("LanceDB counts %d, want 34", n)
	}
	for _, vf := range checkAgainstLanceDB(t, o, dir) {
		if vf.File.Scheme != SchemeV1 {
			t.Errorf("version %d named %s", vf.Version(), vf.File.Path)
		}
	}
	if v, ok, err := ReadHint(dir); err != nil || !ok || v != 4 {
		t.Errorf("hint: %d %v %v", v, ok, err)
	}
}

// TestStableRowIDs: a dataset with stable row ids reads (its reader flag is
// known) but the Go side refuses to commit on it, naming the feature.
func TestStableRowIDs(t *testing.T) {
	o := oracle.Need(t)
	dir := newDir(t)
	rec := batch(t, 0, 30)
	defer rec.Release()
	o.WriteWith(t, dir, rec, oracle.WriteOpts{Options: map[string]string{"new_table_enable_stable_row_ids": "true"}})
	o.Delete(t, dir, "id < 3")
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d.Manifest().GetReaderFeatureFlags()&FlagStableRowIDs == 0 {
		t.Fatalf("flags %d", d.Manifest().GetReaderFeatureFlags())
	}
	if n, err := d.CountRows(); err != nil || n != 27 {
		t.Errorf("count %d %v", n, err)
	}
	_, err = Commit(dir, d, Delete(d.Version(), nil, []uint64{0}, ""), CommitOptions{})
	var ue *UnsupportedFeatureError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "stable row ids") {
		t.Errorf("commit on stable row ids: %v", err)
	}
}

// TestIndexSurvivesGoCommits: LanceDB indexes a column; Go deletes and
// appends carry the index section over (unknown IndexMetadata fields
// included), LanceDB's filtered counts stay right, and LanceDB keeps the
// index when it commits on top of the Go versions.
func TestIndexSurvivesGoCommits(t *testing.T) {
	o := oracle.Need(t)
	dir := newDir(t)
	write(t, o, dir, 0, 300, "", "create")
	o.CreateIndex(t, dir, "id", "btree") // v2
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d.Indices == nil || len(d.Indices.GetIndices()) != 1 {
		t.Fatalf("LanceDB's index section: %v", d.Indices)
	}
	ix := d.Indices.GetIndices()[0]
	t.Logf("index %q on fields %v, %d unknown bytes", ix.GetName(), ix.GetFields(), len(ix.ProtoReflect().GetUnknown()))
	d = goDelete(t, dir, func(frag, off uint64) bool { return off%2 == 0 }) // v3
	if d.Indices == nil || !proto.Equal(d.Indices.GetIndices()[0], ix) {
		t.Fatalf("the Go delete lost the index: %v", d.Indices)
	}
	for where, want := range map[string]int64{"id = 4": 0, "id = 5": 1, "id < 100": 50, "id >= 250": 25} {
		if n := o.Count(t, dir, where); n != want {
			t.Errorf("after the Go delete, LanceDB counts %d rows where %s, want %d", n, where, want)
		}
	}
	other := newDir(t)
	write(t, o, other, 1000, 10, "", "create")
	od, err := Open(other)
	if err != nil {
		t.Fatal(err)
	}
	fr := od.Fragments()[0]
	copyFile(t, filepath.Join(other, DataDir, fr.GetFiles()[0].GetPath()), filepath.Join(dir, DataDir, fr.GetFiles()[0].GetPath()))
	if _, err := Commit(dir, d, Append(d.Version(), []*tablepb.DataFragment{fr}), CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := o.Count(t, dir, "id >= 1000 OR id = 7"); n != 11 {
		t.Errorf("LanceDB counts %d indexed and unindexed rows, want 11", n)
	}
	o.Delete(t, dir, "id = 7")
	last, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if last.Indices == nil || len(last.Indices.GetIndices()) != 1 || last.Indices.GetIndices()[0].GetName() != ix.GetName() {
		t.Errorf("LanceDB dropped the index on top of the Go versions: %v", last.Indices)
	}
	checkAgainstLanceDB(t, o, dir)
}

// TestGoUpdateAndOverwrite: the Go side updates a row the way LanceDB does
// (delete it in its fragment, add the new row as a new fragment; the new
// row's data file comes from a dataset LanceDB wrote), then overwrites the
// dataset; LanceDB reads each version, and updates on top.
func TestGoUpdateAndOverwrite(t *testing.T) {
	o := oracle.Need(t)
	dir := newDir(t)
	write(t, o, dir, 0, 40, "", "create")
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The new row: id 7 with s "s7000" (LanceDB writes it elsewhere).
	other := newDir(t)
	write(t, o, other, 7000, 1, "", "create")
	od, err := Open(other)
	if err != nil {
		t.Fatal(err)
	}
	nf := od.Fragments()[0]
	copyFile(t, filepath.Join(other, DataDir, nf.GetFiles()[0].GetPath()), filepath.Join(dir, DataDir, nf.GetFiles()[0].GetPath()))
	fr := proto.Clone(d.Fragments()[0]).(*tablepb.DataFragment)
	del, err := WriteDeletionFile(dir, fr.GetId(), d.Version(), roaring.BitmapOf(7))
	if err != nil {
		t.Fatal(err)
	}
	fr.DeletionFile = del
	var sID uint32
	for _, f := range d.Manifest().GetFields() {
		if f.GetName() == "s" {
			sID = uint32(f.GetId())
		}
	}
	ud, err := Commit(dir, d, Update(d.Version(), nil, []*tablepb.DataFragment{fr}, []*tablepb.DataFragment{nf}, []uint32{sID}), CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ids := []uint64{ud.Fragments()[0].GetId(), ud.Fragments()[1].GetId()}; ids[1] != 1 {
		t.Errorf("Go update fragments %v", ids)
	}
	if n := o.Count(t, dir, ""); n != 40 {
		t.Errorf("LanceDB counts %d after the Go update, want 40", n)
	}
	if n := o.Count(t, dir, "s = 's7000'"); n != 1 {
		t.Errorf("LanceDB finds %d updated rows", n)
	}
	if n := o.Count(t, dir, "s = 's7'"); n != 0 {
		t.Errorf("LanceDB still finds the old row")
	}
	o.Update(t, dir, "id = 8", map[string]string{"s": "'eight'"})
	if n := o.Count(t, dir, "s = 'eight' OR s = 's7000'"); n != 2 {
		t.Errorf("LanceDB update on the Go update: %d", n)
	}

	// Overwrite with the other dataset's fragment only.
	cur, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ow, err := Commit(dir, cur, Overwrite(cur.Version(), od.Manifest().GetFields(), nil, []*tablepb.DataFragment{nf}, map[string]string{"mvq.note": "overwritten"}), CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ow.Fragments()[0].GetId() != 0 || ow.Manifest().GetWriterFeatureFlags()&FlagTableConfig == 0 || ow.Indices != nil {
		t.Errorf("Go overwrite: fragments %v, flags %d", ow.Fragments(), ow.Manifest().GetWriterFeatureFlags())
	}
	if n := o.Count(t, dir, ""); n != 1 {
		t.Errorf("LanceDB counts %d after the Go overwrite, want 1", n)
	}
	if n := o.CountAt(t, dir, "", cur.Version()); n != 40 {
		t.Errorf("LanceDB counts %d at the version before the overwrite, want 40", n)
	}
	write(t, o, dir, 100, 5, "", "append")
	checkAgainstLanceDB(t, o, dir)
	last, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if last.Manifest().GetConfig()["mvq.note"] != "overwritten" {
		t.Errorf("LanceDB dropped the table config: %v", last.Manifest().GetConfig())
	}
}

// TestShallowClone: LanceDB's shallow clone names its source through base
// paths; the Go side resolves data and deletion files through them, and
// LanceDB reads a Go delete committed on the clone.
func TestShallowClone(t *testing.T) {
	o := oracle.Need(t)
	src := newDir(t)
	write(t, o, src, 0, 30, "", "create")
	o.Delete(t, src, "id < 4")
	dst := newDir(t)
	o.Clone(t, dst, src, 0)
	d, err := Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("clone: version %d, base paths %v, flags r%d w%d", d.Version(), d.Manifest().GetBasePaths(), d.Manifest().GetReaderFeatureFlags(), d.Manifest().GetWriterFeatureFlags())
	if len(d.Manifest().GetBasePaths()) == 0 || d.Manifest().GetReaderFeatureFlags()&FlagBasePaths == 0 {
		t.Fatalf("no base paths in the clone")
	}
	fr := d.Fragments()[0]
	p, err := d.DataFilePath(fr.GetFiles()[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p, filepath.Join(src, DataDir)) {
		t.Errorf("clone data file resolves to %s, not under %s", p, src)
	}
	if _, err := os.Stat(p); err != nil {
		t.Error(err)
	}
	if n, err := d.CountRows(); err != nil || n != 26 {
		t.Errorf("clone rows %d (%v), want 26", n, err)
	}
	dels, err := d.DeletedRows(fr)
	if err != nil || dels.GetCardinality() != 4 {
		t.Errorf("clone deletions %v (%v)", dels, err)
	}
	checkAgainstLanceDB(t, o, dst)
	goDelete(t, dst, func(frag, off uint64) bool { return off == 10 })
	if n := o.Count(t, dst, ""); n != 25 {
		t.Errorf("LanceDB counts %d on the clone after the Go delete, want 25", n)
	}
	if n := o.Count(t, src, ""); n != 26 {
		t.Errorf("the source changed: %d rows", n)
	}
	checkAgainstLanceDB(t, o, dst)
}

// TestHintIsOnlyAHint: LanceDB finds the latest version whatever the hint
// says (stale, missing, ahead), so a writer stopped between its manifest
// and its hint loses nothing; LanceDB's next commit rewrites the hint.
func TestHintIsOnlyAHint(t *testing.T) {
	o := oracle.Need(t)
	dir := newDir(t)
	write(t, o, dir, 0, 10, "", "create")
	goDelete(t, dir, func(frag, off uint64) bool { return off == 0 }) // v2
	hint := filepath.Join(dir, VersionsDir, HintFile)
	for _, state := range []string{"stale", "missing", "ahead"} {
		switch state {
		case "stale":
			if err := WriteHint(dir, 1); err != nil {
				t.Fatal(err)
			}
		case "missing":
			if err := os.Remove(hint); err != nil {
				t.Fatal(err)
			}
		case "ahead":
			if err := WriteHint(dir, 9); err != nil {
				t.Fatal(err)
			}
		}
		if n := o.Count(t, dir, ""); n != 9 {
			t.Errorf("hint %s: LanceDB counts %d, want 9 (version 2)", state, n)
		}
		if l, err := Latest(dir); err != nil || l.Version != 2 {
			t.Errorf("hint %s: Go latest %v %v", state, l, err)
		}
	}
	write(t, o, dir, 10, 1, "", "append")
	if h, _, err := ReadHint(dir); err != nil || h != 3 {
		t.Errorf("LanceDB left hint %d (%v), want 3", h, err)
	}
}

// TestConcurrentDeletes: LanceDB opens version N to delete a row while the
// Go side deletes another row of the same fragment as N+1. LanceDB must
// read the Go transaction and keep both deletions (or refuse); the Go
// deletion must never be lost.
func TestConcurrentDeletes(t *testing.T) {
	o := oracle.Need(t)
	dir := newDir(t)
	write(t, o, dir, 0, 20, "", "create")
	h := o.StartDelete(t, dir, "id = 3")
	goDelete(t, dir, func(frag, off uint64) bool { return off == 5 }) // v2
	err := h.Finish()
	t.Logf("LanceDB delete racing a Go delete: %v", err)
	if n := o.Count(t, dir, "id = 5"); n != 0 {
		t.Errorf("the Go deletion was lost")
	}
	want := int64(19)
	if err == nil {
		want = 18
	}
	if n := o.Count(t, dir, ""); n != want {
		t.Errorf("LanceDB counts %d, want %d", n, want)
	}
	if err == nil {
		d, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		txn, err := d.Transaction()
		// LanceDB 0.31 commits this delete reading version 2: it moves to
		// the Go version (on the conflict or before it), where an append
		// rebase keeps its read version (TestRebase).
		if err != nil || d.Version() != 3 || txn.GetReadVersion() == 0 || OperationName(txn) != "delete" {
			t.Errorf("LanceDB's delete: version %d, read version %d, %s (%v)", d.Version(), txn.GetReadVersion(), OperationName(txn), err)
		}
		t.Logf("LanceDB's delete committed as version %d reading version %d", d.Version(), txn.GetReadVersion())
	}
	checkAgainstLanceDB(t, o, dir)
}

// TestGoRebasesOnLanceDB: a Go delete made against version N commits after
// LanceDB appended, and after LanceDB deleted in another fragment (it reads
// LanceDB's transactions and rebuilds on the newest version); a Go delete
// in a fragment LanceDB changed meanwhile is a conflict.
func TestGoRebasesOnLanceDB(t *testing.T) {
	o := oracle.Need(t)
	dir := newDir(t)
	write(t, o, dir, 0, 20, "", "create")  // v1: fragment 0, ids 0..19
	write(t, o, dir, 20, 20, "", "append") // v2: fragment 1, ids 20..39
	base, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	write(t, o, dir, 100, 5, "", "append") // v3 (LanceDB)
	o.Delete(t, dir, "id = 25")            // v4 (LanceDB, fragment 1)
	d, err := base.DeleteRows(map[uint64]*roaring.Bitmap{0: roaring.BitmapOf(3)}, "id = 3", CommitOptions{})
	if err != nil {
		t.Fatalf("Go delete across LanceDB's append and delete: %v", err)
	}
	if d.Version() != 5 {
		t.Errorf("Go delete landed as version %d", d.Version())
	}
	if n := o.Count(t, dir, ""); n != 45-2 {
		t.Errorf("LanceDB counts %d, want 43", n)
	}
	if n := o.Count(t, dir, "id = 3 OR id = 25"); n != 0 {
		t.Errorf("a deletion was lost")
	}
	// LanceDB deletes in fragment 0; a Go delete there from version 5 must
	// not overwrite LanceDB's deletion file.
	o.Delete(t, dir, "id = 4") // v6
	_, err = d.DeleteRows(map[uint64]*roaring.Bitmap{0: roaring.BitmapOf(5)}, "id = 5", CommitOptions{})
	if !errors.Is(err, ErrConflict) {
		t.Errorf("Go delete in a fragment LanceDB changed: %v", err)
	}
	if n := o.Count(t, dir, "id = 4"); n != 0 {
		t.Errorf("LanceDB's deletion was lost")
	}
	checkAgainstLanceDB(t, o, dir)
}

// TestGoEmptyDataset: a dataset the Go side creates with a schema and no
// fragments opens in LanceDB, which appends to it.
func TestGoEmptyDataset(t *testing.T) {
	o := oracle.Need(t)
	src := newDir(t)
	write(t, o, src, 0, 3, "", "create")
	s, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := newDir(t)
	if _, err := Commit(dir, nil, Overwrite(0, s.Manifest().GetFields(), nil, nil, nil), CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := o.Count(t, dir, ""); n != 0 {
		t.Errorf("LanceDB counts %d rows in an empty dataset", n)
	}
	write(t, o, dir, 10, 4, "", "append")
	if n := o.Count(t, dir, "id >= 10"); n != 4 {
		t.Errorf("LanceDB counts %d after appending to the Go-made empty dataset", n)
	}
	checkAgainstLanceDB(t, o, dir)
}

// TestGoUpdateConfig: the Go side sets table config and table metadata;
// LanceDB opens the dataset and keeps both through its own commits.
func TestGoUpdateConfig(t *testing.T) {
	o := oracle.Need(t)
	dir := newDir(t)
	write(t, o, dir, 0, 10, "", "create")
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	val := func(s string) *string { return &s }
	cd, err := Commit(dir, d, UpdateConfig(d.Version(),
		&MapUpdate{Set: map[string]*string{"mvq.refresh": val("incremental")}},
		&MapUpdate{Set: map[string]*string{"mvq.view": val("orders_by_day"), "gone": nil}}), CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cd.Manifest().GetWriterFeatureFlags()&FlagTableConfig == 0 {
		t.Errorf("writer flags %d lack table config", cd.Manifest().GetWriterFeatureFlags())
	}
	if n := o.Count(t, dir, ""); n != 10 {
		t.Errorf("LanceDB counts %d", n)
	}
	write(t, o, dir, 10, 2, "", "append")
	o.Delete(t, dir, "id = 1")
	last, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if last.Manifest().GetConfig()["mvq.refresh"] != "incremental" || last.Manifest().GetTableMetadata()["mvq.view"] != "orders_by_day" {
		t.Errorf("after LanceDB's commits: config %v, table metadata %v", last.Manifest().GetConfig(), last.Manifest().GetTableMetadata())
	}
	// Removing the key again.
	if _, err := Commit(dir, last, UpdateConfig(last.Version(), nil, &MapUpdate{Set: map[string]*string{"mvq.view": nil}}), CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := o.Count(t, dir, ""); n != 11 {
		t.Errorf("LanceDB counts %d", n)
	}
	checkAgainstLanceDB(t, o, dir)
}

// TestAfterCompaction: LanceDB compacts fragments with deletions (a
// Rewrite); the Go side reads the result and deletes on top, across the
// rewrite when its delete touches a fragment the rewrite left alone.
func TestAfterCompaction(t *testing.T) {
	o := oracle.Need(t)
	dir := newDir(t)
	write(t, o, dir, 0, 50, "", "create")
	write(t, o, dir, 50, 50, "", "append")
	write(t, o, dir, 100, 50, "", "append")
	o.Delete(t, dir, "id % 2 = 0 AND id < 100")
	before, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	o.Optimize(t, dir)
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ops := []string{}
	for v := before.Version() + 1; v <= d.Version(); v++ {
		dv, err := OpenVersion(dir, v)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, opName(t, dv))
	}
	t.Logf("optimize made versions %v: %d fragments -> %d", ops, len(before.Fragments()), len(d.Fragments()))
	if !slices.Contains(ops, "rewrite") {
		t.Errorf("no rewrite among %v", ops)
	}
	for _, fr := range d.Fragments() {
		if fr.GetDeletionFile() != nil && fr.GetId() < 2 {
			t.Errorf("fragment %d kept deletions after compaction", fr.GetId())
		}
	}
	// A delete made before the compaction, in a fragment it rewrote, is a
	// conflict.
	if _, err := before.DeleteRows(map[uint64]*roaring.Bitmap{2: roaring.BitmapOf(1)}, "", CommitOptions{}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "rewrite") {
		t.Errorf("a delete across the rewrite: %v", err)
	}
	goDelete(t, dir, func(frag, off uint64) bool { return off == 0 })
	if n := o.Count(t, dir, ""); n != 100-int64(len(d.Fragments())) {
		t.Errorf("LanceDB counts %d after the Go delete on the compacted dataset", n)
	}
	checkAgainstLanceDB(t, o, dir)
}
