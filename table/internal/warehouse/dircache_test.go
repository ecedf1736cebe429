package warehouse

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestDirCache: an unchanged folder is answered from the cache; a name
// added or removed is seen at once, also right after a listing (the
// racy window, where the folder's mtime is too close to the listing to
// trust); a folder dropped and made again is read again.
func TestDirCache(t *testing.T) {
	root := t.TempDir()
	c := newDirCache(root)
	if c == nil {
		t.Skip("the temp dir is not on a file system known to be local")
	}
	dir := filepath.Join(root, "_versions")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	reads := 0
	read := func(p string) ([]Entry, error) { reads++; return readNames(p) }
	names := func() []string {
		t.Helper()
		es, err := c.list(dir, read)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.Name)
		}
		slices.Sort(out)
		return out
	}
	touch := func(name string) {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	touch("1.manifest")
	// Within the racy margin: read every time, and a new name is seen.
	if got := names(); !slices.Equal(got, []string{"1.manifest"}) {
		t.Fatalf("listing %v", got)
	}
	touch("2.manifest")
	if got := names(); !slices.Equal(got, []string{"1.manifest", "2.manifest"}) || reads != 2 {
		t.Fatalf("listing %v after %d reads", got, reads)
	}
	// Past the margin: the second listing comes from the cache.
	c.now = func() time.Time { return time.Now().Add(time.Second) }
	names()
	names()
	if reads != 3 {
		t.Fatalf("%d reads of an unchanged folder, want one more", reads)
	}
	touch("3.manifest")
	if got := names(); len(got) != 3 || reads != 4 {
		t.Fatalf("after an add: %v (%d reads)", got, reads)
	}
	if err := os.Remove(filepath.Join(dir, "1.manifest")); err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Equal(got, []string{"2.manifest", "3.manifest"}) {
		t.Fatalf("after a remove: %v", got)
	}
	// A file's stat is kept with its folder's key: a file removed and
	// written again under the same name is seen anew after a listing.
	st, ok, err := c.stat(dir, "3.manifest")
	if err != nil || !ok || st.size != 0 {
		t.Fatalf("stat: %+v %v %v", st, ok, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "3.manifest.tmp"), []byte("longer"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "3.manifest.tmp"), filepath.Join(dir, "3.manifest")); err != nil {
		t.Fatal(err)
	}
	names()
	if st, ok, _ := c.stat(dir, "3.manifest"); !ok || st.size != 6 {
		t.Fatalf("stat after a replace: %+v %v", st, ok)
	}
	os.Remove(filepath.Join(dir, "3.manifest"))
	names()
	if _, ok, _ := c.stat(dir, "3.manifest"); ok {
		t.Fatal("a removed file is still stat'ed")
	}
	// Dropped and made again, even with the old mtime: another inode.
	fi, _ := os.Stat(dir)
	names()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if got := names(); got != nil {
		t.Fatalf("a missing folder: %v", got)
	}
	os.Mkdir(dir, 0o755)
	touch("9.manifest")
	os.Chtimes(dir, fi.ModTime(), fi.ModTime())
	if got := names(); !slices.Equal(got, []string{"9.manifest"}) {
		t.Fatalf("a folder made again: %v", got)
	}
}
