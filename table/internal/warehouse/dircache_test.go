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
		es, _, err := c.list(dir, read)
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
	// Whole-second times (a file system that keeps no more) are never
	// trusted; one fine-grained time is enough to tell.
	for _, k := range []struct {
		key    dirKey
		coarse bool
	}{
		{dirKey{mtime: 5e9, ctime: 7e9}, true},
		{dirKey{mtime: 5e9, ctime: 7e9 + 1}, false},
		{dirKey{mtime: 5e9 + 4e6, ctime: 7e9}, false},
	} {
		if k.key.coarse() != k.coarse {
			t.Fatalf("%+v coarse: %v", k.key, !k.coarse)
		}
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

// TestDirCacheStat: a file stat'ed after a kept listing is answered from
// memory while the folder is unchanged; a file written again under its
// name (a rename over it, as writers publish) or removed is stat'ed
// afresh, and a listing within the racy margin keeps no stat.
func TestDirCacheStat(t *testing.T) {
	root := t.TempDir()
	c := newDirCache(root)
	if c == nil {
		t.Skip("the temp dir is not on a file system known to be local")
	}
	dir := filepath.Join(root, "_versions")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) {
		t.Helper()
		tmp := filepath.Join(dir, ".tmp-"+name)
		if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	stat := func() (int64, bool) {
		t.Helper()
		_, l, err := c.list(dir, readNames)
		if err != nil {
			t.Fatal(err)
		}
		size, _, ok, err := c.statListed(l, dir, "2.manifest")
		if err != nil {
			t.Fatal(err)
		}
		return size, ok
	}
	write("2.manifest", "ab")
	// Within the racy margin nothing is kept.
	if size, ok := stat(); !ok || size != 2 || c.stats.Len() != 0 {
		t.Fatalf("size %d ok %v, %d stats kept", size, ok, c.stats.Len())
	}
	c.now = func() time.Time { return time.Now().Add(time.Second) }
	if size, ok := stat(); !ok || size != 2 || c.stats.Len() != 1 {
		t.Fatalf("size %d ok %v, %d stats kept", size, ok, c.stats.Len())
	}
	// A kept stat answers without reading the file: a write in place
	// (which leaves the folder as it was, and which no writer of
	// _versions/ makes) is not seen.
	if err := os.WriteFile(filepath.Join(dir, "2.manifest"), []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	if size, ok := stat(); !ok || size != 2 {
		t.Fatalf("from the cache: size %d ok %v", size, ok)
	}
	write("2.manifest", "abcd")
	if size, ok := stat(); !ok || size != 4 {
		t.Fatalf("after a rename over the file: size %d ok %v", size, ok)
	}
	if err := os.Remove(filepath.Join(dir, "2.manifest")); err != nil {
		t.Fatal(err)
	}
	if _, ok := stat(); ok {
		t.Fatal("a removed file was answered from the cache")
	}
}
