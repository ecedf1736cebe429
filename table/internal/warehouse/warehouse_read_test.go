package warehouse

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestLocalReadMatchesFileblob: a file:// read takes the direct path only
// for keys fileblob stores under their own name, and answers what
// fileblob answers: the bytes, or os.ErrNotExist for a missing key or a
// folder. Keys fileblob escapes still round-trip through it.
func TestLocalReadMatchesFileblob(t *testing.T) {
	ctx := context.Background()
	w, err := Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key   string
		plain bool
	}{
		{"ns/t/_versions/1.manifest", true},
		{"ns/t/data/a b.parquet", true},
		{"a//b", false},
		{"a/../b", false},
		{"a/b/", false},
		{"/a", false},
		{"a\x01b", false},
		{"x.attrs", false},
		{"..", false},
	} {
		if _, ok := w.plainPath(c.key); ok != c.plain {
			t.Errorf("plainPath(%q) = %v, want %v", c.key, ok, c.plain)
		}
		if c.key == "x.attrs" || c.key == "/a" || c.key == ".." {
			continue // fileblob refuses these keys outright
		}
		data := []byte("content of " + c.key)
		if err := w.Write(ctx, c.key, data); err != nil {
			t.Fatalf("write %q: %v", c.key, err)
		}
		got, err := w.Read(ctx, c.key)
		if err != nil || string(got) != string(data) {
			t.Errorf("read %q: %q %v", c.key, got, err)
		}
	}
	if _, err := w.Read(ctx, "ns/t/_versions/2.manifest"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing key: %v, want os.ErrNotExist", err)
	}
	if _, err := w.Read(ctx, "ns/t"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("folder: %v, want os.ErrNotExist", err)
	}
	// The direct path reads what is on disk under the key's own name.
	if err := os.WriteFile(filepath.Join(w.dir, "ns", "direct"), []byte("on disk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := w.Read(ctx, "ns/direct"); err != nil || string(got) != "on disk" {
		t.Errorf("direct file: %q %v", got, err)
	}
}

// BenchmarkLocalRead: reading a 4 KiB manifest-sized object on file://
// through the direct path against through fileblob.
func BenchmarkLocalRead(b *testing.B) {
	ctx := context.Background()
	w, err := Open(ctx, "file://"+b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	const key = "ns/t/_versions/1.manifest"
	if err := w.Write(ctx, key, make([]byte, 4096)); err != nil {
		b.Fatal(err)
	}
	b.Run("direct", func(b *testing.B) {
		for range b.N {
			if _, err := w.Read(ctx, key); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fileblob", func(b *testing.B) {
		for range b.N {
			if _, err := w.bucket.ReadAll(ctx, key); err != nil {
				b.Fatal(err)
			}
		}
	})
}
