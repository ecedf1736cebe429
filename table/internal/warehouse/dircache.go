package warehouse

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mvq-dev/mvq/internal/lru"
)

// A refresh accept reads the _versions/ folders of the view and of its
// source to know their latest versions (latest.go). On a local file
// system a folder's mtime changes whenever a name is added to it or
// removed from it, so a listing taken while the folder had mtime M is the
// folder's listing as long as its mtime is still M: one stat instead of
// an open, a getdents and a close per folder.
//
// What could make an unchanged mtime lie is excluded:
//   - Timestamps are coarse (the kernel stamps them from a clock that
//     ticks every few milliseconds): a change in the same tick as the
//     listing could keep the mtime the listing saw. A listing is kept only
//     when it began more than racyMargin after the mtime it saw (as a
//     stat before the read), so any later change gets a later mtime.
//   - Some local file systems keep whole seconds only (ext4 with 128-byte
//     inodes, ext2, ext3): a folder whose mtime and ctime both fall on a
//     whole second is read each time.
//   - Network file systems (NFS, SMB, FUSE mounts, …) cache attributes on
//     the client for seconds and stamp times with the server's clock: the
//     cache is used only on file systems known to be local
//     (localFileSystem), and only for folders on the warehouse root's
//     device (a mount below the root is read each time).
//
// Listings are kept under (folder, mtime, inode, ctime), so an entry never
// changes; a folder changed since is a new key and the old one ages out
// of the byte-bounded cache. Only listings are kept: a file's size and
// time are stat'ed each time (a file removed and written again under its
// name between a kept listing and the stat must not answer the old one).
const racyMargin = 100 * time.Millisecond

// dirListMaxBytes bounds the listings kept per warehouse.
const dirListMaxBytes = 4 << 20

type dirKey struct {
	path  string
	mtime int64 // unix ns
	inode uint64
	ctime int64 // unix ns
}

// coarse reports whether the folder's times look like a file system's
// that keeps whole seconds: both on a whole second.
func (k dirKey) coarse() bool {
	return k.mtime%int64(time.Second) == 0 && k.ctime%int64(time.Second) == 0
}

// dirCache keeps listings of a local warehouse's folders; nil: none.
type dirCache struct {
	lists *lru.Cache[dirKey, []Entry]
	dev   uint64 // the root's device: other devices are read each time
	now   func() time.Time
}

func newDirCache(root string) *dirCache {
	fi, err := os.Stat(root)
	if err != nil || !localFileSystem(root) {
		return nil
	}
	dev, _, _ := identityOf(fi)
	return &dirCache{lists: lru.New[dirKey, []Entry](dirListMaxBytes), dev: dev, now: time.Now}
}

// stat answers the size and time of file name in folder dir; ok is false
// when the file is gone.
func statIn(dir, name string) (size int64, mtime time.Time, ok bool, err error) {
	fi, err := os.Lstat(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, time.Time{}, false, nil
	}
	if err != nil {
		return 0, time.Time{}, false, err
	}
	return fi.Size(), fi.ModTime(), true, nil
}

// list answers read(path) from the cache when the folder has not changed
// since a listing it holds. A missing folder is no entries.
func (c *dirCache) list(path string, read func(string) ([]Entry, error)) ([]Entry, error) {
	if c == nil {
		return read(path)
	}
	began := c.now()
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return read(path) // its error, as a read answers it
	}
	dev, inode, ctime := identityOf(fi)
	key := dirKey{path: path, mtime: fi.ModTime().UnixNano(), inode: inode, ctime: ctime}
	if dev != c.dev || key.coarse() {
		return read(path) // another device, or whole-second timestamps
	}
	if entries, ok := c.lists.Get(key); ok {
		return entries, nil
	}
	entries, err := read(path)
	changed := max(key.mtime, key.ctime)
	if err != nil || began.UnixNano()-changed <= int64(racyMargin) {
		return entries, err
	}
	size := int64(64)
	for _, e := range entries {
		size += int64(len(e.Name)) + 64
	}
	c.lists.Put(key, entries, size)
	return entries, nil
}

// readNames reads a folder's names: entries carry no size or time. As
// List, it skips hidden names (and fileblob's sidecar attribute files)
// and answers a missing folder with no entries. Callers must not change
// the slice (a cached listing is shared).
func readNames(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	des, err := f.ReadDir(-1) // unsorted: callers order what they keep
	f.Close()
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(des))
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".attrs") {
			continue
		}
		out = append(out, Entry{Name: name, IsDir: de.IsDir()})
	}
	return out, nil
}
