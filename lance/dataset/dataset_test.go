package dataset

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"

	"github.com/mvq-dev/mvq/lance/pb/tablepb"
)

func goldenManifest(t testing.TB, name string, v uint64) []byte {
	t.Helper()
	vf, err := FindVersion(filepath.Join("testdata", name), v)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(vf.Path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cloneDataset copies a golden dataset into a temporary folder.
func cloneDataset(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	copyTree(t, filepath.Join("testdata", name), dir)
	return dir
}

func TestManifestNames(t *testing.T) {
	cases := []struct {
		name   string
		v      uint64
		scheme Scheme
		ok     bool
	}{
		{"1.manifest", 1, SchemeV1, true},
		{"42.manifest", 42, SchemeV1, true},
		{"18446744073709551614.manifest", 1, SchemeV2, true},
		{"00000000000000000000.manifest", math.MaxUint64, SchemeV2, true},
		{"d5.manifest", 0, 0, false},
		{".tmp_1.manifest_abc", 0, 0, false},
		{"latest_version_hint.json", 0, 0, false},
		{".manifest", 0, 0, false},
		{"+1.manifest", 0, 0, false},
		{"99999999999999999999.manifest", 0, 0, false}, // over u64
	}
	for _, c := range cases {
		v, s, ok := ParseManifestName(c.name)
		if ok != c.ok || v != c.v || s != c.scheme {
			t.Errorf("%s: got %d %v %v", c.name, v, s, ok)
		}
		if ok && ManifestName(s, v) != c.name {
			t.Errorf("%s: named back as %s", c.name, ManifestName(s, v))
		}
	}
}

// TestEncodeManifestMatchesLanceDB re-encodes LanceDB's manifests: the
// bytes come out the same as LanceDB's (these manifests have no protobuf
// maps, whose order no writer fixes).
func TestEncodeManifestMatchesLanceDB(t *testing.T) {
	for v := uint64(1); v <= 7; v++ {
		b := goldenManifest(t, "history.lance", v)
		mf, err := DecodeManifest(b)
		if err != nil {
			t.Fatal(err)
		}
		if mf.Transaction == nil || mf.Major != 0 || mf.Minor != 2 {
			t.Fatalf("v%d: inline transaction %v, footer %d.%d", v, mf.Transaction != nil, mf.Major, mf.Minor)
		}
		out, err := EncodeManifest(mf)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeManifest(out)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(back.Manifest, mf.Manifest) || !proto.Equal(back.Transaction, mf.Transaction) {
			t.Errorf("v%d: re-encoded manifest differs", v)
		}
		if !bytes.Equal(out, b) {
			t.Errorf("v%d: %d bytes differ from LanceDB's %d", v, len(out), len(b))
		}
	}
}

func TestDecodeManifestCorrupt(t *testing.T) {
	good := goldenManifest(t, "history.lance", 3)
	pos := binary.LittleEndian.Uint64(good[len(good)-16:])
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := map[string][]byte{
		"empty":         nil,
		"short":         []byte("LANC"),
		"bad magic":     mutate(func(b []byte) []byte { b[len(b)-1] = 'X'; return b }),
		"pos past end":  mutate(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[len(b)-16:], 1<<40); return b }),
		"pos in footer": mutate(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[len(b)-16:], uint64(len(b)-10)); return b }),
		"pos max":       mutate(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[len(b)-16:], math.MaxUint64); return b }),
		"len too big":   mutate(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[pos:], math.MaxUint32); return b }),
		"len too small": mutate(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[pos:], 3); return b }),
		"truncated":     good[1:],
		"garbage proto": mutate(func(b []byte) []byte {
			for i := pos + 4; i < uint64(len(b)-16); i++ {
				b[i] = 0xff
			}
			return b
		}),
		"txn section outside": mutate(func(b []byte) []byte {
			mf, _ := DecodeManifest(good)
			m := mf.Manifest
			bad := uint64(len(good))
			m.TransactionSection = &bad
			out := encodeRaw(t, m)
			return out
		}),
	}
	for name, b := range cases {
		if _, err := DecodeManifest(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

// encodeRaw writes a manifest file holding only m, section positions as
// they are.
func encodeRaw(t *testing.T, m *tablepb.Manifest) []byte {
	t.Helper()
	b, err := appendSection(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = binary.LittleEndian.AppendUint32(b, 2<<16)
	return append(b, magic...)
}

// writeVersion replaces a manifest of the dataset with m.
func writeVersion(t *testing.T, dir string, m *tablepb.Manifest) {
	t.Helper()
	vf, err := FindVersion(dir, m.GetVersion())
	if err != nil {
		t.Fatal(err)
	}
	b, err := EncodeManifest(&ManifestFile{Manifest: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vf.Path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownFeatureFlags(t *testing.T) {
	dir := cloneDataset(t, "history.lance")
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := proto.Clone(d.Manifest()).(*tablepb.Manifest)
	m.ReaderFeatureFlags |= 64 | 1<<40
	writeVersion(t, dir, m)
	_, err = Open(dir)
	var ue *UnsupportedFeatureError
	if !errors.As(err, &ue) || ue.Unknown != 64|1<<40 {
		t.Fatalf("open with unknown reader flags: %v", err)
	}
	for _, want := range []string{"cannot read", "unknown flag 64 (bit 6)", "bit 40", "reader flags"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// Unknown writer flags still read, but refuse commits.
	m.ReaderFeatureFlags = d.Manifest().GetReaderFeatureFlags()
	m.WriterFeatureFlags |= 128
	writeVersion(t, dir, m)
	d, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Commit(dir, d, Delete(d.Version(), nil, []uint64{0}, ""), CommitOptions{})
	if !errors.As(err, &ue) || !ue.Writer || !strings.Contains(err.Error(), "cannot write to") {
		t.Errorf("commit with unknown writer flags: %v", err)
	}
}

func TestValidateRefusesEscapingPaths(t *testing.T) {
	dir := cloneDataset(t, "v1.lance")
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../../etc/passwd", "/etc/passwd", "a/../../b", ""} {
		m := proto.Clone(d.Manifest()).(*tablepb.Manifest)
		m.Fragments[0].Files[0].Path = p
		writeVersion(t, dir, m)
		if _, err := Open(dir); !errors.Is(err, ErrCorrupt) {
			t.Errorf("path %q: %v", p, err)
		}
	}
}

func TestCreateFileRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x")
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = createFile(path, []byte{byte(i)})
		}()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("writers %d and %d both created the file", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, fs.ErrExist):
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil || won < 0 || !bytes.Equal(b, []byte{byte(won)}) {
		t.Fatalf("file holds %v (%v), winner %d", b, err, won)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".tmp_*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestCommitConflict: two commits against the same version; the second
// delete is refused, a second append is rebuilt on the newer version.
func TestCommitConflict(t *testing.T) {
	dir := cloneDataset(t, "history.lance")
	base, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	first, err := Commit(dir, base, Delete(base.Version(), nil, []uint64{0}, ""), CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The same fragment again: a conflict naming the version in the way.
	if _, err := Commit(dir, base, Delete(base.Version(), nil, []uint64{0}, ""), CommitOptions{}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "also changed fragment 0") {
		t.Fatalf("second delete of fragment 0: %v", err)
	}
	frag := proto.Clone(base.Fragments()[0]).(*tablepb.DataFragment)
	frag.DeletionFile = nil
	d, err := Commit(dir, base, Append(base.Version(), []*tablepb.DataFragment{frag}), CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Version() != first.Version()+1 {
		t.Errorf("append landed as %d, want %d", d.Version(), first.Version()+1)
	}
	// The append kept the first commit's delete: fragment 0 is gone, the
	// appended one has a new id.
	ids := []uint64{}
	for _, f := range d.Fragments() {
		ids = append(ids, f.GetId())
	}
	if len(ids) != len(base.Fragments()) || ids[0] == 0 || ids[len(ids)-1] != uint64(base.Manifest().GetMaxFragmentId())+1 {
		t.Errorf("fragments after rebased append: %v", ids)
	}
	txn, err := d.Transaction()
	if err != nil || txn.GetReadVersion() != base.Version() {
		t.Errorf("rebased append reads version %d (%v), want %d", txn.GetReadVersion(), err, base.Version())
	}
	// A delete of another fragment, made against the old base, is rebuilt
	// on top of both.
	other := base.Fragments()[len(base.Fragments())-1].GetId()
	d3, err := Commit(dir, base, Delete(base.Version(), nil, []uint64{other}, ""), CommitOptions{})
	if err != nil {
		t.Fatalf("disjoint delete: %v", err)
	}
	if d3.Version() != d.Version()+1 || len(d3.Fragments()) != len(d.Fragments())-1 {
		t.Errorf("disjoint delete: version %d with %d fragments", d3.Version(), len(d3.Fragments()))
	}
	// Nothing rebuilds across a whole-dataset change.
	ow, err := Commit(dir, d3, Overwrite(d3.Version(), d3.Manifest().GetFields(), nil, nil, nil), CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Commit(dir, d3, Delete(d3.Version(), nil, []uint64{other + 1}, ""), CommitOptions{}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "overwrite") {
		t.Errorf("delete across an overwrite: %v", err)
	}
	d = ow
	if h, _, _ := ReadHint(dir); h != d.Version() {
		t.Errorf("hint %d", h)
	}
}

func TestDeletionRoundTrip(t *testing.T) {
	sets := map[string]*roaring.Bitmap{
		"one":    roaring.BitmapOf(7),
		"sparse": roaring.BitmapOf(0, 3, 65535, 65536, 1<<20, math.MaxUint32),
		"range":  func() *roaring.Bitmap { b := roaring.New(); b.AddRange(100, 70000); return b }(),
		"dense":  func() *roaring.Bitmap { b := roaring.New(); b.AddRange(0, 5000); b.Remove(17); return b }(),
		"stripes": func() *roaring.Bitmap {
			b := roaring.New()
			b.AddMany([]uint32{1, 5, 9, 10, 11})
			b.AddRange(200000, 200100)
			return b
		}(),
	}
	for name, set := range sets {
		a, err := EncodeDeletionArrow(set)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := DecodeDeletionArrow(a); err != nil || !back.Equals(set) {
			t.Errorf("%s arrow: %v", name, err)
		}
		b, err := EncodeDeletionBitmap(set)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := DecodeDeletionBitmap(b); err != nil || !back.Equals(set) {
			t.Errorf("%s bitmap: %v", name, err)
		}
		// Run containers (which other writers may use) decode too.
		rs := set.Clone()
		rs.RunOptimize()
		var buf bytes.Buffer
		if _, err := rs.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		if back, err := DecodeDeletionBitmap(buf.Bytes()); err != nil || !back.Equals(set) {
			t.Errorf("%s run bitmap: %v", name, err)
		}
	}
}

func TestDeletionCorrupt(t *testing.T) {
	ar, _ := EncodeDeletionArrow(roaring.BitmapOf(1, 2, 3))
	bm, _ := EncodeDeletionBitmap(roaring.BitmapOf(1, 2, 3))
	for name, b := range map[string][]byte{
		"empty": nil, "short": ar[:10], "cut": ar[:len(ar)-9], "magic only": []byte("ARROW1\x00\x00ARROW1"),
	} {
		if _, err := DecodeDeletionArrow(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("arrow %s: %v", name, err)
		}
	}
	for name, b := range map[string][]byte{
		"empty": nil, "cookie": {1, 2, 3, 4}, "cut": bm[:len(bm)-1], "trailing": append(bytes.Clone(bm), 0),
		"many containers": binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, serialCookieNoRun), 1<<20),
	} {
		if _, err := DecodeDeletionBitmap(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("bitmap %s: %v", name, err)
		}
	}
	// A wrong schema (int32 instead of uint32) is refused.
	dir := cloneDataset(t, "v1.lance")
	d, _ := Open(dir)
	fr := d.Fragments()[0]
	p, _ := d.DeletionFilePath(fr)
	if err := os.WriteFile(p, bm, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DeletedRows(fr); !errors.Is(err, ErrCorrupt) {
		t.Errorf("bitmap bytes in an arrow deletion file: %v", err)
	}
	// Offsets past physical_rows are refused.
	big, _ := EncodeDeletionArrow(roaring.BitmapOf(uint32(fr.GetPhysicalRows())))
	if err := os.WriteFile(p, big, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DeletedRows(fr); !errors.Is(err, ErrCorrupt) {
		t.Errorf("offset past the fragment: %v", err)
	}
}

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{"/a/b": "/a/b", "file:///a/b/": "/a/b", "/a/../b": "/b"} {
		if got, err := LocalPath(in); err != nil || got != want {
			t.Errorf("%s: %s %v", in, got, err)
		}
	}
	for _, in := range []string{"s3://bucket/x", "gs://b/x", "relative/x", "file://"} {
		if _, err := LocalPath(in); err == nil {
			t.Errorf("%s accepted", in)
		}
	}
}

func TestDeleteRows(t *testing.T) {
	dir := cloneDataset(t, "v1.lance")
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := d.CountRows()
	f0, f1 := d.Fragments()[0], d.Fragments()[1]
	all := roaring.New()
	all.AddRange(0, f1.GetPhysicalRows())
	nd, err := d.DeleteRows(map[uint64]*roaring.Bitmap{f0.GetId(): roaring.BitmapOf(0, 4), f1.GetId(): all}, "test", CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nd.Fragments()) != 1 || nd.Fragments()[0].GetId() != f0.GetId() {
		t.Fatalf("fragments after deleting all of %d: %v", f1.GetId(), nd.Fragments())
	}
	// Offset 4 was already deleted (golden: id = 4): one new deletion.
	if n, _ := nd.CountRows(); n != before-f1.GetPhysicalRows()-1 {
		t.Errorf("rows %d, before %d", n, before)
	}
	txn, _ := nd.Transaction()
	if del := txn.GetDelete(); del == nil || len(del.GetDeletedFragmentIds()) != 1 || del.GetPredicate() != "test" {
		t.Errorf("transaction %v", txn)
	}
	if same, err := nd.DeleteRows(map[uint64]*roaring.Bitmap{f0.GetId(): roaring.BitmapOf(0)}, "", CommitOptions{}); err != nil || same != nd {
		t.Errorf("deleting deleted rows made a version (%v)", err)
	}
	if _, err := nd.DeleteRows(map[uint64]*roaring.Bitmap{99: roaring.BitmapOf(0)}, "", CommitOptions{}); err == nil {
		t.Error("deleted from a missing fragment")
	}
	if _, err := nd.DeleteRows(map[uint64]*roaring.Bitmap{f0.GetId(): roaring.BitmapOf(uint32(f0.GetPhysicalRows()))}, "", CommitOptions{}); err == nil {
		t.Error("deleted past the fragment's rows")
	}
}

func TestCreateOverExisting(t *testing.T) {
	dir := cloneDataset(t, "history.lance")
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Scheme{SchemeV1, SchemeV2} {
		_, err := Commit(dir, nil, Overwrite(0, d.Manifest().GetFields(), nil, nil, nil), CommitOptions{Scheme: s})
		if !errors.Is(err, ErrConflict) {
			t.Errorf("create over an existing dataset (%v names): %v", s, err)
		}
	}
	fresh := filepath.Join(t.TempDir(), "new.lance")
	nd, err := Commit(fresh, nil, Overwrite(0, d.Manifest().GetFields(), nil, nil, nil), CommitOptions{Scheme: SchemeV1})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(nd.File.Path) != "1.manifest" || nd.StorageVersion() != "2.1" {
		t.Errorf("new empty dataset: %s, storage %s", nd.File.Path, nd.StorageVersion())
	}
	if n, err := nd.CountRows(); err != nil || n != 0 {
		t.Errorf("rows %d %v", n, err)
	}
}
