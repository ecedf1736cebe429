package dataset

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
	"github.com/mvq-dev/mvq/lance/pb/tablepb"
)

// The golden datasets in testdata were written by LanceDB 0.31.0 (set
// LANCE_GOLDEN=1 to write them again with the oracle); golden.json records
// what LanceDB said about each version, so these tests run without node.
//
//   - history.lance (V2 names): create 10 rows, append 6000, delete
//     id % 3 = 0 AND id < 10 (Arrow deletion file), delete id >= 100 AND
//     id < 5600 (a roaring bitmap), update id = 5, add column w, drop s.
//   - v1.lance (V1 names): create 10 rows, append 10, delete id = 4.

type goldenVersion struct {
	Version uint64 `json:"version"`
	Op      string `json:"op"`
	Count   int64  `json:"count"`
	RowIDs  string `json:"rowids_sha256"` // of the sorted live row addresses, one per line
}

type golden map[string][]goldenVersion

func small(t testing.TB, start, n int) arrow.RecordBatch {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := start; i < start+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("s%d", i%7))
	}
	return b.NewRecordBatch()
}

func hashRows(rows []int64) string {
	h := sha256.New()
	for _, r := range sorted(rows) {
		fmt.Fprintf(h, "%d\n", r)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if e.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestWriteGolden(t *testing.T) {
	if os.Getenv("LANCE_GOLDEN") != "1" {
		t.Skip("set LANCE_GOLDEN=1 to write testdata again with LanceDB")
	}
	o := oracle.Need(t)
	put := func(dir string, start, n int, opts oracle.WriteOpts) {
		rec := small(t, start, n)
		defer rec.Release()
		o.WriteWith(t, dir, rec, opts)
	}
	g := golden{}
	record := func(name, dir string) {
		for _, v := range o.Versions(t, dir) {
			d, err := OpenVersion(dir, v.Version)
			if err != nil {
				t.Fatal(err)
			}
			tbl := o.Read(t, dir, oracle.ReadOpts{At: v.Version, RowID: true, Columns: []string{"id"}})
			rows := int64s(t, tbl, "_rowid")
			tbl.Release()
			g[name] = append(g[name], goldenVersion{v.Version, opName(t, d), o.CountAt(t, dir, "", v.Version), hashRows(rows)})
		}
		if err := os.RemoveAll(filepath.Join("testdata", name)); err != nil {
			t.Fatal(err)
		}
		copyTree(t, dir, filepath.Join("testdata", name))
	}

	h := newDir(t)
	put(h, 0, 10, oracle.WriteOpts{})
	put(h, 10, 6000, oracle.WriteOpts{Mode: "append"})
	o.Delete(t, h, "id % 3 = 0 AND id < 10")
	o.Delete(t, h, "id >= 100 AND id < 5600")
	o.Update(t, h, "id = 5", map[string]string{"s": "'five'"})
	o.AddColumns(t, h, map[string]string{"w": "id * 2"})
	o.DropColumns(t, h, "s")
	record("history.lance", h)

	v1 := newDir(t)
	put(v1, 0, 10, oracle.WriteOpts{Options: map[string]string{"new_table_enable_v2_manifest_paths": "false"}})
	put(v1, 10, 10, oracle.WriteOpts{Mode: "append"})
	o.Delete(t, v1, "id = 4")
	record("v1.lance", v1)

	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", "golden.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readGolden(t *testing.T) golden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGolden reads every version of the golden datasets and compares row
// counts, live row addresses and operations with what LanceDB said.
func TestGolden(t *testing.T) {
	for name, versions := range readGolden(t) {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", name)
			vs, err := ListVersions(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(vs) != len(versions) {
				t.Fatalf("%d versions, LanceDB listed %d", len(vs), len(versions))
			}
			for i, want := range versions {
				d, err := OpenVersion(dir, want.Version)
				if err != nil {
					t.Fatal(err)
				}
				if vs[i].Version != want.Version {
					t.Errorf("version %d listed as %d", want.Version, vs[i].Version)
				}
				n, err := d.CountRows()
				if err != nil || int64(n) != want.Count {
					t.Errorf("version %d: %d rows (%v), LanceDB %d", want.Version, n, err, want.Count)
				}
				if got := hashRows(liveRowAddresses(t, d)); got != want.RowIDs {
					t.Errorf("version %d: live rows differ from LanceDB's", want.Version)
				}
				if got := opName(t, d); got != want.Op {
					t.Errorf("version %d: operation %s, LanceDB %s", want.Version, got, want.Op)
				}
			}
			sc, err := OpenVersion(dir, 1)
			if err != nil {
				t.Fatal(err)
			}
			as, err := sc.Schema()
			if err != nil || as.NumFields() != 2 || as.Field(0).Name != "id" || as.Field(0).Type.ID() != arrow.INT64 || as.Field(1).Type.ID() != arrow.STRING {
				t.Errorf("version 1 schema %v (%v)", as, err)
			}
			latest, err := Open(dir)
			if err != nil || latest.Version() != versions[len(versions)-1].Version {
				t.Fatalf("latest: %v %v", latest, err)
			}
			if h, ok, err := ReadHint(dir); err != nil || !ok || h != latest.Version() {
				t.Errorf("hint %d %v %v", h, ok, err)
			}
		})
	}
}

// TestGoldenDeletionKinds checks the golden history has both kinds of
// deletion file, and that re-encoding each gives back the same rows.
func TestGoldenDeletionKinds(t *testing.T) {
	d, err := OpenVersion(filepath.Join("testdata", "history.lance"), 4)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[tablepb.DeletionFile_DeletionFileType]bool{}
	for _, fr := range d.Fragments() {
		del := fr.GetDeletionFile()
		if del == nil {
			continue
		}
		seen[del.GetFileType()] = true
		rows, err := d.DeletedRows(fr)
		if err != nil {
			t.Fatal(err)
		}
		for _, enc := range []func(r *roaring.Bitmap) ([]byte, error){EncodeDeletionArrow, EncodeDeletionBitmap} {
			b, err := enc(rows)
			if err != nil {
				t.Fatal(err)
			}
			var back *roaring.Bitmap
			if strings.HasPrefix(string(b), "ARROW1") {
				back, err = DecodeDeletionArrow(b)
			} else {
				back, err = DecodeDeletionBitmap(b)
			}
			if err != nil || !back.Equals(rows) {
				t.Errorf("fragment %d: re-encoded deletions differ (%v)", fr.GetId(), err)
			}
		}
	}
	if !seen[tablepb.DeletionFile_ARROW_ARRAY] || !seen[tablepb.DeletionFile_BITMAP] {
		t.Errorf("deletion kinds in golden v4: %v", seen)
	}
}
