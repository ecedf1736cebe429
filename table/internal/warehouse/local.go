package warehouse

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Dir is the absolute root directory of a file:// warehouse ("" for the
// other stores).
func (w *Warehouse) Dir() string { return w.dir }

// Lists counts the listings made so far (tests check hot paths make none).
func (w *Warehouse) Lists() int64 { return w.lists.Load() }

// Path is the file of key in a file:// warehouse.
func (w *Warehouse) Path(key string) string {
	return filepath.Join(w.dir, filepath.FromSlash(key))
}

// ListNames is List for a file:// warehouse from the directory's names
// alone: entries carry no size or time. As List, it skips hidden names
// (and fileblob's sidecar attribute files) and answers a missing folder
// with no entries. An unchanged folder is answered from the warehouse's
// listing cache (dircache.go); callers must not change the entries.
func (w *Warehouse) ListNames(prefix string) ([]Entry, error) {
	entries, _, err := w.ListNamesAt(prefix)
	return entries, err
}

// ListNamesAt is ListNames with the folder's state the listing was read
// in, for StatListed.
func (w *Warehouse) ListNamesAt(prefix string) ([]Entry, Listed, error) {
	entries, l, err := w.dirs.list(w.Path(prefix), readNames)
	if err != nil {
		return nil, Listed{}, w.Rel(err)
	}
	return entries, l, nil
}

// StatIn answers the size and time of file name in folder prefix of a
// file:// warehouse; ok is false when the file is gone.
func (w *Warehouse) StatIn(prefix, name string) (size int64, mtime time.Time, ok bool, err error) {
	return w.StatListed(Listed{}, prefix, name)
}

// StatListed is StatIn for a file of a folder ListNamesAt listed at l:
// while the folder is as l found it, the file is the one stat'ed then
// (dircache.go), and its size and time are answered from memory.
func (w *Warehouse) StatListed(l Listed, prefix, name string) (size int64, mtime time.Time, ok bool, err error) {
	size, mtime, ok, err = w.dirs.statListed(l, w.Path(prefix), name)
	return size, mtime, ok, w.Rel(err)
}

// Missing reports whether key is known not to exist without asking the
// bucket: only a file:// warehouse can tell (one lstat); false means
// "read it to know".
func (w *Warehouse) Missing(key string) bool {
	if w.dir == "" {
		return false
	}
	_, err := os.Lstat(w.Path(key))
	return errors.Is(err, fs.ErrNotExist)
}

// Walk lists every file under prefix (recursively), as keys.
func (w *Warehouse) Walk(ctx context.Context, prefix string) ([]string, error) {
	entries, err := w.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir {
			sub, err := w.Walk(ctx, prefix+e.Name+"/")
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
			continue
		}
		out = append(out, prefix+e.Name)
	}
	return out, nil
}

// CopyObject streams one object to another key.
func (w *Warehouse) CopyObject(ctx context.Context, from, to string) error {
	r, err := w.Open(ctx, from)
	if err != nil {
		return err
	}
	defer r.Close()
	return w.WriteFrom(ctx, to, func(wr io.Writer) error {
		_, err := io.Copy(wr, r)
		return err
	})
}
